//! Naming an array volume storch does not manage yet, for import: a backend and the volume's
//! array-side name, or a volume handle that carries both (the NexentaStor seed's
//! `configName:pool/volumeGroup/volume`). Parsed here once for every frontend.

use super::request::{RequestError, quote};
use super::validate_name;

/// An array volume by backend and array-side name; `pool` when the handle names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeHandle {
    pub backend: String,
    /// The name the backend's driver looks the volume up by (`StorageDriver::get`).
    pub internal_name: String,
    /// The pool the handle places it in (`pool/volumeGroup` of a NexentaStor handle).
    pub pool: Option<String>,
}

impl VolumeHandle {
    /// A backend and an internal name given apart.
    pub fn new(backend: &str, internal_name: &str) -> Result<VolumeHandle, RequestError> {
        validate_name("backend", backend)?;
        if internal_name.is_empty() {
            return Err(RequestError::Handle(
                "internalName must not be empty".to_string(),
            ));
        }
        if internal_name.chars().any(|c| c.is_control()) {
            return Err(RequestError::Handle(format!(
                "internalName {} must not contain control characters",
                quote(internal_name)
            )));
        }
        Ok(VolumeHandle {
            backend: backend.to_string(),
            internal_name: internal_name.to_string(),
            pool: None,
        })
    }

    /// `backend:internalName` or `backend:pool/…/volume`: the backend before the first `:`,
    /// the volume after the last `/`, and the pool in between when there is one.
    pub fn parse(handle: &str) -> Result<VolumeHandle, RequestError> {
        let bad = |why: &str| {
            RequestError::Handle(format!(
                "volumeHandle {} {why}; expected BACKEND:VOLUME or BACKEND:POOL/VOLUME",
                quote(handle)
            ))
        };
        let Some((backend, rest)) = handle.split_once(':') else {
            return Err(bad("has no ':'"));
        };
        if backend.is_empty() {
            return Err(bad("names no backend"));
        }
        let (pool, volume) = match rest.rsplit_once('/') {
            Some((pool, volume)) => (Some(pool), volume),
            None => (None, rest),
        };
        if volume.is_empty() {
            return Err(bad("names no volume"));
        }
        if pool.is_some_and(|p| p.is_empty() || p.split('/').any(str::is_empty)) {
            return Err(bad("has an empty pool segment"));
        }
        let mut h = VolumeHandle::new(backend, volume).map_err(|e| bad(&e.to_string()))?;
        h.pool = pool.map(str::to_string);
        Ok(h)
    }
}

/// A volume to import: the array volume, the storch name and class it gets, and whether storch
/// manages it (`false`: a delete forgets it and never destroys it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRequest {
    pub handle: VolumeHandle,
    pub name: String,
    pub storage_class: String,
    pub managed: bool,
}

impl ImportRequest {
    pub fn parse(
        handle: VolumeHandle,
        name: &str,
        storage_class: &str,
        managed: bool,
    ) -> Result<ImportRequest, RequestError> {
        validate_name("name", name)?;
        validate_name("storageClass", storage_class)?;
        Ok(ImportRequest {
            handle,
            name: name.to_string(),
            storage_class: storage_class.to_string(),
            managed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nexentastor_handle_names_backend_pool_and_volume() {
        let h = VolumeHandle::parse("nexenta-a:pool1/vg1/pvc-123").unwrap();
        assert_eq!(h.backend, "nexenta-a");
        assert_eq!(h.pool.as_deref(), Some("pool1/vg1"));
        assert_eq!(h.internal_name, "pvc-123");
        let plain = VolumeHandle::parse("ontap:legacy_vol").unwrap();
        assert_eq!((plain.backend.as_str(), plain.pool), ("ontap", None));
        assert_eq!(plain.internal_name, "legacy_vol");
    }

    #[test]
    fn a_bad_handle_is_refused_naming_the_field() {
        for bad in ["novolume", ":pool/v", "b:pool/", "b:", "b:pool//v", "b:/v"] {
            let e = VolumeHandle::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("volumeHandle"), "{bad}: {e}");
        }
        assert!(
            VolumeHandle::new("b", "")
                .unwrap_err()
                .to_string()
                .contains("internalName")
        );
        assert!(
            VolumeHandle::new("a/b", "v")
                .unwrap_err()
                .to_string()
                .contains("backend")
        );
    }

    #[test]
    fn an_import_needs_a_name_and_a_class() {
        let h = VolumeHandle::new("b", "v").unwrap();
        let e = ImportRequest::parse(h.clone(), "", "gold", true).unwrap_err();
        assert!(e.to_string().contains("name"));
        let e = ImportRequest::parse(h.clone(), "v1", "", true).unwrap_err();
        assert!(e.to_string().contains("storageClass"));
        assert!(ImportRequest::parse(h, "v1", "gold", false).is_ok_and(|r| !r.managed));
    }
}

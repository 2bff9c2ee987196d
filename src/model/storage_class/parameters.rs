//! A StorageClass's `parameters` map read as a storch class: the one reading shared by the
//! Kubernetes frontend (StorageClass objects) and the CSI frontend (CreateVolume and
//! GetCapacity `parameters`), so one StorageClass means the same through either.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{CompiledClass, StorageClassConfig};

/// The keys read as pool lists in `backend:pool1,pool2;backend2:pool3` form
/// (`requiredStorage` is the 17.x alias of `additionalStoragePools`).
const POOL_LIST_KEYS: [&str; 4] = [
    "storagePools",
    "additionalStoragePools",
    "requiredStorage",
    "excludeStoragePools",
];

/// A class read from parameters, and the file system they ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassParameters {
    pub config: StorageClassConfig,
    /// `fsType`, when given and not empty.
    pub fs_type: Option<String>,
}

/// Reads `parameters` as the class `name`: every key is an attribute request, except `fsType`
/// (kept apart), the pool lists and the driver parameters (`volumeGroup`, `chapSecret`, …:
/// `super::driver_parameters`), which are passed to the driver and never matched. The class is validated and its pool patterns compiled
/// here; errors name the parameter (`parameters.<key>: …`).
pub fn class_from_parameters<'a>(
    name: &str,
    parameters: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Result<ClassParameters, String> {
    let mut attributes = Map::new();
    let mut driver_params = Map::new();
    let mut doc = Map::new();
    let mut fs_type = None;
    for (key, value) in parameters {
        if key == "fsType" {
            fs_type = Some(value.clone()).filter(|v| !v.is_empty());
        } else if POOL_LIST_KEYS.contains(&key.as_str()) {
            let list = pool_list(value).map_err(|e| format!("parameters.{key}: {e}"))?;
            doc.insert(key.clone(), list);
        } else if super::driver_parameters::is_driver_parameter(key) {
            driver_params.insert(key.clone(), Value::String(value.clone()));
        } else {
            attributes.insert(key.clone(), Value::String(value.clone()));
        }
    }
    doc.insert("version".into(), json!("1"));
    doc.insert("parameters".into(), Value::Object(driver_params));
    doc.insert("name".into(), json!(name));
    doc.insert("attributes".into(), Value::Object(attributes));
    let config = StorageClassConfig::from_value(Value::Object(doc))
        .map_err(|e| e.replace("attributes.", "parameters."))?;
    crate::model::validate_name("metadata.name", &config.name).map_err(|e| e.to_string())?;
    // Pool-list patterns are compiled here, so that one bad class cannot hold up the others.
    CompiledClass::compile(config.clone()).map_err(|e| e.replace("attributes.", "parameters."))?;
    Ok(ClassParameters { config, fs_type })
}

/// `backend:pool1,pool2;backend2:pool3` → `{"backend":["pool1","pool2"],"backend2":["pool3"]}`.
/// Split on `;`, then on the first `:`, then on `,`; empty parts are errors.
fn pool_list(s: &str) -> Result<Value, String> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for entry in s.split(';') {
        let (backend, pools) = entry
            .split_once(':')
            .ok_or_else(|| format!("{entry:?} is not of the form backend:pool1,pool2"))?;
        let backend = backend.trim();
        if backend.is_empty() {
            return Err(format!("{entry:?} has an empty backend"));
        }
        let slot = out.entry(backend.to_string()).or_default();
        for pool in pools.split(',') {
            let pool = pool.trim();
            if pool.is_empty() {
                return Err(format!("{entry:?} has an empty pool"));
            }
            slot.push(Value::String(pool.to_string()));
        }
    }
    Ok(Value::Object(
        out.into_iter().map(|(k, v)| (k, Value::Array(v))).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn attributes_pools_and_fs_type() {
        let p = params(&[
            ("media", "ssd"),
            ("fsType", "xfs"),
            ("storagePools", "b1:p1,p2;b2:p3"),
        ]);
        let c = class_from_parameters("gold", &p).unwrap();
        assert!(c.config.parameters.is_empty());
        assert_eq!(c.fs_type.as_deref(), Some("xfs"));
        assert_eq!(c.config.name, "gold");
        assert!(c.config.attributes.contains_key("media"));
        assert_eq!(c.config.attributes.len(), 1);
    }

    #[test]
    fn driver_parameters_are_kept_apart() {
        let p = params(&[
            ("backendType", "nexentastor-iscsi"),
            ("volumeGroup", "tank/a"),
            ("chapSecret", "canary-secret-1"),
        ]);
        let c = class_from_parameters("nx", &p).unwrap();
        assert_eq!(c.config.attributes.len(), 1);
        assert_eq!(c.config.parameters["volumeGroup"], "tank/a");
        assert_eq!(c.config.parameters["chapSecret"], "canary-secret-1");
        let wrong = params(&[("backendType", "ontap-nas"), ("volumeGroup", "tank/a")]);
        let e = class_from_parameters("nx", &wrong).unwrap_err();
        assert!(
            e.contains("parameters.volumeGroup") && e.contains("ontap-nas"),
            "{e}"
        );
        let short = params(&[("chapSecret", "short")]);
        let e = class_from_parameters("nx", &short).unwrap_err();
        assert!(
            e.contains("parameters.chapSecret") && !e.contains("short\""),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_parameter() {
        let bad = params(&[("storagePools", "b1")]);
        let e = class_from_parameters("c", &bad).unwrap_err();
        assert!(e.starts_with("parameters.storagePools: "), "{e}");
        let unknown = params(&[("colour", "red")]);
        let e = class_from_parameters("c", &unknown).unwrap_err();
        assert!(e.contains("colour"), "{e}");
        let empty_pool = params(&[("excludeStoragePools", "b:p,")]);
        assert!(class_from_parameters("c", &empty_pool).is_err());
    }
}

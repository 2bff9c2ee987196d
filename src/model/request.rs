//! Requests parsed once: every frontend (REST, Kubernetes, the benchmarks, later CSI) turns its
//! input into one of these, and the core takes nothing else. A parse error names the field.

use super::volume::{AccessMode, Protocol, VolumeConfig, resolve_protocol};
use super::{NameError, canonical_size, parse_size_strict, validate_name};

/// The longest prefix of a bad value quoted back in an error message.
const QUOTE_MAX_CHARS: usize = 64;

/// Quotes a client-supplied value for an error message, cut to 64 characters.
pub fn quote(value: &str) -> String {
    let mut chars = value.chars();
    let head: String = chars.by_ref().take(QUOTE_MAX_CHARS).collect();
    if chars.next().is_some() {
        format!("{:?}…", head)
    } else {
        format!("{head:?}")
    }
}

/// The most ignored fields a `warnings` list names one by one.
const MAX_WARNINGS: usize = 20;

/// One warning per ignored field, at most [`MAX_WARNINGS`] (then how many more).
pub fn ignored_warnings<S: AsRef<str>>(fields: impl IntoIterator<Item = S>) -> Vec<String> {
    let fields: Vec<S> = fields.into_iter().collect();
    let mut out: Vec<String> = fields
        .iter()
        .take(MAX_WARNINGS)
        .map(|f| format!("unknown field {} was ignored", quote(f.as_ref())))
        .collect();
    if fields.len() > MAX_WARNINGS {
        out.push(format!(
            "{} more unknown fields were ignored",
            fields.len() - MAX_WARNINGS
        ));
    }
    out
}

/// Why a volume, resize or snapshot request was refused. Every message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A name (`name`, `storageClass`, `cloneSourceVolume`, `snapshot`) that cannot be an
    /// object name.
    #[error("{0}")]
    Name(#[from] NameError),
    /// A size that is missing, does not parse or is zero; the message starts `invalid size`.
    #[error("{0}")]
    Size(String),
    #[error(
        "invalid accessMode {0}; acceptable values: ReadWriteOnce, ReadOnlyMany, ReadWriteMany, \"\""
    )]
    AccessMode(String),
    /// Access mode and protocol that cannot go together.
    #[error("{0}")]
    Incompatible(String),
    /// A volume handle or internal name (import) that names no array volume.
    #[error("{0}")]
    Handle(String),
}

/// A size as a request gives it: it must parse strictly ([`parse_size_strict`]: whole numbers,
/// Trident's units spelled one way, no spaces) and be above zero. It is kept in its one
/// canonical spelling ([`canonical_size`]), so `1G`, `1GiB` and `1073741824` are all stored as
/// `1Gi`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedSize {
    text: String,
    bytes: u64,
}

impl RequestedSize {
    pub fn parse(size: &str) -> Result<RequestedSize, RequestError> {
        let bytes = parse_size_strict(size).map_err(RequestError::Size)?;
        if bytes == 0 {
            return Err(RequestError::Size(format!(
                "invalid size {}: size must be greater than zero",
                quote(size)
            )));
        }
        Ok(RequestedSize {
            text: canonical_size(bytes),
            bytes,
        })
    }

    /// The size in its canonical spelling (`"2Gi"`).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// A volume create (or clone), built once from Trident's `VolumeConfig`.
///
/// The config is kept as the record of what was asked (with the protocol resolved from the
/// access mode); the parsed parts are read through the accessors.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeRequest {
    config: VolumeConfig,
    access_mode: AccessMode,
    /// `None` for a clone that names no size (it inherits its source's).
    size: Option<RequestedSize>,
    /// Where the volume must be reachable from (CSI's accessibility requirements); `None`:
    /// anywhere. Only placement reads it: the plan it shapes is what the log records.
    topology: Option<super::TopologyRequirement>,
}

impl VolumeRequest {
    /// Checks names (`name`, `storageClass`, `cloneSourceVolume`), the access mode and its
    /// protocol, and the size — required unless the volume is a clone, whose size comes from
    /// its source.
    pub fn parse(mut config: VolumeConfig) -> Result<VolumeRequest, RequestError> {
        validate_name("name", &config.name)?;
        if !config.storage_class.is_empty() {
            validate_name("storageClass", &config.storage_class)?;
        }
        if !config.clone_source_volume.is_empty() {
            validate_name("cloneSourceVolume", &config.clone_source_volume)?;
        }
        let access_mode = AccessMode::parse(&config.access_mode)
            .ok_or_else(|| RequestError::AccessMode(quote(&config.access_mode)))?;
        config.protocol =
            resolve_protocol(access_mode, config.protocol).map_err(RequestError::Incompatible)?;
        let size = if config.size.is_empty() && !config.clone_source_volume.is_empty() {
            None
        } else {
            let size = RequestedSize::parse(&config.size)?;
            config.size = size.as_str().to_string();
            Some(size)
        };
        Ok(VolumeRequest {
            config,
            access_mode,
            size,
            topology: None,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The requested size in bytes; `None` for a clone that inherits its source's.
    pub fn size_bytes(&self) -> Option<u64> {
        self.size.as_ref().map(RequestedSize::bytes)
    }

    /// The protocol, resolved from the access mode (`ReadWriteMany` with any protocol means
    /// file).
    pub fn protocol(&self) -> Protocol {
        self.config.protocol
    }

    pub fn access_mode(&self) -> AccessMode {
        self.access_mode
    }

    /// The storage class, when one is named.
    pub fn storage_class(&self) -> Option<&str> {
        Some(self.config.storage_class.as_str()).filter(|c| !c.is_empty())
    }

    /// The volume to clone, when this is a clone.
    pub fn clone_source(&self) -> Option<&str> {
        Some(self.config.clone_source_volume.as_str()).filter(|c| !c.is_empty())
    }

    /// The whole config, as recorded (options such as `snapshotPolicy` or `exportPolicy` are
    /// read from it).
    pub fn config(&self) -> &VolumeConfig {
        &self.config
    }

    /// The same request, to be placed only where `topology` admits.
    pub fn with_topology(mut self, topology: super::TopologyRequirement) -> VolumeRequest {
        self.topology = Some(topology);
        self
    }

    /// Where the volume must be reachable from, if the frontend said.
    pub fn topology(&self) -> Option<&super::TopologyRequirement> {
        self.topology.as_ref()
    }

    pub fn into_config(self) -> VolumeConfig {
        self.config
    }
}

impl TryFrom<VolumeConfig> for VolumeRequest {
    type Error = RequestError;

    fn try_from(config: VolumeConfig) -> Result<Self, Self::Error> {
        VolumeRequest::parse(config)
    }
}

/// A snapshot to take or delete: the volume and a valid snapshot name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRequest {
    pub volume: String,
    pub snapshot: String,
}

impl SnapshotRequest {
    /// `field` is how an error names the snapshot (`snapshot` for the core, `name` for a
    /// REST body).
    pub fn parse(
        volume: &str,
        field: &'static str,
        snapshot: &str,
    ) -> Result<SnapshotRequest, RequestError> {
        validate_name(field, snapshot)?;
        Ok(SnapshotRequest {
            volume: volume.to_string(),
            snapshot: snapshot.to_string(),
        })
    }
}

/// A volume to grow to a new size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResizeRequest {
    pub volume: String,
    pub size: RequestedSize,
}

impl ResizeRequest {
    pub fn parse(volume: &str, size: &str) -> Result<ResizeRequest, RequestError> {
        Ok(ResizeRequest {
            volume: volume.to_string(),
            size: RequestedSize::parse(size)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, size: &str) -> VolumeConfig {
        VolumeConfig {
            name: name.into(),
            size: size.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_plain_volume_parses_once() {
        let r = VolumeRequest::parse(config("v", "2Gi")).unwrap();
        assert_eq!(r.name(), "v");
        assert_eq!(r.size_bytes(), Some(2 << 30));
        assert_eq!(r.protocol(), Protocol::Any);
        assert_eq!(r.access_mode(), AccessMode::Unset);
        assert_eq!(r.storage_class(), None);
        assert_eq!(r.clone_source(), None);
        assert_eq!(r.config().size, "2Gi");
    }

    #[test]
    fn errors_name_the_field() {
        let msg = |c: VolumeConfig| VolumeRequest::parse(c).unwrap_err().to_string();
        assert!(msg(config("a/b", "1Gi")).starts_with("name "));
        assert!(msg(config("v", "0")).starts_with("invalid size \"0\""));
        assert!(msg(config("v", "")).contains("size"));
        let mut c = config("v", "1Gi");
        c.storage_class = "..".into();
        assert!(msg(c).starts_with("storageClass "));
        let mut c = config("v", "1Gi");
        c.access_mode = "Sometimes".into();
        assert_eq!(
            msg(c),
            "invalid accessMode \"Sometimes\"; acceptable values: ReadWriteOnce, ReadOnlyMany, ReadWriteMany, \"\""
        );
        let mut c = config("v", "1Gi");
        c.access_mode = "ReadWriteMany".into();
        c.protocol = Protocol::Block;
        assert!(msg(c).contains("incompatible access mode"));
    }

    #[test]
    fn read_write_many_resolves_to_file() {
        let mut c = config("v", "1Gi");
        c.access_mode = "ReadWriteMany".into();
        let r = VolumeRequest::parse(c).unwrap();
        assert_eq!(r.protocol(), Protocol::File);
        assert_eq!(r.config().protocol, Protocol::File);
    }

    #[test]
    fn a_clone_may_inherit_its_size_but_not_give_a_bad_one() {
        let mut c = config("copy", "");
        c.clone_source_volume = "src".into();
        let r = VolumeRequest::parse(c.clone()).unwrap();
        assert_eq!(r.size_bytes(), None);
        assert_eq!(r.clone_source(), Some("src"));
        c.size = "lots".into();
        assert!(VolumeRequest::parse(c).is_err());
    }

    #[test]
    fn sizes_are_stored_canonical() {
        let s = RequestedSize::parse("1536Mi").unwrap();
        assert_eq!((s.as_str(), s.bytes()), ("1536Mi", 1536 << 20));
        for same in ["1G", "1GiB", "1024Mi", "1073741824"] {
            assert_eq!(
                RequestedSize::parse(same).unwrap().as_str(),
                "1Gi",
                "{same}"
            );
        }
        let r = VolumeRequest::parse(config("v", "2048Mi")).unwrap();
        assert_eq!(r.config().size, "2Gi");
        for bad in [
            " 1Gi",
            "1 Gi",
            "1gi",
            "0",
            "-1",
            "1.5Gi",
            "lots",
            "99999999999999999999999",
            "",
        ] {
            assert!(RequestedSize::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resizes_keep_the_size_text() {
        let r = ResizeRequest::parse("v", "2Gi").unwrap();
        assert_eq!((r.volume.as_str(), r.size.as_str()), ("v", "2Gi"));
        assert!(ResizeRequest::parse("v", "0").is_err());
    }

    #[test]
    fn snapshot_names_are_checked() {
        assert!(SnapshotRequest::parse("v", "snapshot", "s1").is_ok());
        let e = SnapshotRequest::parse("v", "name", "../x").unwrap_err();
        assert!(e.to_string().starts_with("name "));
    }
}

//! Pure translations between CSI messages and storch's model: ids, capacity ranges,
//! capabilities, parameters, contexts and paging tokens. No I/O; unit-tested below.

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use tonic::Status;

use super::proto::volume_capability::access_mode::Mode;
use super::proto::volume_capability::{AccessMode as CsiAccessMode, AccessType};
use super::proto::{CapacityRange, VolumeCapability};
use super::status::{invalid, missing};
use crate::drivers::Attachment;
use crate::model::{AccessMode, ClassParameters, Protocol, class_from_parameters};

/// The prefix of the keys the external-provisioner and -snapshotter own.
pub const RESERVED_PREFIX: &str = "csi.storage.k8s.io/";
/// Sizes are whole MiB: a request rounds up to the next one.
pub const SIZE_STEP: u64 = 1 << 20;
/// The size of a volume whose request names no capacity.
pub const DEFAULT_SIZE: u64 = 1 << 30;
/// The file system when neither the capabilities nor the parameters name one.
pub const DEFAULT_FS: &str = "ext4";
/// Separates the volume and the snapshot in a snapshot id (never part of a storch name).
const SNAPSHOT_SEP: char = '/';

/// A plugin name as csi-sanity checks it: at most 63 characters, letters at both ends,
/// alphanumerics, `.`, `-` and `_` between.
pub fn check_driver_name(name: &str) -> Result<(), String> {
    let ok_inner = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    let first = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    let last = name.chars().last().is_some_and(|c| c.is_ascii_alphabetic());
    if name.len() < 2 || name.len() > 63 || !ok_inner || !first || !last {
        return Err(
            "must be 2 to 63 characters of letters, digits, '.', '-' and '_', with a \
             letter at both ends (e.g. csi.storch.io)"
                .into(),
        );
    }
    Ok(())
}

/// The storch object name of a CSI `name` (volumes and snapshots alike), stable for the life of
/// the object: the name itself when storch accepts it as a name (no `/` or `\`), otherwise
/// `csi-` and 32 hex digits of its SHA-256.
pub fn object_name(csi_name: &str) -> String {
    if crate::model::validate_name("name", csi_name).is_ok() {
        csi_name.to_string()
    } else {
        format!("csi-{}", short_hash(csi_name.as_bytes(), 32))
    }
}

fn short_hash(bytes: &[u8], hex_digits: usize) -> String {
    let mut h = hex::encode(Sha256::digest(bytes));
    h.truncate(hex_digits);
    h
}

/// The CSI id of a storch snapshot: `<volume>/<snapshot>` (enough to find both).
pub fn snapshot_id(volume: &str, snapshot: &str) -> String {
    format!("{volume}{SNAPSHOT_SEP}{snapshot}")
}

/// The volume and snapshot of a snapshot id; `None` for an id storch never issued.
pub fn parse_snapshot_id(id: &str) -> Option<(&str, &str)> {
    let (volume, snapshot) = id.split_once(SNAPSHOT_SEP)?;
    (!volume.is_empty() && !snapshot.is_empty() && !snapshot.contains(SNAPSHOT_SEP))
        .then_some((volume, snapshot))
}

/// A capacity range checked: never negative, `limit` not below `required`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Range {
    pub required: Option<u64>,
    pub limit: Option<u64>,
}

impl Range {
    pub fn parse(field: &str, range: Option<&CapacityRange>) -> Result<Range, Status> {
        let Some(r) = range else {
            return Ok(Range::default());
        };
        let read = |name: &str, v: i64| -> Result<Option<u64>, Status> {
            match v {
                0 => Ok(None),
                v if v < 0 => Err(invalid(&format!("{field}.{name}"), "must not be negative")),
                v => Ok(Some(v as u64)),
            }
        };
        let range = Range {
            required: read("required_bytes", r.required_bytes)?,
            limit: read("limit_bytes", r.limit_bytes)?,
        };
        if let (Some(req), Some(limit)) = (range.required, range.limit)
            && limit < req
        {
            return Err(invalid(
                &format!("{field}.limit_bytes"),
                format!("{limit} is below required_bytes {req}"),
            ));
        }
        Ok(range)
    }

    /// The size to create: `required_bytes` rounded up to whole MiB (or 1 GiB, or the limit
    /// when smaller, when nothing is required); `OUT_OF_RANGE` when rounding passes the limit.
    pub fn size(&self) -> Result<u64, Status> {
        let wanted = match self.required {
            Some(r) => r,
            None => self.limit.map_or(DEFAULT_SIZE, |l| l.min(DEFAULT_SIZE)),
        };
        let rounded = wanted.div_ceil(SIZE_STEP).saturating_mul(SIZE_STEP);
        match self.limit {
            Some(limit) if rounded > limit => Err(Status::out_of_range(format!(
                "capacity_range: sizes are whole MiB; {wanted} bytes round up to {rounded}, \
                 above limit_bytes {limit}"
            ))),
            _ => Ok(rounded),
        }
    }

    /// Whether an existing size satisfies the range.
    pub fn admits(&self, size: u64) -> bool {
        self.required.is_none_or(|r| size >= r) && self.limit.is_none_or(|l| size <= l)
    }
}

/// What a list of capabilities asks of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The widest access mode asked for.
    pub access_mode: AccessMode,
    /// A raw block device was asked for.
    pub block: bool,
    /// The file system asked for by a mount capability.
    pub fs_type: Option<String>,
}

impl Wanted {
    /// The protocol a create needs: raw block needs block; several writers on several nodes
    /// need file (the model's `resolve_protocol` applies the same rule).
    pub fn protocol(&self) -> Protocol {
        if self.block {
            Protocol::Block
        } else if self.access_mode == AccessMode::ReadWriteMany {
            Protocol::File
        } else {
            Protocol::Any
        }
    }
}

impl Wanted {
    /// Whether the access mode lets several nodes use the volume at once (MULTI_NODE_*).
    pub fn multi_node(&self) -> bool {
        matches!(
            self.access_mode,
            AccessMode::ReadOnlyMany | AccessMode::ReadWriteMany
        )
    }
}

/// A capability in canonical words, `mount/ext4/SINGLE_NODE_WRITER` or
/// `block/MULTI_NODE_READER_ONLY` (the mount flags left out): what a publication records, so a
/// repeat with other words is told apart.
pub fn capability_words(cap: &VolumeCapability) -> String {
    let mode = cap
        .access_mode
        .as_ref()
        .map(|m| m.mode().as_str_name())
        .unwrap_or("UNKNOWN");
    match &cap.access_type {
        Some(AccessType::Block(_)) => format!("block/{mode}"),
        Some(AccessType::Mount(m)) if !m.fs_type.is_empty() => {
            format!("mount/{}/{mode}", m.fs_type)
        }
        _ => format!("mount/{mode}"),
    }
}

/// Reads `volume_capabilities` (REQUIRED, each with an access type and a known access mode;
/// the alpha single-node modes are not offered). Errors name the element.
pub fn wanted(field: &str, caps: &[VolumeCapability]) -> Result<Wanted, Status> {
    if caps.is_empty() {
        return Err(missing(field));
    }
    let mut out = Wanted {
        access_mode: AccessMode::Unset,
        block: false,
        fs_type: None,
    };
    for (i, cap) in caps.iter().enumerate() {
        let one = capability(&format!("{field}[{i}]"), cap)?;
        out.block |= one.block;
        out.access_mode = wider(out.access_mode, one.access_mode);
        if let Some(fs) = one.fs_type {
            match &out.fs_type {
                Some(other) if *other != fs => {
                    return Err(invalid(
                        &format!("{field}[{i}].mount.fs_type"),
                        format!("{fs:?} differs from {other:?} of another capability"),
                    ));
                }
                _ => out.fs_type = Some(fs),
            }
        }
    }
    Ok(out)
}

/// One capability.
pub fn capability(field: &str, cap: &VolumeCapability) -> Result<Wanted, Status> {
    let (block, fs_type) = match &cap.access_type {
        None => return Err(invalid(field, "needs block or mount")),
        Some(AccessType::Block(_)) => (true, None),
        Some(AccessType::Mount(m)) => (false, Some(m.fs_type.clone()).filter(|f| !f.is_empty())),
    };
    let mode = cap
        .access_mode
        .as_ref()
        .map(CsiAccessMode::mode)
        .ok_or_else(|| missing(&format!("{field}.access_mode")))?;
    let access_mode = match mode {
        Mode::SingleNodeWriter | Mode::SingleNodeReaderOnly => AccessMode::ReadWriteOnce,
        Mode::MultiNodeReaderOnly => AccessMode::ReadOnlyMany,
        Mode::MultiNodeSingleWriter | Mode::MultiNodeMultiWriter => AccessMode::ReadWriteMany,
        Mode::Unknown | Mode::SingleNodeSingleWriter | Mode::SingleNodeMultiWriter => {
            return Err(invalid(
                &format!("{field}.access_mode.mode"),
                format!(
                    "{} is not supported (SINGLE_NODE_WRITER, SINGLE_NODE_READER_ONLY, \
                     MULTI_NODE_READER_ONLY, MULTI_NODE_SINGLE_WRITER or MULTI_NODE_MULTI_WRITER)",
                    mode.as_str_name()
                ),
            ));
        }
    };
    Ok(Wanted {
        access_mode,
        block,
        fs_type,
    })
}

fn wider(a: AccessMode, b: AccessMode) -> AccessMode {
    let rank = |m: AccessMode| match m {
        AccessMode::Unset => 0,
        AccessMode::ReadWriteOnce => 1,
        AccessMode::ReadOnlyMany => 2,
        AccessMode::ReadWriteMany => 3,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// Why a volume that attaches as `attachment` with file system `fs` cannot serve `wanted`
/// (`None`: it can). Raw block needs an iSCSI LUN; writers on several nodes need NFS; a
/// volume on one host's path serves one node only; a mount's file system must match.
pub fn unsupported(attachment: Option<Attachment>, fs: &str, wanted: &Wanted) -> Option<String> {
    let kind = match attachment {
        Some(Attachment::Nfs) => "an NFS export",
        Some(Attachment::Iscsi) => "an iSCSI LUN",
        Some(Attachment::LocalPath) => "a local path",
        None => return Some("the volume's attachment is unknown".into()),
    };
    if wanted.block && attachment != Some(Attachment::Iscsi) {
        return Some(format!(
            "raw block access needs an iSCSI LUN; the volume is {kind}"
        ));
    }
    let multi = matches!(
        wanted.access_mode,
        AccessMode::ReadWriteMany | AccessMode::ReadOnlyMany
    );
    if wanted.access_mode == AccessMode::ReadWriteMany && attachment != Some(Attachment::Nfs) {
        return Some(format!(
            "writers on several nodes need an NFS export; the volume is {kind}"
        ));
    }
    if multi && attachment == Some(Attachment::LocalPath) {
        return Some("a volume on a local path serves one node only".into());
    }
    if attachment == Some(Attachment::Iscsi)
        && let Some(want) = &wanted.fs_type
        && !fs.is_empty()
        && want != fs
    {
        return Some(format!("the volume's file system is {fs}, not {want}"));
    }
    None
}

/// What CreateVolume and GetCapacity read from `parameters`.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameters {
    /// The storch class these parameters mean (named `csi-<hash of the parameters>`).
    pub class: ClassParameters,
    /// From `csi.storage.k8s.io/pvc/namespace` and `…/pvc/name` (external-provisioner's
    /// `--extra-create-metadata`): who asked, for the events.
    pub claim: Option<(String, String)>,
}

impl Parameters {
    /// Reads the parameters exactly as a StorageClass's (`model::class_from_parameters`),
    /// leaving out the keys the sidecars own (`is_sidecar_key`). Errors name the parameter.
    pub fn read(parameters: &HashMap<String, String>) -> Result<Parameters, Status> {
        let mut own: Vec<(&String, &String)> = parameters
            .iter()
            .filter(|(k, _)| !is_sidecar_key(k))
            .collect();
        own.sort();
        let mut canonical = Vec::new();
        for (k, v) in &own {
            canonical.extend_from_slice(k.as_bytes());
            canonical.push(0);
            canonical.extend_from_slice(v.as_bytes());
            canonical.push(0);
        }
        let name = format!("csi-{}", short_hash(&canonical, 16));
        let class = class_from_parameters(&name, own).map_err(Status::invalid_argument)?;
        let meta = |k: &str| {
            parameters
                .get(&format!("{RESERVED_PREFIX}pvc/{k}"))
                .cloned()
        };
        let claim = meta("namespace").zip(meta("name"));
        Ok(Parameters { class, claim })
    }
}

/// Keys of StorageClass parameters that the external-provisioner reads itself and storch
/// ignores: the `csi.storage.k8s.io/` keys (claim metadata, secret references), the
/// unprefixed `fstype` (it arrives as the capability's `fs_type`), and the deprecated
/// unprefixed secret references (`csiProvisionerSecretName`, …), which are not stripped.
pub fn is_sidecar_key(key: &str) -> bool {
    key.starts_with(RESERVED_PREFIX)
        || key == "fstype"
        || (key.starts_with("csi")
            && (key.ends_with("SecretName") || key.ends_with("SecretNamespace")))
}

/// The `volume_context` of a volume: how to reach it, never a secret. Built only from what
/// the log holds, so it is the same in every answer and across restarts.
pub fn volume_context(
    backend: &str,
    driver: &str,
    config: &crate::model::VolumeConfig,
    attachment: Option<Attachment>,
) -> HashMap<String, String> {
    let a = &config.access_information;
    let mut ctx = HashMap::new();
    let mut put = |k: &str, v: String| {
        if !v.is_empty() {
            ctx.insert(format!("storch.io/{k}"), v);
        }
    };
    put("backend", backend.to_string());
    put("driver", driver.to_string());
    put("internalName", config.internal_name.clone());
    put("protocol", config.protocol.as_str().to_string());
    put("fsType", config.file_system.clone());
    match attachment {
        Some(Attachment::Nfs) => {
            put("attachment", "nfs".into());
            put("nfsServerIp", a.nfs_server_ip.clone());
            put("nfsPath", a.nfs_path.clone());
        }
        Some(Attachment::Iscsi) => {
            put("attachment", "iscsi".into());
            put("iscsiTargetPortal", a.iscsi_target_portal.clone());
            put("iscsiPortals", a.iscsi_portals.join(","));
            put("iscsiTargetIqn", a.iscsi_target_iqn.clone());
            put("iscsiLunNumber", a.iscsi_lun_number.to_string());
            put("iscsiInterface", a.iscsi_interface.clone());
            put("iscsiUsername", a.iscsi_username.clone());
        }
        Some(Attachment::LocalPath) => {
            put("attachment", "local".into());
            put("localPath", a.local_path.clone());
        }
        None => {}
    }
    ctx
}

/// A paging token: where the next page starts (an id), hex-encoded behind a version tag.
pub fn token(next: &str) -> String {
    format!("v1.{}", hex::encode(next))
}

/// The id a token starts at; `ABORTED` for a token storch did not issue (spec §5.6).
pub fn parse_token(token: &str) -> Result<Option<String>, Status> {
    if token.is_empty() {
        return Ok(None);
    }
    token
        .strip_prefix("v1.")
        .and_then(|h| hex::decode(h).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .map(Some)
        .ok_or_else(|| {
            Status::aborted(format!("starting_token {token:?} was not issued by storch"))
        })
}

/// One page of `ids` (sorted): from `start` (inclusive), at most `max_entries` (0 = all),
/// and the token of the rest. A negative `max_entries` is refused.
pub fn page<T>(
    items: Vec<T>,
    id: impl Fn(&T) -> &str,
    starting_token: &str,
    max_entries: i32,
) -> Result<(Vec<T>, String), Status> {
    if max_entries < 0 {
        return Err(invalid("max_entries", "must not be negative"));
    }
    let start = parse_token(starting_token)?;
    let mut rest: Vec<T> = match start {
        None => items,
        Some(s) => items.into_iter().filter(|i| id(i) >= s.as_str()).collect(),
    };
    let max = if max_entries == 0 {
        usize::MAX
    } else {
        max_entries as usize
    };
    if rest.len() <= max {
        return Ok((rest, String::new()));
    }
    let tail = rest.split_off(max);
    let next = token(id(&tail[0]));
    Ok((rest, next))
}

#[cfg(test)]
mod tests {
    use super::super::proto::volume_capability::{BlockVolume, MountVolume};
    use super::*;

    fn cap(block: bool, mode: Mode) -> VolumeCapability {
        VolumeCapability {
            access_type: Some(if block {
                AccessType::Block(BlockVolume {})
            } else {
                AccessType::Mount(MountVolume::default())
            }),
            access_mode: Some(CsiAccessMode { mode: mode as i32 }),
        }
    }

    #[test]
    fn names_and_ids() {
        assert_eq!(object_name("pvc-1234"), "pvc-1234");
        let hashed = object_name("a/b");
        assert!(hashed.starts_with("csi-") && hashed.len() == 36, "{hashed}");
        assert_eq!(hashed, object_name("a/b"));
        assert_eq!(parse_snapshot_id(&snapshot_id("v", "s")), Some(("v", "s")));
        assert_eq!(parse_snapshot_id("non-existing-snapshot-id"), None);
        assert_eq!(parse_snapshot_id("v/"), None);
    }

    #[test]
    fn ranges_round_to_mib_within_the_limit() {
        let r = |req: i64, lim: i64| {
            Range::parse(
                "capacity_range",
                Some(&CapacityRange {
                    required_bytes: req,
                    limit_bytes: lim,
                }),
            )
        };
        assert_eq!(r(1, 0).unwrap().size().unwrap(), SIZE_STEP);
        assert_eq!(r(10 << 30, 10 << 30).unwrap().size().unwrap(), 10 << 30);
        assert_eq!(
            r(1000, 1000).unwrap().size().unwrap_err().code(),
            tonic::Code::OutOfRange
        );
        assert_eq!(r(-1, 0).unwrap_err().code(), tonic::Code::InvalidArgument);
        assert_eq!(r(10, 5).unwrap_err().code(), tonic::Code::InvalidArgument);
        assert_eq!(Range::default().size().unwrap(), DEFAULT_SIZE);
        assert!(r(5, 10).unwrap().admits(7));
        assert!(!r(5, 10).unwrap().admits(11));
    }

    #[test]
    fn capabilities_decide_the_protocol() {
        let w = wanted("c", &[cap(false, Mode::SingleNodeWriter)]).unwrap();
        assert_eq!(w.protocol(), Protocol::Any);
        let w = wanted("c", &[cap(false, Mode::MultiNodeMultiWriter)]).unwrap();
        assert_eq!(w.protocol(), Protocol::File);
        let w = wanted("c", &[cap(true, Mode::SingleNodeWriter)]).unwrap();
        assert_eq!(w.protocol(), Protocol::Block);
        assert!(unsupported(Some(Attachment::Nfs), "", &w).is_some());
        assert!(unsupported(Some(Attachment::Iscsi), "ext4", &w).is_none());
        let e = wanted("c", &[]).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        let mut none = cap(false, Mode::SingleNodeWriter);
        none.access_mode = None;
        assert!(
            wanted("c", &[none])
                .unwrap_err()
                .message()
                .contains("c[0].access_mode")
        );
    }

    #[test]
    fn capabilities_in_words_and_their_reach() {
        assert_eq!(
            capability_words(&cap(false, Mode::SingleNodeWriter)),
            "mount/SINGLE_NODE_WRITER"
        );
        assert_eq!(
            capability_words(&cap(true, Mode::MultiNodeReaderOnly)),
            "block/MULTI_NODE_READER_ONLY"
        );
        let mut xfs = cap(false, Mode::SingleNodeReaderOnly);
        if let Some(AccessType::Mount(m)) = &mut xfs.access_type {
            m.fs_type = "xfs".into();
        }
        assert_eq!(capability_words(&xfs), "mount/xfs/SINGLE_NODE_READER_ONLY");
        let one = |m| capability("c", &cap(false, m)).unwrap().multi_node();
        assert!(!one(Mode::SingleNodeWriter));
        assert!(!one(Mode::SingleNodeReaderOnly));
        assert!(one(Mode::MultiNodeReaderOnly));
        assert!(one(Mode::MultiNodeSingleWriter));
        assert!(one(Mode::MultiNodeMultiWriter));
    }

    #[test]
    fn tokens_page_and_refuse_strangers() {
        let ids: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
        let (first, next) = page(ids.clone(), |s| s.as_str(), "", 2).unwrap();
        assert_eq!(first, ["v0", "v1"]);
        let (rest, end) = page(ids, |s| s.as_str(), &next, 0).unwrap();
        assert_eq!(rest, ["v2", "v3", "v4"]);
        assert!(end.is_empty());
        assert_eq!(
            parse_token("invalid-token").unwrap_err().code(),
            tonic::Code::Aborted
        );
    }

    #[test]
    fn parameters_name_a_class_by_their_content() {
        let p = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let a = Parameters::read(&p(&[
            ("media", "ssd"),
            ("csi.storage.k8s.io/pvc/name", "x"),
            ("csi.storage.k8s.io/pvc/namespace", "ns"),
        ]))
        .unwrap();
        let b = Parameters::read(&p(&[("media", "ssd")])).unwrap();
        assert_eq!(a.class.config.name, b.class.config.name);
        assert_eq!(a.claim, Some(("ns".into(), "x".into())));
        let legacy = Parameters::read(&p(&[
            ("media", "ssd"),
            ("fstype", "xfs"),
            ("csiProvisionerSecretName", "s"),
            ("csiProvisionerSecretNamespace", "ns"),
        ]))
        .unwrap();
        assert_eq!(legacy.class.config.name, b.class.config.name);
        let c = Parameters::read(&p(&[("media", "hdd")])).unwrap();
        assert_ne!(a.class.config.name, c.class.config.name);
        let e = Parameters::read(&p(&[("storagePools", "nocolon")])).unwrap_err();
        assert!(
            e.message().starts_with("parameters.storagePools"),
            "{}",
            e.message()
        );
    }
}

//! The Element methods the simulator answers (docs/wire-notes.md#element-calls-storch-sends),
//! behind one dispatch table.
//!
//! Every handler checks its parameters first (unknown names, missing required ones and wrong
//! types are refused with `xInvalidParameter`, naming the parameter) and changes the cluster
//! last, so a refused call changes nothing. One file per object family:
//!
//! - `accounts.rs`: accounts and their CHAP secrets.
//! - `volumes.rs`: create, list (paged), modify, delete, purge.
//! - `snapshots.rs`: snapshots.
//! - `clones.rs`: CloneVolume and GetAsyncResult.
//! - `groups.rs`: volume access groups.
//! - `cluster.rs`: cluster info, capacity, version, hardware, default QoS.

mod accounts;
mod clones;
mod cluster;
mod groups;
mod snapshots;
mod volumes;

use serde_json::{Map, Value, json};

use super::state::Cluster;

/// Error names the simulator uses. Those marked "spec" are Element's documented names
/// (docs/wire-notes.md); the others are the simulator's choice (real Element's name for the case is
/// unverified).
pub mod names {
    /// spec
    pub const UNKNOWN_ACCOUNT: &str = "xUnknownAccount";
    /// spec
    pub const DUPLICATE_USERNAME: &str = "xDuplicateUsername";
    /// spec
    pub const VOLUME_ID_DOES_NOT_EXIST: &str = "xVolumeIDDoesNotExist";
    /// spec
    pub const SNAPSHOT_ID_DOES_NOT_EXIST: &str = "xSnapshotIDDoesNotExist";
    /// spec
    pub const VAG_ID_DOES_NOT_EXIST: &str = "xVolumeAccessGroupIDDoesNotExist";
    /// spec
    pub const ASYNC_HANDLE_DOES_NOT_EXIST: &str = "xAsyncHandleDoesNotExist";
    /// spec
    pub const ALREADY_IN_VAG: &str = "xAlreadyInVolumeAccessGroup";
    /// spec
    pub const NOT_IN_VAG: &str = "xNotInVolumeAccessGroup";
    /// spec
    pub const INVALID_PARAMETER: &str = "xInvalidParameter";
    /// spec
    pub const EXCEEDED_LIMIT: &str = "xExceededLimit";
    /// spec
    pub const MAX_SNAPSHOTS_PER_VOLUME: &str = "xMaxSnapshotsPerVolumeExceeded";
    /// simulator's choice, from a public Element client's list of names: an initiator that
    /// is already in another volume access group (Element keeps an initiator in one group).
    pub const INITIATOR_EXISTS: &str = "xInitiatorExists";
    /// simulator's choice (the issue names it; the spec leaves it unverified)
    pub const UNKNOWN_API_METHOD: &str = "xUnknownAPIMethod";
    /// simulator's choice: the cluster cannot provision the bytes asked for.
    pub const INSUFFICIENT_SPACE: &str = "xInsufficientSpace";
    /// simulator's choice: PurgeDeletedVolume of a volume that is not deleted.
    pub const VOLUME_NOT_DELETED: &str = "xVolumeNotDeleted";
    /// simulator's choice: the URL's API version is not one Element has.
    pub const UNKNOWN_API_VERSION: &str = "xUnknownAPIVersion";
    /// simulator's choice: the request body is not a JSON-RPC object.
    pub const INVALID_REQUEST: &str = "xInvalidRequest";
    /// The default name of an injected failure (one of Element's retryable names).
    pub const DEFAULT_INJECTED: &str = "xDBConnectionLoss";
}

/// A refused call: Element error name and message (the code is always 500).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    pub name: String,
    pub message: String,
}

pub(super) fn fail(name: &str, message: impl Into<String>) -> Fail {
    Fail {
        name: name.to_string(),
        message: message.into(),
    }
}

type R = Result<Value, Fail>;

/// Knobs that shape answers.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// The most volumes (or groups) one list page holds, whatever `limit` asks.
    pub page_cap: usize,
    /// Polls (list calls, or GetAsyncResult on its handle) a clone stays invisible/running.
    pub clone_polls: u32,
    /// Polls a new CreateVolume volume stays out of the lists.
    pub create_polls: u32,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            page_cap: 10_000,
            clone_polls: 1,
            create_polls: 0,
        }
    }
}

pub(super) struct Ctx<'a> {
    pub c: &'a mut Cluster,
    pub tuning: Tuning,
    /// Set by a handler that changed the cluster (so it is persisted).
    pub dirty: bool,
}

type Handler = fn(&mut Ctx<'_>, &Params<'_>) -> R;

/// One row per method: name, the lowest API version that has it, the parameters it takes,
/// and its handler.
struct Method {
    name: &'static str,
    since: (u32, u32),
    params: &'static [&'static str],
    run: Handler,
}

const fn m(
    name: &'static str,
    since: (u32, u32),
    params: &'static [&'static str],
    run: Handler,
) -> Method {
    Method {
        name,
        since,
        params,
        run,
    }
}

const V1: (u32, u32) = (1, 0);

/// The dispatch table.
const METHODS: &[Method] = &[
    m("GetAccountByName", V1, &["username"], accounts::get_by_name),
    m("GetAccountByID", V1, &["accountID"], accounts::get_by_id),
    m(
        "AddAccount",
        V1,
        &[
            "username",
            "initiatorSecret",
            "targetSecret",
            "attributes",
            "enableChap",
        ],
        accounts::add,
    ),
    m("GetClusterInfo", V1, &[], cluster::info),
    m("GetClusterVersionInfo", V1, &[], cluster::version),
    m("GetClusterHardwareInfo", V1, &["type"], cluster::hardware),
    m("GetClusterCapacity", V1, &[], cluster::capacity),
    m("GetDefaultQoS", V1, &[], cluster::default_qos),
    m(
        "CreateVolume",
        V1,
        &[
            "name",
            "accountID",
            "totalSize",
            "enable512e",
            "qos",
            "attributes",
            "access",
        ],
        volumes::create,
    ),
    m(
        "ListVolumesForAccount",
        V1,
        &[
            "accountID",
            "startVolumeID",
            "limit",
            "includeVirtualVolumes",
        ],
        volumes::list_for_account,
    ),
    m(
        "ListVolumes",
        (8, 0),
        &[
            "startVolumeID",
            "limit",
            "volumeStatus",
            "accounts",
            "volumeName",
            "volumeIDs",
            "isPaired",
            "includeVirtualVolumes",
        ],
        volumes::list,
    ),
    m(
        "ListActiveVolumes",
        V1,
        &["startVolumeID", "limit", "includeVirtualVolumes"],
        volumes::list_active,
    ),
    m(
        "ListDeletedVolumes",
        V1,
        &["includeVirtualVolumes"],
        volumes::list_deleted,
    ),
    m(
        "ModifyVolume",
        V1,
        &[
            "volumeID",
            "qos",
            "totalSize",
            "attributes",
            "access",
            "accountID",
        ],
        volumes::modify,
    ),
    m("DeleteVolume", V1, &["volumeID"], volumes::delete),
    m("PurgeDeletedVolume", V1, &["volumeID"], volumes::purge),
    m(
        "CreateSnapshot",
        V1,
        &[
            "volumeID",
            "name",
            "snapshotID",
            "enableRemoteReplication",
            "retention",
            "attributes",
        ],
        snapshots::create,
    ),
    m("ListSnapshots", V1, &["volumeID"], snapshots::list),
    m("DeleteSnapshot", V1, &["snapshotID"], snapshots::delete),
    m(
        "RollbackToSnapshot",
        V1,
        &[
            "volumeID",
            "snapshotID",
            "saveCurrentState",
            "name",
            "attributes",
        ],
        snapshots::rollback,
    ),
    m(
        "CloneVolume",
        V1,
        &[
            "volumeID",
            "name",
            "snapshotID",
            "attributes",
            "newAccountID",
            "newSize",
            "access",
            "enable512e",
        ],
        clones::clone_volume,
    ),
    m(
        "GetAsyncResult",
        V1,
        &["asyncHandle", "keepResult"],
        clones::async_result,
    ),
    m(
        "ListVolumeAccessGroups",
        V1,
        &["startVolumeAccessGroupID", "limit"],
        groups::list,
    ),
    m(
        "CreateVolumeAccessGroup",
        V1,
        &["name", "initiators", "volumes", "attributes"],
        groups::create,
    ),
    m(
        "DeleteVolumeAccessGroup",
        V1,
        &["volumeAccessGroupID", "deleteOrphanInitiators", "force"],
        groups::delete,
    ),
    m(
        "AddVolumesToVolumeAccessGroup",
        V1,
        &["volumeAccessGroupID", "volumes"],
        groups::add_volumes,
    ),
    m(
        "RemoveVolumesFromVolumeAccessGroup",
        V1,
        &["volumeAccessGroupID", "volumes"],
        groups::remove_volumes,
    ),
    m(
        "AddInitiatorsToVolumeAccessGroup",
        V1,
        &["volumeAccessGroupID", "initiators"],
        groups::add_initiators,
    ),
];

/// The names of every method the simulator knows.
pub fn method_names() -> impl Iterator<Item = &'static str> {
    METHODS.iter().map(|m| m.name)
}

/// Runs `method` with `params` (a JSON object, or null for none) as API `version`.
pub(super) fn dispatch(ctx: &mut Ctx<'_>, version: (u32, u32), method: &str, params: &Value) -> R {
    let unknown = || {
        fail(
            names::UNKNOWN_API_METHOD,
            format!(
                "Unknown API method {method:?} in API version {}.{}",
                version.0, version.1
            ),
        )
    };
    let m = METHODS
        .iter()
        .find(|m| m.name == method)
        .ok_or_else(unknown)?;
    if version < m.since {
        return Err(unknown());
    }
    let p = Params::params(params, m.params, invalid)?;
    (m.run)(ctx, &p)
}

/// A method's parameters, checked against the names it takes.
pub(super) type Params<'a> = crate::sim::body::Fields<'a, Fail>;

fn invalid(message: String) -> Fail {
    fail(names::INVALID_PARAMETER, message)
}

/// Element's own kinds of parameter: ids, attributes, lists of ids.
impl<'a> Params<'a> {
    /// An id: a positive integer.
    pub fn id(&self, name: &str) -> Result<u64, Fail> {
        match self.u64(name)? {
            0 => Err(invalid(format!("Invalid value for parameter {name}: 0"))),
            id => Ok(id),
        }
    }

    /// A JSON object (attributes), at most 1000 bytes encoded as Element requires.
    pub fn opt_object(&self, name: &str) -> Result<Option<&'a Map<String, Value>>, Fail> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        let o = v.as_object().ok_or_else(|| self.wrong(name, "an object"))?;
        if name == "attributes" && v.to_string().len() >= 1000 {
            return Err(invalid(
                "Invalid value for parameter attributes: 1000 bytes or more".into(),
            ));
        }
        Ok(Some(o))
    }

    /// Attributes kept verbatim (an empty object when absent).
    pub fn attributes(&self) -> Result<Value, Fail> {
        Ok(Value::Object(
            self.opt_object("attributes")?.cloned().unwrap_or_default(),
        ))
    }

    pub fn opt_ids(&self, name: &str) -> Result<Option<Vec<u64>>, Fail> {
        let Some(a) = self.opt_array(name)? else {
            return Ok(None);
        };
        a.iter()
            .map(|x| {
                x.as_u64()
                    .ok_or_else(|| self.wrong(name, "an array of integers"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    pub fn ids(&self, name: &str) -> Result<Vec<u64>, Fail> {
        self.required(name)?;
        Ok(self.opt_ids(name)?.unwrap_or_default())
    }
}

/// An empty result object.
fn done() -> R {
    Ok(json!({}))
}

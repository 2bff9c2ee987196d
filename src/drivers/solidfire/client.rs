//! The Element JSON-RPC client: one POST per call to `https://MVIP/json-rpc/VERSION` with
//! Basic auth, error objects kept with their name, code and message, retries of the busy
//! class (through `net`), volume paging, async-clone polling, and the typed calls.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::config::SolidFireConfig;
use super::wire::*;
use crate::drivers::DriverError;
use crate::drivers::config::Secret;
use crate::net::{self as http, RetryPolicy};

/// Volumes per `ListVolumes` page.
pub const PAGE_SIZE: u32 = 500;

/// Error names that say "the cluster is busy, try again" (Cinder's retry list, without the
/// limits that retrying cannot lift).
const BUSY: &[&str] = &[
    "xDBVersionMismatch",
    "xSliceNotRegistered",
    "xNotReadyForIO",
    "xNotPrimary",
    "xDBOperationTimeout",
    "xDBConnectionLoss",
    "xNoHandler",
    "xRecvTimeout",
    "xDBNoSuchPath",
];

/// An Element call that did not pass. Messages name the method and never carry credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElementError {
    #[error("Element API {method} failed: {name}: {message} (code {code})")]
    Api {
        method: String,
        code: i64,
        name: String,
        message: String,
    },
    #[error(
        "the SolidFire cluster rejected the credentials (HTTP 401): check the user and password \
         in EndPoint"
    )]
    Unauthorized,
    #[error("Element API {method}: unexpected HTTP status {status}")]
    Http { method: String, status: u16 },
    #[error("cannot reach the SolidFire cluster for {method}: {msg}")]
    Transport {
        method: String,
        msg: String,
        retryable: bool,
    },
    #[error("Element API {method}: unreadable response: {msg}")]
    Malformed { method: String, msg: String },
}

impl ElementError {
    /// The Element error name (`xVolumeIDDoesNotExist`), or "".
    pub fn name(&self) -> &str {
        match self {
            ElementError::Api { name, .. } => name,
            _ => "",
        }
    }

    pub fn is_name(&self, names: &[&str]) -> bool {
        names.contains(&self.name())
    }

    /// The method is unknown to this cluster (an older Element).
    pub fn is_unknown_method(&self) -> bool {
        self.is_name(&["xUnknownAPIMethod", "xUnknownMethod", "xUnknownAPIVersion"])
    }

    /// "Does not exist" for any object kind.
    pub fn is_not_found(&self) -> bool {
        let n = self.name();
        !self.is_unknown_method()
            && (n.ends_with("DoesNotExist") || n == "xUnknownAccount" || n == "xNotFound")
    }

    /// The busy class and transport failures where the request was not processed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ElementError::Api { name, .. } => BUSY.contains(&name.as_str()),
            ElementError::Transport { retryable, .. } => *retryable,
            ElementError::Http { status, .. } => http::is_retryable_status(
                http::StatusCode::from_u16(*status)
                    .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR),
            ),
            ElementError::Unauthorized | ElementError::Malformed { .. } => false,
        }
    }

    /// Classifies the failure by what the caller can do about it.
    pub fn into_driver(self) -> DriverError {
        let msg = self.to_string();
        match &self {
            ElementError::Api { method, name, .. } => {
                if self.is_unknown_method() {
                    return DriverError::Unsupported(format!(
                        "{msg}: this SolidFire cluster does not know {method}; storch needs \
                         Element {} or later",
                        min_element_version(method)
                    ));
                }
                if self.is_not_found() {
                    return DriverError::NotFound(msg);
                }
                if self.is_retryable() {
                    return DriverError::Unavailable(msg);
                }
                let lower = name.to_ascii_lowercase();
                if lower.contains("duplicate") || lower.contains("already") {
                    DriverError::AlreadyExists(msg)
                } else if lower.contains("exceed")
                    || lower.contains("space")
                    || lower.contains("full")
                    || lower.contains("limit")
                    || lower.contains("busy")
                    || lower.contains("inuse")
                {
                    DriverError::Conflict(msg)
                } else if lower.starts_with("xinvalid")
                    || lower.starts_with("xmissing")
                    || lower.contains("qos")
                    || lower.contains("parameter")
                {
                    DriverError::Invalid(msg)
                } else if lower.contains("permission") || lower.contains("unauthorized") {
                    DriverError::Invalid(format!("{msg}: check the user in EndPoint"))
                } else {
                    DriverError::Other(msg)
                }
            }
            ElementError::Unauthorized => DriverError::Invalid(msg),
            ElementError::Transport { .. } => DriverError::Unavailable(msg),
            ElementError::Http { status, .. } if *status >= 500 || *status == 429 => {
                DriverError::Unavailable(msg)
            }
            _ => DriverError::Other(msg),
        }
    }
}

impl From<ElementError> for DriverError {
    fn from(e: ElementError) -> Self {
        e.into_driver()
    }
}

/// The Element version that introduced a method storch calls (8.0 unless known later).
pub fn min_element_version(method: &str) -> &'static str {
    match method {
        "ListVolumes" | "ListActiveVolumes" => "8.0",
        _ => super::config::MIN_API_VERSION,
    }
}

/// One cluster's JSON-RPC endpoint.
pub struct ElementClient {
    http: http::Client,
    url: String,
    version: String,
    username: String,
    password: Secret,
    retry: RetryPolicy,
    page_size: u32,
    clone_timeout: Duration,
}

impl std::fmt::Debug for ElementClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElementClient")
            .field("url", &self.url)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl ElementClient {
    /// Builds the client (no network access).
    pub fn new(cfg: &SolidFireConfig) -> Result<ElementClient, DriverError> {
        let http = http::build_client(&cfg.tls, cfg.api_timeout)
            .map_err(|e| DriverError::Invalid(e.to_string()))?;
        Ok(ElementClient {
            http,
            url: cfg.url.clone(),
            version: cfg.api_version.clone(),
            username: cfg.username.clone(),
            password: cfg.password.clone(),
            retry: RetryPolicy::default(),
            page_size: PAGE_SIZE,
            clone_timeout: cfg.clone_timeout,
        })
    }

    /// Overrides the retry policy (tests use short delays).
    pub fn with_retry(mut self, retry: RetryPolicy) -> ElementClient {
        self.retry = retry;
        self
    }

    /// Overrides the `ListVolumes` page size.
    pub fn with_page_size(mut self, n: u32) -> ElementClient {
        self.page_size = n.max(1);
        self
    }

    /// The endpoint's API version speaks `method` (a method newer than the configured version
    /// is refused before asking).
    pub fn api_version(&self) -> &str {
        &self.version
    }

    /// Sends one call, retrying the busy class, and decodes its result.
    pub async fn call<P: Serialize + Sync, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R, ElementError> {
        self.call_retrying(method, params, ElementError::is_retryable)
            .await
    }

    /// Sends one call, retrying what `retryable` accepts, and decodes its result.
    async fn call_retrying<P: Serialize + Sync, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
        retryable: impl Fn(&ElementError) -> bool,
    ) -> Result<R, ElementError> {
        let value = http::retry(&self.retry, method, retryable, || {
            self.call_once(method, params)
        })
        .await?;
        serde_json::from_value(value).map_err(|e| ElementError::Malformed {
            method: method.to_string(),
            msg: e.to_string(),
        })
    }

    async fn call_once<P: Serialize>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<Value, ElementError> {
        let id = 1 + rand::random::<u64>() % 999;
        let body = serde_json::to_vec(&Request { method, params, id }).map_err(|e| {
            ElementError::Malformed {
                method: method.to_string(),
                msg: e.to_string(),
            }
        })?;
        let resp = self
            .http
            .post(&self.url)
            .basic_auth(&self.username, Some(self.password.expose()))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| transport(method, &e))?;
        let status = resp.status();
        if status == http::StatusCode::UNAUTHORIZED {
            return Err(ElementError::Unauthorized);
        }
        if !status.is_success() {
            return Err(ElementError::Http {
                method: method.to_string(),
                status: status.as_u16(),
            });
        }
        let text = resp.text().await.map_err(|e| transport(method, &e))?;
        let parsed: Response =
            serde_json::from_str(&text).map_err(|e| ElementError::Malformed {
                method: method.to_string(),
                msg: e.to_string(),
            })?;
        match (parsed.error, parsed.result) {
            (Some(e), _) => Err(api_error(method, e)),
            (None, Some(r)) => Ok(r),
            (None, None) => Err(ElementError::Malformed {
                method: method.to_string(),
                msg: "neither result nor error".into(),
            }),
        }
    }

    // ---- typed calls ----

    /// The account named `username`, `None` when unknown.
    pub async fn account_by_name(&self, username: &str) -> Result<Option<Account>, ElementError> {
        match self
            .call::<_, AccountResult>("GetAccountByName", &json!({"username": username}))
            .await
        {
            Ok(r) => Ok(Some(r.account)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn account_by_id(&self, id: i64) -> Result<Account, ElementError> {
        let r: AccountResult = self
            .call("GetAccountByID", &json!({"accountID": id}))
            .await?;
        Ok(r.account)
    }

    pub async fn add_account(&self, username: &str) -> Result<i64, ElementError> {
        let r: AddAccountResult = self
            .call("AddAccount", &json!({"username": username}))
            .await?;
        Ok(r.account_id)
    }

    pub async fn cluster_capacity(&self) -> Result<ClusterCapacity, ElementError> {
        let r: ClusterCapacityResult = self.call("GetClusterCapacity", &Empty {}).await?;
        Ok(r.cluster_capacity)
    }

    /// The cluster's default QoS; `None` on an Element that does not have the call.
    pub async fn default_qos(&self) -> Result<Option<Qos>, ElementError> {
        match self.call::<_, Qos>("GetDefaultQoS", &Empty {}).await {
            Ok(q) => Ok(Some(q)),
            Err(e) if e.is_unknown_method() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every volume access group, paged with `startVolumeAccessGroupID`/`limit` until a page
    /// comes back empty (as the volume lists).
    /// The node serial numbers (`GetClusterHardwareInfo`); none on a cluster without it.
    pub async fn serial_numbers(&self) -> Result<Vec<String>, ElementError> {
        let r: Value = match self.call("GetClusterHardwareInfo", &Empty {}).await {
            Ok(r) => r,
            Err(e) if e.is_unknown_method() => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let nodes = &r["clusterHardwareInfo"]["nodes"];
        let list: Vec<&Value> = match nodes {
            Value::Object(m) => m.values().collect(),
            Value::Array(a) => a.iter().collect(),
            _ => Vec::new(),
        };
        let mut serials: Vec<String> = list
            .iter()
            .filter_map(|n| n["serial"].as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        serials.sort();
        serials.dedup();
        Ok(serials)
    }

    pub async fn access_groups(&self) -> Result<Vec<AccessGroup>, ElementError> {
        let mut out: Vec<AccessGroup> = Vec::new();
        let mut start: Option<i64> = None;
        for _ in 0..1_000_000 {
            let mut params = json!({"limit": self.page_size});
            if let Some(s) = start {
                params["startVolumeAccessGroupID"] = json!(s);
            }
            let page: AccessGroupsResult = self.call("ListVolumeAccessGroups", &params).await?;
            match page.groups.iter().map(|g| g.id).max() {
                Some(last) if Some(last + 1) > start => {
                    out.extend(page.groups);
                    start = Some(last + 1);
                }
                _ => return Ok(out),
            }
        }
        Err(ElementError::Malformed {
            method: "ListVolumeAccessGroups".into(),
            msg: "the group list never ended".into(),
        })
    }

    /// Adds volumes to a group; already a member counts as done.
    pub async fn add_to_group(&self, group_id: i64, volumes: Vec<i64>) -> Result<(), ElementError> {
        let params = AddToGroupParams { group_id, volumes };
        match self
            .call::<_, Value>("AddVolumesToVolumeAccessGroup", &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_name(&["xAlreadyInVolumeAccessGroup"]) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates a volume access group: its id.
    pub async fn create_group(&self, p: &CreateGroupParams) -> Result<i64, ElementError> {
        let r: GroupIdResult = self.call("CreateVolumeAccessGroup", p).await?;
        Ok(r.group_id)
    }

    /// Removes volumes from a group; not a member (or the group gone) counts as done.
    pub async fn remove_from_group(
        &self,
        group_id: i64,
        volumes: Vec<i64>,
    ) -> Result<(), ElementError> {
        let params = AddToGroupParams { group_id, volumes };
        match self
            .call::<_, Value>("RemoveVolumesFromVolumeAccessGroup", &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_name(&["xNotInVolumeAccessGroup"]) || e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Deletes a group and the initiator objects it leaves orphaned; a group already gone
    /// counts as deleted.
    pub async fn delete_group(&self, group_id: i64) -> Result<(), ElementError> {
        let params = DeleteGroupParams {
            group_id,
            delete_orphan_initiators: true,
        };
        match self
            .call::<_, Value>("DeleteVolumeAccessGroup", &params)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every volume of the account (active and deleted), paged with `startVolumeID`/`limit`
    /// until a page comes back empty.
    pub async fn volumes(&self, account_id: i64) -> Result<Vec<Volume>, ElementError> {
        let mut out: Vec<Volume> = Vec::new();
        let mut start: Option<i64> = None;
        // A guard against a server that never stops paging.
        for _ in 0..1_000_000 {
            let params = ListVolumesParams {
                accounts: vec![account_id],
                start_volume_id: start,
                limit: self.page_size,
            };
            let page: VolumesResult = self.call("ListVolumes", &params).await?;
            let n = page.volumes.len();
            let last = page.volumes.iter().map(|v| v.volume_id).max();
            out.extend(
                page.volumes
                    .into_iter()
                    .filter(|v| v.account_id == account_id || v.account_id == 0),
            );
            // A page may hold fewer than `limit` volumes (a cluster caps pages), so only an
            // empty page (or one that does not move forward) ends the list.
            match last {
                Some(id) if n > 0 && Some(id + 1) > start => start = Some(id + 1),
                _ => {
                    out.sort_by_key(|v| v.volume_id);
                    out.dedup_by_key(|v| v.volume_id);
                    return Ok(out);
                }
            }
        }
        Err(ElementError::Malformed {
            method: "ListVolumes".into(),
            msg: "the volume list never ended".into(),
        })
    }

    /// One volume by id, `None` when it does not exist (or is in another account).
    pub async fn volume(&self, account_id: i64, id: i64) -> Result<Option<Volume>, ElementError> {
        let params = ListVolumesParams {
            accounts: vec![account_id],
            start_volume_id: Some(id),
            limit: 1,
        };
        let page: VolumesResult = self.call("ListVolumes", &params).await?;
        Ok(page.volumes.into_iter().find(|v| v.volume_id == id))
    }

    pub async fn create_volume(&self, p: &CreateVolumeParams) -> Result<i64, ElementError> {
        let r: VolumeIdResult = self.call("CreateVolume", p).await?;
        Ok(r.volume_id)
    }

    pub async fn modify_volume(&self, p: &ModifyVolumeParams) -> Result<(), ElementError> {
        self.call::<_, Value>("ModifyVolume", p).await.map(|_| ())
    }

    /// `DeleteVolume` then `PurgeDeletedVolume`; a volume already gone counts as deleted.
    pub async fn delete_volume(&self, id: i64) -> Result<(), ElementError> {
        let p = VolumeIdParams { volume_id: id };
        match self.call::<_, Value>("DeleteVolume", &p).await {
            Ok(_) => self.purge_deleted_volume(id).await,
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `PurgeDeletedVolume` of a deleted volume; a volume already gone counts as purged.
    pub async fn purge_deleted_volume(&self, id: i64) -> Result<(), ElementError> {
        let p = VolumeIdParams { volume_id: id };
        match self.call::<_, Value>("PurgeDeletedVolume", &p).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub async fn snapshots(&self, volume_id: i64) -> Result<Vec<Snapshot>, ElementError> {
        let r: SnapshotsResult = self
            .call("ListSnapshots", &VolumeIdParams { volume_id })
            .await?;
        Ok(r.snapshots)
    }

    pub async fn create_snapshot(&self, p: &CreateSnapshotParams) -> Result<i64, ElementError> {
        let r: SnapshotIdResult = self.call("CreateSnapshot", p).await?;
        Ok(r.snapshot_id)
    }

    /// Deletes a snapshot; one already gone counts as deleted.
    pub async fn delete_snapshot(&self, snapshot_id: i64) -> Result<(), ElementError> {
        match self
            .call::<_, Value>("DeleteSnapshot", &SnapshotIdParams { snapshot_id })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `CloneVolume`, then waits for the clone: `GetAsyncResult` on its handle until
    /// "complete", bounded by the clone timeout. Returns the new volume's id.
    /// CloneVolume is also retried on `xInvalidParameter` and `xSliceNotRegistered`, which a
    /// cluster answers while the source's slices settle (as Trident does).
    pub async fn clone_volume(&self, p: &CloneVolumeParams) -> Result<i64, ElementError> {
        let retryable = |e: &ElementError| {
            e.is_retryable() || e.is_name(&["xInvalidParameter", "xSliceNotRegistered"])
        };
        let r: CloneVolumeResult = self.call_retrying("CloneVolume", p, retryable).await?;
        if let Some(handle) = r.async_handle {
            self.wait_async(handle).await?;
        }
        Ok(r.volume_id)
    }

    /// Polls `GetAsyncResult` until the operation completes. An Element without the call is
    /// not waited for (the caller then finds the volume by listing).
    pub async fn wait_async(&self, handle: i64) -> Result<(), ElementError> {
        let started = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            let params = AsyncResultParams {
                async_handle: handle,
            };
            let r: AsyncResult = match self.call("GetAsyncResult", &params).await {
                Ok(r) => r,
                Err(e) if e.is_unknown_method() => return Ok(()),
                Err(e) => return Err(e),
            };
            if let Some(err) = r.error {
                return Err(api_error("CloneVolume", err));
            }
            if r.status == "complete" {
                return Ok(());
            }
            if started.elapsed() > self.clone_timeout {
                return Err(ElementError::Transport {
                    method: "GetAsyncResult".into(),
                    msg: format!(
                        "the clone (async handle {handle}) did not finish within {:?}",
                        self.clone_timeout
                    ),
                    retryable: true,
                });
            }
            attempt += 1;
            let delay = http::backoff(attempt, Duration::from_millis(20), Duration::from_secs(2));
            tokio::time::sleep(delay).await;
        }
    }
}

fn api_error(method: &str, e: ErrorBody) -> ElementError {
    ElementError::Api {
        method: method.to_string(),
        code: e.code,
        name: e.name,
        message: e.message,
    }
}

fn transport(method: &str, e: &http::Error) -> ElementError {
    let (msg, retryable) = http::describe_transport(e);
    ElementError::Transport {
        method: method.to_string(),
        msg,
        retryable,
    }
}

//! The ZAPI client: one POST per call, `results` status/errno/reason, paging of `-iter` calls,
//! retries of the busy class (through `drivers::http`), and the mapping of errno values to the
//! driver error classes (wire-protocols §1.6–1.7).

use std::time::Duration;

use super::config::{OntapConfig, Secret};
use crate::drivers::DriverError;
use crate::drivers::http::{self, RetryPolicy};
use crate::wire::zapi::{self, Node, errno};

/// Records per page the driver asks for.
pub const PAGE_SIZE: u32 = 100;

/// A ZAPI call that did not pass. Messages name the API and never carry credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZapiError {
    #[error("ONTAP API {api} failed: {reason} (errno {errno})")]
    Api {
        api: String,
        errno: u32,
        reason: String,
    },
    #[error("ONTAP rejected the credentials: incorrect or missing credentials (HTTP 401)")]
    Unauthorized,
    #[error("ONTAP API {api}: unexpected HTTP status {status}")]
    Http { api: String, status: u16 },
    #[error("cannot reach ONTAP for {api}: {msg}")]
    Transport {
        api: String,
        msg: String,
        retryable: bool,
    },
    #[error("ONTAP API {api}: unreadable response: {msg}")]
    Malformed { api: String, msg: String },
}

impl ZapiError {
    pub fn errno(&self) -> Option<u32> {
        match self {
            ZapiError::Api { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            ZapiError::Api { reason, .. } => reason,
            _ => "",
        }
    }

    pub fn is_errno(&self, codes: &[u32]) -> bool {
        self.errno().is_some_and(|e| codes.contains(&e))
    }

    /// The busy class, worth retrying after a pause: "Job exists" (13001), and transport or
    /// HTTP failures that mean the request was not processed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ZapiError::Api { errno, reason, .. } => {
                *errno == errno::EAPIERROR && reason.to_ascii_lowercase().contains("job exists")
            }
            ZapiError::Transport { retryable, .. } => *retryable,
            ZapiError::Http { status, .. } => http::is_retryable_status(
                reqwest::StatusCode::from_u16(*status)
                    .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR),
            ),
            ZapiError::Unauthorized | ZapiError::Malformed { .. } => false,
        }
    }

    /// "Does not exist" for any object kind.
    pub fn is_not_found(&self) -> bool {
        self.is_errno(&[
            errno::ENOENT,
            errno::EOBJECTNOTFOUND,
            errno::EVOLUMEDOESNOTEXIST,
            errno::NO_SUCH_VOLUME,
            errno::NO_SUCH_INITGROUP,
            errno::NO_SUCH_SNAPSHOT,
        ])
    }

    /// Classifies the failure by what the caller can do about it (style habit 7).
    pub fn into_driver(self) -> DriverError {
        let msg = self.to_string();
        match &self {
            ZapiError::Api {
                errno: e, reason, ..
            } => match *e {
                errno::EEXIST
                | errno::VDISK_EXISTS
                | errno::INITGROUP_EXISTS
                | errno::EDUPLICATEENTRY => DriverError::AlreadyExists(msg),
                errno::ENOENT
                | errno::EOBJECTNOTFOUND
                | errno::EVOLUMEDOESNOTEXIST
                | errno::NO_SUCH_VOLUME
                | errno::NO_SUCH_INITGROUP
                | errno::NO_SUCH_SNAPSHOT
                | errno::EAGGRDOESNOTEXIST => DriverError::NotFound(msg),
                errno::EVSERVERNOTFOUND => DriverError::Invalid(format!(
                    "{msg}; check the backend's svm (the SVM does not exist)"
                )),
                errno::ESNAPSHOTBUSY
                | errno::EVOLDEL_NOT_ALLOW_BY_CLONE
                | errno::EVOLOPNOTSUPP
                | errno::ENOSPC
                | errno::ESNAPSHOTNOTALLOWED
                | errno::INITGROUP_MAPS_EXIST => DriverError::Conflict(msg),
                errno::EINVALIDINPUTERROR | errno::EINVAL | errno::SIZE_TOO_SMALL => {
                    DriverError::Invalid(msg)
                }
                errno::EAPINOTFOUND | errno::EAPIPRIVILEGE | errno::ESIS_CLONE_NOT_LICENSED => {
                    DriverError::Unsupported(format!("{msg}: not supported by this array or user"))
                }
                _ if self.is_retryable() => DriverError::Unavailable(msg),
                _ if reason.to_ascii_lowercase().contains("space") => DriverError::Conflict(msg),
                _ => DriverError::Other(msg),
            },
            ZapiError::Transport { .. } => DriverError::Unavailable(msg),
            ZapiError::Http { status, .. } if *status >= 500 || *status == 429 => {
                DriverError::Unavailable(msg)
            }
            _ => DriverError::Other(msg),
        }
    }
}

impl From<ZapiError> for DriverError {
    fn from(e: ZapiError) -> Self {
        e.into_driver()
    }
}

/// One array's ZAPI endpoint.
pub struct ZapiClient {
    http: reqwest::Client,
    url: String,
    username: String,
    password: Secret,
    retry: RetryPolicy,
    page_size: u32,
}

impl std::fmt::Debug for ZapiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZapiClient")
            .field("url", &self.url)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl ZapiClient {
    /// Builds the client (no network access).
    pub fn new(cfg: &OntapConfig) -> Result<ZapiClient, DriverError> {
        let http = http::build_client(&cfg.tls, cfg.api_timeout)
            .map_err(|e| DriverError::Invalid(e.to_string()))?;
        Ok(ZapiClient {
            http,
            url: cfg.url(),
            username: cfg.username.clone(),
            password: cfg.password.clone(),
            retry: RetryPolicy::default(),
            page_size: PAGE_SIZE,
        })
    }

    /// Overrides the retry policy (tests use short delays).
    pub fn with_retry(mut self, retry: RetryPolicy) -> ZapiClient {
        self.retry = retry;
        self
    }

    /// Overrides the page size of `-iter` calls.
    pub fn with_page_size(mut self, n: u32) -> ZapiClient {
        self.page_size = n.max(1);
        self
    }

    /// Sends one call, retrying the busy class. `vfiler` tunnels it to that SVM.
    pub async fn call(&self, api: &Node, vfiler: Option<&str>) -> Result<Node, ZapiError> {
        http::retry(&self.retry, &api.name, ZapiError::is_retryable, || {
            self.call_once(api, vfiler)
        })
        .await
    }

    async fn call_once(&self, api: &Node, vfiler: Option<&str>) -> Result<Node, ZapiError> {
        let body = zapi::request(api, vfiler);
        let name = api.name.clone();
        let resp = self
            .http
            .post(&self.url)
            .basic_auth(&self.username, Some(self.password.expose()))
            .header(reqwest::header::CONTENT_TYPE, "application/xml")
            .header(
                "X-Dot-Client-App",
                concat!("storch/", env!("CARGO_PKG_VERSION")),
            )
            .body(body)
            .send()
            .await
            .map_err(|e| transport(&name, &e))?;
        let status = resp.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(ZapiError::Unauthorized);
        }
        if !status.is_success() {
            return Err(ZapiError::Http {
                api: name,
                status: status.as_u16(),
            });
        }
        let text = resp.text().await.map_err(|e| transport(&name, &e))?;
        match zapi::parse_response(&text) {
            Ok(results) => Ok(results),
            Err(Ok(f)) => Err(ZapiError::Api {
                api: name,
                errno: f.errno,
                reason: f.reason,
            }),
            Err(Err(e)) => Err(ZapiError::Malformed {
                api: name,
                msg: e.to_string(),
            }),
        }
    }

    /// Runs an `-iter` call to the end and returns every record. `query` and `desired` are the
    /// typed objects to put under `query` / `desired-attributes`.
    pub async fn iter(
        &self,
        api: &str,
        query: Option<Node>,
        desired: Option<Node>,
        vfiler: Option<&str>,
    ) -> Result<Vec<Node>, ZapiError> {
        let mut out = Vec::new();
        let mut tag: Option<String> = None;
        // A guard against a server that never stops paging.
        for _ in 0..1_000_000 {
            let mut req = Node::new(api).with_leaf("max-records", self.page_size.to_string());
            if let Some(q) = &query {
                req.push(Node::new("query").with(q.clone()));
            }
            if let Some(d) = &desired {
                req.push(Node::new("desired-attributes").with(d.clone()));
            }
            if let Some(t) = &tag {
                req.push(Node::leaf("tag", t.clone()));
            }
            let results = self.call(&req, vfiler).await?;
            let page = zapi::page(&results);
            let n = page.num_records;
            out.extend(page.records);
            match page.next_tag {
                Some(t) if n > 0 => tag = Some(t),
                _ => return Ok(out),
            }
        }
        Err(ZapiError::Malformed {
            api: api.to_string(),
            msg: "the iterator never ended".into(),
        })
    }

    /// Polls an async job until it ends (`job-get-iter`, cluster scope). `Ok` on success.
    pub async fn wait_job(&self, job_id: &str, timeout: Duration) -> Result<(), ZapiError> {
        let started = std::time::Instant::now();
        let mut delay = Duration::from_millis(20);
        loop {
            let query = Node::new("job-info").with_leaf("job-id", job_id);
            let records = self.iter("job-get-iter", Some(query), None, None).await?;
            let state = records
                .first()
                .map(|r| r.str_at("job-state").to_string())
                .unwrap_or_default();
            match state.as_str() {
                "success" => return Ok(()),
                "failure" | "error" | "quit" | "dead" => {
                    let r = records.first().cloned().unwrap_or_default();
                    return Err(ZapiError::Api {
                        api: "job-get-iter".into(),
                        errno: r.u64_at("job-status-code").unwrap_or(0) as u32,
                        reason: format!("job {job_id} {state}: {}", r.str_at("job-completion")),
                    });
                }
                "" => {
                    return Err(ZapiError::Api {
                        api: "job-get-iter".into(),
                        errno: errno::EOBJECTNOTFOUND,
                        reason: format!("job {job_id} not found"),
                    });
                }
                _ => {}
            }
            if started.elapsed() > timeout {
                return Err(ZapiError::Transport {
                    api: "job-get-iter".into(),
                    msg: format!("job {job_id} did not finish within {timeout:?}"),
                    retryable: true,
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }

    /// Runs an `*-async` call and waits for its job. A call that finished at once
    /// (`result-status succeeded`) needs no polling.
    pub async fn call_async(
        &self,
        api: &Node,
        vfiler: Option<&str>,
        timeout: Duration,
    ) -> Result<(), ZapiError> {
        let r = self.call(api, vfiler).await?;
        match r.str_at("result-status") {
            "succeeded" => Ok(()),
            "failed" => Err(ZapiError::Api {
                api: api.name.clone(),
                errno: r.u64_at("result-error-code").unwrap_or(0) as u32,
                reason: r.str_at("result-error-message").to_string(),
            }),
            _ => match r.text_at("result-jobid") {
                Some(id) if !id.is_empty() => self.wait_job(id, timeout).await,
                _ => Ok(()),
            },
        }
    }
}

fn transport(api: &str, e: &reqwest::Error) -> ZapiError {
    // reqwest's message for a connection error names the URL; ours never holds credentials.
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    // A certificate the client does not trust will not become trusted by retrying.
    let retryable = http::is_retryable_transport(e) && !msg.contains("certificate");
    ZapiError::Transport {
        api: api.to_string(),
        msg,
        retryable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(errno: u32, reason: &str) -> ZapiError {
        ZapiError::Api {
            api: "x".into(),
            errno,
            reason: reason.into(),
        }
    }

    #[test]
    fn errno_classes() {
        use DriverError::*;
        let class = |e: ZapiError| match e.into_driver() {
            NotFound(_) => "not_found",
            AlreadyExists(_) => "exists",
            Conflict(_) => "conflict",
            Unsupported(_) => "unsupported",
            Unavailable(_) => "unavailable",
            Invalid(_) => "invalid",
            Other(_) => "other",
        };
        assert_eq!(class(api(17, "Duplicate volume name")), "exists");
        assert_eq!(class(api(9012, "")), "exists");
        assert_eq!(class(api(13130, "")), "exists");
        assert_eq!(class(api(13040, "")), "not_found");
        assert_eq!(class(api(15661, "")), "not_found");
        assert_eq!(class(api(13024, "busy")), "conflict");
        assert_eq!(class(api(28, "no space")), "conflict");
        assert_eq!(class(api(13115, "bad")), "invalid");
        assert_eq!(class(api(13005, "Unable to find API")), "unsupported");
        assert_eq!(class(api(13001, "Job exists")), "unavailable");
        assert_eq!(class(api(13001, "something else")), "other");
        assert_eq!(class(api(15698, "")), "invalid");
        assert_eq!(class(ZapiError::Unauthorized), "other");
        assert_eq!(
            class(ZapiError::Http {
                api: "x".into(),
                status: 503
            }),
            "unavailable"
        );
    }

    #[test]
    fn busy_class_is_retryable() {
        assert!(api(13001, "Create volume: Job exists").is_retryable());
        assert!(!api(13001, "other").is_retryable());
        assert!(!api(17, "").is_retryable());
        assert!(
            ZapiError::Http {
                api: "x".into(),
                status: 503
            }
            .is_retryable()
        );
        assert!(
            !ZapiError::Http {
                api: "x".into(),
                status: 500
            }
            .is_retryable()
        );
    }
}

// ---- typed calls ----

/// The fields of a `volume-attributes` record the drivers read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeRecord {
    pub name: String,
    /// `flexvol` or `flexgroup`.
    pub style: String,
    pub aggregate: String,
    pub aggregates: Vec<String>,
    pub size: u64,
    pub junction: String,
    pub state: String,
    pub space_guarantee: String,
    pub snapshot_policy: String,
    pub snapshot_reserve: Option<u64>,
    pub snapdir: Option<bool>,
    pub export_policy: String,
    pub unix_permissions: String,
    pub security_style: String,
    pub encrypt: bool,
    pub comment: String,
    pub is_root: bool,
    pub clone_parent: Option<(String, String)>,
}

impl VolumeRecord {
    pub fn from_node(n: &Node) -> VolumeRecord {
        let parent = n.str_at("volume-clone-attributes/volume-clone-parent-attributes/name");
        VolumeRecord {
            name: n.str_at("volume-id-attributes/name").to_string(),
            style: n.str_at("volume-id-attributes/style-extended").to_string(),
            aggregate: n
                .str_at("volume-id-attributes/containing-aggregate-name")
                .to_string(),
            aggregates: n.list_at("volume-id-attributes/aggr-list"),
            size: n.u64_at("volume-space-attributes/size").unwrap_or(0),
            junction: n.str_at("volume-id-attributes/junction-path").to_string(),
            state: n.str_at("volume-state-attributes/state").to_string(),
            space_guarantee: n
                .str_at("volume-space-attributes/space-guarantee")
                .to_string(),
            snapshot_policy: n
                .str_at("volume-snapshot-attributes/snapshot-policy")
                .to_string(),
            snapshot_reserve: n.u64_at("volume-space-attributes/percentage-snapshot-reserve"),
            snapdir: n.bool_at("volume-snapshot-attributes/snapdir-access-enabled"),
            export_policy: n.str_at("volume-export-attributes/policy").to_string(),
            unix_permissions: n
                .str_at("volume-security-attributes/volume-security-unix-attributes/permissions")
                .to_string(),
            security_style: n.str_at("volume-security-attributes/style").to_string(),
            encrypt: n.bool_at("encrypt").unwrap_or(false),
            comment: n.str_at("volume-id-attributes/comment").to_string(),
            is_root: n
                .bool_at("volume-state-attributes/is-vserver-root")
                .unwrap_or(false),
            clone_parent: (!parent.is_empty()).then(|| {
                (
                    parent.to_string(),
                    n.str_at(
                        "volume-clone-attributes/volume-clone-parent-attributes/snapshot-name",
                    )
                    .to_string(),
                )
            }),
        }
    }
}

/// A snapshot record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRecord {
    pub name: String,
    pub volume: String,
    /// Epoch seconds.
    pub access_time: u64,
    /// KiB.
    pub total_kib: u64,
    pub busy: bool,
}

/// A qtree record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QtreeRecord {
    pub volume: String,
    pub qtree: String,
}

/// Everything `volume-create` (FlexVol) or `volume-create-async` (FlexGroup) takes here.
#[derive(Debug, Clone, Default)]
pub struct VolumeCreate {
    pub name: String,
    /// One aggregate for a FlexVol; every aggregate of a FlexGroup.
    pub aggregates: Vec<String>,
    pub size: u64,
    pub space_reserve: String,
    pub snapshot_policy: String,
    pub snapshot_reserve: Option<String>,
    pub export_policy: Option<String>,
    pub unix_permissions: Option<String>,
    pub security_style: String,
    pub encrypt: bool,
    pub comment: String,
    /// Only for FlexGroups (created mounted).
    pub junction_path: Option<String>,
}

/// How long to wait for one async job.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(120);

impl ZapiClient {
    /// `system-get-ontapi-version` → (major, minor).
    pub async fn ontapi_version(&self) -> Result<(u32, u32), ZapiError> {
        let r = self
            .call(&Node::new("system-get-ontapi-version"), None)
            .await?;
        let major = r.u64_at("major-version").unwrap_or(0) as u32;
        let minor = r.u64_at("minor-version").unwrap_or(0) as u32;
        Ok((major, minor))
    }

    fn volume_query(name: &str, style: Option<&str>) -> Node {
        let mut id = Node::new("volume-id-attributes").with_leaf("name", name);
        if let Some(s) = style {
            id.push(Node::leaf("style-extended", s));
        }
        Node::new("volume-attributes").with(id)
    }

    /// Volumes whose name matches `pattern` (exact, or `prefix*`).
    pub async fn volumes(
        &self,
        svm: &str,
        pattern: &str,
        style: Option<&str>,
    ) -> Result<Vec<VolumeRecord>, ZapiError> {
        let records = self
            .iter(
                "volume-get-iter",
                Some(Self::volume_query(pattern, style)),
                None,
                Some(svm),
            )
            .await?;
        Ok(records.iter().map(VolumeRecord::from_node).collect())
    }

    /// One volume by exact name.
    pub async fn volume(
        &self,
        svm: &str,
        name: &str,
        style: Option<&str>,
    ) -> Result<Option<VolumeRecord>, ZapiError> {
        let mut v = self.volumes(svm, name, style).await?;
        v.retain(|r| r.name == name);
        Ok(v.into_iter().next())
    }

    /// `volume-create` (one aggregate) or `volume-create-async` (a FlexGroup) and its job.
    pub async fn volume_create(
        &self,
        svm: &str,
        v: &VolumeCreate,
        flexgroup: bool,
    ) -> Result<(), ZapiError> {
        let mut n = Node::new(if flexgroup {
            "volume-create-async"
        } else {
            "volume-create"
        });
        if flexgroup {
            n.push(Node::leaf("volume-name", &v.name));
            let mut list = Node::new("aggr-list");
            for a in &v.aggregates {
                list.push(Node::leaf("aggr-name", a));
            }
            n.push(list);
        } else {
            n.push(Node::leaf("volume", &v.name));
            n.push(Node::leaf(
                "containing-aggr-name",
                v.aggregates.first().cloned().unwrap_or_default(),
            ));
        }
        n = n
            .with_leaf("size", v.size.to_string())
            .with_leaf("space-reserve", &v.space_reserve)
            .with_leaf("snapshot-policy", &v.snapshot_policy)
            .with_opt("percentage-snapshot-reserve", v.snapshot_reserve.clone())
            .with_opt("export-policy", v.export_policy.clone())
            .with_opt("unix-permissions", v.unix_permissions.clone())
            .with_leaf("volume-security-style", &v.security_style)
            .with_leaf("volume-comment", &v.comment)
            .with_opt("junction-path", v.junction_path.clone());
        if v.encrypt {
            n.push(Node::leaf("encrypt", "true"));
        }
        if flexgroup {
            self.call_async(&n, Some(svm), JOB_TIMEOUT).await
        } else {
            self.call(&n, Some(svm)).await.map(|_| ())
        }
    }

    pub async fn volume_mount(
        &self,
        svm: &str,
        name: &str,
        junction: &str,
    ) -> Result<(), ZapiError> {
        let n = Node::new("volume-mount")
            .with_leaf("volume-name", name)
            .with_leaf("junction-path", junction);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    /// Sets `.snapshot` directory visibility (`volume-modify-iter`, which passes even when the
    /// per-volume modify failed: `num-failed` is checked).
    pub async fn volume_set_snapdir(
        &self,
        svm: &str,
        name: &str,
        visible: bool,
    ) -> Result<(), ZapiError> {
        let n = Node::new("volume-modify-iter")
            .with(Node::new("query").with(Self::volume_query(name, None)))
            .with(
                Node::new("attributes").with(
                    Node::new("volume-attributes").with(
                        Node::new("volume-snapshot-attributes")
                            .with_leaf("snapdir-access-enabled", visible.to_string()),
                    ),
                ),
            );
        let r = self.call(&n, Some(svm)).await?;
        if r.u64_at("num-failed").unwrap_or(0) > 0 {
            let f = r
                .at("failure-list/volume-modify-iter-info")
                .cloned()
                .unwrap_or_default();
            return Err(ZapiError::Api {
                api: "volume-modify-iter".into(),
                errno: f.u64_at("error-code").unwrap_or(0) as u32,
                reason: f.str_at("error-message").to_string(),
            });
        }
        Ok(())
    }

    /// `volume-size` with a new size (absolute bytes); `-async` for FlexGroups.
    pub async fn volume_set_size(
        &self,
        svm: &str,
        name: &str,
        bytes: u64,
        flexgroup: bool,
    ) -> Result<(), ZapiError> {
        if flexgroup {
            let n = Node::new("volume-size-async")
                .with_leaf("volume-name", name)
                .with_leaf("new-size", bytes.to_string());
            return self.call_async(&n, Some(svm), JOB_TIMEOUT).await;
        }
        let n = Node::new("volume-size")
            .with_leaf("volume", name)
            .with_leaf("new-size", bytes.to_string());
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    /// Unmount, offline, destroy; each step treats "already done / already gone" as success.
    pub async fn volume_destroy(
        &self,
        svm: &str,
        name: &str,
        flexgroup: bool,
    ) -> Result<(), ZapiError> {
        let gone = [
            errno::EVOLUMEDOESNOTEXIST,
            errno::EOBJECTNOTFOUND,
            errno::ENOENT,
        ];
        let unmount = Node::new("volume-unmount")
            .with_leaf("volume-name", name)
            .with_leaf("force", "true");
        match self.call(&unmount, Some(svm)).await {
            Ok(_) => {}
            Err(e) if e.is_errno(&gone) => return Ok(()),
            Err(e) if e.is_errno(&[errno::EVOL_NOT_MOUNTED]) => {}
            Err(e) => return Err(e),
        }
        let offline = Node::new("volume-offline").with_leaf("name", name);
        match self.call(&offline, Some(svm)).await {
            Ok(_) => {}
            Err(e) if e.is_errno(&gone) => return Ok(()),
            Err(e) if e.is_errno(&[errno::EVOLUMEOFFLINE]) => {}
            Err(e) => return Err(e),
        }
        let result = if flexgroup {
            let n = Node::new("volume-destroy-async").with_leaf("volume-name", name);
            self.call_async(&n, Some(svm), JOB_TIMEOUT).await
        } else {
            let n = Node::new("volume-destroy")
                .with_leaf("name", name)
                .with_leaf("unmount-and-offline", "true");
            self.call(&n, Some(svm)).await.map(|_| ())
        };
        match result {
            Err(e) if e.is_errno(&gone) => Ok(()),
            r => r,
        }
    }

    pub async fn snapshot_create(
        &self,
        svm: &str,
        volume: &str,
        snapshot: &str,
    ) -> Result<(), ZapiError> {
        let n = Node::new("snapshot-create")
            .with_leaf("volume", volume)
            .with_leaf("snapshot", snapshot);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    pub async fn snapshots(
        &self,
        svm: &str,
        volume: &str,
    ) -> Result<Vec<SnapshotRecord>, ZapiError> {
        let q = Node::new("snapshot-info").with_leaf("volume", volume);
        let records = self
            .iter("snapshot-get-iter", Some(q), None, Some(svm))
            .await?;
        Ok(records
            .iter()
            .filter(|r| r.str_at("volume") == volume)
            .map(|r| SnapshotRecord {
                name: r.str_at("name").to_string(),
                volume: r.str_at("volume").to_string(),
                access_time: r.u64_at("access-time").unwrap_or(0),
                total_kib: r.u64_at("total").unwrap_or(0),
                busy: r.bool_at("busy").unwrap_or(false),
            })
            .collect())
    }

    /// Deletes a snapshot; one already gone (or whose volume is gone) is success.
    pub async fn snapshot_delete(
        &self,
        svm: &str,
        volume: &str,
        snapshot: &str,
    ) -> Result<(), ZapiError> {
        let n = Node::new("snapshot-delete")
            .with_leaf("volume", volume)
            .with_leaf("snapshot", snapshot);
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_not_found() => Ok(()),
            r => r.map(|_| ()),
        }
    }

    pub async fn clone_create(
        &self,
        svm: &str,
        name: &str,
        parent: &str,
        snapshot: &str,
        space_reserve: &str,
    ) -> Result<(), ZapiError> {
        let n = Node::new("volume-clone-create")
            .with_leaf("volume", name)
            .with_leaf("parent-volume", parent)
            .with_leaf("parent-snapshot", snapshot)
            .with_leaf("space-reserve", space_reserve);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    pub async fn clone_split_start(&self, svm: &str, name: &str) -> Result<(), ZapiError> {
        let n = Node::new("volume-clone-split-start").with_leaf("volume", name);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    // ---- qtrees and quotas ----

    pub async fn qtrees(
        &self,
        svm: &str,
        volume_pattern: &str,
        qtree_pattern: Option<&str>,
    ) -> Result<Vec<QtreeRecord>, ZapiError> {
        let q = Node::new("qtree-info")
            .with_leaf("volume", volume_pattern)
            .with_opt("qtree", qtree_pattern);
        let desired = Node::new("qtree-info")
            .with(Node::new("volume"))
            .with(Node::new("qtree"));
        let records = self
            .iter("qtree-list-iter", Some(q), Some(desired), Some(svm))
            .await?;
        Ok(records
            .iter()
            .map(|r| QtreeRecord {
                volume: r.str_at("volume").to_string(),
                qtree: r.str_at("qtree").to_string(),
            })
            .filter(|q| !q.qtree.is_empty())
            .collect())
    }

    pub async fn qtree_create(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
        mode: &str,
        security_style: &str,
        export_policy: &str,
    ) -> Result<(), ZapiError> {
        let n = Node::new("qtree-create")
            .with_leaf("volume", volume)
            .with_leaf("qtree", qtree)
            .with_leaf("mode", mode)
            .with_leaf("security-style", security_style)
            .with_leaf("export-policy", export_policy);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    /// Deletes a qtree; one already gone is success.
    pub async fn qtree_delete(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
    ) -> Result<(), ZapiError> {
        let n = Node::new("qtree-delete")
            .with_leaf("qtree", format!("/vol/{volume}/{qtree}"))
            .with_leaf("force", "true");
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_not_found() => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// Tree quota limits (bytes) by `/vol/<volume>/<qtree>` target.
    pub async fn tree_quotas(
        &self,
        svm: &str,
        volume_pattern: &str,
    ) -> Result<std::collections::BTreeMap<String, u64>, ZapiError> {
        let q = Node::new("quota-entry")
            .with_leaf("volume", volume_pattern)
            .with_leaf("quota-type", "tree");
        let records = self
            .iter("quota-list-entries-iter", Some(q), None, Some(svm))
            .await?;
        Ok(records
            .iter()
            .filter_map(|r| {
                let kib = r.text_at("disk-limit")?.trim().parse::<u64>().ok()?;
                Some((r.str_at("quota-target").to_string(), kib * 1024))
            })
            .collect())
    }

    pub async fn tree_quota_set(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
        bytes: u64,
    ) -> Result<(), ZapiError> {
        let n = Node::new("quota-set-entry")
            .with_leaf("volume", volume)
            .with_leaf("qtree", "")
            .with_leaf("quota-target", format!("/vol/{volume}/{qtree}"))
            .with_leaf("quota-type", "tree")
            .with_leaf("disk-limit", bytes.div_ceil(1024).to_string());
        self.call(&n, Some(svm)).await?;
        self.quota_resize(svm, volume).await
    }

    pub async fn tree_quota_delete(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
    ) -> Result<(), ZapiError> {
        let n = Node::new("quota-delete-entry")
            .with_leaf("volume", volume)
            .with_leaf("qtree", "")
            .with_leaf("quota-target", format!("/vol/{volume}/{qtree}"))
            .with_leaf("quota-type", "tree");
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_not_found() => {}
            r => {
                r?;
            }
        }
        self.quota_resize(svm, volume).await
    }

    /// Makes quota rule changes take effect (`quota-resize`, an async job).
    pub async fn quota_resize(&self, svm: &str, volume: &str) -> Result<(), ZapiError> {
        let n = Node::new("quota-resize").with_leaf("volume", volume);
        match self.call_async(&n, Some(svm), JOB_TIMEOUT).await {
            Err(e) if e.is_not_found() => Ok(()),
            r => r,
        }
    }

    pub async fn quota_on(&self, svm: &str, volume: &str) -> Result<(), ZapiError> {
        let n = Node::new("quota-on").with_leaf("volume", volume);
        self.call_async(&n, Some(svm), JOB_TIMEOUT).await
    }

    // ---- export policies ----

    /// Creates an export policy with one rule for `client_match` unless it exists.
    pub async fn ensure_export_policy(
        &self,
        svm: &str,
        policy: &str,
        client_match: &str,
    ) -> Result<(), ZapiError> {
        let n = Node::new("export-policy-create").with_leaf("policy-name", policy);
        match self.call(&n, Some(svm)).await {
            Ok(_) => {}
            Err(e) if e.is_errno(&[errno::EDUPLICATEENTRY]) => {}
            Err(e) => return Err(e),
        }
        let q = Node::new("export-rule-info").with_leaf("policy-name", policy);
        let rules = self
            .iter("export-rule-get-iter", Some(q), None, Some(svm))
            .await?;
        if rules
            .iter()
            .any(|r| r.str_at("client-match") == client_match)
        {
            return Ok(());
        }
        let flavor = |name: &str, v: &str| Node::new(name).with_leaf("security-flavor", v);
        let n = Node::new("export-rule-create")
            .with_leaf("policy-name", policy)
            .with_leaf("client-match", client_match)
            .with(Node::new("protocol").with_leaf("access-protocol", "nfs"))
            .with(flavor("ro-rule", "any"))
            .with(flavor("rw-rule", "any"))
            .with(flavor("super-user-security", "any"));
        match self.call(&n, Some(svm)).await {
            Err(e)
                if e.is_errno(&[errno::EAPIERROR])
                    && e.reason().contains("already contains a rule") =>
            {
                Ok(())
            }
            r => r.map(|_| ()),
        }
    }

    // ---- LUNs and igroups ----

    pub async fn lun_create(
        &self,
        svm: &str,
        path: &str,
        size: u64,
        thick: bool,
    ) -> Result<u64, ZapiError> {
        let n = Node::new("lun-create-by-size")
            .with_leaf("path", path)
            .with_leaf("size", size.to_string())
            .with_leaf("ostype", "linux")
            .with_leaf("space-reservation-enabled", thick.to_string())
            .with_leaf("space-allocation-enabled", "false");
        let r = self.call(&n, Some(svm)).await?;
        Ok(r.u64_at("actual-size").unwrap_or(size))
    }

    /// LUN path → size, for LUNs whose path matches `pattern`.
    pub async fn luns(
        &self,
        svm: &str,
        pattern: &str,
    ) -> Result<std::collections::BTreeMap<String, u64>, ZapiError> {
        let q = Node::new("lun-info").with_leaf("path", pattern);
        let records = self.iter("lun-get-iter", Some(q), None, Some(svm)).await?;
        Ok(records
            .iter()
            .map(|r| (r.str_at("path").to_string(), r.u64_at("size").unwrap_or(0)))
            .collect())
    }

    pub async fn lun_resize(&self, svm: &str, path: &str, size: u64) -> Result<(), ZapiError> {
        let n = Node::new("lun-resize")
            .with_leaf("path", path)
            .with_leaf("size", size.to_string());
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    /// Creates the igroup unless it exists (9004 / 13130 are success).
    pub async fn ensure_igroup(&self, svm: &str, igroup: &str) -> Result<(), ZapiError> {
        let n = Node::new("igroup-create")
            .with_leaf("initiator-group-name", igroup)
            .with_leaf("initiator-group-type", "iscsi")
            .with_leaf("os-type", "linux");
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_errno(&[errno::INITGROUP_EXISTS, errno::EDUPLICATEENTRY]) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// The LUN id of `path` in `igroup`, mapping it first when it is not mapped yet.
    pub async fn lun_map(&self, svm: &str, path: &str, igroup: &str) -> Result<i32, ZapiError> {
        let n = Node::new("lun-map-list-info").with_leaf("path", path);
        let r = self.call(&n, Some(svm)).await?;
        if let Some(groups) = r.child("initiator-groups") {
            for g in groups.children_named("initiator-group-info") {
                if g.str_at("initiator-group-name") == igroup {
                    return Ok(g.u64_at("lun-id").unwrap_or(0) as i32);
                }
            }
        }
        let n = Node::new("lun-map")
            .with_leaf("initiator-group", igroup)
            .with_leaf("path", path);
        let r = self.call(&n, Some(svm)).await?;
        Ok(r.u64_at("lun-id-assigned").unwrap_or(0) as i32)
    }

    /// The LUN id of `path` in `igroup`, if mapped.
    pub async fn lun_id(
        &self,
        svm: &str,
        path: &str,
        igroup: &str,
    ) -> Result<Option<i32>, ZapiError> {
        let n = Node::new("lun-map-list-info").with_leaf("path", path);
        let r = self.call(&n, Some(svm)).await?;
        Ok(r.child("initiator-groups").and_then(|groups| {
            groups
                .children_named("initiator-group-info")
                .find(|g| g.str_at("initiator-group-name") == igroup)
                .map(|g| g.u64_at("lun-id").unwrap_or(0) as i32)
        }))
    }

    /// Unmaps (from `igroup`), offlines and destroys a LUN; "already gone" is success.
    pub async fn lun_destroy(&self, svm: &str, path: &str, igroup: &str) -> Result<(), ZapiError> {
        let gone = [
            errno::EOBJECTNOTFOUND,
            errno::NO_SUCH_VOLUME,
            errno::EVOLUMEDOESNOTEXIST,
            errno::ENOENT,
        ];
        let n = Node::new("lun-unmap")
            .with_leaf("initiator-group", igroup)
            .with_leaf("path", path);
        match self.call(&n, Some(svm)).await {
            Ok(_) => {}
            Err(e) if e.is_errno(&gone) => return Ok(()),
            Err(e) if e.is_errno(&[errno::NO_SUCH_LUNMAP, errno::NO_SUCH_INITGROUP]) => {}
            Err(e) => return Err(e),
        }
        let n = Node::new("lun-offline").with_leaf("path", path);
        match self.call(&n, Some(svm)).await {
            Ok(_) => {}
            Err(e) if e.is_errno(&gone) => return Ok(()),
            Err(e) if e.is_errno(&[errno::VDISK_NOT_ENABLED]) => {}
            Err(e) => return Err(e),
        }
        let n = Node::new("lun-destroy").with_leaf("path", path);
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_errno(&gone) => Ok(()),
            r => r.map(|_| ()),
        }
    }
}

//! The ZAPI client: one POST per call, `results` status/errno/reason, paging of `-iter` calls,
//! retries of the busy class (through `net`), and the mapping of errno values to the
//! driver error classes (docs/wire-notes.md#zapi-error-classes-and-idempotency). The typed calls
//! are in `calls.rs`.

use std::time::Duration;

use super::config::{OntapConfig, Secret};
use crate::drivers::DriverError;
use crate::net::{self as http, RetryPolicy};
use crate::wire::zapi::{self, Node, errno};

/// Records per page the driver asks for.
pub const PAGE_SIZE: u32 = 100;

/// A ZAPI or REST call that did not pass, the one error type of [`super::api::OntapApi`].
/// Messages name the API and never carry credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OntapError {
    #[error("ONTAP API {api} failed: {reason} (errno {errno})")]
    Api {
        api: String,
        errno: u32,
        reason: String,
    },
    /// A REST error body `{"error": {"message", "code", "target"}}` or a failed job.
    #[error(
        "ONTAP REST {api} failed: {message} (code {code}{})",
        target_note(target)
    )]
    Rest {
        api: String,
        code: u64,
        message: String,
        target: String,
    },
    #[error("ONTAP rejected the credentials: incorrect or missing credentials (HTTP 401)")]
    Unauthorized,
    #[error("ONTAP REST {api}: this user's role lacks the privilege (HTTP 403)")]
    Forbidden { api: String },
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

/// The old name, from when ZAPI was the only API.
pub type ZapiError = OntapError;

fn target_note(target: &str) -> String {
    if target.is_empty() {
        String::new()
    } else {
        format!(", field {target}")
    }
}

impl OntapError {
    /// The ZAPI errno.
    pub fn errno(&self) -> Option<u32> {
        match self {
            OntapError::Api { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    /// The REST error code.
    pub fn rest_code(&self) -> Option<u64> {
        match self {
            OntapError::Rest { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            OntapError::Api { reason, .. } => reason,
            OntapError::Rest { message, .. } => message,
            _ => "",
        }
    }

    /// "Already exists" for any object kind, over either API.
    pub fn is_duplicate(&self) -> bool {
        matches!(self.clone().into_driver(), DriverError::AlreadyExists(_))
    }

    pub fn is_errno(&self, codes: &[u32]) -> bool {
        self.errno().is_some_and(|e| codes.contains(&e))
    }

    /// The busy class, worth retrying after a pause: "Job exists" (13001), and transport or
    /// HTTP failures that mean the request was not processed.
    pub fn is_retryable(&self) -> bool {
        match self {
            OntapError::Api { errno, reason, .. } => {
                *errno == errno::EAPIERROR && reason.to_ascii_lowercase().contains("job exists")
            }
            OntapError::Transport { retryable, .. } => *retryable,
            OntapError::Http { status, .. } => http::is_retryable_status(
                reqwest::StatusCode::from_u16(*status)
                    .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR),
            ),
            OntapError::Rest { code, .. } => super::rest_wire::is_busy_code(*code),
            OntapError::Unauthorized
            | OntapError::Forbidden { .. }
            | OntapError::Malformed { .. } => false,
        }
    }

    /// "Does not exist" for any object kind.
    pub fn is_not_found(&self) -> bool {
        if let OntapError::Rest { code, .. } = self {
            return super::rest_wire::is_not_found_code(*code);
        }
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
            OntapError::Api {
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
            OntapError::Rest { code, .. } => super::rest_wire::classify(*code, msg),
            OntapError::Forbidden { .. } => {
                DriverError::Unsupported(format!("{msg}: not permitted for this user"))
            }
            OntapError::Transport { .. } => DriverError::Unavailable(msg),
            OntapError::Http { status, .. } if *status >= 500 || *status == 429 => {
                DriverError::Unavailable(msg)
            }
            _ => DriverError::Other(msg),
        }
    }
}

impl From<OntapError> for DriverError {
    fn from(e: OntapError) -> Self {
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
    limit: std::sync::Arc<tokio::sync::Semaphore>,
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
            limit: super::api::lif_limit(&cfg.authority, cfg.max_concurrent_requests),
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
    pub async fn call(&self, api: &Node, vfiler: Option<&str>) -> Result<Node, OntapError> {
        http::retry(&self.retry, &api.name, OntapError::is_retryable, || {
            self.call_once(api, vfiler)
        })
        .await
    }

    async fn call_once(&self, api: &Node, vfiler: Option<&str>) -> Result<Node, OntapError> {
        let body = zapi::request(api, vfiler);
        let name = api.name.clone();
        let _permit = self
            .limit
            .acquire()
            .await
            .map_err(|_| OntapError::Transport {
                api: name.clone(),
                msg: "the request limiter was closed".into(),
                retryable: false,
            })?;
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
            return Err(OntapError::Unauthorized);
        }
        if !status.is_success() {
            return Err(OntapError::Http {
                api: name,
                status: status.as_u16(),
            });
        }
        let text = resp.text().await.map_err(|e| transport(&name, &e))?;
        match zapi::parse_response(&text) {
            Ok(results) => Ok(results),
            Err(Ok(f)) => Err(OntapError::Api {
                api: name,
                errno: f.errno,
                reason: f.reason,
            }),
            Err(Err(e)) => Err(OntapError::Malformed {
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
    ) -> Result<Vec<Node>, OntapError> {
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
        Err(OntapError::Malformed {
            api: api.to_string(),
            msg: "the iterator never ended".into(),
        })
    }

    /// Polls an async job until it ends (`job-get-iter`, cluster scope). `Ok` on success.
    pub async fn wait_job(&self, job_id: &str, timeout: Duration) -> Result<(), OntapError> {
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
                    return Err(OntapError::Api {
                        api: "job-get-iter".into(),
                        errno: r.u64_at("job-status-code").unwrap_or(0) as u32,
                        reason: format!("job {job_id} {state}: {}", r.str_at("job-completion")),
                    });
                }
                "" => {
                    return Err(OntapError::Api {
                        api: "job-get-iter".into(),
                        errno: errno::EOBJECTNOTFOUND,
                        reason: format!("job {job_id} not found"),
                    });
                }
                _ => {}
            }
            if started.elapsed() > timeout {
                return Err(OntapError::Transport {
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
    ) -> Result<(), OntapError> {
        let r = self.call(api, vfiler).await?;
        match r.str_at("result-status") {
            "succeeded" => Ok(()),
            "failed" => Err(OntapError::Api {
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

fn transport(api: &str, e: &reqwest::Error) -> OntapError {
    let (msg, retryable) = http::describe_transport(e);
    OntapError::Transport {
        api: api.to_string(),
        msg,
        retryable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(errno: u32, reason: &str) -> OntapError {
        OntapError::Api {
            api: "x".into(),
            errno,
            reason: reason.into(),
        }
    }

    #[test]
    fn errno_classes() {
        use DriverError::*;
        let class = |e: OntapError| match e.into_driver() {
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
        assert_eq!(class(OntapError::Unauthorized), "other");
        assert_eq!(
            class(OntapError::Http {
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
            OntapError::Http {
                api: "x".into(),
                status: 503
            }
            .is_retryable()
        );
        assert!(
            !OntapError::Http {
                api: "x".into(),
                status: 500
            }
            .is_retryable()
        );
    }
}

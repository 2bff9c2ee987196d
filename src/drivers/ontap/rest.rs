//! The ONTAP REST client (`https://<managementLIF>/api`): Basic auth, `application/hal+json`,
//! `_links.next` paging with `max_records`, async jobs (202 + job link) polled to the end with a
//! bound, error bodies mapped to [`OntapError`], and the per-LIF cap on requests in flight it
//! shares with the ZAPI client (docs/wire-notes.md; wire-protocols §5). The typed calls are in
//! `rest_calls.rs`, the JSON shapes in `rest_wire.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;
use tokio::sync::Semaphore;

use super::calls::JOB_TIMEOUT;
use super::client::{OntapError, PAGE_SIZE};
use super::config::{OntapConfig, Secret};
use super::rest_wire::{self as rw, codes};
use crate::drivers::DriverError;
use crate::net::{self as http, RetryPolicy};

/// One array's REST endpoint.
pub struct RestClient {
    http: reqwest::Client,
    /// `https://<authority>`: hrefs the array returns (`/api/...`) follow it.
    origin: String,
    username: String,
    password: Secret,
    retry: RetryPolicy,
    page_size: u32,
    limit: Arc<Semaphore>,
    job_timeout: Duration,
    svm_uuids: Mutex<HashMap<String, String>>,
    /// Volume UUIDs by SVM and name, as last looked up or created: a create's follow-up
    /// `PATCH`es reuse the UUID instead of reading it again. Only calls that tell a stale
    /// UUID by "does not exist" use it (they look the name up again then); deletes and
    /// listings always read the array.
    volume_uuids: Mutex<HashMap<(String, String), String>>,
}

/// How many volume UUIDs are kept before the memory starts over.
const VOLUME_UUIDS_KEPT: usize = 4096;

impl std::fmt::Debug for RestClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestClient")
            .field("origin", &self.origin)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// A path with its query: `path` is relative to `/api` (or an href starting with `/api/`).
#[derive(Debug, Clone)]
pub struct Req {
    path: String,
    query: Vec<(String, String)>,
}

impl Req {
    pub fn new(path: impl Into<String>) -> Req {
        Req {
            path: path.into(),
            query: Vec::new(),
        }
    }

    /// Adds a query parameter (a filter, `fields`, …).
    pub fn q(mut self, key: &str, value: impl Into<String>) -> Req {
        self.query.push((key.to_string(), value.into()));
        self
    }

    fn describe(&self) -> String {
        self.path.split('?').next().unwrap_or_default().to_string()
    }
}

impl RestClient {
    /// Builds the client (no network access).
    pub fn new(cfg: &OntapConfig) -> Result<RestClient, DriverError> {
        let http = http::build_client(&cfg.tls, cfg.api_timeout)
            .map_err(|e| DriverError::Invalid(e.to_string()))?;
        Ok(RestClient {
            http,
            origin: format!("https://{}", cfg.authority),
            username: cfg.username.clone(),
            password: cfg.password.clone(),
            retry: RetryPolicy::default(),
            page_size: PAGE_SIZE,
            limit: super::api::lif_limit(&cfg.authority, cfg.max_concurrent_requests),
            job_timeout: JOB_TIMEOUT,
            svm_uuids: Mutex::new(HashMap::new()),
            volume_uuids: Mutex::new(HashMap::new()),
        })
    }

    /// Overrides the retry policy (tests use short delays).
    pub fn with_retry(mut self, retry: RetryPolicy) -> RestClient {
        self.retry = retry;
        self
    }

    /// Overrides `max_records` of collection reads.
    pub fn with_page_size(mut self, n: u32) -> RestClient {
        self.page_size = n.max(1);
        self
    }

    /// Overrides how long one job is waited for.
    pub fn with_job_timeout(mut self, t: Duration) -> RestClient {
        self.job_timeout = t;
        self
    }

    fn url(&self, req: &Req) -> Result<reqwest::Url, OntapError> {
        let full = if req.path.starts_with("/api/") {
            format!("{}{}", self.origin, req.path)
        } else {
            format!("{}/api{}", self.origin, req.path)
        };
        let mut url = reqwest::Url::parse(&full).map_err(|e| OntapError::Malformed {
            api: req.describe(),
            msg: format!("bad URL {full}: {e}"),
        })?;
        if !req.query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in &req.query {
                pairs.append_pair(k, v);
            }
        }
        Ok(url)
    }

    /// Sends one request, retrying transport and HTTP failures that mean it was not
    /// processed; any non-2xx is an error. Busy answers in an error body are retried by
    /// [`Self::change_retrying_busy`] only, so that retries never nest. Returns the status and
    /// the body (`null` when empty).
    pub async fn send(
        &self,
        method: Method,
        req: &Req,
        body: Option<&Value>,
    ) -> Result<(u16, Value), OntapError> {
        let what = format!("{method} {}", req.describe());
        let unprocessed = |e: &OntapError| e.is_retryable() && e.rest_code().is_none();
        http::retry(&self.retry, &what, unprocessed, || {
            self.send_once(method.clone(), req, body, &what)
        })
        .await
    }

    async fn send_once(
        &self,
        method: Method,
        req: &Req,
        body: Option<&Value>,
        what: &str,
    ) -> Result<(u16, Value), OntapError> {
        let url = self.url(req)?;
        let _permit = self
            .limit
            .acquire()
            .await
            .map_err(|_| OntapError::Transport {
                api: what.to_string(),
                msg: "the request limiter was closed".into(),
                retryable: false,
            })?;
        let mut rb = self
            .http
            .request(method, url)
            .basic_auth(&self.username, Some(self.password.expose()))
            .header(reqwest::header::ACCEPT, "application/hal+json")
            .header(
                "X-Dot-Client-App",
                concat!("storch/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(b) = body {
            rb = rb
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.to_string());
        }
        let resp = rb.send().await.map_err(|e| transport(what, &e))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| transport(what, &e))?;
        match status {
            401 => return Err(OntapError::Unauthorized),
            403 => {
                return Err(OntapError::Forbidden {
                    api: what.to_string(),
                });
            }
            _ => {}
        }
        let value = if text.trim().is_empty() {
            Value::Null
        } else {
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => v,
                Err(_) if !(200..300).contains(&status) => {
                    return Err(OntapError::Http {
                        api: what.to_string(),
                        status,
                    });
                }
                Err(e) => {
                    return Err(OntapError::Malformed {
                        api: what.to_string(),
                        msg: format!("not JSON: {e}"),
                    });
                }
            }
        };
        if (200..300).contains(&status) {
            Ok((status, value))
        } else {
            Err(rw::error_from(what, status, &value))
        }
    }

    /// One record or document.
    pub async fn get(&self, req: &Req) -> Result<Value, OntapError> {
        Ok(self.send(Method::GET, req, None).await?.1)
    }

    /// Every record of a collection, following `_links.next` to the end; `max_records` is
    /// added. A page may hold no records and still link on (ONTAP ends a page early when its
    /// `return_timeout` is up), so only a missing link ends the list; a link back to the page
    /// just read is an error rather than a loop.
    pub async fn collect(&self, req: Req) -> Result<Vec<Value>, OntapError> {
        let what = req.describe();
        let mut out = Vec::new();
        let mut next = req.q("max_records", self.page_size.to_string());
        let mut previous: Option<String> = None;
        // A guard against a server that never stops paging.
        for _ in 0..1_000_000 {
            let page = self.get(&next).await?;
            let records = page
                .get("records")
                .and_then(Value::as_array)
                .ok_or_else(|| OntapError::Malformed {
                    api: what.clone(),
                    msg: "a collection without records".into(),
                })?;
            out.extend(records.iter().cloned());
            let Some(href) = rw::next_href(&page) else {
                return Ok(out);
            };
            if records.is_empty() && previous.as_deref() == Some(href.as_str()) {
                return Err(OntapError::Malformed {
                    api: what,
                    msg: format!("an empty page links to itself ({href})"),
                });
            }
            previous = Some(href.clone());
            next = Req::new(href);
        }
        Err(OntapError::Malformed {
            api: what,
            msg: "the collection never ended".into(),
        })
    }

    /// Sends a change and, when the array answers 202 with a job, waits for the job. Returns
    /// the answer's body (the records of a `return_records=true` create).
    pub async fn change(
        &self,
        method: Method,
        req: &Req,
        body: Option<&Value>,
    ) -> Result<Value, OntapError> {
        let (status, value) = self.send(method.clone(), req, body).await?;
        if let (202, Some(href)) = (status, rw::job_href(&value)) {
            self.wait_job(&href, &format!("{method} {}", req.describe()))
                .await?;
        }
        Ok(value)
    }

    /// [`Self::change`], retried as a whole while it fails with the busy class, also when the
    /// busy answer comes as a failed job (a volume busy on delete, 524486; too many qtree
    /// deletes, 5242925), as Trident retries them.
    pub async fn change_retrying_busy(
        &self,
        method: Method,
        req: &Req,
        body: Option<&Value>,
    ) -> Result<Value, OntapError> {
        let what = format!("{method} {}", req.describe());
        http::retry(&self.retry, &what, OntapError::is_retryable, || {
            self.change(method.clone(), req, body)
        })
        .await
    }

    /// Polls a job (`?fields=state`) until it ends, at most the job timeout; then reads it in
    /// full. `failure` is an error carrying the job's code and message.
    pub async fn wait_job(&self, href: &str, what: &str) -> Result<(), OntapError> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(20);
        loop {
            let job = self.get(&Req::new(href).q("fields", "state")).await?;
            let state = job["state"].as_str().unwrap_or_default().to_string();
            if matches!(state.as_str(), "success" | "failure") {
                if state == "success" {
                    return Ok(());
                }
                let job = self.get(&Req::new(href).q("fields", "**")).await?;
                return Err(rw::job_error(what, &job));
            }
            if started.elapsed() > self.job_timeout {
                return Err(OntapError::Transport {
                    api: what.to_string(),
                    msg: format!(
                        "job {href} did not finish within {:?} (last state {state:?})",
                        self.job_timeout
                    ),
                    retryable: true,
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }

    /// Polls `lookup` until it finds something, at most the job timeout: a create's job can
    /// succeed before the object shows in collection reads (wire-protocols §5.4).
    pub async fn until_visible<T, F, Fut>(&self, what: &str, lookup: F) -> Result<T, OntapError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<Option<T>, OntapError>>,
    {
        let started = Instant::now();
        let mut delay = Duration::from_millis(20);
        loop {
            if let Some(v) = lookup().await? {
                return Ok(v);
            }
            if started.elapsed() > self.job_timeout {
                return Err(OntapError::Transport {
                    api: what.to_string(),
                    msg: format!(
                        "{what} did not become visible within {:?}",
                        self.job_timeout
                    ),
                    retryable: true,
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(1));
        }
    }

    /// `GET /cluster` → the ONTAP version (generation, major, minor).
    pub async fn cluster_version(&self) -> Result<(u32, u32, u32), OntapError> {
        let c = self
            .get(&Req::new("/cluster").q("fields", "version"))
            .await?;
        rw::parse_version(&c).ok_or_else(|| OntapError::Malformed {
            api: "GET /cluster".into(),
            msg: "no version in the cluster record".into(),
        })
    }

    /// The SVM's UUID (read once); an unknown SVM is code 2621462.
    pub async fn svm_uuid(&self, svm: &str) -> Result<String, OntapError> {
        if let Some(u) = self
            .svm_uuids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(svm)
        {
            return Ok(u.clone());
        }
        let records = self
            .collect(Req::new("/svm/svms").q("name", svm).q("fields", "uuid"))
            .await?;
        let uuids: Vec<&str> = records
            .iter()
            .filter(|r| r["name"].as_str().is_none_or(|n| n == svm))
            .filter_map(|r| r["uuid"].as_str())
            .collect();
        let [uuid] = uuids.as_slice() else {
            return Err(OntapError::Rest {
                api: "GET /svm/svms".into(),
                code: codes::SVM_NOT_FOUND,
                message: format!("SVM {svm} not found ({} matches)", uuids.len()),
                target: "svm.name".into(),
            });
        };
        let uuid = uuid.to_string();
        self.svm_uuids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(svm.to_string(), uuid.clone());
        Ok(uuid)
    }

    /// The UUID last seen for a volume, if any.
    pub fn remembered_volume(&self, svm: &str, name: &str) -> Option<String> {
        self.volume_uuids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(svm.to_string(), name.to_string()))
            .cloned()
    }

    /// Records what a lookup found: the UUID, or that there is none.
    pub fn remember_volume(&self, svm: &str, name: &str, uuid: Option<&str>) {
        let mut kept = self.volume_uuids.lock().unwrap_or_else(|e| e.into_inner());
        let key = (svm.to_string(), name.to_string());
        match uuid {
            Some(uuid) => {
                if kept.len() >= VOLUME_UUIDS_KEPT && !kept.contains_key(&key) {
                    kept.clear();
                }
                kept.insert(key, uuid.to_string());
            }
            None => {
                kept.remove(&key);
            }
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

//! The NEF REST client: bearer-token sessions (`POST /auth/login`, one re-login and replay on
//! 401), HA failover across the configured endpoints, 202 + `jobStatus` polling with a bound,
//! `limit`/`offset` paging that also honours `next` links, and error bodies kept with their
//! code and message. The token and the password are never logged or shown.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::wire::{Collection, ErrorBody, LoginAnswer, monitor_href};
use crate::drivers::DriverError;
use crate::drivers::config::Secret;
use crate::net::{self as http, Method, TlsOptions};

/// Items per collection page (go-nexentastor's largest page).
pub const PAGE_SIZE: usize = 100;

/// Default bound on waiting for one asynchronous job.
pub const DEFAULT_JOB_TIMEOUT: Duration = Duration::from_secs(120);

/// Default timeout of one HTTP request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Error codes that are the appliance's own decision: a 5xx carrying one of them is an
/// answer, not a reason to try the next HA endpoint.
const APPLIANCE_CODES: &[&str] = &[
    "EEXIST", "ENOENT", "EBUSY", "EBADARG", "EINVAL", "EAUTH", "ENOSPC",
];

/// A NEF call that did not pass. Messages name the call and never carry credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NefError {
    #[error("NexentaStor {call} failed: {code}: {message} (HTTP {status})")]
    Api {
        call: String,
        status: u16,
        code: String,
        message: String,
    },
    #[error(
        "NexentaStor at {endpoint} rejected the login (HTTP {status}): check username and \
         password"
    )]
    Login { endpoint: String, status: u16 },
    #[error("NexentaStor {call}: unexpected HTTP status {status}")]
    Http { call: String, status: u16 },
    #[error("cannot reach NexentaStor for {call}: {msg}")]
    Transport { call: String, msg: String },
    #[error("NexentaStor {call}: unreadable answer: {msg}")]
    Malformed { call: String, msg: String },
    #[error("NexentaStor {call}: the job {href} did not finish within {timeout:?}")]
    JobTimeout {
        call: String,
        href: String,
        timeout: Duration,
    },
}

impl NefError {
    /// The NEF error code (`EEXIST`, `ENOENT`, …), or "".
    pub fn code(&self) -> &str {
        match self {
            NefError::Api { code, .. } => code,
            _ => "",
        }
    }

    pub fn is_code(&self, code: &str) -> bool {
        self.code() == code
    }

    /// Not found: `ENOENT` (or a bare 404 without a code).
    pub fn is_not_found(&self) -> bool {
        match self {
            NefError::Api { code, status, .. } => {
                code == "ENOENT" || (code.is_empty() && *status == 404)
            }
            NefError::Http { status, .. } => *status == 404,
            _ => false,
        }
    }

    /// Whether the next HA endpoint should be tried: the endpoint did not answer, or answered
    /// 5xx without one of the appliance's own error codes.
    fn moves_on(&self) -> bool {
        match self {
            NefError::Transport { .. } => true,
            NefError::Http { status, .. } => *status >= 500,
            NefError::Api { status, code, .. } => {
                *status >= 500 && !APPLIANCE_CODES.contains(&code.as_str())
            }
            _ => false,
        }
    }

    /// Classifies the failure by what the caller can do about it; the appliance's message is
    /// kept in every class.
    pub fn into_driver(self) -> DriverError {
        let msg = self.to_string();
        match &self {
            NefError::Api { code, status, .. } => match code.as_str() {
                "EEXIST" => DriverError::AlreadyExists(msg),
                "ENOENT" => DriverError::NotFound(msg),
                "EBUSY" | "ENOSPC" => DriverError::Conflict(msg),
                "EBADARG" | "EINVAL" => DriverError::Invalid(msg),
                "EAUTH" => DriverError::Invalid(format!("{msg}: check username and password")),
                _ if *status >= 500 || *status == 429 => DriverError::Unavailable(msg),
                _ if *status == 404 => DriverError::NotFound(msg),
                _ => DriverError::Other(msg),
            },
            NefError::Login { .. } => DriverError::Invalid(msg),
            NefError::Transport { .. } | NefError::JobTimeout { .. } => {
                DriverError::Unavailable(msg)
            }
            NefError::Http { status, .. } if *status >= 500 || *status == 429 => {
                DriverError::Unavailable(msg)
            }
            _ => DriverError::Other(msg),
        }
    }
}

impl From<NefError> for DriverError {
    fn from(e: NefError) -> Self {
        e.into_driver()
    }
}

/// One appliance (or HA pair) reached over its REST endpoints.
pub struct NefClient {
    http: http::Client,
    /// `https://host:port`, in the configured order.
    endpoints: Vec<String>,
    username: String,
    password: Secret,
    /// The endpoint that answered last: requests start there.
    active: AtomicUsize,
    /// The session token of each endpoint, once logged in.
    tokens: Mutex<Vec<Option<Secret>>>,
    page_size: usize,
    job_timeout: Duration,
}

impl std::fmt::Debug for NefClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NefClient")
            .field("endpoints", &self.endpoints)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// What one request sends.
struct Call<'a> {
    method: Method,
    /// The path after the endpoint, without a leading `/`, ids already escaped.
    path: &'a str,
    query: &'a [(&'a str, String)],
    body: Option<&'a Value>,
}

impl Call<'_> {
    fn name(&self) -> String {
        format!("{} /{}", self.method, self.path)
    }
}

impl NefClient {
    /// Builds the client (no network access).
    pub fn new(
        endpoints: Vec<String>,
        username: String,
        password: Secret,
        tls: &TlsOptions,
    ) -> Result<NefClient, DriverError> {
        let http = http::build_client(tls, DEFAULT_REQUEST_TIMEOUT)
            .map_err(|e| DriverError::Invalid(e.to_string()))?;
        let n = endpoints.len();
        Ok(NefClient {
            http,
            endpoints,
            username,
            password,
            active: AtomicUsize::new(0),
            tokens: Mutex::new(vec![None; n]),
            page_size: PAGE_SIZE,
            job_timeout: DEFAULT_JOB_TIMEOUT,
        })
    }

    /// Overrides the page size and the job bound (tests).
    pub fn tuned(mut self, page_size: usize, job_timeout: Duration) -> NefClient {
        self.page_size = page_size.max(1);
        self.job_timeout = job_timeout;
        self
    }

    /// The endpoint requests go to first (the one that answered last).
    pub fn active_endpoint(&self) -> &str {
        &self.endpoints[self.active.load(Ordering::Relaxed) % self.endpoints.len()]
    }

    // ---- verbs ----

    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, NefError> {
        let call = Call {
            method: Method::GET,
            path,
            query,
            body: None,
        };
        Ok(self.send(&call).await?.unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Option<Value>, NefError> {
        self.send(&Call {
            method: Method::POST,
            path,
            query: &[],
            body: Some(body),
        })
        .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Result<Option<Value>, NefError> {
        self.send(&Call {
            method: Method::PUT,
            path,
            query: &[],
            body: Some(body),
        })
        .await
    }

    pub async fn delete(&self, path: &str, query: &[(&str, String)]) -> Result<(), NefError> {
        self.send(&Call {
            method: Method::DELETE,
            path,
            query,
            body: None,
        })
        .await
        .map(|_| ())
    }

    /// Every item of a collection, page by page (`limit`/`offset`), until a short page
    /// without a `next` link, or an empty page.
    pub async fn list(&self, path: &str, query: &[(&str, String)]) -> Result<Vec<Value>, NefError> {
        let mut out = Vec::new();
        let mut offset = 0usize;
        // A guard against an appliance that never stops paging.
        for _ in 0..100_000 {
            let mut q: Vec<(&str, String)> = query.to_vec();
            q.push(("limit", self.page_size.to_string()));
            q.push(("offset", offset.to_string()));
            let answer = self.get(path, &q).await?;
            let page: Collection =
                serde_json::from_value(answer).map_err(|e| NefError::Malformed {
                    call: format!("GET /{path}"),
                    msg: e.to_string(),
                })?;
            let n = page.data.len();
            let more = page.has_next();
            out.extend(page.data);
            if n == 0 || (n < self.page_size && !more) {
                return Ok(out);
            }
            offset += n;
        }
        Err(NefError::Malformed {
            call: format!("GET /{path}"),
            msg: "the collection never ended".into(),
        })
    }

    // ---- transport ----

    /// Sends a call to the active endpoint, failing over to the others in order; remembers
    /// the endpoint that answered.
    async fn send(&self, call: &Call<'_>) -> Result<Option<Value>, NefError> {
        let n = self.endpoints.len();
        let start = self.active.load(Ordering::Relaxed) % n;
        let mut tried = Vec::new();
        for i in 0..n {
            let idx = (start + i) % n;
            match self.on_endpoint(idx, call).await {
                Err(e) if e.moves_on() => {
                    tracing::warn!(endpoint = %self.endpoints[idx], call = %call.name(), error = %e, "NexentaStor endpoint failed; trying the next");
                    tried.push(format!("{}: {e}", self.endpoints[idx]));
                }
                answer => {
                    if idx != start {
                        tracing::info!(endpoint = %self.endpoints[idx], "NexentaStor failover: using this endpoint");
                        self.active.store(idx, Ordering::Relaxed);
                    }
                    return answer;
                }
            }
        }
        Err(NefError::Transport {
            call: call.name(),
            msg: format!("no endpoint answered ({})", tried.join("; ")),
        })
    }

    /// One call on one endpoint: logs in when there is no token, logs in again and replays
    /// once on 401, and waits for a 202's job.
    async fn on_endpoint(&self, idx: usize, call: &Call<'_>) -> Result<Option<Value>, NefError> {
        let token = match self.token(idx) {
            Some(t) => t,
            None => self.login(idx).await?,
        };
        let (status, body) = match self.exchange(idx, call, &token).await? {
            (401, _) => {
                tracing::debug!(endpoint = %self.endpoints[idx], "NexentaStor session expired; logging in again");
                let token = self.login(idx).await?;
                self.exchange(idx, call, &token).await?
            }
            answer => answer,
        };
        self.answer(idx, call, status, body).await
    }

    /// Turns an answer into a result: 200/201 (body or none), 202 (the job's end), else the
    /// error body.
    async fn answer(
        &self,
        idx: usize,
        call: &Call<'_>,
        status: u16,
        body: Vec<u8>,
    ) -> Result<Option<Value>, NefError> {
        match status {
            200 | 201 | 204 => parse_optional(call, &body),
            202 => {
                let value = parse_optional(call, &body)?.unwrap_or(Value::Null);
                let href = monitor_href(&value).ok_or_else(|| NefError::Malformed {
                    call: call.name(),
                    msg: "202 without a monitor link".into(),
                })?;
                self.wait_job(idx, call, href).await
            }
            _ => Err(error_of(call.name(), status, &body)),
        }
    }

    /// Polls `GET <monitor href>` until it stops answering 202, bounded by the job timeout.
    /// Each 202 may name the next monitor href.
    async fn wait_job(
        &self,
        idx: usize,
        call: &Call<'_>,
        mut href: String,
    ) -> Result<Option<Value>, NefError> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            let path = href.trim_start_matches('/').to_string();
            let poll = Call {
                method: Method::GET,
                path: &path,
                query: &[],
                body: None,
            };
            let token = match self.token(idx) {
                Some(t) => t,
                None => self.login(idx).await?,
            };
            let (status, body) = match self.exchange(idx, &poll, &token).await? {
                (401, _) => {
                    let token = self.login(idx).await?;
                    self.exchange(idx, &poll, &token).await?
                }
                answer => answer,
            };
            match status {
                200 | 201 | 204 => return parse_optional(&poll, &body),
                202 => {
                    if let Some(next) = parse_optional(&poll, &body)
                        .ok()
                        .flatten()
                        .as_ref()
                        .and_then(monitor_href)
                    {
                        href = next;
                    }
                }
                _ => return Err(error_of(call.name(), status, &body)),
            }
            if started.elapsed() > self.job_timeout {
                return Err(NefError::JobTimeout {
                    call: call.name(),
                    href,
                    timeout: self.job_timeout,
                });
            }
            attempt += 1;
            let delay = http::backoff(attempt, Duration::from_millis(10), Duration::from_secs(2));
            tokio::time::sleep(delay).await;
        }
    }

    fn token(&self, idx: usize) -> Option<Secret> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner())[idx].clone()
    }

    /// `POST /auth/login` on one endpoint; keeps the token for it.
    async fn login(&self, idx: usize) -> Result<Secret, NefError> {
        let call = "POST /auth/login".to_string();
        let url = format!("{}/auth/login", self.endpoints[idx]);
        let body = json!({"username": self.username, "password": self.password.expose()});
        let resp = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| transport(&call, &e))?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| transport(&call, &e))?;
        if status == 401 || status == 403 {
            return Err(NefError::Login {
                endpoint: self.endpoints[idx].clone(),
                status,
            });
        }
        if status != 200 && status != 201 {
            return Err(error_of(call, status, &bytes));
        }
        let answer: LoginAnswer =
            serde_json::from_slice(&bytes).map_err(|e| NefError::Malformed {
                call: call.clone(),
                msg: e.to_string(),
            })?;
        if answer.token.is_empty() {
            return Err(NefError::Malformed {
                call,
                msg: "the login answer has no token".into(),
            });
        }
        let token = Secret::new(answer.token);
        self.tokens.lock().unwrap_or_else(|e| e.into_inner())[idx] = Some(token.clone());
        Ok(token)
    }

    /// One HTTP exchange: (status, body).
    async fn exchange(
        &self,
        idx: usize,
        call: &Call<'_>,
        token: &Secret,
    ) -> Result<(u16, Vec<u8>), NefError> {
        let mut url =
            http::Url::parse(&format!("{}/{}", self.endpoints[idx], call.path)).map_err(|e| {
                NefError::Malformed {
                    call: call.name(),
                    msg: format!("bad URL: {e}"),
                }
            })?;
        if !call.query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(call.query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        let mut req = self
            .http
            .request(call.method.clone(), url)
            .bearer_auth(token.expose());
        if let Some(body) = call.body {
            req = req.json(body);
        }
        let resp = req.send().await.map_err(|e| transport(&call.name(), &e))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| transport(&call.name(), &e))?;
        Ok((status, bytes.to_vec()))
    }
}

fn parse_optional(call: &Call<'_>, body: &[u8]) -> Result<Option<Value>, NefError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| NefError::Malformed {
            call: call.name(),
            msg: e.to_string(),
        })
}

/// The error of a non-success answer: the NEF error body when there is one.
fn error_of(call: String, status: u16, body: &[u8]) -> NefError {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) if !e.code.is_empty() || !e.message.is_empty() => NefError::Api {
            call,
            status,
            code: e.code,
            message: if e.message.is_empty() {
                e.name
            } else {
                e.message
            },
        },
        _ => NefError::Http { call, status },
    }
}

fn transport(call: &str, e: &http::Error) -> NefError {
    let (msg, _) = http::describe_transport(e);
    NefError::Transport {
        call: call.to_string(),
        msg,
    }
}

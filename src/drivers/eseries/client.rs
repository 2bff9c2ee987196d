//! The SANtricity Web Services Proxy client: JSON over HTTP(S) under `/devmgr/v2`, Basic
//! auth with the proxy user, SANtricity's error bodies kept with the HTTP status, and the
//! typed calls. Reads are retried when the array or proxy is busy or unreachable (through
//! `net`); changes only when the request never reached the proxy.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::config::EseriesConfig;
use super::wire::*;
use crate::drivers::DriverError;
use crate::drivers::config::Secret;
use crate::net::{self as http, Method, RetryPolicy, StatusCode};

/// A proxy call that did not pass. Messages name the call and keep the array's message; they
/// never carry credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    #[error("SANtricity {call}: HTTP {status}: {}{}", body.message(), detail(body))]
    Api {
        call: String,
        status: u16,
        body: ErrorBody,
    },
    #[error(
        "the SANtricity Web Services Proxy rejected the credentials (HTTP 401) for {call}: \
         check username and password"
    )]
    Unauthorized { call: String },
    #[error("cannot reach the SANtricity Web Services Proxy for {call}: {msg}")]
    Transport {
        call: String,
        msg: String,
        retryable: bool,
    },
    #[error("SANtricity {call}: unreadable response: {msg}")]
    Malformed { call: String, msg: String },
}

fn detail(body: &ErrorBody) -> String {
    match (body.retcode.as_str(), body.code_type.as_str()) {
        ("", "") => String::new(),
        (r, "") => format!(" (retcode {r})"),
        ("", t) => format!(" ({t})"),
        (r, t) => format!(" (retcode {r}, {t})"),
    }
}

impl ProxyError {
    /// The HTTP status of an answered call.
    pub fn status(&self) -> Option<u16> {
        match self {
            ProxyError::Api { status, .. } => Some(*status),
            ProxyError::Unauthorized { .. } => Some(401),
            _ => None,
        }
    }

    /// 404: the object (or the resource) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// The array lacks the resource or feature asked for: 404/405/501 on the resource, or a
    /// 422 whose return code or message says "not supported" (the wire spec names no code for
    /// it; the simulator answers `featureNotSupported`).
    pub fn is_unsupported_feature(&self) -> bool {
        match self {
            ProxyError::Api {
                status: 404 | 405 | 501,
                ..
            } => true,
            ProxyError::Api {
                status: 422, body, ..
            } => {
                let text = format!("{} {}", body.retcode, body.message()).to_ascii_lowercase();
                text.contains("notsupported") || text.contains("not support")
            }
            _ => false,
        }
    }

    /// 422 with the wrong-array-password return codes.
    pub fn is_wrong_array_password(&self) -> bool {
        match self {
            ProxyError::Api {
                status: 422, body, ..
            } => body.retcode == "authFailPassword" || body.retcode == "30",
            _ => false,
        }
    }

    /// The proxy or array said "later" (424 offline, 429, 502–504) or the request never
    /// left (connection refused).
    pub fn is_retryable(&self) -> bool {
        match self {
            ProxyError::Api { status, .. } => {
                *status == 424
                    || http::is_retryable_status(
                        StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    )
            }
            ProxyError::Transport { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// Classifies the failure by what the caller can do about it, keeping the array's message.
    pub fn into_driver(self) -> DriverError {
        let msg = self.to_string();
        let (status, body) = match &self {
            ProxyError::Api { status, body, .. } => (*status, body),
            ProxyError::Unauthorized { .. } => return DriverError::Invalid(msg),
            ProxyError::Transport { msg: m, .. } if m.contains("certificate") => {
                return DriverError::Invalid(format!(
                    "{msg}: the proxy's certificate is not trusted; check trustedCACertificate \
                     and webProxyVerifyTLS"
                ));
            }
            ProxyError::Transport { .. } => return DriverError::Unavailable(msg),
            ProxyError::Malformed { .. } => return DriverError::Other(msg),
        };
        if self.is_wrong_array_password() {
            return DriverError::Invalid(format!(
                "{msg}: the array rejects the password the proxy holds for it; check \
                 passwordArray"
            ));
        }
        match status {
            404 | 410 => DriverError::NotFound(msg),
            424 => DriverError::Unavailable(format!(
                "{msg}: the storage array is offline or unreachable from the proxy"
            )),
            400 => DriverError::Invalid(msg),
            403 => DriverError::Invalid(format!(
                "{msg}: the proxy user lacks the permission; check username"
            )),
            422 => classify_422(body, msg),
            429 | 500..=599 => DriverError::Unavailable(msg),
            _ => DriverError::Other(msg),
        }
    }
}

/// A 422 ("semantic failure") by its return code and message.
fn classify_422(body: &ErrorBody, msg: String) -> DriverError {
    let text = format!("{} {}", body.retcode, body.message()).to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    if has(&[
        "duplicate",
        "already exists",
        "name in use",
        "label in use",
        "nameexists",
    ]) {
        DriverError::AlreadyExists(msg)
    } else if has(&[
        "space",
        "capacity",
        "insufficient",
        "full",
        "busy",
        "in use",
        "inuse",
        "conflict",
        "already mapped",
        "maximum",
        "exceed",
        "limit",
    ]) {
        DriverError::Conflict(msg)
    } else if has(&[
        "invalid",
        "illegal",
        "parameter",
        "length",
        "too long",
        "unsupported",
    ]) {
        DriverError::Invalid(msg)
    } else {
        DriverError::Other(msg)
    }
}

impl From<ProxyError> for DriverError {
    fn from(e: ProxyError) -> Self {
        e.into_driver()
    }
}

/// One proxy's `/devmgr/v2` API.
pub struct ProxyClient {
    http: http::Client,
    base: String,
    username: String,
    password: Secret,
    retry: RetryPolicy,
}

impl std::fmt::Debug for ProxyClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyClient")
            .field("base", &self.base)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl ProxyClient {
    /// Builds the client (no network access).
    pub fn new(cfg: &EseriesConfig) -> Result<ProxyClient, DriverError> {
        let http = http::build_client(&cfg.tls, cfg.api_timeout)
            .map_err(|e| DriverError::Invalid(e.to_string()))?;
        Ok(ProxyClient {
            http,
            base: cfg.base_url.clone(),
            username: cfg.username.clone(),
            password: cfg.password.clone(),
            retry: RetryPolicy::default(),
        })
    }

    /// Overrides the retry policy (tests use short delays).
    pub fn with_retry(mut self, retry: RetryPolicy) -> ProxyClient {
        self.retry = retry;
        self
    }

    /// `GET path` (under `/devmgr/v2`), retried while the proxy says "later".
    pub async fn get<R: DeserializeOwned>(&self, path: &str) -> Result<R, ProxyError> {
        let call = format!("GET {path}");
        let value = http::retry(&self.retry, &call, ProxyError::is_retryable, || {
            self.send(Method::GET, path, None::<&()>)
        })
        .await?;
        decode(&call, value.1)
    }

    /// `POST path` with a JSON body: the status and the decoded answer. Retried only when the
    /// request never reached the proxy.
    pub async fn post<B: Serialize + Sync, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<(u16, R), ProxyError> {
        let call = format!("POST {path}");
        let (status, value) = self.changing(Method::POST, path, Some(body)).await?;
        Ok((status, decode(&call, value)?))
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> Result<(), ProxyError> {
        self.changing(Method::DELETE, path, None::<&()>)
            .await
            .map(|_| ())
    }

    async fn changing<B: Serialize + Sync>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<(u16, Value), ProxyError> {
        let what = format!("{method} {path}");
        let never_sent = |e: &ProxyError| {
            matches!(
                e,
                ProxyError::Transport {
                    retryable: true,
                    ..
                }
            )
        };
        http::retry(&self.retry, &what, never_sent, || {
            self.send(method.clone(), path, body)
        })
        .await
    }

    async fn send<B: Serialize>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<(u16, Value), ProxyError> {
        let call = format!("{method} {path}");
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .basic_auth(&self.username, Some(self.password.expose()))
            .header("Accept", "application/json");
        if let Some(b) = body {
            let bytes = serde_json::to_vec(b).map_err(|e| ProxyError::Malformed {
                call: call.clone(),
                msg: e.to_string(),
            })?;
            req = req.header("Content-Type", "application/json").body(bytes);
        }
        let resp = req.send().await.map_err(|e| {
            let (msg, retryable) = http::describe_transport(&e);
            ProxyError::Transport {
                call: call.clone(),
                msg,
                retryable,
            }
        })?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| ProxyError::Transport {
            call: call.clone(),
            msg: http::describe_transport(&e).0,
            retryable: false,
        })?;
        if status == 401 {
            return Err(ProxyError::Unauthorized { call });
        }
        if !(200..300).contains(&status) {
            // Statuses other than 404 and 422 may come without a useful body.
            let body = serde_json::from_str::<ErrorBody>(&text).unwrap_or_else(|_| ErrorBody {
                error_message: text.chars().take(200).collect(),
                ..ErrorBody::default()
            });
            return Err(ProxyError::Api { call, status, body });
        }
        if text.trim().is_empty() {
            return Ok((status, Value::Null));
        }
        let value = serde_json::from_str(&text).map_err(|e| ProxyError::Malformed {
            call,
            msg: e.to_string(),
        })?;
        Ok((status, value))
    }

    // ---- typed calls ----

    /// Registers the array by its controllers (201 new, 200 known): its id.
    pub async fn register(
        &self,
        controllers: &[String],
        password: Option<&str>,
    ) -> Result<RegisterResponse, ProxyError> {
        let body = RegisterRequest {
            controller_addresses: controllers.to_vec(),
            password: password.map(str::to_string),
        };
        Ok(self.post("/storage-systems", &body).await?.1)
    }
}

fn decode<R: DeserializeOwned>(call: &str, value: Value) -> Result<R, ProxyError> {
    serde_json::from_value(value).map_err(|e| ProxyError::Malformed {
        call: call.to_string(),
        msg: e.to_string(),
    })
}

/// The path of an array-scoped resource.
pub fn system_path(system_id: &str, rest: &str) -> String {
    format!("/storage-systems/{system_id}{rest}")
}

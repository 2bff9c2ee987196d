//! `CoreError`, the errors of core commands and reads, and `RequestCtx`, who asked.

/// Who asked, for the events a command causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestCtx {
    /// A uuid per REST request (or `config`, `boot`, `k8s/<uid>`).
    pub request_id: String,
}

impl RequestCtx {
    pub fn new(request_id: impl Into<String>) -> Self {
        RequestCtx {
            request_id: request_id.into(),
        }
    }

    /// A fresh random request id.
    pub fn random() -> Self {
        RequestCtx::new(uuid::Uuid::new_v4().to_string())
    }
}

/// Errors of core commands and reads, classified for the frontends (HTTP mapping lives in
/// `api::error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// Replay is not finished (HTTP 503).
    #[error("storch is initializing, please try again later")]
    NotReady,
    /// A standby refuses writes (HTTP 503); the leader's identity.
    #[error("this storch instance is a standby and takes no writes; the leader is {0}")]
    Standby(String),
    /// Start-up failed for good (HTTP 500).
    #[error("storch initialization failed; {0}")]
    BootstrapFailed(String),
    /// HTTP 404.
    #[error("{0}")]
    NotFound(String),
    /// A duplicate name (HTTP 409).
    #[error("{0}")]
    AlreadyExists(String),
    /// Bad input; the message names the field (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// A size no candidate's driver makes (below its minimum, above its maximum): bad input,
    /// refused before anything is recorded; the message starts `size: ` (HTTP 400, CSI
    /// `OUT_OF_RANGE`).
    #[error("{0}")]
    OutOfRange(String),
    /// The request is valid but cannot be carried out now or here, e.g. every pool failed
    /// (HTTP 400 as Trident; the message says why per pool).
    #[error("{0}")]
    Failed(String),
    /// Not yet, but soon: a backend the request needs is still initialising (HTTP 503 with
    /// `Retry-After`; the message, which names the backends, is shown).
    #[error("{0}")]
    Starting(String),
    /// The log refuses writes or an actor is gone (HTTP 503).
    #[error("{0}")]
    Unavailable(String),
    /// A bug or an unexpected failure (HTTP 500; details only in the server log).
    #[error("internal error: {0}")]
    Internal(String),
    /// The event log takes no writes (its disk is full or failed, or it lacks acknowledged
    /// records): HTTP 503 with `Retry-After`; the message says why, without paths, and is
    /// shown. Reads go on.
    #[error("{0}")]
    LogUnavailable(String),
}

/// A request the model refuses is bad input (HTTP 400); the message names the field.
impl From<crate::model::RequestError> for CoreError {
    fn from(e: crate::model::RequestError) -> Self {
        CoreError::Invalid(e.to_string())
    }
}

/// Records how long a core operation took and how it ended
/// (`storch_operation_duration_seconds{operation, outcome}`).
pub(crate) fn observe<T>(
    operation: &'static str,
    started: std::time::Instant,
    result: &Result<T, CoreError>,
) {
    let outcome = match result {
        Ok(_) => "ok",
        Err(CoreError::NotFound(_)) => "not_found",
        Err(CoreError::AlreadyExists(_)) => "conflict",
        Err(CoreError::Invalid(_) | CoreError::OutOfRange(_)) => "invalid",
        Err(CoreError::Failed(_)) => "failed",
        Err(
            CoreError::NotReady
            | CoreError::Starting(_)
            | CoreError::Unavailable(_)
            | CoreError::LogUnavailable(_),
        ) => "unavailable",
        Err(CoreError::Standby(_)) => "standby",
        Err(CoreError::BootstrapFailed(_) | CoreError::Internal(_)) => "error",
    };
    metrics::histogram!("storch_operation_duration_seconds", "operation" => operation, "outcome" => outcome)
        .record(started.elapsed().as_secs_f64());
}

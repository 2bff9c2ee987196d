//! How core errors become gRPC statuses (spec §8), the guard that answers `ABORTED` to a
//! second call for a name while the first is in flight, and the call metrics.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tonic::{Code, Response, Status};

use crate::actors::CoreError;

/// A core error as a status. `Failed` (valid, but refused by the arrays or the rules: every
/// pool failed, a snapshot blocks a delete) is `FAILED_PRECONDITION`; a size no driver makes
/// is `OUT_OF_RANGE` (spec: an unsupported capacity); start-up and standby states are
/// `UNAVAILABLE`, which the sidecars retry.
pub fn from_core(e: CoreError) -> Status {
    let message = e.to_string();
    match e {
        CoreError::NotReady
        | CoreError::Standby(_)
        | CoreError::Starting(_)
        | CoreError::Unavailable(_)
        | CoreError::LogUnavailable(_) => Status::unavailable(message),
        CoreError::NotFound(_) => Status::not_found(message),
        CoreError::AlreadyExists(_) => Status::already_exists(message),
        CoreError::Invalid(_) => Status::invalid_argument(message),
        CoreError::OutOfRange(_) => Status::out_of_range(message),
        CoreError::Failed(_) => Status::failed_precondition(message),
        CoreError::BootstrapFailed(_) | CoreError::Internal(_) => Status::internal(message),
    }
}

/// `INVALID_ARGUMENT` naming the field.
pub fn invalid(field: &str, why: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field}: {why}"))
}

/// `INVALID_ARGUMENT` for a required field left empty.
pub fn missing(field: &str) -> Status {
    invalid(field, "is required")
}

/// Keys (`volume:<id>`, `snapshot:<name>`) with an operation in flight.
#[derive(Debug, Clone, Default)]
pub struct InFlight {
    keys: Arc<Mutex<HashSet<String>>>,
}

/// Holds a key while alive.
#[derive(Debug)]
pub struct Claim {
    keys: Arc<Mutex<HashSet<String>>>,
    key: String,
}

impl InFlight {
    /// Claims `key`, or `ABORTED` when another call holds it (spec §1: the plugin may answer
    /// `ABORTED` to a duplicate while the first runs).
    pub fn claim(&self, key: String) -> Result<Claim, Status> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if !keys.insert(key.clone()) {
            return Err(Status::aborted(format!(
                "an operation on {key} is already in progress; retry later"
            )));
        }
        Ok(Claim {
            keys: self.keys.clone(),
            key,
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.key);
    }
}

/// Runs one RPC and records its duration and outcome
/// (`storch_csi_request_duration_seconds{method, code}`; the histogram's count is the number
/// of calls).
pub async fn observed<T>(
    method: &'static str,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<Response<T>, Status> {
    let started = std::time::Instant::now();
    let result = call.await;
    let code = match &result {
        Ok(_) => Code::Ok,
        Err(s) => s.code(),
    };
    metrics::histogram!(
        "storch_csi_request_duration_seconds",
        "method" => method,
        "code" => code_name(code)
    )
    .record(started.elapsed().as_secs_f64());
    if let Err(s) = &result {
        tracing::debug!(
            method,
            code = code_name(s.code()),
            message = s.message(),
            "CSI call refused"
        );
    }
    result.map(Response::new)
}

fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_is_aborted_until_the_first_ends() {
        let f = InFlight::default();
        let first = f.claim("volume:a".into()).unwrap();
        assert_eq!(
            f.claim("volume:a".into()).unwrap_err().code(),
            Code::Aborted
        );
        let _other = f.claim("volume:b".into()).unwrap();
        drop(first);
        f.claim("volume:a".into()).unwrap();
    }

    #[test]
    fn core_errors_map_to_spec_codes() {
        assert_eq!(
            from_core(CoreError::NotFound("x".into())).code(),
            Code::NotFound
        );
        assert_eq!(
            from_core(CoreError::Invalid("x".into())).code(),
            Code::InvalidArgument
        );
        assert_eq!(
            from_core(CoreError::Standby("l".into())).code(),
            Code::Unavailable
        );
        assert_eq!(
            from_core(CoreError::Failed("x".into())).code(),
            Code::FailedPrecondition
        );
        assert_eq!(
            from_core(CoreError::OutOfRange("size: x".into())).code(),
            Code::OutOfRange
        );
    }
}

//! Keeps the secrets of a request out of its error messages.
//!
//! The core and the drivers word their own errors, and some quote request values (Trident's
//! `unknown storage driver: X`). A value a client put under a secret key may also sit in such
//! a field (by mistake or on purpose), so before a backend request's error is answered or
//! logged, every secret value of its document is cut out of the message.

use serde_json::Value;

use crate::actors::CoreError;
use crate::secrets::REDACTED;

/// Secrets shorter than this are not searched for: they would match all over a message
/// (a one-letter password) and are not worth hiding from their own sender.
const MIN_SECRET_LEN: usize = 4;

/// The secret strings of a backend document: every value under a secret-looking key (as
/// `crate::secrets` decides) and the user-info of URLs, with `user:pass` also split in two.
pub(crate) fn secret_values(doc: &Value) -> Vec<String> {
    let mut copy = doc.clone();
    let mut out = Vec::new();
    for value in crate::secrets::split(&mut copy).into_values() {
        collect_strings(&value, &mut out);
    }
    let parts: Vec<String> = out
        .iter()
        .filter_map(|s| s.split_once(':'))
        .flat_map(|(user, pass)| [user.to_string(), pass.to_string()])
        .collect();
    out.extend(parts);
    out.retain(|s| s.chars().count() >= MIN_SECRET_LEN);
    // Longest first, so a secret that contains another is cut whole.
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

fn collect_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect_strings(i, out)),
        Value::Null | Value::Bool(_) => {}
    }
}

/// `message` with every secret replaced by `<redacted>`.
pub(crate) fn scrub(message: &str, secrets: &[String]) -> String {
    let mut out = message.to_string();
    for secret in secrets {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    out
}

/// A core error with the secrets cut out of its message (also of the ones only logged).
pub(crate) fn scrub_core_error(e: CoreError, secrets: &[String]) -> CoreError {
    if secrets.is_empty() {
        return e;
    }
    let s = |m: String| scrub(&m, secrets);
    match e {
        CoreError::NotReady => CoreError::NotReady,
        CoreError::Standby(m) => CoreError::Standby(s(m)),
        CoreError::BootstrapFailed(m) => CoreError::BootstrapFailed(s(m)),
        CoreError::NotFound(m) => CoreError::NotFound(s(m)),
        CoreError::AlreadyExists(m) => CoreError::AlreadyExists(s(m)),
        CoreError::Invalid(m) => CoreError::Invalid(s(m)),
        CoreError::OutOfRange(m) => CoreError::OutOfRange(s(m)),
        CoreError::Failed(m) => CoreError::Failed(s(m)),
        CoreError::Starting(m) => CoreError::Starting(s(m)),
        CoreError::Unavailable(m) => CoreError::Unavailable(s(m)),
        CoreError::Internal(m) => CoreError::Internal(s(m)),
        CoreError::LogUnavailable(m) => CoreError::LogUnavailable(s(m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_found_everywhere_in_the_document() {
        let doc = json!({
            "storageDriverName": "fake",
            "password": "hunter2-canary",
            "chapTargetSecret": 12345678,
            "nested": {"EndPoint": "https://admin:url-canary@10.0.0.1/json-rpc/8.0"},
            "list": [{"apiToken": ["tok-canary-1", "tok-canary-2"]}],
            "username": "admin",
            "pin": "abc",
        });
        let found = secret_values(&doc);
        for want in [
            "hunter2-canary",
            "12345678",
            "admin:url-canary",
            "url-canary",
            "admin",
            "tok-canary-1",
            "tok-canary-2",
        ] {
            assert!(found.iter().any(|s| s == want), "{want} not in {found:?}");
        }
        assert!(!found.iter().any(|s| s == "fake"));
    }

    #[test]
    fn messages_lose_their_secrets() {
        let doc = json!({"storageDriverName": "CANARY-x1", "password": "CANARY-x1"});
        let secrets = secret_values(&doc);
        assert_eq!(
            scrub("unknown storage driver: CANARY-x1", &secrets),
            "unknown storage driver: <redacted>"
        );
        let e = scrub_core_error(
            CoreError::Invalid("unknown storage driver: CANARY-x1".into()),
            &secrets,
        );
        assert_eq!(
            e,
            CoreError::Invalid("unknown storage driver: <redacted>".into())
        );
        let e = scrub_core_error(CoreError::Internal("boom CANARY-x1".into()), &secrets);
        assert_eq!(e, CoreError::Internal("boom <redacted>".into()));
    }

    #[test]
    fn short_secrets_are_left_alone() {
        let secrets = secret_values(&json!({"password": "e"}));
        assert!(secrets.is_empty());
        assert_eq!(scrub("the message", &secrets), "the message");
    }

    #[test]
    fn longer_secrets_are_cut_first() {
        let secrets = secret_values(&json!({"password": "abcd", "secret": "abcdefgh"}));
        assert_eq!(scrub("x abcdefgh y", &secrets), "x <redacted> y");
    }
}

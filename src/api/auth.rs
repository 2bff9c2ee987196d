//! Bearer-token authentication: when a token is configured, every route except the probes
//! (`/livez`, `/readyz`) and the dashboard's static files (`/ui/…`, which hold no data) needs
//! `Authorization: Bearer <token>`.
//!
//! Only the SHA-256 of the token is kept, and a presented token is hashed and compared with it
//! in constant time, so neither the comparison's timing nor the token's length leaks.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::error::{ApiError, ErrorKind, Op};
use super::handlers::ReqCtx;
use super::routes::UNAUTHENTICATED_PATHS;

/// The shortest token accepted (bytes).
pub const MIN_TOKEN_LEN: usize = 16;

/// A configured bearer token (its SHA-256 digest).
#[derive(Clone)]
pub struct AuthToken(Arc<[u8; 32]>);

impl std::fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthToken(<redacted>)")
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is empty")]
    Empty,
    #[error("the token is shorter than {MIN_TOKEN_LEN} bytes")]
    TooShort,
    #[error(
        "the token must be one line of visible ASCII characters (no spaces or control characters)"
    )]
    BadChars,
}

impl AuthToken {
    /// A token from its text, e.g. a token file's contents: surrounding whitespace (a trailing
    /// newline) is ignored; the rest must be visible ASCII of at least [`MIN_TOKEN_LEN`] bytes.
    pub fn new(text: &str) -> Result<AuthToken, TokenError> {
        let token = text.trim();
        if token.is_empty() {
            return Err(TokenError::Empty);
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::BadChars);
        }
        if token.len() < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort);
        }
        Ok(AuthToken(Arc::new(Sha256::digest(token.as_bytes()).into())))
    }

    /// Whether `presented` is the token (constant time in its content).
    pub fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        constant_time_eq(&digest, &self.0)
    }

    /// Whether the request's `Authorization` header carries the token.
    fn admits(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return false;
        };
        let value = value.as_bytes();
        let scheme = b"bearer ";
        if value.len() <= scheme.len() || !value[..scheme.len()].eq_ignore_ascii_case(scheme) {
            return false;
        }
        self.matches(value[scheme.len()..].trim_ascii())
    }
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Middleware: refuses a request without the configured token (401 in the operation's
/// envelope). Without a configured token, everything passes.
pub(crate) async fn require(
    State(token): State<Option<AuthToken>>,
    ctx: ReqCtx,
    req: Request,
    next: Next,
) -> Response {
    if let Some(token) = token
        && !UNAUTHENTICATED_PATHS.contains(&req.uri().path())
        && !super::ui::is_asset_path(req.uri().path())
        && !token.admits(req.headers())
    {
        let op = Op::classify(req.method(), req.uri().path());
        return ApiError::new(op, &ctx.0, ErrorKind::Unauthorized).into_response();
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    const T: &str = "s3cr3t-t0ken-0123456789";

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn tokens_are_checked_when_made() {
        assert_eq!(AuthToken::new("").unwrap_err(), TokenError::Empty);
        assert_eq!(AuthToken::new(" \n").unwrap_err(), TokenError::Empty);
        assert_eq!(AuthToken::new("short").unwrap_err(), TokenError::TooShort);
        assert_eq!(
            AuthToken::new("has a space in the middle").unwrap_err(),
            TokenError::BadChars
        );
        assert_eq!(
            AuthToken::new("t\u{e9}t\u{e9}-0123456789abcdef").unwrap_err(),
            TokenError::BadChars
        );
        assert!(AuthToken::new(&format!("{T}\n")).is_ok());
    }

    #[test]
    fn only_the_right_bearer_token_is_admitted() {
        let token = AuthToken::new(&format!("  {T}\n")).unwrap();
        assert!(token.admits(&headers(&format!("Bearer {T}"))));
        assert!(token.admits(&headers(&format!("bearer {T}"))));
        assert!(token.admits(&headers(&format!("BEARER  {T} "))));
        assert!(!token.admits(&HeaderMap::new()));
        assert!(!token.admits(&headers(T)));
        assert!(!token.admits(&headers(&format!("Basic {T}"))));
        assert!(!token.admits(&headers("Bearer ")));
        assert!(!token.admits(&headers(&format!("Bearer {T}x"))));
        assert!(!token.admits(&headers(&format!("Bearer {}", &T[1..]))));
        assert!(!token.admits(&headers("Bearer s3cr3t-t0ken-0123456788")));
    }

    #[test]
    fn debug_output_hides_the_token() {
        let token = AuthToken::new(T).unwrap();
        assert_eq!(format!("{token:?}"), "AuthToken(<redacted>)");
    }
}

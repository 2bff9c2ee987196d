//! Cross-cutting HTTP, below every module that talks HTTP as a client: the rustls crypto
//! provider, the reqwest client factory with TLS options, and one retry policy with one backoff
//! function. Drivers, replication, the CLI, the bench and the Kubernetes controllers use it;
//! it knows none of them.
//!
//! - `client.rs`: the client factory ([`client_builder`], [`build_client`] with [`TlsOptions`]).
//! - `retry.rs`: [`backoff`], [`RetryPolicy`] and [`retry`], and which HTTP failures to retry.
//!
//! TLS uses rustls with the ring provider only (never aws-lc-rs). reqwest is built without a
//! default provider, so a client built before [`install_crypto_provider`] panics: every reqwest
//! client is built from [`client_builder`], which installs it first (idempotent), and the
//! binaries install it first thing in `main` for what builds TLS on the process default
//! outside `net` (kube's client). The servers (`api`, `sim`) name ring explicitly.
//!
//! The reqwest types other modules name are re-exported here, so that reqwest itself appears
//! only in `net`, `drivers` and `replication`.

mod client;
mod retry;

pub use client::{
    CaError, ClientBuildError, TlsOptions, build_client, client, client_builder, trusted_certs,
};
pub use reqwest::{Client, Error, Method, Response, StatusCode, Url};
pub use retry::{
    RetryPolicy, backoff, describe_transport, is_retryable_status, is_retryable_transport, retry,
};

/// Installs rustls' ring provider as the process default. Idempotent; an already installed
/// provider (ours or someone else's) is kept. Called once by each binary's `main` and by test
/// support.
pub fn install_crypto_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

//! The reqwest client factory: a plain builder for callers that set their own options, and a
//! client with TLS options (verify, trusted CA PEM) and timeouts for the array drivers.

use std::time::Duration;

/// How a client checks the server's certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Verify the server certificate (the default). `false` accepts anything.
    pub verify: bool,
    /// PEM certificates to trust *instead of* the system roots.
    pub trusted_ca_pem: Option<String>,
}

/// Why a client could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientBuildError {
    #[error("trustedCACertificate is not a PEM certificate: {0}")]
    BadCertificate(String),
    #[error("cannot build the HTTP client: {0}")]
    Build(String),
}

/// Why PEM text gave no certificates to trust.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaError {
    #[error("{0}")]
    Invalid(String),
    #[error("no certificate found")]
    Empty,
}

/// A reqwest client builder: every client of the crate starts here. It installs the crypto
/// provider first (once per process), so no client depends on who ran before it.
pub fn client_builder() -> reqwest::ClientBuilder {
    super::install_crypto_provider();
    reqwest::Client::builder()
}

/// A default reqwest client (see [`client_builder`]).
pub fn client() -> reqwest::Client {
    client_builder()
        .build()
        .expect("a default reqwest client builds")
}

/// The certificates in a PEM bundle, at least one.
pub fn trusted_certs(pem: &[u8]) -> Result<Vec<reqwest::Certificate>, CaError> {
    let certs =
        reqwest::Certificate::from_pem_bundle(pem).map_err(|e| CaError::Invalid(e.to_string()))?;
    if certs.is_empty() {
        return Err(CaError::Empty);
    }
    Ok(certs)
}

/// A reqwest client with the given TLS options and per-request timeout. Never contacts
/// anything.
pub fn build_client(
    tls: &TlsOptions,
    timeout: Duration,
) -> Result<reqwest::Client, ClientBuildError> {
    let mut builder = client_builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .pool_idle_timeout(Duration::from_secs(30));
    if !tls.verify {
        builder = builder.tls_danger_accept_invalid_certs(true);
    } else if let Some(pem) = &tls.trusted_ca_pem {
        let certs = trusted_certs(pem.as_bytes())
            .map_err(|e| ClientBuildError::BadCertificate(e.to_string()))?;
        builder = builder.tls_certs_only(certs);
    }
    builder
        .build()
        .map_err(|e| ClientBuildError::Build(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_options() {
        let verify = TlsOptions {
            verify: true,
            trusted_ca_pem: None,
        };
        build_client(&verify, Duration::from_secs(5)).unwrap();
        let insecure = TlsOptions {
            verify: false,
            trusted_ca_pem: None,
        };
        build_client(&insecure, Duration::from_secs(5)).unwrap();
        let bad = TlsOptions {
            verify: true,
            trusted_ca_pem: Some("not a pem".into()),
        };
        assert!(matches!(
            build_client(&bad, Duration::from_secs(5)),
            Err(ClientBuildError::BadCertificate(_))
        ));
    }
}

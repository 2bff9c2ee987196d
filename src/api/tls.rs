//! TLS for the REST API: a rustls server config (ring provider, TLS 1.2 and 1.3, HTTP/1.1 via
//! ALPN) from a PEM certificate chain and a PEM private key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// Why the certificate or key could not be used. Messages name the file, never key material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {} holds no PEM {expected}", path.display())]
    Empty {
        what: &'static str,
        path: PathBuf,
        expected: &'static str,
    },
    #[error("{what} {} is not valid PEM: {reason}", path.display())]
    Pem {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("the TLS certificate and key cannot be used together: {0}")]
    Config(#[source] rustls::Error),
}

/// A TLS acceptor for the certificate chain in `cert` and the private key in `key` (PEM;
/// PKCS#8, PKCS#1 or SEC1 keys).
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let read = |what: &'static str, path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            what,
            path: path.to_path_buf(),
            source,
        })
    };
    let cert_pem = read("TLS certificate file", cert)?;
    let key_pem = read("TLS key file", key)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what: "TLS certificate file",
            path: cert.to_path_buf(),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Empty {
            what: "TLS certificate file",
            path: cert.to_path_buf(),
            expected: "certificate",
        });
    }
    let private_key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::Empty {
            what: "TLS key file",
            path: key.to_path_buf(),
            expected: "private key",
        },
        other => TlsError::Pem {
            what: "TLS key file",
            path: key.to_path_buf(),
            reason: other.to_string(),
        },
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(TlsError::Config)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(cert: &Path, key: &Path) -> TlsError {
        match acceptor(cert, key) {
            Ok(_) => panic!("accepted {} and {}", cert.display(), key.display()),
            Err(e) => e,
        }
    }

    #[test]
    fn unusable_files_are_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let msg = refused(&missing, &missing).to_string();
        assert!(
            msg.contains("TLS certificate file") && msg.contains("nope.pem"),
            "{msg}"
        );

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let msg = refused(&empty, &empty).to_string();
        assert!(msg.contains("holds no PEM certificate"), "{msg}");

        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert_path = dir.path().join("cert.pem");
        std::fs::write(&cert_path, cert.cert.pem()).unwrap();
        let msg = refused(&cert_path, &empty).to_string();
        assert!(
            msg.contains("TLS key file") && msg.contains("private key"),
            "{msg}"
        );

        let key_path = dir.path().join("key.pem");
        std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
        assert!(acceptor(&cert_path, &key_path).is_ok());

        // A key that does not belong to the certificate.
        let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let other_key = dir.path().join("other-key.pem");
        std::fs::write(&other_key, other.signing_key.serialize_pem()).unwrap();
        let err = refused(&cert_path, &other_key);
        assert!(matches!(err, TlsError::Config(_)), "{err}");
        let key_text = other.signing_key.serialize_pem();
        assert!(!format!("{err:#?}").contains(key_text.lines().nth(1).unwrap()));
    }
}

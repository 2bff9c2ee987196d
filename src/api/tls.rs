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
    #[error(
        "TLS certificate file {}: clients that verify certificates (storch's own, and any \
         built on rustls or webpki) would refuse it: {reason}. A self-signed certificate must \
         name the server in subjectAltName and not be a CA, e.g. `{FIX_RECIPE}`",
        path.display()
    )]
    Unverifiable { path: PathBuf, reason: String },
}

/// A self-signed certificate that storch's client (and any webpki client) accepts.
pub const FIX_RECIPE: &str = "openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem \
    -out cert.pem -days 365 -subj /CN=localhost -addext \
    subjectAltName=DNS:localhost,IP:127.0.0.1 -addext basicConstraints=critical,CA:FALSE";

/// Verifies the chain as a client would that trusts the chain's last certificate (the usual
/// self-signed case: `--ca-cert` the same file), so that a certificate every such client
/// refuses stops the start instead of failing each client. A chain whose issuer is not in the
/// file is left to the clients, which hold that CA.
fn check_as_clients_would(path: &Path, chain: &[CertificateDer<'static>]) -> Result<(), TlsError> {
    use rustls::CertificateError as C;
    use rustls::client::danger::ServerCertVerifier;
    let unverifiable = |reason: String| TlsError::Unverifiable {
        path: path.to_path_buf(),
        reason,
    };
    let (Some(leaf), Some(anchor)) = (chain.first(), chain.last()) else {
        return Ok(());
    };
    let mut roots = rustls::RootCertStore::empty();
    if let Err(e) = roots.add(anchor.clone()) {
        return Err(unverifiable(e.to_string()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| unverifiable(e.to_string()))?;
    // A name no certificate holds: the chain is checked first, then the name, whose error
    // lists the names the certificate presents.
    let probe =
        rustls::pki_types::ServerName::try_from("storch-check.invalid").expect("a valid DNS name");
    let now = rustls::pki_types::UnixTime::now();
    match verifier.verify_server_cert(leaf, &chain[1..], &probe, &[], now) {
        Ok(_) => Ok(()),
        Err(rustls::Error::InvalidCertificate(C::NotValidForNameContext { presented, .. }))
            if !presented.is_empty() =>
        {
            Ok(())
        }
        Err(rustls::Error::InvalidCertificate(
            C::NotValidForName | C::NotValidForNameContext { .. },
        )) => Err(unverifiable(
            "it has no subjectAltName (clients match the server's name against it only, never \
             against the CN)"
                .into(),
        )),
        Err(rustls::Error::InvalidCertificate(C::UnknownIssuer)) => Ok(()),
        Err(e) if e.to_string().contains("CaUsedAsEndEntity") => Err(unverifiable(
            "it is a CA certificate (basicConstraints CA:TRUE, as `openssl req -x509` makes by \
             default), which clients refuse as a server's"
                .into(),
        )),
        Err(e) => Err(unverifiable(e.to_string())),
    }
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
    check_as_clients_would(cert, &chain)?;
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

    /// The usual `openssl req -x509` recipe makes a CA certificate without subjectAltName:
    /// refused at start naming the fix; the recipe the message gives is served.
    #[test]
    fn a_certificate_clients_refuse_is_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let openssl = |name: &str, extra: &[&str]| {
            let (cert, key) = (
                dir.path().join(format!("{name}.pem")),
                dir.path().join(format!("{name}-key.pem")),
            );
            let mut args = vec![
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
            ];
            args.extend_from_slice(extra);
            let status = std::process::Command::new("openssl")
                .args(&args)
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&cert)
                .stderr(std::process::Stdio::null())
                .status();
            status.ok().filter(|s| s.success()).map(|_| (cert, key))
        };
        let Some((cert, key)) = openssl("plain", &[]) else {
            eprintln!("no openssl: skipped");
            return;
        };
        let msg = refused(&cert, &key).to_string();
        assert!(msg.contains("it is a CA certificate"), "{msg}");
        assert!(msg.contains("subjectAltName=DNS:localhost"), "{msg}");
        let (cert, key) =
            openssl("no-san", &["-addext", "basicConstraints=critical,CA:FALSE"]).unwrap();
        let msg = refused(&cert, &key).to_string();
        assert!(msg.contains("it has no subjectAltName"), "{msg}");
        let (cert, key) = openssl(
            "fixed",
            &[
                "-addext",
                "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-addext",
                "basicConstraints=critical,CA:FALSE",
            ],
        )
        .unwrap();
        acceptor(&cert, &key).unwrap();
        // rcgen's self-signed certificates (the tests' own) are fine too.
        let ok = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        std::fs::write(dir.path().join("rc.pem"), ok.cert.pem()).unwrap();
        std::fs::write(
            dir.path().join("rc-key.pem"),
            ok.signing_key.serialize_pem(),
        )
        .unwrap();
        acceptor(&dir.path().join("rc.pem"), &dir.path().join("rc-key.pem")).unwrap();
    }
}

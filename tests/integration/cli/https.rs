//! A server with TLS and a token, reached with `--ca-cert` and `--token`.

use super::*;

/// A CA, and a server certificate for localhost and 127.0.0.1 signed by it: (CA PEM, server
/// certificate PEM, server key PEM).
fn test_pki() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "storch test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[test]
fn https_with_a_token() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert, key) = test_pki();
    let path = |name: &str, text: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (ca_file, cert_file, key_file) = (
        path("ca.pem", &ca),
        path("server.pem", &cert),
        path("server.key", &key),
    );
    let token = "s3cret-token-for-tests";
    let token_file = path("token", &format!("{token}\n"));
    let mut server = Server::start_on(
        &tmp.path().join("data"),
        &[
            "--tls-cert",
            &cert_file,
            "--tls-key",
            &key_file,
            "--auth-token-file",
            &token_file,
        ],
    );
    assert!(server.url.starts_with("https://"), "{}", server.url);
    server.client_flags = vec![
        "--server".into(),
        server.url.clone(),
        "--ca-cert".into(),
        ca_file.clone(),
        "--token".into(),
        token.into(),
    ];
    server.wait_ready();
    server
        .run_with(&["create", "sc", "-f", "-"], Some(r#"{"name": "gold"}"#))
        .ok();
    assert_eq!(
        server.run(&["get", "sc", "-o", "name"]).ok().stdout,
        "gold\n"
    );
    // The token from the environment works too.
    storch(
        &[
            "-s",
            &server.url,
            "--ca-cert",
            &ca_file,
            "get",
            "sc",
            "-o",
            "name",
        ],
        &[("STORCH_TOKEN", token)],
        None,
    )
    .ok();
    // No token, or a wrong one: 401.
    storch(
        &["-s", &server.url, "--ca-cert", &ca_file, "get", "sc"],
        &[],
        None,
    )
    .fails_with("401 Unauthorized");
    storch(
        &[
            "-s",
            &server.url,
            "--ca-cert",
            &ca_file,
            "--token",
            "wrong",
            "get",
            "sc",
        ],
        &[],
        None,
    )
    .fails_with("401 Unauthorized");
    // A certificate from an unknown CA is refused before anything is sent.
    let out = storch(
        &["-s", &server.url, "--token", token, "get", "sc"],
        &[],
        None,
    )
    .fails_with(&format!("cannot reach the storch server at {}", server.url));
    assert!(
        out.stderr.contains("pass it with --ca-cert"),
        "{}",
        out.stderr
    );
    // Plain http to a TLS port fails too, with a hint.
    let plain = server.url.replace("https://", "");
    storch(&["-s", &plain, "--token", token, "get", "sc"], &[], None)
        .fails_with("use --server https://");
    server.stop();
}

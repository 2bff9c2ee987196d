//! Securing the API: TLS and a bearer token in-process, and the real `storch serve` binary
//! refusing (or, with `--insecure-listen`, accepting) a non-loopback address without them.

use std::time::Duration;

use crate::support::Server;
use crate::support::http::*;
use crate::support::server::{exit_status, spawn};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_token_accepted_missing_or_wrong_token_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cert = make_cert(dir.path());
    let rt = crate::support::start(&dir.path().join("data")).await;
    let s = TestServer::start(rt, secured(Some(&cert))).await;
    assert!(s.url.starts_with("https://127.0.0.1:"), "{}", s.url);
    let ca = cert.cert_pem.as_str();

    let r = https(s.addr, ca, "GET", "/trident/v1/version", Some(TOKEN), "")
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{:?}", r);
    assert_eq!(r.json["version"], "18.07.0");
    let backend =
        crate::support::fake_backend("lab", "file", &[("p1", crate::support::ssd())]).to_string();
    let r = https(
        s.addr,
        ca,
        "POST",
        "/trident/v1/backend",
        Some(TOKEN),
        &backend,
    )
    .await
    .unwrap();
    assert_eq!(r.status, 201, "{}", r.json);

    for token in [None, Some("wrong-token-0123456789abcdef"), Some("")] {
        for (method, path, key) in [
            ("GET", "/trident/v1/backend", Some("backends")),
            ("POST", "/trident/v1/backend", Some("backend")),
            ("GET", "/trident/v1/events", Some("events")),
            ("GET", "/metrics", None),
            ("GET", "/openapi.json", None),
            ("GET", "/no/such/path", None),
        ] {
            let r = https(s.addr, ca, method, path, token, &backend)
                .await
                .unwrap();
            assert_eq!(r.status, 401, "{method} {path} with {token:?}");
            assert_eq!(r.headers["www-authenticate"], "Bearer realm=\"storch\"");
            assert!(r.headers.contains_key("x-request-id"));
            assert_eq!(
                r.json["error"],
                "missing or invalid bearer token: send the header Authorization: Bearer <token>"
            );
            if let Some(key) = key {
                assert!(r.json.get(key).is_some(), "{}", r.json);
            }
        }
    }
    // The probes need no token.
    for path in ["/livez", "/readyz"] {
        let r = https(s.addr, ca, "GET", path, None, "").await.unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.json, json!({"status": "ok"}));
    }

    // Plain HTTP to the TLS port gets no answer.
    let plain = storch::net::client()
        .get(format!("http://{}/livez", s.addr))
        .timeout(Duration::from_secs(10))
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
    // A client that does not trust the certificate refuses it.
    let stranger = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let refused = https(s.addr, &stranger.cert.pem(), "GET", "/livez", None, "").await;
    assert!(refused.is_err(), "{refused:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_also_works_without_tls_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let rt = crate::support::start(&dir.path().join("data")).await;
    let s = TestServer::start(rt, secured(None)).await;
    let c = storch::net::client();
    let r = c.get(s.url("/trident/v1/backend")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = c
        .get(s.url("/trident/v1/backend"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(get(&c, &s.url("/livez")).await.status, 200);
    s.stop().await;
}

// ---------------------------------------------------------------------------------------------
// The binary

#[test]
fn the_binary_refuses_a_non_loopback_address_without_tls_and_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (mut child, log) = spawn(&data, &["--address", "0.0.0.0"], &[]);
    let status = exit_status(&mut child);
    assert_eq!(status.code(), Some(2), "{status}");
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("refusing to listen on 0.0.0.0"), "{err}");
    assert!(
        err.contains("missing: --tls-cert, --tls-key, --auth-token-file"),
        "{err}"
    );
    assert!(err.contains("--insecure-listen"), "{err}");
    assert!(!data.exists(), "nothing was started");

    // TLS alone is not enough.
    let cert = make_cert(dir.path());
    let (mut child, log) = spawn(
        &data,
        &[
            "--address",
            "0.0.0.0",
            "--tls-cert",
            cert.cert_path.to_str().unwrap(),
            "--tls-key",
            cert.key_path.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(exit_status(&mut child).code(), Some(2));
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("missing: --auth-token-file"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_accepts_a_non_loopback_address_with_insecure_listen() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start_with(&data, &["--address", "0.0.0.0", "--insecure-listen"], &[]);
    let port = server
        .url
        .strip_prefix("http://0.0.0.0:")
        .unwrap_or_else(|| panic!("{}", server.url));
    let r = storch::net::client()
        .get(format!("http://127.0.0.1:{port}/livez"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    server.stop();
    let text = server.log();
    assert!(text.contains("INSECURE"), "{text}");
    assert!(
        text.contains("without TLS and without a bearer token"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_https_with_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cert = make_cert(dir.path());
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut server = Server::start_with(
        &data,
        &[
            "--tls-cert",
            cert.cert_path.to_str().unwrap(),
            "--tls-key",
            cert.key_path.to_str().unwrap(),
            "--auth-token-file",
            token_file.to_str().unwrap(),
        ],
        &[],
    );
    let addr: std::net::SocketAddr = server
        .url
        .strip_prefix("https://")
        .unwrap_or_else(|| panic!("{}", server.url))
        .parse()
        .unwrap();
    let ca = cert.cert_pem.as_str();
    let mut ready = false;
    for _ in 0..500 {
        let r = https(addr, ca, "GET", "/readyz", None, "").await.unwrap();
        if r.status == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(ready);
    let r = https(addr, ca, "GET", "/trident/v1/backend", Some(TOKEN), "")
        .await
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({"backends": []}));
    let r = https(addr, ca, "GET", "/trident/v1/backend", None, "")
        .await
        .unwrap();
    assert_eq!(r.status, 401);
    server.stop();
    let text = server.log();
    assert!(!text.contains(TOKEN), "the token was logged");
    assert!(!text.contains("INSECURE"), "{text}");
}

#[test]
fn the_binary_refuses_unusable_tls_and_token_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cert = make_cert(dir.path());
    let short = dir.path().join("short-token");
    std::fs::write(&short, "abc\n").unwrap();
    let (mut child, log) = spawn(&data, &["--auth-token-file", short.to_str().unwrap()], &[]);
    assert_eq!(exit_status(&mut child).code(), Some(1));
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("unusable token in --auth-token-file"), "{err}");
    assert!(err.contains("shorter than 16 bytes"), "{err}");
    assert!(!err.contains("abc\n"), "{err}");

    let missing = dir.path().join("nope.pem");
    let (mut child, log) = spawn(
        &data,
        &[
            "--tls-cert",
            missing.to_str().unwrap(),
            "--tls-key",
            cert.key_path.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(exit_status(&mut child).code(), Some(1));
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("could not set up TLS"), "{err}");
    assert!(err.contains("nope.pem"), "{err}");

    let (mut child, log) = spawn(
        &data,
        &["--tls-cert", cert.cert_path.to_str().unwrap()],
        &[],
    );
    assert_eq!(exit_status(&mut child).code(), Some(2));
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(err.contains("--tls-key is missing"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Slow clients

/// Reads until the server closes the connection; `None` if it is still open after 10 s.
async fn closed_by_server(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_stalled_handshakes_are_cut_off() {
    use tokio::io::AsyncWriteExt;

    let dir = tempfile::tempdir().unwrap();
    let rt = crate::support::start(&dir.path().join("data")).await;
    let options = storch::api::ServeOptions {
        header_read_timeout: Duration::from_millis(300),
        ..storch::api::ServeOptions::default()
    };
    let s = TestServer::start(rt, options).await;
    // Half a request head, then nothing.
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    stream
        .write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let got = closed_by_server(&mut stream)
        .await
        .expect("the server closes a connection whose headers never finish");
    let text = String::from_utf8_lossy(&got);
    assert!(!text.contains("200 OK"), "{text}");
    // A connection that never sends a byte.
    let mut idle = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    assert!(
        closed_by_server(&mut idle).await.is_some(),
        "the server closes a connection that sends nothing"
    );
    // A complete request on a fresh connection is still answered.
    let r = get(&storch::net::client(), &s.url("/livez")).await;
    assert_eq!(r.status, 200);
    s.stop().await;

    // A TLS client that never says hello.
    let cert = make_cert(dir.path());
    let rt = crate::support::start(&dir.path().join("data2")).await;
    let mut options = secured(Some(&cert));
    options.tls_handshake_timeout = Duration::from_millis(300);
    let s = TestServer::start(rt, options).await;
    let mut stream = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    assert!(
        closed_by_server(&mut stream).await.is_some(),
        "the server closes a stalled handshake"
    );
    s.stop().await;
}

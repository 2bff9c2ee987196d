//! The REST server in-process on 127.0.0.1:0 (plain or TLS, with or without a token), a small
//! HTTPS client that trusts a test certificate, and self-signed certificates made with rcgen.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::Value;
use storch::actors::{Core, CoreRuntime};
use storch::api::{AuthToken, RouterOptions, ServeOptions};

/// A token for tests (long enough to be accepted).
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// The REST server on a core, in this process.
pub struct TestServer {
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT` or `https://…`.
    pub url: String,
    runtime: Option<CoreRuntime>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    /// Serves `runtime`'s core with `options` on 127.0.0.1:0 (and stops it with the server).
    pub async fn start(runtime: CoreRuntime, options: ServeOptions) -> TestServer {
        let mut server = TestServer::serving(runtime.core(), options).await;
        server.runtime = Some(runtime);
        server
    }

    /// Serves `core` with `options` on 127.0.0.1:0; whoever started the core stops it.
    pub async fn serving(core: Core, options: ServeOptions) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let scheme = if options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(storch::api::serve_with(
            listener,
            core,
            options,
            async move {
                let _ = stop_rx.await;
            },
        ));
        TestServer {
            addr,
            url: format!("{scheme}://{addr}"),
            runtime: None,
            stop: Some(stop_tx),
            task: Some(task),
        }
    }

    /// A ready core on `dir`, served over plain HTTP without a token.
    pub async fn plain(dir: &Path) -> TestServer {
        let runtime = crate::support::start(dir).await;
        TestServer::start(runtime, ServeOptions::default()).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Signals shutdown and waits (at most 10 s) for the server to return, then stops the
    /// core.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the server stops within 10 s")
                .unwrap()
                .unwrap();
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown().await;
        }
    }
}

/// Options with a token (and TLS when `tls` is given).
pub fn secured(tls: Option<&TestCert>) -> ServeOptions {
    ServeOptions {
        router: RouterOptions {
            auth: Some(AuthToken::new(TOKEN).unwrap()),
        },
        tls: tls.map(|c| storch::api::tls::acceptor(&c.cert_path, &c.key_path).unwrap()),
        ..ServeOptions::default()
    }
}

/// A self-signed certificate for `localhost` and 127.0.0.1, written to `dir`.
pub struct TestCert {
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
    pub cert_pem: String,
}

pub fn make_cert(dir: &Path) -> TestCert {
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let cert_pem = made.cert.pem();
    let cert_path = dir.join("cert.pem");
    let key_path = dir.join("key.pem");
    std::fs::write(&cert_path, &cert_pem).unwrap();
    std::fs::write(&key_path, made.signing_key.serialize_pem()).unwrap();
    TestCert {
        cert_path,
        key_path,
        cert_pem,
    }
}

/// An answer: status, headers and body (JSON when it parses).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
    pub json: Value,
}

/// One HTTPS request to `addr` (a fresh connection), trusting only `ca_pem`.
pub async fn https(
    addr: SocketAddr,
    ca_pem: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> std::io::Result<Answer> {
    storch::net::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await?;
    let io = hyper_util::rt::TokioIo::new(tls);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let response = sender
        .send_request(req)
        .await
        .map_err(std::io::Error::other)?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes()
        .to_vec();
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Ok(Answer {
        status,
        headers,
        body,
        json,
    })
}

use rustls::pki_types::pem::PemObject;

/// A plain-HTTP JSON request with reqwest.
pub async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Answer {
    let mut req = client.request(method, url);
    if let Some(body) = body {
        req = req.body(body.to_string());
    }
    let response = req.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap().to_vec();
    let json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
        json,
    }
}

pub async fn get(client: &reqwest::Client, url: &str) -> Answer {
    call(client, reqwest::Method::GET, url, None).await
}

pub async fn post(client: &reqwest::Client, url: &str, body: Value) -> Answer {
    call(client, reqwest::Method::POST, url, Some(body)).await
}

pub async fn delete(client: &reqwest::Client, url: &str) -> Answer {
    call(client, reqwest::Method::DELETE, url, None).await
}

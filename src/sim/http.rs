//! The HTTP(S) server every simulator runs on: hyper 1 + hyper-util, HTTP/1.1, and
//! tokio-rustls (ring) with a self-signed certificate for `--tls`.
//!
//! Simulators see plain [`HttpRequest`] / [`HttpResponse`] values, never hyper types.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// A request as a simulator sees it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    /// The query string (without `?`), empty when there is none.
    pub query: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

/// A response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// Extra headers (e.g. `WWW-Authenticate`).
    pub headers: Vec<(&'static str, String)>,
}

impl HttpResponse {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        HttpResponse {
            status,
            content_type,
            body: body.into(),
            headers: Vec::new(),
        }
    }
}

pub type BoxFuture = Pin<Box<dyn Future<Output = HttpResponse> + Send>>;

/// What serves requests.
pub type Handler = Arc<dyn Fn(HttpRequest) -> BoxFuture + Send + Sync>;

/// The [`Handler`] that answers each request with `f(state, request)`.
pub fn handler<S, F, Fut>(state: Arc<S>, f: F) -> Handler
where
    S: Send + Sync + 'static,
    F: Fn(Arc<S>, HttpRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HttpResponse> + Send + 'static,
{
    Arc::new(move |req| Box::pin(f(state.clone(), req)))
}

/// The 401 answer of a simulator's HTML front door: Basic authentication in `realm`.
pub fn unauthorized(realm: &str) -> HttpResponse {
    let mut r = HttpResponse::new(
        401,
        "text/html",
        "<html><body>401 Unauthorized</body></html>",
    );
    r.headers
        .push(("WWW-Authenticate", format!("Basic realm=\"{realm}\"")));
    r
}

/// A self-signed certificate for the simulator's HTTPS, valid for `localhost`, `127.0.0.1`,
/// `::1` and any extra names given. The certificate is its own trust anchor: a client that
/// trusts its PEM verifies the server.
#[derive(Clone)]
pub struct SelfSigned {
    pub cert_pem: String,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
}

impl std::fmt::Debug for SelfSigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfSigned").finish_non_exhaustive()
    }
}

impl SelfSigned {
    pub fn generate(extra_names: &[String]) -> Result<SelfSigned, String> {
        let mut names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        for n in extra_names {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
        let ck = rcgen::generate_simple_self_signed(names).map_err(|e| e.to_string())?;
        Ok(SelfSigned {
            cert_pem: ck.cert.pem(),
            cert_der: ck.cert.der().to_vec(),
            key_der: ck.signing_key.serialize_der(),
        })
    }

    fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, String> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()));
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(self.cert_der.clone())], key)
            .map_err(|e| e.to_string())?;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }

    /// Writes the certificate (PEM) to `path` atomically.
    pub fn write_pem(&self, path: &Path) -> std::io::Result<()> {
        super::write_atomic(path, self.cert_pem.as_bytes())
    }
}

/// A running server; stops when dropped or on [`Server::stop`].
pub struct Server {
    addr: SocketAddr,
    tls: bool,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("tls", &self.tls)
            .finish()
    }
}

impl Server {
    /// Binds `addr` (port 0 picks one) and serves `handler`, over TLS with `cert` when given.
    pub async fn start(
        addr: SocketAddr,
        cert: Option<&SelfSigned>,
        handler: Handler,
    ) -> std::io::Result<Server> {
        Server::start_gated(addr, cert, handler, None).await
    }

    /// [`Server::start`] with a gate: while it holds `true` the server is "down": it closes
    /// every open connection and closes each new one as soon as it is accepted (before TLS),
    /// so clients see a connection failure; the port stays bound for when it turns `false`.
    pub async fn start_gated(
        addr: SocketAddr,
        cert: Option<&SelfSigned>,
        handler: Handler,
        gate: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> std::io::Result<Server> {
        let tls = match cert {
            Some(c) => Some(tokio_rustls::TlsAcceptor::from(
                c.server_config().map_err(std::io::Error::other)?,
            )),
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        let is_tls = tls.is_some();
        let task = tokio::spawn(async move {
            // Dropping the set (when this task ends or is aborted) aborts every connection.
            let mut conns = tokio::task::JoinSet::new();
            let (mut gate, mut gated) = match gate {
                Some(g) => (g, true),
                None => (tokio::sync::watch::channel(false).1, false),
            };
            loop {
                let accepted = tokio::select! {
                    r = listener.accept() => r,
                    _ = &mut stop_rx => break,
                    Some(_) = conns.join_next(), if !conns.is_empty() => continue,
                    r = gate.changed(), if gated => {
                        // A dropped sender leaves the gate where it was.
                        gated = r.is_ok();
                        if *gate.borrow() {
                            conns.abort_all();
                        }
                        continue;
                    }
                };
                let Ok((stream, _peer)) = accepted else {
                    continue;
                };
                if *gate.borrow() {
                    drop(stream);
                    continue;
                }
                let _ = stream.set_nodelay(true);
                let handler = handler.clone();
                let tls = tls.clone();
                conns.spawn(async move {
                    match tls {
                        Some(acceptor) => {
                            if let Ok(s) = acceptor.accept(stream).await {
                                serve(TokioIo::new(s), handler).await;
                            }
                        }
                        None => serve(TokioIo::new(stream), handler).await,
                    }
                });
            }
        });
        Ok(Server {
            addr,
            tls: is_tls,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` or `https://ADDR`.
    pub fn url(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.addr
        )
    }

    /// Stops accepting, closes every connection and waits for the server task.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn serve<I>(io: TokioIo<I>, handler: Handler)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let handler = handler.clone();
        async move {
            let method = req.method().as_str().to_string();
            let path = req.uri().path().to_string();
            let query = req.uri().query().unwrap_or_default().to_string();
            let authorization = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = match req.into_body().collect().await {
                Ok(b) => b.to_bytes().to_vec(),
                Err(_) => Vec::new(),
            };
            let out = handler(HttpRequest {
                method,
                path,
                query,
                authorization,
                body,
            })
            .await;
            let mut resp = hyper::Response::builder()
                .status(out.status)
                .header(hyper::header::CONTENT_TYPE, out.content_type);
            for (k, v) in out.headers {
                resp = resp.header(k, v);
            }
            Ok::<_, std::convert::Infallible>(
                resp.body(Full::new(Bytes::from(out.body)))
                    .unwrap_or_else(|_| hyper::Response::new(Full::new(Bytes::new()))),
            )
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service)
        .await;
}

/// Where `--tls` writes the certificate when `--cert-out` is not given: next to the state
/// file, else in the temp dir.
pub fn default_cert_path(state: Option<&Path>, tag: &str) -> PathBuf {
    match state {
        Some(s) => {
            let mut p = s.as_os_str().to_owned();
            p.push(".cert.pem");
            PathBuf::from(p)
        }
        None => {
            std::env::temp_dir().join(format!("storch-sim-{tag}-{}-cert.pem", std::process::id()))
        }
    }
}

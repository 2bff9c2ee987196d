//! Array simulators: protocol-faithful, stateful servers that drivers are tested against.
//!
//! - `body`: JSON request bodies checked field by field (the REST simulators).
//! - `http`: the shared HTTP(S) server (hyper 1, hyper-util, tokio-rustls) and the simulator's
//!   self-signed certificate.
//! - `ontap`: a ZAPI server (docs/wire-notes.md#the-zapi-simulator): SVM tunnelling, paging,
//!   real errno values, capacity accounting, snapshots, clones, qtrees and quotas, LUNs, igroups
//!   and maps, fault injection, latency and an fsynced state file.
//! - `solidfire`: an Element JSON-RPC server (docs/wire-notes.md#solidfire-element): accounts
//!   with CHAP secrets, volumes (deleted then purged, paged lists), QoS checked against the
//!   cluster, snapshots, async clones, volume access groups, fault injection, latency and an
//!   fsynced state file.
//! - `eseries`: a SANtricity Web Services Proxy with one E-Series array behind it
//!   (docs/wire-notes.md#the-e-series-simulator): registration and array passwords, pools,
//!   volumes, hosts, host groups, LUN mappings, the iSCSI target, expansion and volume copy
//!   jobs (each only when the array has the feature), fault injection (including "422 but
//!   created"), latency and an fsynced state file.
//! - `nexentastor`: a NexentaStor 5 NEF REST server (docs/wire-notes.md#the-nexentastor-simulator):
//!   login tokens that expire, pools, read-only volume groups, zvols, snapshots, clones and
//!   promote, iSCSI targets with CHAP, target and host groups, LUN mappings, 202 + job polling,
//!   offset/limit paging with `next` links, fault injection, latency, and a state file two
//!   instances share as an HA pair (with a control listener to take one down).
//!
//! Simulators run in-process from tests (`OntapSim::start` on `127.0.0.1:0`) or as the
//! `storch-sim` binary.

pub mod body;
pub mod cli;
pub mod eseries;
pub mod http;
pub mod nexentastor;
pub mod ontap;
pub mod solidfire;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use base64::Engine;
use serde::Serialize;
use serde::de::DeserializeOwned;

use self::http::{Handler, SelfSigned, Server};

/// Why a simulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("state file {path}: {msg}")]
    State { path: String, msg: String },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("TLS certificate: {0}")]
    Tls(String),
}

/// What every simulator keeps beside its protocol: its objects behind one lock (written to the
/// state file after each change, when it has one), its fault rules, and how many requests
/// named each API or method.
pub struct Store<S, F> {
    objects: Mutex<S>,
    fail: Mutex<Vec<F>>,
    calls: Mutex<BTreeMap<String, u64>>,
    path: Option<PathBuf>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<S: Serialize + Clone, F> Store<S, F> {
    pub fn new(objects: S, fail: Vec<F>, path: Option<PathBuf>) -> Store<S, F> {
        Store {
            objects: Mutex::new(objects),
            fail: Mutex::new(fail),
            calls: Mutex::new(BTreeMap::new()),
            path,
        }
    }

    /// The objects, locked: one request at a time changes them.
    pub fn lock(&self) -> MutexGuard<'_, S> {
        lock(&self.objects)
    }

    /// A copy of the objects.
    pub fn snapshot(&self) -> S {
        self.lock().clone()
    }

    /// Changes the objects directly (tests), then writes the state file.
    pub fn with<T>(&self, f: impl FnOnce(&mut S) -> T) -> T {
        let mut objects = self.lock();
        let out = f(&mut objects);
        let _ = self.persist(&objects);
        out
    }

    /// Writes `objects` to the state file, if there is one.
    pub fn persist(&self, objects: &S) -> std::io::Result<()> {
        match &self.path {
            Some(p) => persist_json(p, objects),
            None => Ok(()),
        }
    }

    pub fn fail_rules(&self) -> MutexGuard<'_, Vec<F>> {
        lock(&self.fail)
    }

    pub fn set_fail_rules(&self, rules: Vec<F>) {
        *lock(&self.fail) = rules;
    }

    /// Counts one request named `name`.
    pub fn count(&self, name: &str) {
        *lock(&self.calls).entry(name.to_string()).or_default() += 1;
    }

    /// How many requests named `name` so far.
    pub fn calls(&self, name: &str) -> u64 {
        lock(&self.calls).get(name).copied().unwrap_or(0)
    }

    /// Every name counted so far, with its count.
    pub fn call_counts(&self) -> BTreeMap<String, u64> {
        lock(&self.calls).clone()
    }
}

/// The `Authorization` header value a simulator expects: HTTP Basic with its credentials.
pub fn basic_auth(username: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"))
    )
}

/// A simulator's listening server, with its certificate when it serves TLS.
pub struct Listening {
    server: Server,
    cert: Option<SelfSigned>,
    cert_path: Option<PathBuf>,
}

impl Listening {
    /// Serves `handler` on `listen`, over TLS with `tls` (the certificate and where it was
    /// written) when given.
    pub async fn start(
        listen: SocketAddr,
        tls: Option<(SelfSigned, PathBuf)>,
        handler: Handler,
    ) -> Result<Listening, SimError> {
        Listening::start_gated(listen, tls, handler, None).await
    }

    /// [`Listening::start`] behind a gate ([`Server::start_gated`]: `true` = down).
    pub async fn start_gated(
        listen: SocketAddr,
        tls: Option<(SelfSigned, PathBuf)>,
        handler: Handler,
        gate: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> Result<Listening, SimError> {
        let (cert, cert_path) = tls.unzip();
        let server = Server::start_gated(listen, cert.as_ref(), handler, gate)
            .await
            .map_err(|source| SimError::Listen {
                addr: listen,
                source,
            })?;
        Ok(Listening {
            server,
            cert,
            cert_path,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// `http(s)://ADDR`.
    pub fn url(&self) -> String {
        self.server.url()
    }

    pub fn is_tls(&self) -> bool {
        self.cert.is_some()
    }

    /// The certificate (PEM) of a `--tls` simulator, for `trustedCACertificate`.
    pub fn ca_pem(&self) -> Option<&str> {
        self.cert.as_ref().map(|c| c.cert_pem.as_str())
    }

    pub fn cert_path(&self) -> Option<&Path> {
        self.cert_path.as_deref()
    }

    pub async fn stop(self) {
        self.server.stop().await;
    }
}

/// What a started simulator offers the `storch-sim` binary ([`cli::run`]): its name, where it
/// listens, what else it announces, and how it stops.
pub trait Simulator: Sized {
    /// The name the binary prints: `storch-sim NAME listening on URL`.
    const NAME: &'static str;

    /// The listener of its API.
    fn listening(&self) -> &Listening;

    /// Lines printed on stdout after the `listening on` line (none by default).
    fn more_lines(&self) -> Vec<String> {
        Vec::new()
    }

    /// Stops every listener it has.
    fn shut_down(self) -> impl std::future::Future<Output = ()> + Send;
}

/// A JSON answer of a REST simulator (an empty body for None).
pub fn json_response(status: u16, body: Option<&serde_json::Value>) -> http::HttpResponse {
    match body {
        Some(b) => http::HttpResponse::new(status, "application/json", b.to_string()),
        None => http::HttpResponse::new(status, "application/json", Vec::new()),
    }
}

/// Writes a simulator's state as pretty JSON, atomically and durably ([`write_atomic`]).
pub fn persist_json<T: Serialize>(path: &Path, state: &T) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(state).map_err(std::io::Error::other)?;
    write_atomic(path, &bytes)
}

/// Refuses a state file written in another format than the one this simulator reads.
pub fn check_format(found: u32, supported: u32) -> Result<(), String> {
    if found == supported {
        Ok(())
    } else {
        Err(format!("format {found} is not supported"))
    }
}

/// Loads a simulator's state file, or makes a fresh state with `fresh` and writes it when the
/// file does not exist. `what` names the file kind in errors; `check` refuses a loaded state
/// (its format version).
pub fn load_or_create<T: Serialize + DeserializeOwned>(
    path: &Path,
    what: &str,
    fresh: impl FnOnce() -> T,
    check: impl FnOnce(&T) -> Result<(), String>,
) -> Result<T, SimError> {
    let err = |msg: String| SimError::State {
        path: path.display().to_string(),
        msg,
    };
    match std::fs::read(path) {
        Ok(bytes) => {
            let t: T = serde_json::from_slice(&bytes)
                .map_err(|e| err(format!("not {what} state file: {e}")))?;
            check(&t).map_err(err)?;
            Ok(t)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let t = fresh();
            persist_json(path, &t).map_err(|e| err(e.to_string()))?;
            Ok(t)
        }
        Err(e) => Err(err(e.to_string())),
    }
}

/// The certificate of a `--tls` simulator (`None` without `--tls`), written to `cert_out`
/// (default next to the state file, else in the temp dir): valid for the listen address and
/// `extra` names too.
pub fn tls_certificate(
    tls: bool,
    listen: SocketAddr,
    extra: &[String],
    cert_out: Option<&Path>,
    state: Option<&Path>,
    tag: &str,
) -> Result<Option<(SelfSigned, PathBuf)>, SimError> {
    if !tls {
        return Ok(None);
    }
    let mut names = extra.to_vec();
    if !listen.ip().is_unspecified() {
        names.push(listen.ip().to_string());
    }
    let cert = SelfSigned::generate(&names).map_err(SimError::Tls)?;
    let path = cert_out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| http::default_cert_path(state, tag));
    cert.write_pem(&path)
        .map_err(|e| SimError::Tls(format!("cannot write {}: {e}", path.display())))?;
    Ok(Some((cert, path)))
}

/// Writes `bytes` to `path` atomically and durably: `<path>.tmp`, fsync, rename, fsync of the
/// directory. A crash leaves either the old or the new file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// The request part of a simulator's `--fail` rule: `[METHOD@]PATH` and a rate. PATH is
/// `/`-separated segments where `*` matches one segment and a final `**` any number.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultTarget {
    pub method: Option<String>,
    pub path: Vec<String>,
    /// 0.0 to 1.0.
    pub rate: f64,
}

impl FaultTarget {
    /// Parses `target` (`[METHOD@]PATH`) and `rate`; `prefix` gives the segments that go
    /// before PATH (given PATH without its outer slashes). Errors say what is wrong.
    pub fn parse(
        target: &str,
        rate: &str,
        prefix: impl FnOnce(&str) -> Vec<String>,
    ) -> Result<FaultTarget, &'static str> {
        let (method, path) = match target.split_once('@') {
            Some((m, p)) => {
                if !matches!(m, "GET" | "POST" | "DELETE" | "PUT") {
                    return Err("METHOD is GET, POST, PUT or DELETE");
                }
                (Some(m.to_string()), p)
            }
            None => (None, target),
        };
        let path = path.trim_matches('/');
        if path.is_empty() {
            return Err("empty path");
        }
        let mut segs = prefix(path);
        segs.extend(path.split('/').map(str::to_string));
        if segs.iter().rev().skip(1).any(|s| s == "**") {
            return Err("** may only end the path");
        }
        let rate: f64 = rate.parse().map_err(|_| "rate is not a number")?;
        if !(0.0..=1.0).contains(&rate) {
            return Err("rate is not between 0 and 1");
        }
        Ok(FaultTarget {
            method,
            path: segs,
            rate,
        })
    }

    /// Whether the rule names this request (`segs`: its path, split).
    pub fn matches<S: AsRef<str>>(&self, method: &str, segs: &[S]) -> bool {
        if self.method.as_deref().is_some_and(|m| m != method) {
            return false;
        }
        let mut i = 0;
        for p in &self.path {
            match p.as_str() {
                "**" => return true,
                "*" if i < segs.len() => {}
                p if segs.get(i).is_some_and(|s| s.as_ref() == p) => {}
                _ => return false,
            }
            i += 1;
        }
        i == segs.len()
    }

    /// Whether the rule names this request and its dice say it fails this time.
    pub fn fires<S: AsRef<str>>(&self, method: &str, segs: &[S]) -> bool {
        self.matches(method, segs) && rand::random::<f64>() < self.rate
    }
}

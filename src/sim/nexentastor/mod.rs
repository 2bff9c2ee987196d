//! A stateful NexentaStor 5 REST (NEF API) simulator
//! (docs/wire-notes.md#the-nexentastor-simulator), built from the wire description rather
//! than from any driver.
//!
//! - `mod.rs` (this file): the server, login and bearer tokens, routing, faults, latency,
//!   the shared state file of an HA pair, and the control listener (down/up, token expiry).
//! - `api/`: the resources, one file per object family behind one routing table.
//! - `state.rs`: the appliance (plain data, also the `--state` file format).
//!
//! Transport: JSON over HTTP(S) at `/`; `POST /auth/login` gives a token, every other request
//! needs `Authorization: Bearer <token>` (401 `EAUTH` without, with an unknown or an expired
//! one). Errors are HTTP statuses with `{"name", "message", "code"}`.
//!
//! **HA.** Two instances started with the same `--state` file are the two nodes of one
//! appliance: each request takes an exclusive `flock` on `<state>.lock`, reads the state file,
//! runs, writes it back (temp file, fsync, rename, directory fsync) and unlocks, so each node
//! sees the other's changes at once. Tokens are each node's own (a client that fails over logs
//! in again); jobs are in the shared state (either node answers a poll).
//!
//! **Down.** `--down` starts an instance down: its API port stays bound but closes every
//! connection as soon as it is accepted (before TLS), so clients see a connection failure.
//! The control listener (plain HTTP, `--control ADDR`, printed as the second stdout line)
//! serves `POST /__sim/down`, `POST /__sim/up`, `POST /__sim/expire-tokens` and
//! `GET /__sim/status`; it is for tests, outside the NEF API.

pub mod api;
pub mod state;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use self::api::{Fail, Tuning, codes};
pub use self::state::{Appliance, VolumeGroupSpec};
pub use super::SimError;
use super::http::{HttpRequest, HttpResponse};
use super::{FaultTarget, Listening, Store, json_response};

pub const DEFAULT_USERNAME: &str = "admin";
pub const DEFAULT_PASSWORD: &str = "nexenta123";
/// Volume groups of a new appliance.
pub const DEFAULT_VOLUME_GROUPS: &str = "tank/csi:1TiB";
/// How long a token is valid after login.
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(3600);
/// The status of an injected failure when the rule names none.
pub const DEFAULT_FAIL_STATUS: u16 = 500;

/// An injected failure: `[METHOD@]PATH:RATE[:STATUS[/CODE]]`. PATH is an API path without
/// the leading `/` (`storage/volumes`, `storage/volumes/*`, `san/**`); `*` matches one
/// segment (an escaped id), a final `**` any number. The code defaults by status: 401
/// `EAUTH`, 404 `ENOENT`, 409 `EEXIST`, 5xx `EBUSY`, other 4xx `EINVAL`.
#[derive(Debug, Clone, PartialEq)]
pub struct FailRule {
    pub target: FaultTarget,
    pub status: u16,
    pub code: String,
}

impl FailRule {
    pub fn parse(s: &str) -> Result<FailRule, String> {
        let bad = |why: &str| {
            format!("--fail {s:?}: {why} (expected [METHOD@]PATH:RATE[:STATUS[/CODE]])")
        };
        let mut parts = s.trim().split(':');
        let target = parts.next().unwrap_or_default();
        let rate = parts.next().ok_or_else(|| bad("missing rate"))?;
        let status = parts.next();
        if parts.next().is_some() {
            return Err(bad("too many fields"));
        }
        let target = FaultTarget::parse(target, rate, |_| Vec::new()).map_err(bad)?;
        let (status, code) = match status.map(|s| s.split_once('/').unwrap_or((s, ""))) {
            None => (DEFAULT_FAIL_STATUS, ""),
            Some((st, code)) => {
                let st: u16 = st
                    .parse()
                    .ok()
                    .filter(|c| (400..=599).contains(c))
                    .ok_or_else(|| bad("STATUS is an HTTP status from 400 to 599"))?;
                if !code.is_empty() && !code.chars().all(|c| c.is_ascii_uppercase()) {
                    return Err(bad("CODE is upper-case letters, such as EBUSY"));
                }
                (st, code)
            }
        };
        let code = match (code, status) {
            ("", 401) => codes::EAUTH,
            ("", 404) => codes::ENOENT,
            ("", 409) => codes::EEXIST,
            ("", 500..) => codes::EBUSY,
            ("", _) => codes::EINVAL,
            (c, _) => c,
        };
        Ok(FailRule {
            target,
            status,
            code: code.to_string(),
        })
    }
}

/// How to start a simulator.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub listen: SocketAddr,
    /// The control listener (plain HTTP).
    pub control: SocketAddr,
    pub tls: bool,
    pub cert_out: Option<PathBuf>,
    /// Volume groups (and their pools) of a new appliance.
    pub volume_groups: Vec<VolumeGroupSpec>,
    pub latency: Duration,
    pub fail: Vec<FailRule>,
    pub state: Option<PathBuf>,
    pub username: String,
    pub password: String,
    pub token_ttl: Duration,
    /// Start down (closing every connection).
    pub down: bool,
    pub tuning: Tuning,
}

impl Default for SimOptions {
    fn default() -> Self {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        SimOptions {
            listen: loopback,
            control: loopback,
            tls: false,
            cert_out: None,
            volume_groups: VolumeGroupSpec::parse_list(DEFAULT_VOLUME_GROUPS)
                .expect("default volume groups parse"),
            latency: Duration::ZERO,
            fail: Vec::new(),
            state: None,
            username: DEFAULT_USERNAME.into(),
            password: DEFAULT_PASSWORD.into(),
            token_ttl: DEFAULT_TOKEN_TTL,
            down: false,
            tuning: Tuning::default(),
        }
    }
}

struct Shared {
    store: Store<Appliance, FailRule>,
    state: Option<PathBuf>,
    username: String,
    password: String,
    token_ttl: Duration,
    /// This node's tokens and when each expires.
    tokens: Mutex<HashMap<String, Instant>>,
    latency: Duration,
    tuning: Tuning,
    down: tokio::sync::watch::Sender<bool>,
}

/// A running simulator. Stops when dropped.
pub struct NexentaSim {
    listening: Listening,
    control: Listening,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for NexentaSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NexentaSim")
            .field("url", &self.listening.url())
            .finish_non_exhaustive()
    }
}

fn state_error(p: &Path, e: impl std::fmt::Display) -> SimError {
    SimError::State {
        path: p.display().to_string(),
        msg: e.to_string(),
    }
}

fn check_format(a: &Appliance) -> Result<(), String> {
    super::check_format(a.format, state::FORMAT)
}

/// The exclusive lock an HA pair takes around each request (`<state>.lock`).
struct FileLock(std::fs::File);

impl FileLock {
    fn acquire(state: &Path) -> std::io::Result<FileLock> {
        let mut p = state.as_os_str().to_owned();
        p.push(".lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(PathBuf::from(p))?;
        rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(FileLock(f))
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.0, rustix::fs::FlockOperation::Unlock);
    }
}

fn shared(opts: &SimOptions) -> Result<Shared, SimError> {
    let appliance = match &opts.state {
        Some(p) => {
            let _lock = FileLock::acquire(p).map_err(|e| state_error(p, e))?;
            super::load_or_create(
                p,
                "a NexentaStor simulator",
                || Appliance::new(&opts.volume_groups),
                check_format,
            )?
        }
        None => Appliance::new(&opts.volume_groups),
    };
    Ok(Shared {
        store: Store::new(appliance, opts.fail.clone(), opts.state.clone()),
        state: opts.state.clone(),
        username: opts.username.clone(),
        password: opts.password.clone(),
        token_ttl: opts.token_ttl,
        tokens: Mutex::new(HashMap::new()),
        latency: opts.latency,
        tuning: opts.tuning,
        down: tokio::sync::watch::channel(opts.down).0,
    })
}

impl NexentaSim {
    /// Loads or creates the appliance and starts serving (and the control listener).
    pub async fn start(opts: SimOptions) -> Result<NexentaSim, SimError> {
        let shared = Arc::new(shared(&opts)?);
        let tls = super::tls_certificate(
            opts.tls,
            opts.listen,
            &[],
            opts.cert_out.as_deref(),
            opts.state.as_deref(),
            "nexentastor",
        )?;
        let handler = super::http::handler(shared.clone(), |shared, req| async move {
            handle(&shared, req).await
        });
        let gate = Some(shared.down.subscribe());
        let listening = Listening::start_gated(opts.listen, tls, handler, gate).await?;
        let switches = super::http::handler(shared.clone(), |shared, req| async move {
            control(&shared, &req)
        });
        let control = Listening::start(opts.control, None, switches).await?;
        Ok(NexentaSim {
            listening,
            control,
            shared,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.listening.addr()
    }

    /// `http(s)://ADDR`.
    pub fn url(&self) -> String {
        self.listening.url()
    }

    /// `http://ADDR` of the control listener.
    pub fn control_url(&self) -> String {
        self.control.url()
    }

    /// The certificate (PEM) of a `--tls` simulator.
    pub fn ca_pem(&self) -> Option<&str> {
        self.listening.ca_pem()
    }

    pub fn cert_path(&self) -> Option<&Path> {
        self.listening.cert_path()
    }

    /// A copy of the appliance as this node last read or wrote it.
    pub fn appliance(&self) -> Appliance {
        self.shared.store.snapshot()
    }

    /// Takes the API down (every connection closed) or up again.
    pub fn set_down(&self, down: bool) {
        self.shared.down.send_replace(down);
    }

    pub fn set_fail_rules(&self, rules: Vec<FailRule>) {
        self.shared.store.set_fail_rules(rules);
    }

    /// How many requests reached a route so far, named `METHOD PATH` as in the routing table
    /// (`POST storage/volumes`, `GET jobStatus/*`, `POST auth/login`).
    pub fn calls(&self, name: &str) -> u64 {
        self.shared.store.calls(name)
    }

    pub async fn stop(self) {
        self.listening.stop().await;
        self.control.stop().await;
    }
}

impl super::Simulator for NexentaSim {
    const NAME: &'static str = "nexentastor";

    fn listening(&self) -> &Listening {
        &self.listening
    }

    /// The control listener's address, on the second line.
    fn more_lines(&self) -> Vec<String> {
        vec![format!(
            "storch-sim {} control on {}",
            Self::NAME,
            self.control_url()
        )]
    }

    async fn shut_down(self) {
        self.stop().await;
    }
}

fn fail_response(f: &Fail) -> HttpResponse {
    json_response(f.status, Some(&f.body()))
}

/// The control listener: test-only switches outside the NEF API.
fn control(shared: &Shared, req: &HttpRequest) -> HttpResponse {
    match (req.method.as_str(), req.path.trim_end_matches('/')) {
        ("POST", "/__sim/down") => {
            shared.down.send_replace(true);
        }
        ("POST", "/__sim/up") => {
            shared.down.send_replace(false);
        }
        ("POST", "/__sim/expire-tokens") => {
            super::lock(&shared.tokens).clear();
        }
        ("GET", "/__sim/status") => {}
        _ => return fail_response(&api::not_found("control path", &req.path)),
    }
    let tokens = super::lock(&shared.tokens).len();
    json_response(
        200,
        Some(&json!({"down": *shared.down.borrow(), "tokens": tokens})),
    )
}

/// Splits and decodes a request path; drops an API version segment (`v1.2.6`).
fn segments(path: &str) -> Result<Vec<String>, Fail> {
    let mut segs = path
        .trim_matches('/')
        .split('/')
        .map(|s| api::decode(s, false))
        .collect::<Result<Vec<_>, _>>()?;
    if segs.len() > 1 && api::is_version(&segs[0]) {
        segs.remove(0);
    }
    Ok(segs)
}

fn login(shared: &Shared, body: &[u8]) -> HttpResponse {
    let parsed: Result<Value, _> = serde_json::from_slice(body);
    let creds = parsed.ok().and_then(|v| {
        let m = v.as_object()?;
        if m.keys().any(|k| k != "username" && k != "password") {
            return None;
        }
        Some((
            m.get("username")?.as_str()?.to_string(),
            m.get("password")?.as_str()?.to_string(),
        ))
    });
    let Some((user, password)) = creds else {
        return fail_response(&api::bad_arg(
            "login takes a JSON object with the strings username and password",
        ));
    };
    if user != shared.username || password != shared.password {
        return fail_response(&Fail::new(codes::EAUTH, "wrong username or password"));
    }
    let token = format!("{:032x}", rand::random::<u128>());
    let mut tokens = super::lock(&shared.tokens);
    let now = Instant::now();
    tokens.retain(|_, exp| *exp > now);
    tokens.insert(token.clone(), now + shared.token_ttl);
    json_response(200, Some(&json!({"token": token})))
}

fn authorized(shared: &Shared, req: &HttpRequest) -> bool {
    let Some(token) = req
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
    else {
        return false;
    };
    super::lock(&shared.tokens)
        .get(token.trim())
        .is_some_and(|exp| *exp > Instant::now())
}

async fn handle(shared: &Shared, req: HttpRequest) -> HttpResponse {
    if !shared.latency.is_zero() {
        tokio::time::sleep(shared.latency).await;
    }
    let segs = match segments(&req.path) {
        Ok(s) => s,
        Err(f) => return fail_response(&f),
    };
    if let Some(f) = injected(shared, &req, &segs) {
        return fail_response(&f);
    }
    if segs.join("/") == api::LOGIN {
        shared
            .store
            .count(&format!("{} {}", req.method, api::LOGIN));
        if req.method != "POST" {
            return fail_response(&Fail {
                status: 405,
                ..api::bad_arg("auth/login takes POST")
            });
        }
        return login(shared, &req.body);
    }
    let (route, args) = match api::resolve(&req.method, &segs) {
        Ok(r) => r,
        Err(other_method) => {
            shared.store.count(&format!("{} ?", req.method));
            if other_method {
                return fail_response(&Fail {
                    status: 405,
                    ..api::bad_arg(format!("{} is not allowed on {}", req.method, req.path))
                });
            }
            return fail_response(&api::not_found("path", &req.path));
        }
    };
    shared
        .store
        .count(&format!("{} {}", req.method, route.path));
    if !authorized(shared, &req) {
        return fail_response(&Fail::new(
            codes::EAUTH,
            "not logged in: log in at /auth/login and send Authorization: Bearer <token>",
        ));
    }
    let (status, body) = match respond(shared, &req, route, args) {
        Ok(answer) => answer,
        Err(f) => (f.status, Some(f.body())),
    };
    json_response(status, body.as_ref())
}

/// The failure of the first `--fail` rule that names the request and fires.
fn injected(shared: &Shared, req: &HttpRequest, segs: &[String]) -> Option<Fail> {
    let rules = shared.store.fail_rules();
    let r = rules.iter().find(|r| r.target.fires(&req.method, segs))?;
    Some(Fail {
        status: r.status,
        code: r.code.clone(),
        message: format!(
            "{} {}: injected failure (storch-sim --fail)",
            req.method, req.path
        ),
    })
}

/// Answers one authenticated request for `route`.
fn respond(
    shared: &Shared,
    req: &HttpRequest,
    route: &'static api::Route,
    args: Vec<String>,
) -> api::R {
    let body: Option<Value> = if req.body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(
            serde_json::from_slice(&req.body)
                .map_err(|e| api::bad_arg(format!("the request body is not JSON: {e}")))?,
        )
    };
    let query = api::Query::parse(&req.query)?;
    let mut a = shared.store.lock();
    let _lock = match &shared.state {
        Some(p) => {
            let lock = FileLock::acquire(p).map_err(|e| persist_fail(&e))?;
            *a = reload(p).map_err(|e| persist_fail(&e))?;
            Some(lock)
        }
        None => None,
    };
    let mut ctx = api::Ctx {
        a: &mut a,
        tuning: shared.tuning,
        dirty: false,
    };
    let out = (route.run)(
        &mut ctx,
        &api::Req {
            args,
            query: &query,
            body: body.as_ref(),
            path: &req.path,
        },
    );
    if ctx.dirty {
        shared.store.persist(&a).map_err(|e| persist_fail(&e))?;
    }
    out
}

fn persist_fail(e: &dyn std::fmt::Display) -> Fail {
    Fail {
        status: 503,
        code: "EIO".into(),
        message: format!("simulator could not read or write its state: {e}"),
    }
}

/// The state file as the pair last wrote it.
fn reload(p: &Path) -> Result<Appliance, String> {
    let bytes = std::fs::read(p).map_err(|e| e.to_string())?;
    let a: Appliance = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    check_format(&a)?;
    Ok(a)
}

//! A stateful SANtricity Web Services Proxy simulator with one E-Series array behind it
//! (docs/wire-notes.md#the-e-series-simulator), built from the wire description rather than
//! from any driver.
//!
//! - `mod.rs` (this file): the server, Basic auth, routing, the array-scoped checks, faults,
//!   latency, persistence.
//! - `api/`: the resources, one file per object family behind one routing table.
//! - `state.rs`: the proxy and its array (plain data, also the `--state` file format).
//!
//! Transport: REST under `/devmgr/v2/` (a trailing slash allowed on every path), HTTP Basic
//! or 401, JSON bodies; `GET /devmgr/utils/about` needs no credentials. Errors are HTTP
//! statuses with `{"errorMessage", "localizedMessage", "retcode", "codeType"}`: 404 for an
//! unknown system id, path or ref, 422 for a refused request, 424 when the array is offline or
//! its registration unreachable, 422 `authFailPassword` while the proxy's stored array password
//! is wrong, 400 for a body that is not JSON, 405 for a method a path does not have.
//!
//! Faults (`--fail [METHOD@]PATH:RATE[:STATUS[/after|/untagged]]`) answer an error before the
//! request runs, or after it ran (`/after`: the proxy's "422 but created" habit), or after a
//! volume create that dropped its `metaTags` (`/untagged`). With a state file every request
//! that changed something is written (temp file, fsync, rename, fsync of the directory) before
//! the answer is sent.

pub mod api;
pub mod state;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

pub use self::api::{Fail, Tuning, retcodes};
pub use self::state::{ArraySpec, Features, PoolSpec, Proxy};
pub use super::SimError;
use super::http::{HttpRequest, HttpResponse};
use super::{FaultTarget, Listening, Store, json_response};

pub const DEFAULT_USERNAME: &str = "admin";
pub const DEFAULT_PASSWORD: &str = "eseries123";
/// Pools of a new array.
pub const DEFAULT_POOLS: &str = "pool_ssd:ssd:2TiB:raid6,pool_hdd:hdd:10TiB:raidDiskPool";
/// Management addresses of controllers A and B.
pub const DEFAULT_CONTROLLERS: &str = "10.0.0.10,10.0.0.11";
/// iSCSI portal addresses.
pub const DEFAULT_PORTALS: &str = "10.0.1.10,10.0.1.11";
/// The status of an injected failure when the rule names none.
pub const DEFAULT_FAIL_STATUS: u16 = 424;

/// When an injected failure answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Instead of the request: nothing changes.
    Before,
    /// After the request ran and changed the array (`/after`).
    After,
    /// After a volume create that dropped its `metaTags` (`/untagged`).
    Untagged,
}

/// An injected failure: `[METHOD@]PATH:RATE[:STATUS[/after|/untagged]]`. PATH is below
/// `/devmgr/v2/storage-systems/{id}/` (e.g. `volumes`, `volumes/*/expand`) unless it starts with
/// `storage-systems` or `**` (then below `/devmgr/v2/`); `*` matches one segment, a final `**`
/// any number.
#[derive(Debug, Clone, PartialEq)]
pub struct FailRule {
    pub target: FaultTarget,
    pub status: u16,
    pub mode: FailMode,
}

impl FailRule {
    pub fn parse(s: &str) -> Result<FailRule, String> {
        let bad = |why: &str| {
            format!("--fail {s:?}: {why} (expected [METHOD@]PATH:RATE[:STATUS[/after|/untagged]])")
        };
        let mut parts = s.trim().split(':');
        let target = parts.next().unwrap_or_default();
        let rate = parts.next().ok_or_else(|| bad("missing rate"))?;
        let status = parts.next();
        if parts.next().is_some() {
            return Err(bad("too many fields"));
        }
        let target = FaultTarget::parse(target, rate, |path| {
            if path.starts_with("storage-systems") || path.starts_with("**") {
                Vec::new()
            } else {
                vec!["storage-systems".into(), "*".into()]
            }
        })
        .map_err(bad)?;
        let (status, mode) = match status.map(|s| s.split_once('/').unwrap_or((s, ""))) {
            None => (DEFAULT_FAIL_STATUS, FailMode::Before),
            Some((code, mode)) => {
                let code: u16 = code
                    .parse()
                    .ok()
                    .filter(|c| (400..=599).contains(c))
                    .ok_or_else(|| bad("STATUS is an HTTP status from 400 to 599"))?;
                let mode = match mode {
                    "" => FailMode::Before,
                    "after" => FailMode::After,
                    "untagged" => FailMode::Untagged,
                    _ => return Err(bad("the status takes /after or /untagged")),
                };
                (code, mode)
            }
        };
        Ok(FailRule {
            target,
            status,
            mode,
        })
    }
}

/// How to start a simulator.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub listen: SocketAddr,
    pub tls: bool,
    pub cert_out: Option<PathBuf>,
    pub array: ArraySpec,
    pub latency: Duration,
    pub fail: Vec<FailRule>,
    pub state: Option<PathBuf>,
    pub username: String,
    pub password: String,
    pub tuning: Tuning,
}

fn list(s: &str) -> Vec<String> {
    s.split(',').map(str::to_string).collect()
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            cert_out: None,
            array: ArraySpec {
                pools: PoolSpec::parse_list(DEFAULT_POOLS).expect("default pools parse"),
                controllers: list(DEFAULT_CONTROLLERS),
                portals: list(DEFAULT_PORTALS),
                password: String::new(),
                offline: false,
                features: Features::ALL,
                host_groups: Vec::new(),
            },
            latency: Duration::ZERO,
            fail: Vec::new(),
            state: None,
            username: DEFAULT_USERNAME.into(),
            password: DEFAULT_PASSWORD.into(),
            tuning: Tuning::default(),
        }
    }
}

struct Shared {
    store: Store<Proxy, FailRule>,
    auth: String,
    latency: Duration,
    tuning: Tuning,
}

/// A running simulator. Stops when dropped.
pub struct EseriesSim {
    listening: Listening,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EseriesSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EseriesSim")
            .field("url", &self.listening.url())
            .finish_non_exhaustive()
    }
}

fn shared(opts: &SimOptions) -> Result<Shared, SimError> {
    let proxy = match &opts.state {
        Some(p) => {
            let mut proxy = super::load_or_create(
                p,
                "an E-Series simulator",
                || Proxy::new(&opts.array),
                |c: &Proxy| super::check_format(c.format, state::FORMAT),
            )?;
            proxy.apply(&opts.array);
            super::persist_json(p, &proxy).map_err(|e| SimError::State {
                path: p.display().to_string(),
                msg: e.to_string(),
            })?;
            proxy
        }
        None => Proxy::new(&opts.array),
    };
    Ok(Shared {
        store: Store::new(proxy, opts.fail.clone(), opts.state.clone()),
        auth: super::basic_auth(&opts.username, &opts.password),
        latency: opts.latency,
        tuning: opts.tuning,
    })
}

impl EseriesSim {
    /// Loads or creates the proxy and its array and starts serving.
    pub async fn start(opts: SimOptions) -> Result<EseriesSim, SimError> {
        let shared = Arc::new(shared(&opts)?);
        let tls = super::tls_certificate(
            opts.tls,
            opts.listen,
            &[],
            opts.cert_out.as_deref(),
            opts.state.as_deref(),
            "eseries",
        )?;
        let handler = super::http::handler(shared.clone(), |shared, req| async move {
            handle(&shared, req).await
        });
        let listening = Listening::start(opts.listen, tls, handler).await?;
        Ok(EseriesSim { listening, shared })
    }

    pub fn addr(&self) -> SocketAddr {
        self.listening.addr()
    }

    /// `http(s)://ADDR`.
    pub fn url(&self) -> String {
        self.listening.url()
    }

    /// The certificate (PEM) of a `--tls` simulator.
    pub fn ca_pem(&self) -> Option<&str> {
        self.listening.ca_pem()
    }

    pub fn cert_path(&self) -> Option<&Path> {
        self.listening.cert_path()
    }

    /// A copy of the proxy and its array.
    pub fn proxy(&self) -> Proxy {
        self.shared.store.snapshot()
    }

    /// Changes the proxy or the array directly (tests); persisted when there is a state file.
    pub fn with_proxy<T>(&self, f: impl FnOnce(&mut Proxy) -> T) -> T {
        self.shared.store.with(f)
    }

    pub fn set_fail_rules(&self, rules: Vec<FailRule>) {
        self.shared.store.set_fail_rules(rules);
    }

    /// How many requests reached a route so far, named `METHOD PATH` as in the routing table
    /// (`POST volumes`, `GET volumes/*`, `POST storage-systems`).
    pub fn calls(&self, name: &str) -> u64 {
        self.shared.store.calls(name)
    }

    pub async fn stop(self) {
        self.listening.stop().await;
    }
}

impl super::Simulator for EseriesSim {
    const NAME: &'static str = "eseries";

    fn listening(&self) -> &Listening {
        &self.listening
    }

    async fn shut_down(self) {
        self.stop().await;
    }
}

fn fail_response(f: &Fail) -> HttpResponse {
    json_response(f.status, Some(&f.body()))
}

/// The proxy's own id in `about`: the array WWN's first 32 digits as a UUID.
fn proxy_id(p: &Proxy) -> String {
    let w = p.array.wwn.to_lowercase();
    format!(
        "{}-{}-{}-{}-{}",
        &w[0..8],
        &w[8..12],
        &w[12..16],
        &w[16..20],
        &w[20..32]
    )
}

async fn handle(shared: &Shared, req: HttpRequest) -> HttpResponse {
    let path = req.path.trim_end_matches('/');
    if path == "/devmgr/utils/about" {
        if req.method != "GET" {
            return HttpResponse::new(405, "text/plain", "Method Not Allowed");
        }
        let id = proxy_id(&shared.store.lock());
        return json_response(200, Some(&api::system_about(&id)));
    }
    let Some(rest) = path.strip_prefix("/devmgr/v2/") else {
        return fail_response(&api::not_found("path", &req.path));
    };
    if req.authorization.as_deref() != Some(shared.auth.as_str()) {
        return super::http::unauthorized("SANtricity Web Services");
    }
    if !shared.latency.is_zero() {
        tokio::time::sleep(shared.latency).await;
    }
    let segs: Vec<&str> = rest.split('/').collect();
    let (status, body) = respond(shared, &req, &segs);
    json_response(status, body.as_ref())
}

/// Answers one authenticated request whose path below `/devmgr/v2/` is `segs`.
fn respond(shared: &Shared, req: &HttpRequest, segs: &[&str]) -> (u16, Option<Value>) {
    let failed = |f: Fail| (f.status, Some(f.body()));
    let resolved = match api::resolve(&req.method, segs) {
        Ok(r) => r,
        Err(other_method) => {
            shared.store.count(&format!("{} ?", req.method));
            if other_method {
                return (405, None);
            }
            return failed(api::not_found("path", &req.path));
        }
    };
    shared
        .store
        .count(&format!("{} {}", req.method, resolved.route.path));
    let body: Option<Value> = if req.body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        match serde_json::from_slice(&req.body) {
            Ok(v) => Some(v),
            Err(e) => {
                return (
                    400,
                    Some(
                        json!({"errorMessage": format!("The request body is not JSON: {e}"),
                                "localizedMessage": "Bad request", "retcode": "invalidInput",
                                "codeType": "webservice"}),
                    ),
                );
            }
        }
    };
    let injected = shared
        .store
        .fail_rules()
        .iter()
        .find(|r| r.target.fires(&req.method, segs))
        .map(|r| (r.status, r.mode));
    let injected_fail = |status: u16| Fail {
        status,
        retcode: retcodes::INJECTED.to_string(),
        code_type: "webservice",
        message: format!(
            "{} {}: injected failure (storch-sim --fail)",
            req.method, req.path
        ),
    };
    if let Some((status, FailMode::Before)) = injected {
        return failed(injected_fail(status));
    }
    let mut p = shared.store.lock();
    let mut ctx = api::Ctx {
        p: &mut p,
        tuning: shared.tuning,
        system: resolved.system.to_string(),
        dirty: false,
        drop_tags: matches!(injected, Some((_, FailMode::Untagged))),
    };
    let out = api::run(&mut ctx, &resolved, &req.query, body.as_ref());
    let dirty = ctx.dirty;
    if dirty && let Err(e) = shared.store.persist(&p) {
        return (
            500,
            Some(
                json!({"errorMessage": format!("simulator could not persist its state: {e}"),
                        "retcode": "systemError", "codeType": "systemerror"}),
            ),
        );
    }
    match (out, injected) {
        (Ok(_), Some((status, _))) => failed(injected_fail(status)),
        (Ok(answer), None) => answer,
        (Err(f), _) => failed(f),
    }
}

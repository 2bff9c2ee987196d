//! A stateful SolidFire Element JSON-RPC simulator (docs/wire-notes.md#solidfire-element), built
//! from the wire description rather than from any driver.
//!
//! - `mod.rs` (this file): the server, Basic auth, API versions, faults, latency, persistence.
//! - `api/`: the methods, one file per object family behind one dispatch table.
//! - `state.rs`: the simulated cluster (plain data, also the `--state` file format).
//!
//! Transport: `POST /json-rpc/<version>` (versions 1.0 and 5.0 to 12.x, a trailing slash
//! allowed; methods newer than the version answer `xUnknownAPIMethod`), Basic auth or 401,
//! any Content-Type, a missing `id` answered as `"id": null`. Success is
//! `{"id", "result"}`; API errors are HTTP 200 with `{"id", "error": {"code": 500, "name",
//! "message"}}`. Faults (`--fail METHOD:RATE[:ERRNAME]`) answer such an error before the
//! method runs. With a state file every call that changed the cluster is written (temp file,
//! fsync, rename, fsync of the directory) before the answer is sent.
//!
//! The cluster: accounts with unique usernames and CHAP secrets (12 to 16 printable
//! characters, generated when not given); volumes with duplicate names allowed, deleted then
//! purged (a deleted volume stays listed and keeps counting against `--capacity`), IQNs and
//! SCSI ids from the cluster's 4-letter `uniqueID`; snapshots (32 per volume); clones that
//! stay out of the lists, and whose `asyncHandle` answers `running`, for `clone_polls` polls;
//! volume access groups (a fresh cluster has one named `trident`); paged lists
//! (`startVolumeID`/`limit`, capped by `page_cap`).
//!
//! Where Element's public description is silent the simulator chooses (see [`names`] for the error
//! names): sizes round up to a whole MiB within 10^9 bytes to 16 TiB; QoS is
//! 50 ≤ minIOPS ≤ 15000, 100 ≤ maxIOPS ≤ burstIOPS ≤ `--max-iops`, refused with
//! `xInvalidParameter`; a second DeleteVolume answers like the first; PurgeDeletedVolume of an
//! active volume is `xVolumeNotDeleted`; the provisioned bytes past the capacity are
//! `xInsufficientSpace`; volume names are 1 to 64 letters, digits and dashes.

pub mod api;
pub mod state;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

pub use self::api::{Tuning, names};
pub use self::state::{Cluster, ClusterSpec};
pub use super::SimError;
use super::http::{HttpRequest, HttpResponse};
use super::{Listening, Store};

pub const DEFAULT_USERNAME: &str = "admin";
pub const DEFAULT_PASSWORD: &str = "solidfire123";
pub const DEFAULT_MAX_IOPS: u64 = 200_000;

/// An injected failure: `METHOD:RATE[:ERRNAME]` (`*` for every method).
#[derive(Debug, Clone, PartialEq)]
pub struct FailRule {
    pub method: String,
    /// 0.0 to 1.0.
    pub rate: f64,
    pub name: String,
}

impl FailRule {
    pub fn parse(s: &str) -> Result<FailRule, String> {
        let bad = |why: &str| format!("--fail {s:?}: {why} (expected METHOD:RATE[:ERRNAME])");
        let mut parts = s.trim().split(':');
        let method = parts.next().unwrap_or_default();
        let rate = parts.next().ok_or_else(|| bad("missing rate"))?;
        let name = parts.next().unwrap_or(names::DEFAULT_INJECTED);
        if parts.next().is_some() {
            return Err(bad("too many fields"));
        }
        if method.is_empty() {
            return Err(bad("empty method name"));
        }
        let rate: f64 = rate.parse().map_err(|_| bad("rate is not a number"))?;
        if !(0.0..=1.0).contains(&rate) {
            return Err(bad("rate is not between 0 and 1"));
        }
        if !name.starts_with('x') || name.len() < 2 {
            return Err(bad("error names look like xSomething"));
        }
        Ok(FailRule {
            method: method.to_string(),
            rate,
            name: name.to_string(),
        })
    }
}

/// How to start a simulator.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub listen: SocketAddr,
    pub tls: bool,
    pub cert_out: Option<PathBuf>,
    pub cluster: ClusterSpec,
    pub latency: Duration,
    pub fail: Vec<FailRule>,
    pub state: Option<PathBuf>,
    pub username: String,
    pub password: String,
    pub tuning: Tuning,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            cert_out: None,
            cluster: ClusterSpec {
                mvip: "127.0.0.1".into(),
                svip: "127.0.0.1:3260".into(),
                capacity: 10 << 40,
                max_iops: DEFAULT_MAX_IOPS,
                tenant: None,
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
    store: Store<Cluster, FailRule>,
    auth: String,
    latency: Duration,
    tuning: Tuning,
}

/// A running simulator. Stops when dropped.
pub struct SolidFireSim {
    listening: Listening,
    username: String,
    password: String,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SolidFireSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SolidFireSim")
            .field("url", &self.listening.url())
            .finish_non_exhaustive()
    }
}

fn shared(opts: &SimOptions) -> Result<Shared, SimError> {
    let cluster = match &opts.state {
        Some(p) => super::load_or_create(
            p,
            "a SolidFire simulator",
            || Cluster::new(&opts.cluster),
            |c| super::check_format(c.format, state::FORMAT),
        )?,
        None => Cluster::new(&opts.cluster),
    };
    Ok(Shared {
        store: Store::new(cluster, opts.fail.clone(), opts.state.clone()),
        auth: super::basic_auth(&opts.username, &opts.password),
        latency: opts.latency,
        tuning: opts.tuning,
    })
}

impl SolidFireSim {
    /// Loads or creates the cluster and starts serving.
    pub async fn start(opts: SimOptions) -> Result<SolidFireSim, SimError> {
        let shared = Arc::new(shared(&opts)?);
        let tls = super::tls_certificate(
            opts.tls,
            opts.listen,
            std::slice::from_ref(&opts.cluster.mvip),
            opts.cert_out.as_deref(),
            opts.state.as_deref(),
            "solidfire",
        )?;
        let handler = super::http::handler(shared.clone(), |shared, req| async move {
            handle(&shared, req).await
        });
        let listening = Listening::start(opts.listen, tls, handler).await?;
        Ok(SolidFireSim {
            listening,
            username: opts.username.clone(),
            password: opts.password.clone(),
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

    /// The JSON-RPC endpoint of an API version: `http(s)://ADDR/json-rpc/VERSION`.
    pub fn endpoint(&self, version: &str) -> String {
        format!("{}/json-rpc/{version}", self.url())
    }

    /// What a Trident backend's `Endpoint` says:
    /// `http(s)://USER:PASSWORD@ADDR/json-rpc/VERSION` (the password URL-escaped).
    pub fn backend_endpoint(&self, version: &str) -> String {
        let escape = |s: &str| {
            s.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        };
        let scheme = if self.listening.is_tls() {
            "https"
        } else {
            "http"
        };
        format!(
            "{scheme}://{}:{}@{}/json-rpc/{version}",
            escape(&self.username),
            escape(&self.password),
            self.addr()
        )
    }

    /// The certificate (PEM) of a `--tls` simulator, for `trustedCACertificate`.
    pub fn ca_pem(&self) -> Option<&str> {
        self.listening.ca_pem()
    }

    pub fn cert_path(&self) -> Option<&Path> {
        self.listening.cert_path()
    }

    /// A copy of the cluster.
    pub fn cluster(&self) -> Cluster {
        self.shared.store.snapshot()
    }

    /// Changes the cluster directly (tests); persisted when there is a state file.
    pub fn with_cluster<T>(&self, f: impl FnOnce(&mut Cluster) -> T) -> T {
        self.shared.store.with(f)
    }

    pub fn set_fail_rules(&self, rules: Vec<FailRule>) {
        self.shared.store.set_fail_rules(rules);
    }

    /// How many requests named this method so far.
    pub fn calls(&self, method: &str) -> u64 {
        self.shared.store.calls(method)
    }

    pub async fn stop(self) {
        self.listening.stop().await;
    }
}

impl super::Simulator for SolidFireSim {
    const NAME: &'static str = "solidfire";

    fn listening(&self) -> &Listening {
        &self.listening
    }

    async fn shut_down(self) {
        self.stop().await;
    }
}

/// `1.0`, `5.0` … `12.x` (a trailing slash allowed) as (major, minor).
pub fn parse_version(path: &str) -> Option<(u32, u32)> {
    let v = path.strip_prefix("/json-rpc/")?;
    let v = v.strip_suffix('/').unwrap_or(v);
    let (a, b) = v.split_once('.')?;
    let major: u32 = a.parse().ok()?;
    let minor: u32 = b.parse().ok()?;
    (major == 1 && minor == 0 || (5..=12).contains(&major)).then_some((major, minor))
}

fn error_body(id: &Value, name: &str, message: &str) -> Value {
    json!({"id": id, "error": {"code": 500, "name": name, "message": message}})
}

fn json_response(status: u16, body: &Value) -> HttpResponse {
    HttpResponse::new(status, "application/json", body.to_string())
}

async fn handle(shared: &Shared, req: HttpRequest) -> HttpResponse {
    if !req.path.starts_with("/json-rpc/") {
        return HttpResponse::new(404, "text/plain", "Not Found");
    }
    if req.authorization.as_deref() != Some(shared.auth.as_str()) {
        return super::http::unauthorized("SolidFire");
    }
    if req.method != "POST" {
        return HttpResponse::new(405, "text/plain", "Method Not Allowed");
    }
    if !shared.latency.is_zero() {
        tokio::time::sleep(shared.latency).await;
    }
    json_response(200, &rpc(shared, &req.path, &req.body))
}

/// Answers one JSON-RPC request body sent to `path`.
fn rpc(shared: &Shared, path: &str, body: &[u8]) -> Value {
    let req: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => {
            return error_body(
                &Value::Null,
                names::INVALID_REQUEST,
                "The request body is not a JSON-RPC object",
            );
        }
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let Some(version) = parse_version(path) else {
        return error_body(
            &id,
            names::UNKNOWN_API_VERSION,
            &format!("Unknown API version in {path}"),
        );
    };
    let Some(method) = req.get("method").and_then(Value::as_str) else {
        return error_body(
            &id,
            names::INVALID_REQUEST,
            "The request has no method name",
        );
    };
    shared.store.count(method);
    let injected = shared
        .store
        .fail_rules()
        .iter()
        .find(|r| (r.method == "*" || r.method == method) && rand::random::<f64>() < r.rate)
        .map(|r| r.name.clone());
    if let Some(name) = injected {
        return error_body(
            &id,
            &name,
            &format!("{method}: injected failure (storch-sim --fail)"),
        );
    }
    let params = req.get("params").cloned().unwrap_or(Value::Null);
    let mut c = shared.store.lock();
    let mut ctx = api::Ctx {
        c: &mut c,
        tuning: shared.tuning,
        dirty: false,
    };
    let out = api::dispatch(&mut ctx, version, method, &params);
    let dirty = ctx.dirty;
    match out {
        Ok(result) => {
            if dirty && let Err(e) = shared.store.persist(&c) {
                return error_body(
                    &id,
                    "xDBOperationTimeout",
                    &format!("simulator could not persist its state: {e}"),
                );
            }
            json!({"id": id, "result": result})
        }
        Err(f) => error_body(&id, &f.name, &f.message),
    }
}

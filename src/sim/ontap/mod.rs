//! A stateful ONTAP ZAPI simulator (docs/wire-notes.md#the-zapi-simulator).
//!
//! - `mod.rs` (this file): the server, authentication, SVM tunnelling, faults, persistence.
//! - `api/`: the calls it answers, one file per object family behind one dispatch table.
//! - `state.rs`: the simulated array (plain data, also the `--state` file format).
//!
//! - One endpoint, `POST /servlets/netapp.servlets.admin.XMLrequest_filer`; other paths 404, a
//!   GET answers a failed result; Basic auth (configurable) or 401; API errors are HTTP 200
//!   with a failed `results` element; the real prolog (single quotes, `netapp_gx.dtd`).
//! - `vfiler` tunnels a call into an SVM (unknown SVM → 15698); cluster-only APIs answer 13005
//!   inside an SVM (13003 for an SVM-scoped user); an SVM-scoped user's untunnelled calls run
//!   in its SVM.
//! - Iterators page with `max-records` (capped by `page_cap`), opaque escaped `next-tag`s,
//!   `query` (exact, `prefix*`, `!`, `|`, `<`/`>`, ANDed) and `desired-attributes`.
//! - Capacity: thick (`space-reserve volume`) volumes reserve their size on their
//!   aggregate(s); thin ones reserve nothing. FlexGroups spread over their aggregates greedily.
//!   A create or grow that does not fit fails with errno 28 (ENOSPC; the simulator's choice,
//!   real ONTAP's errno for this is unverified).
//! - Destroyed volumes stay in a recovery queue (renamed `<name>_<dsid>`, their space held)
//!   for the SVM's retention hours, until `volume-recovery-queue-purge` (refused to an SVM
//!   admin, 14719) or REST's `DELETE …?force=true` / private CLI purge.
//! - Async calls (`volume-create-async`, `volume-destroy-async`, `volume-size-async`,
//!   `quota-on`, `quota-resize`, `qtree-delete-async`) return a job that `job-get-iter` reports
//!   `running` for `async_polls` polls, then `success`.
//! - Fault injection ([`FailRule`]): an API (optionally only when it names an aggregate) fails
//!   with a given errno at a given rate; errno 13114 on `volume-clone-create` fails *after*
//!   making the clone ("Failed to load job"). Latency is added to every request.
//! - With a state file every call that changed the array is written (temp file, fsync, rename,
//!   fsync of the directory) before the answer is sent.

pub mod api;
mod rest;
pub mod state;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub use self::api::Tuning;
pub use self::state::{AggregateSpec, Array};
pub use super::SimError;
use super::http::{HttpRequest, HttpResponse};
use super::{Listening, Store};
use crate::wire::zapi::{self as xml, Node, errno};

/// The one servlet path.
pub const SERVLET: &str = "/servlets/netapp.servlets.admin.XMLrequest_filer";

/// Default credentials.
pub const DEFAULT_USERNAME: &str = "admin";
pub const DEFAULT_PASSWORD: &str = "netapp123";

/// Default aggregates: `aggr1:ssd:10TiB,aggr2:hdd:50TiB`.
/// The page size of an in-process simulator.
pub const DEFAULT_TEST_PAGE: usize = 3;

pub const DEFAULT_AGGREGATES: &str = "aggr1:ssd:10TiB,aggr2:hdd:50TiB";

/// An injected failure: `CALL[@AGGR]:RATE[:ERRNO]` for ZAPI, or
/// `METHOD@PATH:RATE[:STATUS/CODE|:job/CODE]` for REST.
#[derive(Debug, Clone, PartialEq)]
pub struct FailRule {
    /// The API name, or `*` for every API; for a REST rule the HTTP method (`*` for any).
    pub api: String,
    /// Only calls that name this aggregate (`containing-aggr-name`, `aggr-list`).
    pub aggregate: Option<String>,
    /// 0.0 to 1.0.
    pub rate: f64,
    /// Default 13001 (EAPIERROR, not retryable); for REST the error body's `code`.
    pub errno: u32,
    /// A REST rule: the path below `/api/` it covers, as a query pattern
    /// (`storage/volumes`, `storage/volumes*`).
    pub path: Option<String>,
    /// A REST rule's HTTP status (default 500).
    pub status: u16,
    /// A REST rule that fails the request's job instead of the request (`job/CODE`); the
    /// request changes nothing and answers 202.
    pub via_job: bool,
    /// A REST rule that fails only this many more matching requests, then clears (a busy
    /// volume that frees up); `None`: for ever.
    pub times: Option<u32>,
}

/// A `--fail` rate: 0 to 1.
fn parse_rate(rate: &str) -> Result<f64, &'static str> {
    let rate: f64 = rate.parse().map_err(|_| "rate is not a number")?;
    if !(0.0..=1.0).contains(&rate) {
        return Err("rate is not between 0 and 1");
    }
    Ok(rate)
}

/// The methods that make a `--fail` rule a REST rule (`ANY` is every method).
const REST_METHODS: &[&str] = &["GET", "POST", "PATCH", "DELETE", "ANY"];

impl FailRule {
    pub fn parse(s: &str) -> Result<FailRule, String> {
        if let Some((m, _)) = s.trim().split_once('@')
            && REST_METHODS.contains(&m)
        {
            return Self::parse_rest(s);
        }
        let bad = |why: &str| format!("--fail {s:?}: {why} (expected CALL[@AGGR]:RATE[:ERRNO])");
        let mut parts = s.trim().split(':');
        let call = parts.next().unwrap_or_default();
        let rate = parts.next().ok_or_else(|| bad("missing rate"))?;
        let errno = parts.next();
        if parts.next().is_some() {
            return Err(bad("too many fields"));
        }
        let (api, aggregate) = match call.split_once('@') {
            Some((a, g)) => (a, Some(g.to_string())),
            None => (call, None),
        };
        if api.is_empty() {
            return Err(bad("empty call name"));
        }
        let rate = parse_rate(rate).map_err(&bad)?;
        let errno = match errno {
            None => errno::EAPIERROR,
            Some(e) => e.parse().map_err(|_| bad("errno is not a number"))?,
        };
        Ok(FailRule {
            api: api.to_string(),
            aggregate,
            rate,
            errno,
            path: None,
            status: 500,
            via_job: false,
            times: None,
        })
    }

    /// `METHOD@PATH:RATE[:STATUS/CODE|:job/CODE]`, e.g. `POST@storage/volumes:1:409/13107405`
    /// or `DELETE@storage/volumes/*:1:job/524486`.
    fn parse_rest(s: &str) -> Result<FailRule, String> {
        let bad = |why: &str| {
            format!(
                "--fail {s:?}: {why} (expected METHOD@PATH:RATE[:STATUS/CODE|:job/CODE][:TIMES])"
            )
        };
        let mut parts = s.trim().split(':');
        let call = parts.next().unwrap_or_default();
        let rate = parts.next().ok_or_else(|| bad("missing rate"))?;
        let error = parts.next();
        let times = match parts.next() {
            None => None,
            Some(t) => Some(
                t.parse::<u32>()
                    .ok()
                    .filter(|t| *t > 0)
                    .ok_or_else(|| bad("TIMES is not a positive number"))?,
            ),
        };
        if parts.next().is_some() {
            return Err(bad("too many fields"));
        }
        let (method, path) = call.split_once('@').unwrap_or_default();
        let path = path.trim_start_matches('/').trim_start_matches("api/");
        if path.is_empty() {
            return Err(bad("empty path"));
        }
        let rate = parse_rate(rate).map_err(&bad)?;
        let (status, via_job, errno) = match error {
            None => (500, false, errno::EAPIERROR),
            Some(e) => {
                let (st, code) = e
                    .split_once('/')
                    .ok_or_else(|| bad("error is not STATUS/CODE"))?;
                let code: u32 = code.parse().map_err(|_| bad("code is not a number"))?;
                match st {
                    "job" => (500, true, code),
                    st => {
                        let st: u16 = st.parse().map_err(|_| bad("status is not a number"))?;
                        if !(400..=599).contains(&st) {
                            return Err(bad("status is not between 400 and 599"));
                        }
                        (st, false, code)
                    }
                }
            }
        };
        Ok(FailRule {
            api: if method == "ANY" { "*" } else { method }.to_string(),
            aggregate: None,
            rate,
            errno,
            path: Some(path.to_string()),
            status,
            via_job,
            times,
        })
    }

    fn applies(&self, api: &Node) -> bool {
        if self.path.is_some() {
            return false;
        }
        if self.api != "*" && self.api != api.name {
            return false;
        }
        match &self.aggregate {
            None => true,
            Some(a) => {
                api.text_at("containing-aggr-name") == Some(a.as_str())
                    || api.list_at("aggr-list").iter().any(|x| x == a)
            }
        }
    }
}

/// Which front ends the simulator serves (`--api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiMode {
    /// The ZAPI servlet and `/api`.
    #[default]
    Both,
    /// Only `/api` (the servlet answers 404, as on an array with ZAPI switched off).
    Rest,
    /// Only the ZAPI servlet (`/api` answers 404).
    Zapi,
}

impl ApiMode {
    pub fn parse(s: &str) -> Result<ApiMode, String> {
        match s {
            "both" => Ok(ApiMode::Both),
            "rest" => Ok(ApiMode::Rest),
            "zapi" => Ok(ApiMode::Zapi),
            other => Err(format!("--api {other:?}: expected rest, zapi or both")),
        }
    }

    fn rest(self) -> bool {
        self != ApiMode::Zapi
    }

    fn zapi(self) -> bool {
        self != ApiMode::Rest
    }
}

/// `9.15.1` → `[9, 15, 1]`.
pub fn parse_release(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<u32> = s
        .split('.')
        .map(|p| p.parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            format!("--ontap-version {s:?}: expected GENERATION.MAJOR.MINOR such as 9.15.1")
        })?;
    match parts.as_slice() {
        [g, ma, mi] => Ok([*g, *ma, *mi]),
        [g, ma] => Ok([*g, *ma, 0]),
        _ => Err(format!(
            "--ontap-version {s:?}: expected GENERATION.MAJOR.MINOR such as 9.15.1"
        )),
    }
}

/// The ONTAPI version of an ONTAP 9 release (9.8.0 → 1.180, 9.15.1 → 1.251).
pub fn ontapi_of(release: [u32; 3]) -> (u32, u32) {
    (1, (10 + release[1]) * 10 + release[2].min(9))
}

/// Whose rights the simulated user has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserScope {
    /// A cluster admin: untunnelled calls run at cluster scope.
    Cluster,
    /// An SVM admin (vsadmin) of this SVM: cluster-only APIs are refused (13003).
    Svm(String),
}

/// How to start a simulator.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub listen: SocketAddr,
    pub tls: bool,
    /// Where `--tls` writes its certificate (PEM); default next to the state file or in the
    /// temp dir.
    pub cert_out: Option<PathBuf>,
    pub svm: String,
    pub aggregates: Vec<AggregateSpec>,
    pub latency: Duration,
    pub fail: Vec<FailRule>,
    pub state: Option<PathBuf>,
    pub username: String,
    pub password: String,
    pub ontapi: (u32, u32),
    /// The ONTAP release a new array reports on `GET /api/cluster`; `None`: the one matching
    /// `ontapi`.
    pub ontap_version: Option<[u32; 3]>,
    /// Which front ends to serve.
    pub api: ApiMode,
    /// Collection GETs that miss a volume or qtree just made over REST (eventual
    /// visibility); 0: listed at once.
    pub visible_after: u32,
    pub scope: UserScope,
    pub tuning: Tuning,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            cert_out: None,
            svm: "svm1".into(),
            aggregates: AggregateSpec::parse_list(DEFAULT_AGGREGATES).unwrap_or_default(),
            latency: Duration::ZERO,
            fail: Vec::new(),
            state: None,
            username: DEFAULT_USERNAME.into(),
            password: DEFAULT_PASSWORD.into(),
            ontapi: (1, 180),
            ontap_version: None,
            api: ApiMode::Both,
            visible_after: 0,
            scope: UserScope::Cluster,
            // In-process simulators (tests) page every list at 3 records, so every
            // iterator a driver reads is paged; the binary's --page-size defaults to 100.
            tuning: Tuning {
                page_cap: DEFAULT_TEST_PAGE,
                async_polls: 1,
            },
        }
    }
}

struct Shared {
    store: Store<Array, FailRule>,
    auth: String,
    latency: Duration,
    scope: UserScope,
    tuning: Tuning,
    api: ApiMode,
    visible_after: u32,
    /// Requests being answered now (both APIs), and the most seen at once.
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

/// Counts a request in flight while it lives.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Shared) -> InFlight<'a> {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.most_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running simulator. Stops when dropped.
pub struct OntapSim {
    listening: Listening,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for OntapSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OntapSim")
            .field("url", &self.listening.url())
            .finish_non_exhaustive()
    }
}

impl OntapSim {
    /// Loads or creates the array and starts serving.
    pub async fn start(opts: SimOptions) -> Result<OntapSim, SimError> {
        let array = match &opts.state {
            Some(p) => super::load_or_create(
                p,
                "an ONTAP simulator",
                || new_array(&opts),
                |a| super::check_format(a.format, state::FORMAT),
            )?,
            None => new_array(&opts),
        };
        let shared = Arc::new(Shared {
            store: Store::new(array, opts.fail.clone(), opts.state.clone()),
            auth: super::basic_auth(&opts.username, &opts.password),
            latency: opts.latency,
            scope: opts.scope.clone(),
            tuning: opts.tuning,
            api: opts.api,
            visible_after: opts.visible_after,
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
        });
        let tls = super::tls_certificate(
            opts.tls,
            opts.listen,
            &[],
            opts.cert_out.as_deref(),
            opts.state.as_deref(),
            "ontap",
        )?;
        let handler = super::http::handler(shared.clone(), |shared, req| async move {
            let _counted = InFlight::enter(&shared);
            handle(&shared, req).await
        });
        let listening = Listening::start(opts.listen, tls, handler).await?;
        Ok(OntapSim { listening, shared })
    }

    pub fn addr(&self) -> SocketAddr {
        self.listening.addr()
    }

    /// `http(s)://ADDR`.
    pub fn url(&self) -> String {
        self.listening.url()
    }

    /// What a backend's `managementLIF` should say: `127.0.0.1:PORT`.
    pub fn management_lif(&self) -> String {
        self.addr().to_string()
    }

    /// The certificate (PEM) of a `--tls` simulator, for `trustedCACertificate`.
    pub fn ca_pem(&self) -> Option<&str> {
        self.listening.ca_pem()
    }

    pub fn cert_path(&self) -> Option<&Path> {
        self.listening.cert_path()
    }

    /// A copy of the array.
    pub fn array(&self) -> Array {
        self.shared.store.snapshot()
    }

    /// Changes the array directly (tests); persisted when there is a state file.
    pub fn with_array<T>(&self, f: impl FnOnce(&mut Array) -> T) -> T {
        self.shared.store.with(f)
    }

    pub fn set_fail_rules(&self, rules: Vec<FailRule>) {
        self.shared.store.set_fail_rules(rules);
    }

    /// How many requests named this API so far (REST: `METHOD /api/PATH`, e.g.
    /// `POST /api/storage/volumes`).
    pub fn calls(&self, api: &str) -> u64 {
        self.shared.store.calls(api)
    }

    /// Every API or REST request named so far, with its count (as [`Self::calls`] names them).
    pub fn call_counts(&self) -> std::collections::BTreeMap<String, u64> {
        self.shared.store.call_counts()
    }

    /// The most requests (ZAPI and REST together) this simulator answered at the same time,
    /// so a test can check a client's cap per management LIF.
    pub fn most_concurrent_requests(&self) -> usize {
        self.shared.most_in_flight.load(Ordering::SeqCst)
    }

    pub async fn stop(self) {
        self.listening.stop().await;
    }
}

impl super::Simulator for OntapSim {
    const NAME: &'static str = "ontap";

    fn listening(&self) -> &Listening {
        &self.listening
    }

    async fn shut_down(self) {
        self.stop().await;
    }
}

fn xml_response(a_version: &str, results: &Node) -> HttpResponse {
    HttpResponse::new(
        200,
        "text/xml; charset=utf-8",
        xml::response(a_version, results),
    )
}

fn new_array(opts: &SimOptions) -> Array {
    let mut a = Array::new(&opts.svm, &opts.aggregates, opts.ontapi);
    a.release = opts.ontap_version;
    a
}

async fn handle(shared: &Shared, req: HttpRequest) -> HttpResponse {
    let is_rest = req.path == "/api" || req.path.starts_with("/api/");
    if is_rest && shared.api.rest() {
        if req.authorization.as_deref() != Some(shared.auth.as_str()) {
            return rest::unauthorized();
        }
        if !shared.latency.is_zero() {
            tokio::time::sleep(shared.latency).await;
        }
        return rest::handle(shared, req).await;
    }
    if req.path != SERVLET || !shared.api.zapi() {
        return HttpResponse::new(404, "text/plain", "Not Found");
    }
    if req.authorization.as_deref() != Some(shared.auth.as_str()) {
        return super::http::unauthorized("netapp");
    }
    if !shared.latency.is_zero() {
        tokio::time::sleep(shared.latency).await;
    }
    let version = {
        let a = shared.store.lock();
        format!("{}.{}", a.ontapi_major, a.ontapi_minor)
    };
    if req.method != "POST" {
        return xml_response(
            &version,
            &xml::failed(errno::EAPIERROR, "Not supported method type"),
        );
    }
    let parsed = std::str::from_utf8(&req.body)
        .map_err(|e| e.to_string())
        .and_then(|s| xml::parse(s).map_err(|e| e.to_string()));
    let root = match parsed {
        Ok(r) if r.name == "netapp" && r.children.len() == 1 => r,
        Ok(_) => {
            return xml_response(
                &version,
                &xml::failed(
                    errno::EINVALIDINPUTERROR,
                    "Request must be one netapp element holding one API",
                ),
            );
        }
        Err(e) => {
            return xml_response(
                &version,
                &xml::failed(
                    errno::EINVALIDINPUTERROR,
                    &format!("Unable to parse request: {e}"),
                ),
            );
        }
    };
    let api = &root.children[0];
    shared.store.count(&api.name);
    let injected = shared
        .store
        .fail_rules()
        .iter()
        .find(|r| r.applies(api) && rand::random::<f64>() < r.rate)
        .map(|r| r.errno);
    let results = run(shared, root.attr("vfiler"), api, injected);
    xml_response(&version, &results)
}

/// Runs one call under the array lock and persists what it changed.
fn run(shared: &Shared, vfiler: Option<&str>, api: &Node, injected: Option<u32>) -> Node {
    let name = api.name.as_str();
    let after = injected == Some(errno::EINTERNALERROR) && name == "volume-clone-create";
    if let Some(e) = injected
        && !after
    {
        return xml::failed(e, &format!("{name}: injected failure (storch-sim --fail)"));
    }
    let mut a = shared.store.lock();
    let svm = match (vfiler, &shared.scope) {
        (Some(v), UserScope::Svm(own)) if v != own => {
            return xml::failed(
                errno::EAPIPRIVILEGE,
                "Insufficient privileges: user is not authorized for this Vserver",
            );
        }
        (Some(v), _) => Some(v.to_string()),
        (None, UserScope::Svm(own)) => Some(own.clone()),
        (None, UserScope::Cluster) => None,
    };
    if api::CLUSTER_ONLY.contains(&name) {
        if matches!(shared.scope, UserScope::Svm(_)) {
            return xml::failed(
                errno::EAPIPRIVILEGE,
                &format!("Insufficient privileges for {name}"),
            );
        }
        if let Some(v) = &svm {
            return xml::failed(
                errno::EAPINOTFOUND,
                &format!("Unable to find API: {name} on data vserver {v}"),
            );
        }
    }
    if let Some(v) = &svm
        && !a.svms.contains_key(v)
    {
        return xml::failed(
            errno::EVSERVERNOTFOUND,
            &format!("Specified vserver not found: {v}"),
        );
    }
    let mut ctx = api::Ctx {
        a: &mut a,
        svm,
        tuning: shared.tuning,
        svm_user: matches!(shared.scope, UserScope::Svm(_)),
    };
    match api::dispatch(&mut ctx, api) {
        Ok(children) => {
            if api::is_mutating(name)
                && let Err(e) = shared.store.persist(&a)
            {
                return xml::failed(
                    errno::EINTERNALERROR,
                    &format!("simulator could not persist its state: {e}"),
                );
            }
            if after {
                return xml::failed(
                    errno::EINTERNALERROR,
                    "Failed to load job: injected failure after the clone was made",
                );
            }
            xml::passed(children)
        }
        Err(f) => xml::failed(f.errno, &f.reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_rules() {
        let r = FailRule::parse("volume-create:0.5").unwrap();
        assert_eq!(r.api, "volume-create");
        assert_eq!(r.aggregate, None);
        assert_eq!(r.errno, 13001);
        let r = FailRule::parse("volume-create@aggr1:1:13114").unwrap();
        assert_eq!(r.aggregate.as_deref(), Some("aggr1"));
        assert_eq!(r.errno, 13114);
        assert!(r.applies(&Node::new("volume-create").with_leaf("containing-aggr-name", "aggr1")));
        assert!(!r.applies(&Node::new("volume-create").with_leaf("containing-aggr-name", "aggr2")));
        for bad in ["x", "x:2", ":1", "x:0.5:e", "x:1:2:3"] {
            assert!(FailRule::parse(bad).is_err(), "{bad}");
        }
    }
}

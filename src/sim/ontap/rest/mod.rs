//! ONTAP's REST API (`/api`) over the same array as the ZAPI servlet
//! (docs/wire-notes.md#the-rest-simulator; spec: wire-protocols.md §5).
//!
//! - `mod.rs` (this file): the router, the request and error types, faults, jobs.
//! - `collection.rs`: query filters, `fields=` projection, `max_records` paging.
//! - `cluster.rs`: cluster, nodes, SVMs, aggregates, IP interfaces, iSCSI services, jobs.
//! - `volumes.rs`: volumes (FlexVol, FlexGroup, clones) and snapshots.
//! - `nas.rs`: qtrees, quota rules, export policies and rules.
//! - `san.rs`: LUNs, igroups and their initiators, LUN maps.
//! - `recovery.rs`: the recovery queue through the private CLI passthrough.
//!
//! Every change runs as the ZAPI call that makes it (`zapi`), so both front ends keep one set
//! of rules: a create refused over ZAPI is refused over REST with the matching REST code.
//! Reads build REST records straight from the array.

mod cluster;
mod collection;
mod nas;
mod recovery;
mod san;
mod volumes;

use serde_json::{Value, json};

use super::api::{self, Fail, Tuning};
use super::state::Array;
use super::{FailRule, Shared, UserScope};
use crate::sim::http::{HttpRequest, HttpResponse};
use crate::wire::zapi::{Node, errno};

/// A refused request: HTTP status and ONTAP's error body.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RestError {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub target: Option<String>,
}

pub(super) fn err(status: u16, code: impl ToString, message: impl Into<String>) -> RestError {
    RestError {
        status,
        code: code.to_string(),
        message: message.into(),
        target: None,
    }
}

/// Generic code 2 (400): a field is invalid or missing, or not taken by this request.
pub(super) fn bad_field(field: &str, message: impl Into<String>) -> RestError {
    RestError {
        target: Some(field.to_string()),
        ..err(400, 2, message)
    }
}

/// Generic code 4 (404): no such record.
pub(super) fn not_found(what: &str) -> RestError {
    err(404, 4, format!("Entry doesn't exist: {what}"))
}

/// A successful answer.
pub(super) enum Reply {
    /// 200 with a body.
    Ok(Value),
    /// 201: the new record (echoed with `return_records=true`) and its `Location` path.
    Created(Value, String),
    /// 202 with a job that ends after the configured polls; the location of the object.
    Job(u64, Option<String>),
}

pub(super) type Answer = Result<Reply, RestError>;

/// A parsed request: the path below `/api`, decoded segments, query parameters, JSON body.
pub(super) struct Req {
    pub method: String,
    pub path: String,
    pub segs: Vec<String>,
    pub raw_query: String,
    pub params: Vec<(String, String)>,
    pub body: Value,
}

impl Req {
    pub fn param(&self, k: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }

    pub fn flag(&self, k: &str) -> bool {
        self.param(k) == Some("true")
    }
}

/// What a handler works on: the array (locked), the tuning, the user's scope, the request.
pub(super) struct Ctx<'a> {
    pub a: &'a mut Array,
    pub tuning: Tuning,
    pub scope: UserScope,
    /// `POST@…:RATE:job/CODE` matched: the job this request starts fails with this error.
    pub job_error: Option<(u32, String)>,
    /// Collection GETs that miss a new volume or qtree.
    pub visible_after: u32,
}

impl Ctx<'_> {
    /// The SVMs this user sees.
    pub fn visible(&self) -> Vec<String> {
        match &self.scope {
            UserScope::Svm(s) if self.a.svms.contains_key(s) => vec![s.clone()],
            UserScope::Svm(_) => Vec::new(),
            UserScope::Cluster => self.a.svms.keys().cloned().collect(),
        }
    }

    /// The SVM named by `svm.uuid` / `svm.name` in the query or body; an SVM user's own SVM
    /// when neither names one.
    pub fn svm_of(&self, req: &Req) -> Result<String, RestError> {
        let uuid = req
            .param("svm.uuid")
            .map(str::to_string)
            .or_else(|| text(&req.body, "svm.uuid"));
        let name = req
            .param("svm.name")
            .map(str::to_string)
            .or_else(|| text(&req.body, "svm.name"));
        let found = match (&uuid, &name) {
            (Some(u), _) => self
                .visible()
                .into_iter()
                .find(|s| self.a.svms.get(s).is_some_and(|x| &x.uuid == u)),
            (None, Some(n)) => self.visible().into_iter().find(|s| s == n),
            (None, None) => match &self.scope {
                UserScope::Svm(s) => self.visible().into_iter().find(|v| v == s),
                UserScope::Cluster => {
                    return Err(bad_field("svm", "Missing value: svm.uuid or svm.name"));
                }
            },
        };
        found.ok_or_else(|| {
            let what = uuid.or(name).unwrap_or_default();
            RestError {
                target: Some("svm".into()),
                ..err(404, 2621462, format!("SVM \"{what}\" does not exist"))
            }
        })
    }

    /// Runs one ZAPI call in `svm`: the rules both front ends share.
    pub fn zapi(&mut self, svm: &str, call: Node) -> Result<Vec<Node>, Fail> {
        let mut ctx = api::Ctx {
            a: self.a,
            svm: Some(svm.to_string()),
            tuning: self.tuning,
            svm_user: matches!(self.scope, UserScope::Svm(_)),
        };
        api::dispatch(&mut ctx, &call)
    }

    /// Records a job for a change already made; it answers `running` for the configured
    /// polls, then `success` (or `failure` with an injected error).
    pub fn job(&mut self, svm: &str, description: String) -> u64 {
        let id = self.a.id();
        self.a.jobs.insert(
            id,
            super::state::Job {
                description,
                vserver: svm.to_string(),
                polls_left: self.tuning.async_polls,
                error: self.job_error.take(),
            },
        );
        // Finished jobs are kept for their pollers; the oldest go once there are many.
        while self.a.jobs.len() > MAX_JOBS {
            let Some(old) = self
                .a
                .jobs
                .iter()
                .find(|(_, j)| j.polls_left == 0)
                .map(|(k, _)| *k)
            else {
                break;
            };
            self.a.jobs.remove(&old);
        }
        id
    }
}

impl Ctx<'_> {
    /// Keeps a new object (by uuid) out of the next `visible_after` collection GETs.
    pub fn unlist(&mut self, uuid: String) {
        if self.visible_after > 0 {
            self.a.unlisted.insert(uuid, self.visible_after);
        }
    }

    /// Drops the records still unlisted from a collection (`uuid_at`: where a record holds
    /// the uuid), counting this read against each.
    pub fn listed(&mut self, records: Vec<(String, Value)>, uuid_at: &str) -> Vec<(String, Value)> {
        if self.a.unlisted.is_empty() {
            return records;
        }
        let kept = records
            .into_iter()
            .filter(|(_, r)| text(r, uuid_at).is_none_or(|u| !self.a.unlisted.contains_key(&u)))
            .collect();
        for left in self.a.unlisted.values_mut() {
            *left = left.saturating_sub(1);
        }
        self.a.unlisted.retain(|_, left| *left > 0);
        kept
    }
}

const MAX_JOBS: usize = 256;

/// The job uuid of a job id, and back.
pub(super) fn job_uuid(id: u64) -> String {
    format!("10b00000-0000-4000-8000-{id:012x}")
}

pub(super) fn job_id(uuid: &str) -> Option<u64> {
    u64::from_str_radix(uuid.strip_prefix("10b00000-0000-4000-8000-")?, 16).ok()
}

/// A string at a dotted path of a JSON value.
pub(super) fn text(v: &Value, path: &str) -> Option<String> {
    let mut cur = v;
    for p in path.split('.') {
        cur = cur.get(p)?;
    }
    match cur {
        // ZAPI trims its inputs; so do reads of a body, so names match what is stored.
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The dotted paths of a body's leaves; array items share their array's path.
fn leaves(v: &Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(x, &p, out);
            }
        }
        Value::Array(items) if items.iter().any(Value::is_object) => {
            for x in items {
                leaves(x, prefix, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

/// Refuses a body that is not an object or names a field this request does not take (ONTAP
/// refuses unknown fields rather than ignoring them).
pub(super) fn check_body(req: &Req, allowed: &[&str]) -> Result<(), RestError> {
    if !req.body.is_object() {
        return Err(bad_field("body", "The request body must be a JSON object"));
    }
    let mut paths = Vec::new();
    leaves(&req.body, "", &mut paths);
    for p in paths {
        if !allowed.contains(&p.as_str()) {
            return Err(bad_field(&p, format!("Unexpected argument \"{p}\"")));
        }
    }
    Ok(())
}

/// A required string field of the body.
pub(super) fn need(req: &Req, field: &str) -> Result<String, RestError> {
    text(&req.body, field)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad_field(field, format!("Missing value: \"{field}\"")))
}

/// A bool field of the body, if present.
pub(super) fn boolean(req: &Req, field: &str) -> Result<Option<bool>, RestError> {
    match text(&req.body, field).as_deref() {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(x) => Err(bad_field(field, format!("\"{x}\" is not a boolean"))),
    }
}

/// A byte count field of the body, if present.
pub(super) fn bytes(req: &Req, field: &str) -> Result<Option<i64>, RestError> {
    let mut cur = &req.body;
    for p in field.split('.') {
        match cur.get(p) {
            Some(x) => cur = x,
            None => return Ok(None),
        }
    }
    cur.as_i64()
        .map(Some)
        .ok_or_else(|| bad_field(field, format!("\"{field}\" must be an integer")))
}

/// Turns a ZAPI failure into ONTAP's REST error: the first `(errno, status, code)` of `map`
/// that matches, else the generic forms (13115 → 400/2, 15698 → 404/2621462, 13003 → 403);
/// anything else keeps the ZAPI errno as its code (400).
pub(super) fn mapped(f: Fail, map: &[(u32, u16, u32)]) -> RestError {
    if let Some((_, status, code)) = map.iter().find(|(e, _, _)| *e == f.errno) {
        return err(*status, code, f.reason);
    }
    match f.errno {
        errno::EINVALIDINPUTERROR => err(400, 2, f.reason),
        errno::EVSERVERNOTFOUND => err(404, 2621462, f.reason),
        errno::EAPIPRIVILEGE => err(403, errno::EAPIPRIVILEGE, f.reason),
        e => err(400, e, f.reason),
    }
}

/// `/api/…` requests: authentication is checked by the caller.
pub(super) async fn handle(shared: &Shared, req: HttpRequest) -> HttpResponse {
    let rel = req
        .path
        .strip_prefix("/api")
        .unwrap_or_default()
        .to_string();
    let body = if req.body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        match serde_json::from_slice::<Value>(&req.body) {
            Ok(v) => v,
            Err(e) => return respond(Err(bad_field("body", format!("Invalid JSON: {e}")))),
        }
    };
    let r = Req {
        method: req.method.clone(),
        segs: rel
            .split('/')
            .filter(|s| !s.is_empty())
            .map(collection::decode)
            .collect(),
        path: rel,
        raw_query: req.query.clone(),
        params: collection::parse_query(&req.query),
        body,
    };
    shared.store.count(&format!("{} /api{}", r.method, r.path));
    let rule = {
        let mut rules = shared.store.fail_rules();
        let hit = rules
            .iter_mut()
            .find(|f| f.applies_rest(&r.method, &r.path) && rand::random::<f64>() < f.rate);
        hit.map(|f| {
            if let Some(t) = &mut f.times {
                *t -= 1;
            }
            f.clone()
        })
        .inspect(|_| rules.retain(|f| f.times != Some(0)))
    };
    let mut job_error = None;
    if let Some(f) = rule {
        if !f.via_job {
            return respond(Err(err(
                f.status,
                f.errno,
                format!(
                    "{} /api{}: injected failure (storch-sim --fail)",
                    r.method, r.path
                ),
            )));
        }
        job_error = Some((
            f.errno,
            "injected job failure (storch-sim --fail)".to_string(),
        ));
    }
    let out = {
        let mut a = shared.store.lock();
        let mut ctx = Ctx {
            a: &mut a,
            tuning: shared.tuning,
            scope: shared.scope.clone(),
            job_error,
            visible_after: shared.visible_after,
        };
        let out = route(&mut ctx, &r);
        let out = match out {
            Ok(Reply::Job(id, loc)) if r.param("return_timeout").is_some_and(|t| t != "0") => {
                finish_now(&mut ctx, id, loc)
            }
            o => o,
        };
        if r.method != "GET"
            && out.is_ok()
            && let Err(e) = shared.store.persist(&a)
        {
            Err(err(
                500,
                errno::EINTERNALERROR,
                format!("simulator could not persist its state: {e}"),
            ))
        } else {
            out
        }
    };
    respond(out)
}

/// `return_timeout=N` (N > 0): the simulator's jobs end by polls, not time, so the job is
/// taken as finished within the timeout and its outcome answered at once.
fn finish_now(ctx: &mut Ctx<'_>, id: u64, loc: Option<String>) -> Answer {
    let job = ctx.a.jobs.remove(&id);
    match job.and_then(|j| j.error) {
        Some((code, message)) => Err(err(400, code, message)),
        None => Ok(match loc {
            Some(l) => Reply::Created(json!({}), l),
            None => Reply::Ok(json!({})),
        }),
    }
}

fn route(ctx: &mut Ctx<'_>, r: &Req) -> Answer {
    let segs: Vec<&str> = r.segs.iter().map(String::as_str).collect();
    let m = r.method.as_str();
    match segs.as_slice() {
        ["cluster" | "svm" | "network" | "support", ..]
        | ["storage", "aggregates", ..]
        | ["protocols", "san", "iscsi", ..] => cluster::route(ctx, r, m, &segs),
        ["storage", "volumes", ..] => volumes::route(ctx, r, m, &segs[2..]),
        ["storage", "qtrees" | "quota", ..] | ["protocols", "nfs", ..] => {
            nas::route(ctx, r, m, &segs)
        }
        ["storage", "luns", ..] | ["protocols", "san", ..] => san::route(ctx, r, m, &segs),
        ["private", "cli", "volume", "recovery-queue", rest @ ..] => {
            recovery::route(ctx, r, m, rest)
        }
        _ => Err(err(
            404,
            4,
            format!("API not found: {} /api{}", r.method, r.path),
        )),
    }
}

/// 405 for a method a resource does not take.
pub(super) fn no_method(r: &Req) -> RestError {
    err(
        405,
        3,
        format!("The method {} is not allowed on /api{}", r.method, r.path),
    )
}

fn respond(out: Answer) -> HttpResponse {
    let (status, body, location) = match out {
        Ok(Reply::Ok(v)) => (200, v, None),
        Ok(Reply::Created(v, loc)) => (201, v, Some(loc)),
        Ok(Reply::Job(id, loc)) => {
            let uuid = job_uuid(id);
            (
                202,
                json!({"job": {"uuid": uuid,
                    "_links": {"self": {"href": format!("/api/cluster/jobs/{uuid}")}}}}),
                loc,
            )
        }
        Err(e) => {
            let mut error = json!({"message": e.message, "code": e.code});
            if let Some(t) = e.target {
                error["target"] = json!(t);
            }
            (e.status, json!({ "error": error }), None)
        }
    };
    let mut resp = HttpResponse::new(
        status,
        "application/hal+json",
        serde_json::to_vec(&body).unwrap_or_default(),
    );
    if let Some(l) = location {
        resp.headers.push(("Location", l));
    }
    resp
}

/// The 401 answer to bad or missing credentials.
pub(super) fn unauthorized() -> HttpResponse {
    let mut r = HttpResponse::new(
        401,
        "application/hal+json",
        json!({"error": {"message": "not authorized for that command", "code": "6"}}).to_string(),
    );
    r.headers
        .push(("WWW-Authenticate", "Basic realm=\"netapp\"".to_string()));
    r
}

impl FailRule {
    /// Whether a REST rule (`METHOD@PATH`) covers this request; `*` is any method, and the
    /// path is matched without `/api/` as a ZAPI query pattern (`storage/volumes*`).
    pub(super) fn applies_rest(&self, method: &str, path: &str) -> bool {
        let Some(p) = &self.path else {
            return false;
        };
        (self.api == "*" || self.api == method)
            && api::pattern_matches(p, path.trim_start_matches('/'))
    }
}

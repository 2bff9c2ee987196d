//! The NEF REST resources the simulator serves: one routing table, the error bodies, the
//! collection conventions (`fields`, `limit`/`offset`, `next` links), request bodies checked
//! field by field, and asynchronous jobs.
//!
//! - `storage.rs`: pools, volume groups, zvols, snapshots, clones, promote.
//! - `san.rs`: iSCSI targets (CHAP), target groups, host groups, LUN mappings, remote
//!   initiators.
//! - `system.rs`: jobs, license, cluster, system properties.

mod san;
mod storage;
mod system;

use serde_json::{Map, Value, json};

use super::state::{Appliance, Job, Op};

/// The `code`s of error bodies (docs/wire-notes.md#the-nexentastor-simulator).
pub mod codes {
    /// The object already exists; also: a dataset or snapshot whose snapshots have clones.
    pub const EEXIST: &str = "EEXIST";
    /// The object (or a dataset, group or target it names) does not exist.
    pub const ENOENT: &str = "ENOENT";
    /// The object is in use (mapped, has snapshots, is a group member).
    pub const EBUSY: &str = "EBUSY";
    /// Not logged in: no, an unknown or an expired token; wrong credentials at login.
    pub const EAUTH: &str = "EAUTH";
    /// A value breaks the appliance's rules (size, block size, name, CHAP secret).
    pub const EINVAL: &str = "EINVAL";
    /// The request's shape: not JSON, an unknown, missing or mistyped field or parameter.
    pub const EBADARG: &str = "EBADARG";
    /// The pool has too little free space.
    pub const ENOSPC: &str = "ENOSPC";
}

/// A refused request: HTTP status and the NEF error body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    pub status: u16,
    pub code: String,
    pub message: String,
}

/// The status that goes with each code (the simulator's choice; clients look at `code`).
pub fn status_of(code: &str) -> u16 {
    match code {
        codes::EAUTH => 401,
        codes::ENOENT => 404,
        codes::EEXIST => 409,
        codes::EBUSY => 500,
        _ => 400,
    }
}

fn name_of(code: &str) -> &'static str {
    match code {
        codes::EAUTH => "AuthenticationError",
        codes::ENOENT => "NotFoundError",
        codes::EEXIST => "ExistsError",
        codes::EBUSY => "BusyError",
        codes::ENOSPC => "NoSpaceError",
        _ => "ValidationError",
    }
}

impl Fail {
    pub fn new(code: &str, message: impl Into<String>) -> Fail {
        Fail {
            status: status_of(code),
            code: code.to_string(),
            message: message.into(),
        }
    }

    pub fn body(&self) -> Value {
        json!({"name": name_of(&self.code), "message": self.message, "code": self.code})
    }
}

pub(super) fn not_found(what: &str, id: &str) -> Fail {
    Fail::new(codes::ENOENT, format!("{what} {id:?} does not exist"))
}

pub(super) fn exists(what: &str, id: &str) -> Fail {
    Fail::new(codes::EEXIST, format!("{what} {id:?} already exists"))
}

pub(super) fn busy(message: impl Into<String>) -> Fail {
    Fail::new(codes::EBUSY, message)
}

pub(super) fn invalid(message: impl Into<String>) -> Fail {
    Fail::new(codes::EINVAL, message)
}

pub(super) fn bad_arg(message: impl Into<String>) -> Fail {
    Fail::new(codes::EBADARG, message)
}

/// A handler's answer: HTTP status and JSON body (None: empty).
pub type R = Result<(u16, Option<Value>), Fail>;

pub(super) fn ok(v: Value) -> R {
    Ok((200, Some(v)))
}

pub(super) fn created() -> R {
    Ok((201, None))
}

pub(super) fn done() -> R {
    Ok((200, None))
}

/// Knobs that shape answers.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// Most items per collection page (also the default `limit`).
    pub page_cap: usize,
    /// Polls of `/jobStatus/<id>` answered 202 before a job runs; 0 answers synchronously.
    pub job_polls: u32,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            page_cap: 100,
            job_polls: 1,
        }
    }
}

pub(super) struct Ctx<'a> {
    pub a: &'a mut Appliance,
    pub tuning: Tuning,
    /// Set by a handler that changed the state (so it is persisted).
    pub dirty: bool,
}

impl Ctx<'_> {
    /// Runs `op` now (no job polls) or checks it on a copy and answers 202 with a job that
    /// runs it after its polls.
    pub fn start(&mut self, op: Op) -> R {
        self.dirty = true;
        if self.tuning.job_polls == 0 {
            return storage::apply(self.a, &op);
        }
        let mut trial = self.a.clone();
        storage::apply(&mut trial, &op)?;
        let id = self.a.next_id();
        self.a.jobs.insert(
            id.clone(),
            Job {
                op,
                polls_left: self.tuning.job_polls,
                outcome: None,
            },
        );
        self.a.prune_jobs();
        Ok((202, Some(monitor(&id))))
    }
}

/// The body of a running job's answer: its monitor link.
pub fn monitor(id: &str) -> Value {
    json!({"links": [{"rel": "monitor", "href": format!("/jobStatus/{id}")}]})
}

/// A request's query string, decoded.
pub(super) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    pub fn parse(q: &str) -> Result<Query, Fail> {
        let mut pairs = Vec::new();
        for part in q.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let k = decode(k, true)?;
            if pairs.iter().any(|(p, _): &(String, String)| *p == k) {
                return Err(bad_arg(format!("query parameter {k:?} given twice")));
            }
            pairs.push((k, decode(v, true)?));
        }
        Ok(Query { pairs })
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(p, _)| p == k)
            .map(|(_, v)| v.as_str())
    }

    /// Refuses a parameter not in `allowed`.
    pub fn allow(&self, allowed: &[&str]) -> Result<(), Fail> {
        match self
            .pairs
            .iter()
            .find(|(k, _)| !allowed.contains(&k.as_str()))
        {
            Some((k, _)) => Err(bad_arg(format!("unknown query parameter {k:?}"))),
            None => Ok(()),
        }
    }

    pub fn bool(&self, k: &str) -> Result<Option<bool>, Fail> {
        match self.get(k) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(v) => Err(bad_arg(format!(
                "query parameter {k}: {v:?} is not true or false"
            ))),
        }
    }

    fn usize(&self, k: &str) -> Result<Option<usize>, Fail> {
        self.get(k)
            .map(|v| {
                v.parse::<usize>().map_err(|_| {
                    bad_arg(format!(
                        "query parameter {k}: {v:?} is not a non-negative integer"
                    ))
                })
            })
            .transpose()
    }
}

/// Percent-decoding (`+` is a space when `plus`, as in form-encoded queries).
pub fn decode(s: &str, plus: bool) -> Result<String, Fail> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = s
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| bad_arg(format!("bad percent-escape in {s:?}")))?;
                out.push(hex);
                i += 3;
            }
            b'+' if plus => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| bad_arg(format!("{s:?} is not UTF-8 once decoded")))
}

/// Percent-encodes a query value (everything but unreserved characters).
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (c as char).to_string()
            }
            _ => format!("%{c:02X}"),
        })
        .collect()
}

/// What a handler gets: the `*` segments of its route (decoded), the query and the body.
pub(super) struct Req<'a> {
    pub args: Vec<String>,
    pub query: &'a Query,
    pub body: Option<&'a Value>,
    /// The request path as sent (for `next` links).
    pub path: &'a str,
}

impl<'a> Req<'a> {
    pub fn arg(&self, i: usize) -> &str {
        self.args.get(i).map(String::as_str).unwrap_or_default()
    }

    /// The body as an object whose fields are all in `allowed`.
    pub fn fields(&self, allowed: &[&str]) -> Result<Fields<'a>, Fail> {
        let map = match self.body {
            Some(Value::Object(m)) => m,
            Some(_) => return Err(bad_arg("the request body must be a JSON object")),
            None => return Err(bad_arg("the request has no body")),
        };
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(bad_arg(format!("unknown field {k:?}")));
        }
        Ok(Fields { map })
    }

    /// One object, projected by `fields` (only `fields` allowed in the query).
    pub fn one(&self, v: Value) -> R {
        self.query.allow(&["fields"])?;
        ok(project(v, self.query.get("fields"))?)
    }

    /// A collection answer: `items` filtered by the caller, projected by `fields`, paged by
    /// `offset` and `limit` (at most the page cap), with a `next` link while more remain.
    /// `filters` are the query parameters the collection takes beside the paging ones.
    pub fn page(&self, ctx: &Ctx<'_>, filters: &[&str], items: Vec<Value>) -> R {
        let mut allowed = vec!["fields", "limit", "offset"];
        allowed.extend_from_slice(filters);
        self.query.allow(&allowed)?;
        let offset = self.query.usize("offset")?.unwrap_or(0);
        let cap = ctx.tuning.page_cap;
        let limit = match self.query.usize("limit")? {
            Some(0) => return Err(invalid("limit must be at least 1")),
            Some(l) => l.min(cap),
            None => cap,
        };
        let total = items.len();
        let fields = self.query.get("fields");
        let data = items
            .into_iter()
            .skip(offset)
            .take(limit)
            .map(|v| project(v, fields))
            .collect::<Result<Vec<_>, _>>()?;
        let mut links = vec![json!({"rel": "self", "href": self.href(offset, limit)})];
        if offset.saturating_add(limit) < total {
            links.push(json!({"rel": "next", "href": self.href(offset + limit, limit)}));
        }
        ok(json!({"data": data, "links": links}))
    }

    fn href(&self, offset: usize, limit: usize) -> String {
        let mut q: Vec<String> = self
            .query
            .pairs
            .iter()
            .filter(|(k, _)| k != "offset" && k != "limit")
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        q.push(format!("offset={offset}"));
        q.push(format!("limit={limit}"));
        format!("{}?{}", self.path, q.join("&"))
    }
}

/// Keeps only the `fields` (comma-separated) of an object; an unknown field is refused.
fn project(v: Value, fields: Option<&str>) -> Result<Value, Fail> {
    let Some(fields) = fields else {
        return Ok(v);
    };
    let Value::Object(mut m) = v else {
        return Ok(v);
    };
    let mut out = Map::new();
    for f in fields.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let val = m
            .remove(f)
            .ok_or_else(|| bad_arg(format!("fields: unknown field {f:?}")))?;
        out.insert(f.to_string(), val);
    }
    Ok(Value::Object(out))
}

/// A JSON request body, checked against the fields a request has.
pub(super) struct Fields<'a> {
    map: &'a Map<String, Value>,
}

fn wrong(name: &str, expected: &str) -> Fail {
    bad_arg(format!("field {name}: expected {expected}"))
}

impl<'a> Fields<'a> {
    /// A field; JSON null counts as absent.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    pub fn required(&self, name: &str) -> Result<&'a Value, Fail> {
        self.get(name)
            .ok_or_else(|| bad_arg(format!("missing required field {name}")))
    }

    pub fn opt_str(&self, name: &str) -> Result<Option<&'a str>, Fail> {
        self.get(name)
            .map(|v| v.as_str().ok_or_else(|| wrong(name, "a string")))
            .transpose()
    }

    pub fn str(&self, name: &str) -> Result<&'a str, Fail> {
        self.required(name)?;
        Ok(self.opt_str(name)?.unwrap_or_default())
    }

    pub fn opt_u64(&self, name: &str) -> Result<Option<u64>, Fail> {
        self.get(name)
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| wrong(name, "a non-negative integer"))
            })
            .transpose()
    }

    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, Fail> {
        self.get(name)
            .map(|v| v.as_bool().ok_or_else(|| wrong(name, "a boolean")))
            .transpose()
    }

    pub fn opt_array(&self, name: &str) -> Result<Option<&'a Vec<Value>>, Fail> {
        self.get(name)
            .map(|v| v.as_array().ok_or_else(|| wrong(name, "an array")))
            .transpose()
    }

    /// An array of strings.
    pub fn opt_strs(&self, name: &str) -> Result<Option<Vec<&'a str>>, Fail> {
        let Some(a) = self.opt_array(name)? else {
            return Ok(None);
        };
        a.iter()
            .map(|v| v.as_str().ok_or_else(|| wrong(name, "an array of strings")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

type Handler = fn(&mut Ctx<'_>, &Req<'_>) -> R;

pub(super) struct Route {
    pub method: &'static str,
    /// Segments; `*` matches one (a URL-escaped id).
    pub path: &'static str,
    pub run: Handler,
}

const fn r(method: &'static str, path: &'static str, run: Handler) -> Route {
    Route { method, path, run }
}

/// The path of the login request, the only one served without a token.
pub const LOGIN: &str = "auth/login";

/// The routing table (paths below `/`, after an optional API version segment such as
/// `v1.2.6`). `POST auth/login` is answered before it.
pub(super) const ROUTES: &[Route] = &[
    r("GET", "jobStatus/*", system::job),
    r("GET", "settings/license", system::license),
    r("GET", "settings/properties/*", system::property),
    r("GET", "rsf/clusters", system::clusters),
    r("GET", "storage/pools", storage::pools),
    r("GET", "storage/pools/*", storage::pool),
    r("GET", "storage/volumeGroups", storage::volume_groups),
    r("GET", "storage/volumeGroups/*", storage::volume_group),
    r("GET", "storage/volumes", storage::volumes),
    r("POST", "storage/volumes", storage::create_volume),
    r("GET", "storage/volumes/*", storage::volume),
    r("PUT", "storage/volumes/*", storage::update_volume),
    r("DELETE", "storage/volumes/*", storage::delete_volume),
    r("POST", "storage/volumes/*/promote", storage::promote),
    r("GET", "storage/snapshots", storage::snapshots),
    r("POST", "storage/snapshots", storage::create_snapshot),
    r("GET", "storage/snapshots/*", storage::snapshot),
    r("DELETE", "storage/snapshots/*", storage::delete_snapshot),
    r("POST", "storage/snapshots/*/clone", storage::clone),
    r("GET", "san/iscsi/targets", san::targets),
    r("POST", "san/iscsi/targets", san::create_target),
    r("GET", "san/iscsi/targets/*", san::target),
    r("PUT", "san/iscsi/targets/*", san::update_target),
    r("DELETE", "san/iscsi/targets/*", san::delete_target),
    r("GET", "san/targetgroups", san::target_groups),
    r("POST", "san/targetgroups", san::create_target_group),
    r("GET", "san/targetgroups/*", san::target_group),
    r("PUT", "san/targetgroups/*", san::update_target_group),
    r("DELETE", "san/targetgroups/*", san::delete_target_group),
    r("GET", "san/hostgroups", san::host_groups),
    r("POST", "san/hostgroups", san::create_host_group),
    r("GET", "san/hostgroups/*", san::host_group),
    r("PUT", "san/hostgroups/*", san::update_host_group),
    r("DELETE", "san/hostgroups/*", san::delete_host_group),
    r("GET", "san/lunMappings", san::lun_mappings),
    r("POST", "san/lunMappings", san::create_lun_mapping),
    r("GET", "san/lunMappings/*", san::lun_mapping),
    r("DELETE", "san/lunMappings/*", san::delete_lun_mapping),
    r("GET", "san/iscsi/remoteInitiators", san::initiators),
    r("POST", "san/iscsi/remoteInitiators", san::create_initiator),
    r("GET", "san/iscsi/remoteInitiators/*", san::initiator),
    r("PUT", "san/iscsi/remoteInitiators/*", san::update_initiator),
    r(
        "DELETE",
        "san/iscsi/remoteInitiators/*",
        san::delete_initiator,
    ),
];

fn matches(pattern: &str, segs: &[String]) -> Option<Vec<String>> {
    let pat: Vec<&str> = pattern.split('/').collect();
    if pat.len() != segs.len() {
        return None;
    }
    let mut args = Vec::new();
    for (p, s) in pat.iter().zip(segs) {
        match *p {
            "*" => args.push(s.clone()),
            p if p == s => {}
            _ => return None,
        }
    }
    Some(args)
}

/// Whether `s` is an API version segment (`v1`, `v1.2.6`).
pub fn is_version(s: &str) -> bool {
    s.strip_prefix('v').is_some_and(|v| {
        !v.is_empty()
            && v.split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Finds the route of `method` and `segs` (decoded). `Err(true)` when the path exists for
/// another method (405), `Err(false)` when it does not (404).
pub(super) fn resolve(
    method: &str,
    segs: &[String],
) -> Result<(&'static Route, Vec<String>), bool> {
    let mut other_method = false;
    for route in ROUTES {
        if let Some(args) = matches(route.path, segs) {
            if route.method == method {
                return Ok((route, args));
            }
            other_method = true;
        }
    }
    Err(other_method)
}

/// A job's status poll, shared by `system::job`: 202 while polls remain, then the op runs
/// once and its answer is kept.
pub(super) fn poll(ctx: &mut Ctx<'_>, id: &str) -> R {
    let job = ctx.a.jobs.get_mut(id).ok_or_else(|| not_found("job", id))?;
    if let Some((status, body)) = &job.outcome {
        return Ok((*status, body.clone()));
    }
    ctx.dirty = true;
    if job.polls_left > 0 {
        job.polls_left -= 1;
        return Ok((202, Some(monitor(id))));
    }
    let op = job.op.clone();
    let outcome = match storage::apply(ctx.a, &op) {
        Ok(answer) => answer,
        Err(f) => (f.status, Some(f.body())),
    };
    if let Some(job) = ctx.a.jobs.get_mut(id) {
        job.outcome = Some(outcome.clone());
    }
    Ok(outcome)
}

//! The Web Services Proxy's resources the simulator answers (docs/wire-notes.md#the-e-series-simulator),
//! behind one routing table.
//!
//! Every handler checks its request first (unknown fields, missing required ones and wrong
//! types are refused with 422 and the proxy's error body, naming the field) and changes the
//! array last, so a refused request changes nothing. One file per object family:
//!
//! - `system.rs`: registration, the storage system object, capabilities, `about`.
//! - `volumes.rs`: pools, volumes (create, list, read, delete) and their expansion.
//! - `hosts.rs`: host types, hosts, host groups.
//! - `mappings.rs`: LUN mappings and the iSCSI target.
//! - `copies.rs`: volume copy jobs and their control endpoint.

mod copies;
mod hosts;
mod mappings;
mod system;
mod volumes;

use serde_json::{Value, json};

use super::state::{Array, Proxy};

pub use self::system::about as system_about;

/// The `retcode`s of error bodies. Those marked "spec" come from public client code
/// (docs/wire-notes.md); the others are the simulator's choice (the real proxy's code for the
/// case is unverified).
pub mod retcodes {
    /// spec: the stored array password is wrong (Cinder also knows it as "30").
    pub const AUTH_FAIL_PASSWORD: &str = "authFailPassword";
    /// A request field is missing, unknown, of the wrong type or out of range.
    pub const INVALID_INPUT: &str = "invalidInput";
    /// A label is empty, too long (over 30 characters) or has characters the array refuses.
    pub const INVALID_LABEL: &str = "invalidLabel";
    /// Another object of the kind already has the label.
    pub const DUPLICATE_LABEL: &str = "duplicateLabel";
    /// The pool has too little free space.
    pub const NO_SPACE: &str = "insufficientCapacity";
    /// The pool is offline.
    pub const POOL_OFFLINE: &str = "poolOffline";
    /// The volume already has a mapping.
    pub const ALREADY_MAPPED: &str = "volumeAlreadyMapped";
    /// The LUN is taken for the host or group (or no LUN is free).
    pub const LUN_IN_USE: &str = "lunInUse";
    /// An iSCSI name already belongs to another host.
    pub const DUPLICATE_PORT: &str = "duplicatePort";
    /// The object is busy (an expansion or copy is running on it).
    pub const BUSY: &str = "operationInProgress";
    /// The array does not have the feature (`--features`).
    pub const NOT_SUPPORTED: &str = "featureNotSupported";
    /// A ref, path or system id names nothing.
    pub const NOT_FOUND: &str = "notFound";
    /// The array cannot be reached.
    pub const OFFLINE: &str = "storageSystemOffline";
    /// The default of an injected failure.
    pub const INJECTED: &str = "injectedFault";
}

/// A refused request: HTTP status and the proxy's error body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    pub status: u16,
    pub retcode: String,
    /// symbol, webservice, systemerror or devicemgrerror.
    pub code_type: &'static str,
    pub message: String,
}

impl Fail {
    pub fn body(&self) -> Value {
        json!({
            "errorMessage": self.message,
            "localizedMessage": self.message,
            "retcode": self.retcode,
            "codeType": self.code_type,
        })
    }
}

/// A 422 from the array (codeType `symbol`).
pub(super) fn refuse(retcode: &str, message: impl Into<String>) -> Fail {
    Fail {
        status: 422,
        retcode: retcode.to_string(),
        code_type: "symbol",
        message: message.into(),
    }
}

/// A 422 from the web service's request checks (codeType `webservice`).
pub(super) fn invalid(message: impl Into<String>) -> Fail {
    Fail {
        status: 422,
        retcode: retcodes::INVALID_INPUT.to_string(),
        code_type: "webservice",
        message: message.into(),
    }
}

pub(super) fn not_found(what: &str, r: &str) -> Fail {
    Fail {
        status: 404,
        retcode: retcodes::NOT_FOUND.to_string(),
        code_type: "webservice",
        message: format!("The {what} {r:?} was not found"),
    }
}

pub(super) fn offline() -> Fail {
    Fail {
        status: 424,
        retcode: retcodes::OFFLINE.to_string(),
        code_type: "devicemgrerror",
        message: "The storage-system is offline".into(),
    }
}

/// A handler's answer: HTTP status and JSON body (None for 204).
pub type R = Result<(u16, Option<Value>), Fail>;

pub(super) fn ok(v: Value) -> R {
    Ok((200, Some(v)))
}

pub(super) fn no_content() -> R {
    Ok((204, None))
}

/// Knobs that shape answers.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// Progress reads (`GET …/expand`, reads of the volume) before an expansion completes.
    pub expand_polls: u32,
    /// Reads of a copy job before it completes.
    pub copy_polls: u32,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            expand_polls: 2,
            copy_polls: 2,
        }
    }
}

pub(super) struct Ctx<'a> {
    pub p: &'a mut Proxy,
    pub tuning: Tuning,
    /// The storage system id of the request (empty for proxy-level requests).
    pub system: String,
    /// Set by a handler that changed the state (so it is persisted).
    pub dirty: bool,
    /// Set by an injected "created without its tags" fault: a volume create drops metaTags.
    pub drop_tags: bool,
}

impl Ctx<'_> {
    pub fn a(&mut self) -> &mut Array {
        &mut self.p.array
    }
}

/// What a handler gets: the `*` segments of its route, the query and the body.
pub(super) struct Req<'a> {
    pub args: Vec<&'a str>,
    pub query: &'a str,
    pub body: Option<&'a Value>,
}

impl<'a> Req<'a> {
    pub fn arg(&self, i: usize) -> &'a str {
        self.args.get(i).copied().unwrap_or_default()
    }

    /// The body as an object whose fields are all in `allowed`.
    pub fn fields(&self, allowed: &[&str]) -> Result<Fields<'a>, Fail> {
        Fields::new(self.body, allowed, invalid)
    }
}

type Handler = fn(&mut Ctx<'_>, &Req<'_>) -> R;

/// Proxy-level routes (under `/devmgr/v2/`) or array-scoped ones (under
/// `/devmgr/v2/storage-systems/{id}/`), which need a reachable array with a valid password.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    Proxy,
    Array,
}

pub(super) struct Route {
    pub method: &'static str,
    /// Segments; `*` matches one.
    pub path: &'static str,
    pub scope: Scope,
    pub run: Handler,
}

const fn r(method: &'static str, path: &'static str, scope: Scope, run: Handler) -> Route {
    Route {
        method,
        path,
        scope,
        run,
    }
}

use Scope::{Array as A, Proxy as P};

/// The routing table.
pub(super) const ROUTES: &[Route] = &[
    r("GET", "storage-systems", P, system::list),
    r("POST", "storage-systems", P, system::register),
    r("GET", "storage-systems/*", P, system::get),
    r("POST", "storage-systems/*", P, system::update),
    r("DELETE", "storage-systems/*", P, system::unregister),
    r("GET", "capabilities", A, system::capabilities),
    r("GET", "storage-pools", A, volumes::pools),
    r("GET", "storage-pools/*", A, volumes::pool),
    r("GET", "volumes", A, volumes::list),
    r("POST", "volumes", A, volumes::create),
    r("GET", "volumes/*", A, volumes::get),
    r("POST", "volumes/*", A, volumes::update),
    r("DELETE", "volumes/*", A, volumes::delete),
    r("POST", "volumes/*/expand", A, volumes::expand),
    r("GET", "volumes/*/expand", A, volumes::expand_progress),
    r("GET", "host-types", A, hosts::host_types),
    r("GET", "hosts", A, hosts::list),
    r("POST", "hosts", A, hosts::create),
    r("GET", "hosts/*", A, hosts::get),
    r("DELETE", "hosts/*", A, hosts::delete),
    r("GET", "host-groups", A, hosts::groups),
    r("POST", "host-groups", A, hosts::create_group),
    r("GET", "host-groups/*", A, hosts::group),
    r("DELETE", "host-groups/*", A, hosts::delete_group),
    r("GET", "volume-mappings", A, mappings::list),
    r("POST", "volume-mappings", A, mappings::create),
    r("GET", "volume-mappings/*", A, mappings::get),
    r("DELETE", "volume-mappings/*", A, mappings::delete),
    r("GET", "iscsi/target-settings", A, mappings::target),
    r("GET", "volume-copy-jobs", A, copies::list),
    r("POST", "volume-copy-jobs", A, copies::create),
    r("GET", "volume-copy-jobs/*", A, copies::get),
    r("POST", "volume-copy-jobs/*", A, copies::update),
    r("DELETE", "volume-copy-jobs/*", A, copies::delete),
    r("POST", "volume-copy-jobs-control/*", A, copies::control),
];

/// A request path below `/devmgr/v2/`, resolved: the route, the system id (array-scoped
/// routes) and the `*` segments.
pub(super) struct Resolved<'a> {
    pub route: &'static Route,
    pub system: &'a str,
    pub args: Vec<&'a str>,
}

fn matches<'a>(pattern: &str, segs: &[&'a str]) -> Option<Vec<&'a str>> {
    let pat: Vec<&str> = pattern.split('/').collect();
    if pat.len() != segs.len() {
        return None;
    }
    let mut args = Vec::new();
    for (p, s) in pat.iter().zip(segs) {
        match *p {
            "*" => args.push(*s),
            p if p == *s => {}
            _ => return None,
        }
    }
    Some(args)
}

/// Finds the route of `method` and `segs` (the path below `/devmgr/v2/`, split). `Err(true)`
/// when the path exists for another method (405), `Err(false)` when it does not (404).
pub(super) fn resolve<'a>(method: &str, segs: &[&'a str]) -> Result<Resolved<'a>, bool> {
    let mut other_method = false;
    for route in ROUTES {
        let found = match route.scope {
            Scope::Proxy => matches(route.path, segs).map(|args| {
                let system = args.first().copied().unwrap_or_default();
                (system, args)
            }),
            Scope::Array => match segs {
                ["storage-systems", id, rest @ ..] => {
                    matches(route.path, rest).map(|args| (*id, args))
                }
                _ => None,
            },
        };
        if let Some((system, args)) = found {
            if route.method == method {
                return Ok(Resolved {
                    route,
                    system,
                    args,
                });
            }
            other_method = true;
        }
    }
    Err(other_method)
}

/// A JSON request body, checked against the fields a request type has.
pub(super) type Fields<'a> = crate::sim::body::Fields<'a, Fail>;

/// Checks a label: 1 to 30 characters, none of them a control character.
pub(super) fn check_label(field: &str, label: &str) -> Result<(), Fail> {
    let n = label.chars().count();
    if n == 0 || n > 30 || label.chars().any(char::is_control) {
        return Err(refuse(
            retcodes::INVALID_LABEL,
            format!("Invalid {field} {label:?}: a label is 1 to 30 characters"),
        ));
    }
    Ok(())
}

/// A size with its unit in bytes: `size` a positive integer that fits a 32-bit signed int,
/// `sizeUnit` one of bytes, b, kb, mb, gb, tb, pb, eb, zb, yb (binary multiples).
pub(super) fn bytes(f: &Fields<'_>, size_field: &str) -> Result<u64, Fail> {
    let unit = f.str("sizeUnit")?;
    let shift = match unit {
        "bytes" | "b" => 0u32,
        "kb" => 10,
        "mb" => 20,
        "gb" => 30,
        "tb" => 40,
        "pb" => 50,
        "eb" => 60,
        "zb" => 70,
        "yb" => 80,
        other => {
            return Err(invalid(format!(
                "Invalid value for field sizeUnit: {other:?} (bytes, b, kb, mb, gb, tb, pb, eb, zb or yb)"
            )));
        }
    };
    let v = f.required(size_field)?;
    let n = v
        .as_u64()
        .filter(|n| (1..=i32::MAX as u64).contains(n))
        .ok_or_else(|| {
            f.wrong(
                size_field,
                "a positive integer that fits a 32-bit signed integer",
            )
        })?;
    let b = (n as u128) << shift;
    u64::try_from(b).map_err(|_| {
        invalid(format!(
            "Invalid value for field {size_field}: {n} {unit} is too large"
        ))
    })
}

/// Runs a resolved request: array-scoped routes first need a registered, reachable, online
/// system whose stored password is the array's.
pub(super) fn run(
    ctx: &mut Ctx<'_>,
    resolved: &Resolved<'_>,
    query: &str,
    body: Option<&Value>,
) -> R {
    if resolved.route.scope == Scope::Array {
        check_system(ctx)?;
    }
    let req = Req {
        args: resolved.args.clone(),
        query,
        body,
    };
    (resolved.route.run)(ctx, &req)
}

fn check_system(ctx: &Ctx<'_>) -> Result<(), Fail> {
    let r = ctx
        .p
        .systems
        .get(&ctx.system)
        .ok_or_else(|| not_found("storage-system", &ctx.system))?;
    if !r.reachable || ctx.p.array.offline {
        return Err(offline());
    }
    if r.stored_password != ctx.p.array.password {
        return Err(refuse(
            retcodes::AUTH_FAIL_PASSWORD,
            "The stored password for this storage array is incorrect; update it",
        ));
    }
    Ok(())
}

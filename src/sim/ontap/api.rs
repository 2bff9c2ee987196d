//! The ZAPI calls the simulator answers, with the errno values of wire-protocols §1.6.
//!
//! Every handler validates first and mutates last, so a failed call changes nothing.

use std::collections::BTreeMap;

use super::state::{Array, ExportRule, Igroup, Job, Lun, Qtree, Snapshot, Svm, Volume, now_secs};
use crate::wire::zapi::{Node, errno};

/// A failed call: errno and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    pub errno: u32,
    pub reason: String,
}

pub(super) fn fail(errno: u32, reason: impl Into<String>) -> Fail {
    Fail {
        errno,
        reason: reason.into(),
    }
}

type R = Result<Vec<Node>, Fail>;

/// Knobs that shape answers.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// The most records one iterator page holds, whatever `max-records` asks.
    pub page_cap: usize,
    /// How many `job-get-iter` polls an async job answers `running` before `success`.
    pub async_polls: u32,
}

/// APIs that only exist at cluster scope.
pub const CLUSTER_ONLY: &[&str] = &[
    "aggr-get-iter",
    "aggr-space-get-iter",
    "system-node-get-iter",
];

/// APIs that answer in either scope.
pub const ANY_SCOPE: &[&str] = &[
    "system-get-ontapi-version",
    "system-get-version",
    "vserver-get-iter",
    "net-interface-get-iter",
    "job-get-iter",
];

/// Whether a call may change the array (persisted after it passes).
pub fn is_mutating(api: &str) -> bool {
    !(api.ends_with("-get-iter")
        || api.ends_with("-list-iter")
        || api.ends_with("-entries-iter")
        || matches!(
            api,
            "system-get-ontapi-version"
                | "system-get-version"
                | "vserver-get"
                | "export-policy-get"
                | "iscsi-node-get-name"
                | "lun-map-list-info"
                | "quota-status"
        ))
}

pub(super) struct Ctx<'a> {
    pub a: &'a mut Array,
    pub svm: Option<String>,
    pub tuning: Tuning,
}

impl Ctx<'_> {
    fn svm_name(&self, api: &str) -> Result<String, Fail> {
        self.svm.clone().ok_or_else(|| {
            fail(
                errno::EAPIERROR,
                format!("{api}: this API needs a vserver context (tunnel it with vfiler)"),
            )
        })
    }

    fn svm(&mut self, api: &str) -> Result<&mut Svm, Fail> {
        let name = self.svm_name(api)?;
        self.a
            .svms
            .get_mut(&name)
            .ok_or_else(|| fail(errno::EVSERVERNOTFOUND, format!("Vserver {name} not found")))
    }
}

fn arg<'n>(api: &'n Node, name: &str) -> Result<&'n str, Fail> {
    api.text_at(name)
        .map(str::trim)
        .ok_or_else(|| fail(errno::EINVALIDINPUTERROR, format!("Missing input: {name}")))
}

fn opt<'n>(api: &'n Node, name: &str) -> Option<&'n str> {
    api.text_at(name).map(str::trim).filter(|s| !s.is_empty())
}

fn flag(api: &Node, name: &str) -> bool {
    opt(api, name) == Some("true")
}

fn leaf(name: &str, v: impl ToString) -> Node {
    Node::leaf(name, v.to_string())
}

fn list(name: &str, item: &str, values: &[String]) -> Node {
    let mut n = Node::new(name);
    for v in values {
        n.push(Node::leaf(item, v));
    }
    n
}

/// Parses a ZAPI size: bytes, or a number with k/m/g/t (binary) suffix.
fn parse_size(s: &str) -> Result<u64, Fail> {
    let s = s.trim();
    let bad = || fail(errno::EINVALIDINPUTERROR, format!("Invalid size \"{s}\""));
    let (num, mult) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (s, 1u64),
        Some((i, _)) => {
            let m = match s[i..].to_ascii_lowercase().as_str() {
                "k" | "kb" => 1 << 10,
                "m" | "mb" => 1 << 20,
                "g" | "gb" => 1 << 30,
                "t" | "tb" => 1 << 40,
                _ => return Err(bad()),
            };
            (&s[..i], m)
        }
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(bad)
}

const MIN_VOLUME: u64 = 20 << 20;
const MIN_LUN: u64 = 1 << 20;
const SNAPSHOT_POLICIES: &[&str] = &["none", "default", "default-1weekly"];

fn valid_volume_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 203
        && n.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn valid_permissions(p: &str) -> bool {
    let octal = (3..=4).contains(&p.len()) && p.chars().all(|c| ('0'..='7').contains(&c));
    let symbolic = (p.len() == 9 || p.len() == 12)
        && p.chars()
            .rev()
            .take(9)
            .zip("xwrxwrxwr".chars())
            .all(|(c, want)| c == want || c == '-')
        && p.chars().take(p.len() - 9).all(|c| c == '-');
    octal || symbolic
}

pub(super) fn dispatch(ctx: &mut Ctx<'_>, api: &Node) -> R {
    match api.name.as_str() {
        "system-get-ontapi-version" => ontapi_version(ctx),
        "system-get-version" => Ok(vec![
            leaf(
                "version",
                format!(
                    "NetApp Release 9.8 (storch-sim, ONTAPI {}.{})",
                    ctx.a.ontapi_major, ctx.a.ontapi_minor
                ),
            ),
            leaf("is-clustered", true),
            leaf("build-timestamp", 1_600_000_000),
        ]),
        "vserver-get-iter" => vserver_get_iter(ctx, api),
        "vserver-get" => vserver_get(ctx),
        "vserver-show-aggr-get-iter" => vserver_show_aggr(ctx, api),
        "aggr-get-iter" => aggr_get_iter(ctx, api),
        "net-interface-get-iter" => net_interface_get_iter(ctx, api),
        "iscsi-service-get-iter" => iscsi_service_get_iter(ctx, api),
        "iscsi-node-get-name" => iscsi_node_get_name(ctx),
        "iscsi-interface-get-iter" => iscsi_interface_get_iter(ctx, api),
        "job-get-iter" => job_get_iter(ctx, api),
        "volume-create" => volume_create(ctx, api, false),
        "volume-create-async" => volume_create(ctx, api, true),
        "volume-get-iter" => volume_get_iter(ctx, api),
        "volume-mount" => volume_mount(ctx, api),
        "volume-unmount" => volume_unmount(ctx, api),
        "volume-offline" => volume_state(ctx, api, "offline"),
        "volume-online" => volume_state(ctx, api, "online"),
        "volume-destroy" => volume_destroy(ctx, api, false),
        "volume-destroy-async" => volume_destroy(ctx, api, true),
        "volume-size" => volume_size(ctx, api, false),
        "volume-size-async" => volume_size(ctx, api, true),
        "volume-modify-iter" => volume_modify_iter(ctx, api),
        "volume-clone-create" => volume_clone_create(ctx, api),
        "volume-clone-split-start" => volume_clone_split(ctx, api),
        "snapshot-create" => snapshot_create(ctx, api),
        "snapshot-get-iter" => snapshot_get_iter(ctx, api),
        "snapshot-delete" => snapshot_delete(ctx, api),
        "qtree-create" => qtree_create(ctx, api),
        "qtree-delete" => qtree_delete(ctx, api, false),
        "qtree-delete-async" => qtree_delete(ctx, api, true),
        "qtree-rename" => qtree_rename(ctx, api),
        "qtree-list-iter" => qtree_list_iter(ctx, api),
        "quota-set-entry" => quota_set_entry(ctx, api),
        "quota-delete-entry" => quota_delete_entry(ctx, api),
        "quota-list-entries-iter" => quota_list_iter(ctx, api),
        "quota-on" | "quota-resize" => quota_switch(ctx, api, true),
        "quota-off" => quota_switch(ctx, api, false),
        "quota-status" => quota_status(ctx, api),
        "lun-create-by-size" => lun_create(ctx, api),
        "lun-get-iter" => lun_get_iter(ctx, api),
        "lun-map" => lun_map(ctx, api),
        "lun-unmap" => lun_unmap(ctx, api),
        "lun-map-list-info" => lun_map_list_info(ctx, api),
        "lun-offline" => lun_online(ctx, api, false),
        "lun-online" => lun_online(ctx, api, true),
        "lun-destroy" => lun_destroy(ctx, api),
        "lun-resize" => lun_resize(ctx, api),
        "lun-set-attribute" => {
            let path = arg(api, "path")?;
            if !ctx.svm(&api.name)?.luns.contains_key(path) {
                return Err(fail(
                    errno::EOBJECTNOTFOUND,
                    format!("LUN {path} not found"),
                ));
            }
            Ok(vec![])
        }
        "igroup-create" => igroup_create(ctx, api),
        "igroup-get-iter" => igroup_get_iter(ctx, api),
        "igroup-add" => igroup_add(ctx, api),
        "igroup-remove" => igroup_remove(ctx, api),
        "igroup-destroy" => igroup_destroy(ctx, api),
        "export-policy-create" => export_policy_create(ctx, api),
        "export-policy-get" => export_policy_get(ctx, api),
        "export-policy-destroy" => export_policy_destroy(ctx, api),
        "export-rule-create" => export_rule_create(ctx, api),
        "export-rule-get-iter" => export_rule_get_iter(ctx, api),
        "export-rule-destroy" => export_rule_destroy(ctx, api),
        other => Err(fail(
            errno::EAPINOTFOUND,
            format!("Unable to find API: {other}"),
        )),
    }
}

// ---- iterators ----

/// Whether `value` matches a ZAPI query pattern: exact, `prefix*`, `*`, `!x`, `a|b`, `>n`,
/// `<n`.
pub fn pattern_matches(pattern: &str, value: &str) -> bool {
    pattern.split('|').any(|p| {
        if let Some(neg) = p.strip_prefix('!') {
            return !pattern_matches(neg, value);
        }
        if let Some(n) = p.strip_prefix('>') {
            return matches!((value.parse::<u64>(), n.parse::<u64>()), (Ok(v), Ok(n)) if v > n);
        }
        if let Some(n) = p.strip_prefix('<') {
            return matches!((value.parse::<u64>(), n.parse::<u64>()), (Ok(v), Ok(n)) if v < n);
        }
        match p.strip_suffix('*') {
            Some(prefix) => value.starts_with(prefix),
            None => p == value,
        }
    })
}

/// Whether a record matches a query object: every filled leaf of the query must match the
/// record's element at the same path (any item, for lists); fields are ANDed.
pub fn query_matches(q: &Node, r: &Node) -> bool {
    q.children.iter().all(|qc| {
        if qc.children.is_empty() {
            if qc.text.is_empty() {
                return true;
            }
            let Some(rc) = r.child(&qc.name) else {
                return false;
            };
            if rc.children.is_empty() {
                pattern_matches(&qc.text, &rc.text)
            } else {
                rc.children
                    .iter()
                    .any(|c| pattern_matches(&qc.text, &c.text))
            }
        } else {
            match r.child(&qc.name) {
                Some(rc) => {
                    // A list query (`<data-protocols><data-protocol>nfs</…></…>`) matches
                    // when the record's list holds each queried item.
                    if qc.children.iter().all(|c| c.children.is_empty())
                        && rc.children.iter().all(|c| c.children.is_empty())
                        && qc.children.iter().all(|c| {
                            c.name == rc.children.first().map(|x| x.name.as_str()).unwrap_or("")
                        })
                    {
                        qc.children.iter().all(|c| {
                            rc.children
                                .iter()
                                .any(|x| pattern_matches(&c.text, &x.text))
                        })
                    } else {
                        query_matches(qc, rc)
                    }
                }
                None => false,
            }
        }
    })
}

/// Keeps only the fields named in `desired` (present elements; an empty element keeps the
/// whole field).
pub fn project(desired: &Node, r: &Node) -> Node {
    if desired.children.is_empty() {
        return r.clone();
    }
    let mut out = Node::new(r.name.clone());
    for rc in &r.children {
        if let Some(dc) = desired.child(&rc.name) {
            out.children.push(project(dc, rc));
        }
    }
    out
}

fn tag_for(api: &str, svm: &str, key: &str) -> String {
    Node::new(format!("{api}-key-td"))
        .with_leaf("key-0", svm)
        .with_leaf("key-1", key)
        .to_xml()
}

fn key_from_tag(tag: &str) -> Option<String> {
    let n = crate::wire::zapi::parse(tag).ok()?;
    n.text_at("key-1").map(str::to_string)
}

/// Answers an `-iter` call from every record (key, record): query, paging, projection.
fn iterate(ctx: &Ctx<'_>, api: &Node, mut records: Vec<(String, Node)>) -> R {
    if let Some(q) = api.at("query").and_then(|q| q.children.first()) {
        records.retain(|(_, r)| query_matches(q, r));
    }
    records.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(tag) = opt(api, "tag") {
        let Some(after) = key_from_tag(tag) else {
            return Err(fail(errno::EINVALIDINPUTERROR, "Invalid tag"));
        };
        records.retain(|(k, _)| *k > after);
    }
    let asked = opt(api, "max-records")
        .and_then(|m| m.parse::<u64>().ok())
        .unwrap_or(20)
        .max(1);
    let limit = (asked.min(ctx.tuning.page_cap as u64)) as usize;
    let more = records.len() > limit;
    records.truncate(limit);
    let desired = api
        .at("desired-attributes")
        .and_then(|d| d.children.first());
    let mut out = Vec::new();
    let n = records.len();
    if n > 0 {
        let mut l = Node::new("attributes-list");
        for (_, r) in &records {
            l.push(match desired {
                Some(d) => project(d, r),
                None => r.clone(),
            });
        }
        out.push(l);
    }
    if more && let Some((k, _)) = records.last() {
        let svm = ctx.svm.clone().unwrap_or_default();
        out.push(Node::leaf("next-tag", tag_for(&api.name, &svm, k)));
    }
    out.push(leaf("num-records", n));
    Ok(out)
}

/// The SVMs a call sees: the tunnelled one, or all at cluster scope.
fn visible_svms(ctx: &Ctx<'_>) -> Vec<String> {
    match &ctx.svm {
        Some(s) => vec![s.clone()],
        None => ctx.a.svms.keys().cloned().collect(),
    }
}

// ---- system, SVMs, aggregates, LIFs ----

fn ontapi_version(ctx: &mut Ctx<'_>) -> R {
    let (ma, mi) = (ctx.a.ontapi_major, ctx.a.ontapi_minor);
    Ok(vec![
        leaf("major-version", ma),
        leaf("minor-version", mi),
        Node::new("node-ontapi-details").with(
            Node::new("node-ontapi-detail-info")
                .with_leaf("node-name", "sim-01")
                .with_leaf("major-version", ma.to_string())
                .with_leaf("minor-version", mi.to_string()),
        ),
    ])
}

fn vserver_record(a: &Array, name: &str, svm: &Svm) -> Node {
    let mut info = Node::new("vserver-aggr-info-list");
    for aggr in &svm.aggregates {
        info.push(
            Node::new("vserver-aggr-info")
                .with_leaf("aggr-name", aggr)
                .with_leaf("aggr-availsize", a.available(aggr).to_string())
                .with_leaf("aggr-is-cft-precommit", "false"),
        );
    }
    let root = svm
        .volumes
        .iter()
        .find(|(_, v)| v.is_root)
        .map(|(n, _)| n.clone())
        .unwrap_or_default();
    Node::new("vserver-info")
        .with_leaf("vserver-name", name)
        .with_leaf("vserver-type", "data")
        .with_leaf("vserver-subtype", "default")
        .with_leaf("state", "running")
        .with_leaf("operational-state", "running")
        .with_leaf("uuid", &svm.uuid)
        .with(list("aggr-list", "aggr-name", &svm.aggregates))
        .with(info)
        .with(list(
            "allowed-protocols",
            "protocol",
            &["nfs".into(), "cifs".into(), "iscsi".into()],
        ))
        .with_leaf("root-volume", root)
        .with_leaf("root-volume-security-style", "unix")
        .with_leaf("ipspace", "Default")
        .with_leaf("language", "c.utf_8")
        .with_leaf("snapshot-policy", "default")
        .with_leaf("volume-delete-retention-hours", "0")
}

fn vserver_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records: Vec<(String, Node)> = visible_svms(ctx)
        .iter()
        .filter_map(|n| {
            ctx.a
                .svms
                .get(n)
                .map(|s| (n.clone(), vserver_record(ctx.a, n, s)))
        })
        .collect();
    if ctx.svm.is_none() {
        // The cluster's admin SVM, which drivers must skip.
        records.push((
            ctx.a.cluster.clone(),
            Node::new("vserver-info")
                .with_leaf("vserver-name", &ctx.a.cluster)
                .with_leaf("vserver-type", "admin")
                .with_leaf("state", "running"),
        ));
    }
    iterate(ctx, api, records)
}

fn vserver_get(ctx: &mut Ctx<'_>) -> R {
    let name = ctx.svm_name("vserver-get")?;
    let svm = ctx.svm("vserver-get")?.clone();
    Ok(vec![
        Node::new("attributes").with(vserver_record(ctx.a, &name, &svm)),
    ])
}

fn vserver_show_aggr(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for name in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&name) else {
            continue;
        };
        for aggr in &svm.aggregates {
            let Some(a) = ctx.a.aggregates.get(aggr) else {
                continue;
            };
            records.push((
                format!("{name}/{aggr}"),
                Node::new("show-aggregates")
                    .with_leaf("aggregate-name", aggr)
                    .with_leaf("aggregate-type", &a.media)
                    .with_leaf("available-size", ctx.a.available(aggr).to_string())
                    .with_leaf("is-nve-capable", a.nve_capable.to_string())
                    .with_leaf("snaplock-type", "non_snaplock")
                    .with_leaf("vserver-name", &name),
            ));
        }
    }
    iterate(ctx, api, records)
}

fn aggr_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let records = ctx
        .a
        .aggregates
        .iter()
        .map(|(name, a)| {
            let avail = ctx.a.available(name);
            (
                name.clone(),
                Node::new("aggr-attributes")
                    .with_leaf("aggregate-name", name)
                    .with(list("nodes", "node-name", std::slice::from_ref(&a.node)))
                    .with(
                        Node::new("aggr-raid-attributes")
                            .with_leaf("raid-type", "raid_dp")
                            .with_leaf("is-hybrid", (a.media == "hybrid").to_string())
                            .with_leaf("aggregate-type", &a.media)
                            .with_leaf("state", "online"),
                    )
                    .with(
                        Node::new("aggr-space-attributes")
                            .with_leaf("size-total", a.size.to_string())
                            .with_leaf("size-available", avail.to_string())
                            .with_leaf("size-used", (a.size - avail).to_string()),
                    ),
            )
        })
        .collect();
    iterate(ctx, api, records)
}

fn net_interface_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for name in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&name) else {
            continue;
        };
        for lif in &svm.lifs {
            let v6 = lif.address.contains(':');
            records.push((
                format!("{name}/{}", lif.name),
                Node::new("net-interface-info")
                    .with_leaf("interface-name", &lif.name)
                    .with_leaf("address", &lif.address)
                    .with_leaf("address-family", if v6 { "ipv6" } else { "ipv4" })
                    .with_leaf("netmask", if v6 { "64" } else { "255.255.255.0" })
                    .with_leaf("role", "data")
                    .with(list("data-protocols", "data-protocol", &lif.protocols))
                    .with_leaf("operational-status", if lif.up { "up" } else { "down" })
                    .with_leaf("administrative-status", "up")
                    .with_leaf("vserver", &name)
                    .with_leaf("current-node", "sim-01")
                    .with_leaf("current-port", "e0c")
                    .with_leaf("home-node", "sim-01")
                    .with_leaf("is-home", "true"),
            ));
        }
    }
    iterate(ctx, api, records)
}

fn iscsi_service_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = ctx.svm_name(&api.name)?;
    let svm = ctx.svm(&api.name)?;
    let mut records = Vec::new();
    if !svm.iqn.is_empty() {
        records.push((
            name.clone(),
            Node::new("iscsi-service-info")
                .with_leaf("node-name", &svm.iqn)
                .with_leaf("alias-name", &name)
                .with_leaf("is-available", "true")
                .with_leaf("vserver", &name),
        ));
    }
    iterate(ctx, api, records)
}

fn iscsi_node_get_name(ctx: &mut Ctx<'_>) -> R {
    let svm = ctx.svm("iscsi-node-get-name")?;
    if svm.iqn.is_empty() {
        return Err(fail(errno::EOBJECTNOTFOUND, "iSCSI service does not exist"));
    }
    Ok(vec![leaf("node-name", &svm.iqn)])
}

fn iscsi_interface_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = ctx.svm_name(&api.name)?;
    let svm = ctx.svm(&api.name)?;
    let records = svm
        .lifs
        .iter()
        .enumerate()
        .filter(|(_, l)| l.protocols.iter().any(|p| p == "iscsi"))
        .map(|(i, l)| {
            (
                l.name.clone(),
                Node::new("iscsi-interface-list-entry-info")
                    .with_leaf("interface-name", &l.name)
                    .with_leaf("ip-address", &l.address)
                    .with_leaf("ip-port", "3260")
                    .with_leaf("is-interface-enabled", l.up.to_string())
                    .with_leaf("tpgroup-name", &l.name)
                    .with_leaf("tpgroup-tag", (1000 + i).to_string())
                    .with_leaf("vserver", &name),
            )
        })
        .collect();
    iterate(ctx, api, records)
}

// ---- jobs ----

fn start_job(ctx: &mut Ctx<'_>, description: &str) -> Vec<Node> {
    if ctx.tuning.async_polls == 0 {
        return vec![
            leaf("result-status", "succeeded"),
            leaf("result-error-code", 0),
        ];
    }
    let id = ctx.a.id();
    ctx.a.jobs.insert(
        id,
        Job {
            description: description.to_string(),
            vserver: ctx.svm.clone().unwrap_or_default(),
            polls_left: ctx.tuning.async_polls,
        },
    );
    vec![
        leaf("result-jobid", id),
        leaf("result-status", "in_progress"),
        leaf("result-error-code", 0),
    ]
}

fn job_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let wanted = api
        .at("query")
        .and_then(|q| q.child("job-info"))
        .and_then(|j| j.text_at("job-id"))
        .and_then(|id| id.parse::<u64>().ok());
    let mut records = Vec::new();
    for (id, job) in ctx.a.jobs.iter_mut() {
        if wanted.is_some_and(|w| w != *id) {
            continue;
        }
        let state = if job.polls_left > 0 {
            job.polls_left -= 1;
            "running"
        } else {
            "success"
        };
        records.push((
            format!("{id:020}"),
            Node::new("job-info")
                .with_leaf("job-id", id.to_string())
                .with_leaf("job-state", state)
                .with_leaf("job-status-code", "0")
                .with_leaf("job-description", &job.description)
                .with_leaf(
                    "job-completion",
                    if state == "success" { "Complete" } else { "" },
                )
                .with_leaf("job-vserver", &job.vserver),
        ));
    }
    // A finished job is forgotten once its poller saw it finish.
    if let Some(w) = wanted
        && records
            .iter()
            .any(|(_, r)| r.str_at("job-state") == "success")
    {
        ctx.a.jobs.remove(&w);
    }
    iterate(ctx, api, records)
}

// ---- volumes ----

fn volume_record(a: &Array, svm: &str, name: &str, v: &Volume) -> Node {
    let mut id = Node::new("volume-id-attributes")
        .with_leaf("name", name)
        .with_leaf("owning-vserver-name", svm)
        .with_leaf("style-extended", &v.style)
        .with_leaf("type", "rw")
        .with_leaf("uuid", &v.uuid)
        .with_leaf("comment", &v.comment)
        .with_leaf("creation-time", v.created.to_string())
        .with_leaf("junction-path", v.junction.clone().unwrap_or_default());
    if v.style == "flexgroup" {
        id.push(list("aggr-list", "aggr-name", &v.aggregates));
    } else {
        id.push(Node::leaf(
            "containing-aggregate-name",
            v.aggregates.first().cloned().unwrap_or_default(),
        ));
    }
    // LUN paths are `/vol/<volume>/<lun>`: this volume's LUNs are one range of the map.
    let lun_prefix = format!("/vol/{name}/");
    let used: u64 = a
        .svms
        .get(svm)
        .map(|s| {
            s.luns
                .range(lun_prefix.clone()..)
                .take_while(|(p, _)| p.starts_with(&lun_prefix))
                .filter(|(p, _)| lun_volume(p) == Some(name))
                .map(|(_, l)| if l.space_reserved { l.size } else { 0 })
                .sum()
        })
        .unwrap_or(0);
    let mut n = Node::new("volume-attributes")
        .with(id)
        .with(
            Node::new("volume-space-attributes")
                .with_leaf("size", v.size.to_string())
                .with_leaf("size-used", used.to_string())
                .with_leaf("size-available", v.size.saturating_sub(used).to_string())
                .with_leaf(
                    "percentage-snapshot-reserve",
                    v.snapshot_reserve.to_string(),
                )
                .with_leaf("space-guarantee", &v.space_guarantee),
        )
        .with(
            Node::new("volume-state-attributes")
                .with_leaf("state", &v.state)
                .with_leaf("is-vserver-root", v.is_root.to_string()),
        )
        .with(Node::new("volume-export-attributes").with_leaf("policy", &v.export_policy))
        .with(
            Node::new("volume-security-attributes")
                .with_leaf("style", &v.security_style)
                .with(
                    Node::new("volume-security-unix-attributes")
                        .with_leaf("permissions", &v.unix_permissions),
                ),
        )
        .with(
            Node::new("volume-snapshot-attributes")
                .with_leaf("snapdir-access-enabled", v.snapdir.to_string())
                .with_leaf("snapshot-policy", &v.snapshot_policy),
        )
        .with_leaf("encrypt", v.encrypt.to_string());
    if let Some((parent, snap)) = &v.clone_parent {
        n.push(
            Node::new("volume-clone-attributes").with(
                Node::new("volume-clone-parent-attributes")
                    .with_leaf("name", parent)
                    .with_leaf("snapshot-name", snap),
            ),
        );
    }
    n
}

/// The volume of a LUN path `/vol/<volume>/<lun>`.
fn lun_volume(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/vol/")?;
    let (vol, lun) = rest.split_once('/')?;
    (!vol.is_empty() && !lun.is_empty() && !lun.contains('/')).then_some(vol)
}

fn vol_missing(name: &str) -> Fail {
    fail(
        errno::EVOLUMEDOESNOTEXIST,
        format!("Volume \"{name}\" does not exist"),
    )
}

fn no_space(what: &str) -> Fail {
    fail(
        errno::ENOSPC,
        format!("Insufficient space in aggregate for {what}"),
    )
}

fn volume_create(ctx: &mut Ctx<'_>, api: &Node, flexgroup: bool) -> R {
    let name = if flexgroup {
        arg(api, "volume-name")?
    } else {
        arg(api, "volume")?
    }
    .to_string();
    let svm_name = ctx.svm_name(&api.name)?;
    if !valid_volume_name(&name) {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid volume name \"{name}\": use letters, digits and _"),
        ));
    }
    let aggregates: Vec<String> = if flexgroup {
        api.list_at("aggr-list")
    } else {
        vec![arg(api, "containing-aggr-name")?.to_string()]
    };
    if aggregates.is_empty() {
        return Err(fail(errno::EINVALIDINPUTERROR, "Missing input: aggr-list"));
    }
    let size = parse_size(arg(api, "size")?)?;
    let guarantee = opt(api, "space-reserve").unwrap_or("volume").to_string();
    let policy = opt(api, "snapshot-policy").unwrap_or("default").to_string();
    let perms = opt(api, "unix-permissions")
        .unwrap_or("---rwxr-xr-x")
        .to_string();
    let style = opt(api, "volume-security-style")
        .unwrap_or("unix")
        .to_string();
    let export = opt(api, "export-policy").unwrap_or("default").to_string();
    let encrypt = flag(api, "encrypt");
    let reserve = match opt(api, "percentage-snapshot-reserve") {
        Some(r) => r.parse::<u64>().ok().filter(|r| *r <= 90).ok_or_else(|| {
            fail(
                errno::EINVALIDINPUTERROR,
                "Invalid percentage-snapshot-reserve",
            )
        })?,
        None if policy == "none" => 0,
        None => 5,
    };
    let junction = opt(api, "junction-path").map(str::to_string);
    let (ontapi, nve): (u32, Vec<bool>) = (
        ctx.a.ontapi_minor,
        aggregates
            .iter()
            .map(|a| ctx.a.aggregates.get(a).is_some_and(|x| x.nve_capable))
            .collect(),
    );
    let svm = ctx.svm(&api.name)?;
    if svm.volumes.contains_key(&name) {
        return Err(fail(
            errno::EEXIST,
            format!("Duplicate volume name {name}."),
        ));
    }
    for a in &aggregates {
        if !svm.aggregates.contains(a) {
            return Err(fail(
                errno::EAGGRDOESNOTEXIST,
                format!(
                    "Aggregate \"{a}\" does not exist or is not assigned to Vserver {svm_name}"
                ),
            ));
        }
    }
    if size < MIN_VOLUME {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid size {size}: the minimum volume size is 20MB"),
        ));
    }
    if guarantee != "none" && guarantee != "volume" {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid space-reserve \"{guarantee}\""),
        ));
    }
    if !SNAPSHOT_POLICIES.contains(&policy.as_str()) {
        return Err(fail(
            errno::EAPIERROR,
            format!("Snapshot policy \"{policy}\" does not exist"),
        ));
    }
    if !valid_permissions(&perms) {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid unix-permissions \"{perms}\""),
        ));
    }
    if !matches!(style.as_str(), "unix" | "ntfs" | "mixed") {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid volume-security-style \"{style}\""),
        ));
    }
    if !svm.export_policies.contains_key(&export) {
        return Err(fail(
            errno::EAPIERROR,
            format!("Export policy \"{export}\" does not exist"),
        ));
    }
    if encrypt && (ontapi < 110 || nve.iter().any(|c| !c)) {
        return Err(fail(
            errno::EAPIERROR,
            "Volume encryption is not supported on this aggregate",
        ));
    }
    if let Some(j) = &junction {
        check_junction(svm, j)?;
    }
    let alloc = if guarantee == "volume" {
        ctx.a
            .plan_alloc(&aggregates, size)
            .ok_or_else(|| no_space(&format!("volume {name}")))?
    } else {
        BTreeMap::new()
    };
    let uuid = ctx.a.uuid();
    let v = Volume {
        style: if flexgroup { "flexgroup" } else { "flexvol" }.into(),
        aggregates,
        size,
        space_guarantee: guarantee,
        state: "online".into(),
        junction,
        export_policy: export,
        snapshot_policy: policy,
        snapshot_reserve: reserve,
        unix_permissions: perms,
        security_style: style,
        snapdir: true,
        encrypt,
        comment: opt(api, "volume-comment").unwrap_or("").to_string(),
        is_root: false,
        uuid,
        created: now_secs(),
        alloc,
        snapshots: BTreeMap::new(),
        clone_parent: None,
        qtrees: BTreeMap::new(),
        quotas: BTreeMap::new(),
        quota_on: false,
    };
    ctx.svm(&api.name)?.volumes.insert(name.clone(), v);
    if flexgroup {
        Ok(start_job(ctx, &format!("Create {name}")))
    } else {
        Ok(vec![])
    }
}

fn check_junction(svm: &Svm, j: &str) -> Result<(), Fail> {
    if !j.starts_with('/') || j.starts_with("/-") || j.contains("//") {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid junction path \"{j}\""),
        ));
    }
    if svm
        .volumes
        .values()
        .any(|v| v.junction.as_deref() == Some(j))
    {
        return Err(fail(
            errno::EAPIERROR,
            format!("Junction path \"{j}\" is already in use"),
        ));
    }
    Ok(())
}

/// The volumes of `svm` a volume query can match, found through the name index as an array
/// would: one volume for an exact `volume-id-attributes/name`, a key range for `prefix*`, else
/// all. The caller still applies the whole query to each candidate's record.
fn volume_candidates<'a>(
    svm: &'a Svm,
    query: Option<&Node>,
) -> Box<dyn Iterator<Item = (&'a String, &'a Volume)> + 'a> {
    let name = query
        .and_then(|q| q.text_at("volume-id-attributes/name"))
        .filter(|n| !n.is_empty() && !n.contains(['|', '!', '<', '>']));
    match name {
        None => Box::new(svm.volumes.iter()),
        Some(n) => match n.strip_suffix('*') {
            Some(prefix) if !prefix.contains('*') => {
                let prefix = prefix.to_string();
                Box::new(
                    svm.volumes
                        .range(prefix.clone()..)
                        .take_while(move |(k, _)| k.starts_with(&prefix)),
                )
            }
            Some(_) => Box::new(svm.volumes.iter()),
            None => Box::new(svm.volumes.get_key_value(n).into_iter()),
        },
    }
}

fn volume_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let query = api.at("query").and_then(|q| q.children.first());
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&s) else {
            continue;
        };
        for (name, v) in volume_candidates(svm, query) {
            records.push((format!("{s}/{name}"), volume_record(ctx.a, &s, name, v)));
        }
    }
    iterate(ctx, api, records)
}

fn volume_mount(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "volume-name")?;
    let j = arg(api, "junction-path")?;
    let svm = ctx.svm(&api.name)?;
    if !svm.volumes.contains_key(name) {
        return Err(vol_missing(name));
    }
    check_junction(svm, j)?;
    let v = svm.volumes.get_mut(name).ok_or_else(|| vol_missing(name))?;
    if v.state != "online" {
        return Err(fail(
            errno::EVOLUMEOFFLINE,
            format!("Volume {name} is offline"),
        ));
    }
    v.junction = Some(j.to_string());
    Ok(vec![])
}

fn volume_unmount(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "volume-name")?;
    let v = ctx.svm(&api.name)?.volumes.get_mut(name).ok_or_else(|| {
        fail(
            errno::EOBJECTNOTFOUND,
            format!("Volume \"{name}\" not found"),
        )
    })?;
    if v.junction.is_none() {
        return Err(fail(
            errno::EVOL_NOT_MOUNTED,
            format!("Volume {name} is not mounted"),
        ));
    }
    v.junction = None;
    Ok(vec![])
}

fn volume_state(ctx: &mut Ctx<'_>, api: &Node, state: &str) -> R {
    let name = arg(api, "name")?;
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(name)
        .ok_or_else(|| vol_missing(name))?;
    if v.state == state {
        return Err(if state == "offline" {
            fail(
                errno::EVOLUMEOFFLINE,
                format!("Volume {name} is already offline"),
            )
        } else {
            fail(errno::EAPIERROR, format!("Volume {name} is already online"))
        });
    }
    if state == "offline" && v.junction.is_some() {
        return Err(fail(
            errno::EVOLOPNOTSUPP,
            format!("Unable to offline volume {name}: it is mounted in the namespace"),
        ));
    }
    v.state = state.to_string();
    Ok(vec![])
}

fn volume_destroy(ctx: &mut Ctx<'_>, api: &Node, is_async: bool) -> R {
    let name = if is_async {
        arg(api, "volume-name")?
    } else {
        arg(api, "name")?
    }
    .to_string();
    let force = flag(api, "unmount-and-offline") || is_async;
    let svm = ctx.svm(&api.name)?;
    let v = svm.volumes.get(&name).ok_or_else(|| vol_missing(&name))?;
    if v.is_root {
        return Err(fail(
            errno::EAPIERROR,
            "Cannot destroy the Vserver root volume",
        ));
    }
    if v.state == "online" && !force {
        return Err(fail(
            errno::EVOLOPNOTSUPP,
            format!("Volume {name} must be offline to be destroyed"),
        ));
    }
    if svm
        .volumes
        .values()
        .any(|c| c.clone_parent.as_ref().is_some_and(|(p, _)| *p == name))
    {
        return Err(fail(
            errno::EVOLDEL_NOT_ALLOW_BY_CLONE,
            format!("Volume {name} has FlexClone children; split or delete them first"),
        ));
    }
    svm.volumes.remove(&name);
    svm.luns.retain(|p, _| lun_volume(p) != Some(name.as_str()));
    if is_async {
        Ok(start_job(ctx, &format!("Destroy {name}")))
    } else {
        Ok(vec![])
    }
}

fn volume_size(ctx: &mut Ctx<'_>, api: &Node, is_async: bool) -> R {
    let name = if is_async {
        arg(api, "volume-name")?
    } else {
        arg(api, "volume")?
    }
    .to_string();
    let new = opt(api, "new-size").map(str::to_string);
    let svm = ctx.svm(&api.name)?;
    let Some(v) = svm.volumes.get(&name) else {
        return Err(fail(
            errno::EOBJECTNOTFOUND,
            format!("Volume \"{name}\" not found"),
        ));
    };
    let Some(new) = new else {
        return Ok(vec![
            leaf("volume-size", v.size),
            leaf("is-fixed-size-flex-volume", false),
            leaf("is-readonly-flex-volume", false),
            leaf("is-replica-flex-volume", false),
        ]);
    };
    let current = v.size;
    let target = match new.strip_prefix('+') {
        Some(d) => current.saturating_add(parse_size(d)?),
        None => match new.strip_prefix('-') {
            Some(d) => current.saturating_sub(parse_size(d)?),
            None => parse_size(&new)?,
        },
    };
    if target < MIN_VOLUME {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            "The minimum volume size is 20MB",
        ));
    }
    let lun_bytes: u64 = svm
        .luns
        .iter()
        .filter(|(p, _)| lun_volume(p) == Some(name.as_str()))
        .map(|(_, l)| l.size)
        .sum();
    if target < lun_bytes {
        return Err(fail(
            errno::EVOLOPNOTSUPP,
            format!("Unable to set volume attribute \"size\": the LUNs need {lun_bytes} bytes"),
        ));
    }
    let v = svm
        .volumes
        .get(&name)
        .cloned()
        .ok_or_else(|| vol_missing(&name))?;
    let mut alloc = v.alloc.clone();
    if v.space_guarantee == "volume" {
        if target > current {
            let extra = ctx
                .a
                .plan_alloc(&v.aggregates, target - current)
                .ok_or_else(|| no_space(&format!("growing volume {name}")))?;
            for (a, b) in extra {
                *alloc.entry(a).or_default() += b;
            }
        } else {
            let mut release = current - target;
            for a in v.aggregates.iter().rev() {
                if let Some(held) = alloc.get_mut(a) {
                    let r = release.min(*held);
                    *held -= r;
                    release -= r;
                }
            }
            alloc.retain(|_, b| *b > 0);
        }
    }
    let vm = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(&name)
        .ok_or_else(|| vol_missing(&name))?;
    vm.size = target;
    vm.alloc = alloc;
    if is_async {
        Ok(start_job(ctx, &format!("Resize {name}")))
    } else {
        Ok(vec![leaf("volume-size", target)])
    }
}

fn volume_modify_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let svm_name = ctx.svm_name(&api.name)?;
    let query = api
        .at("query")
        .and_then(|q| q.children.first())
        .cloned()
        .unwrap_or_default();
    let attrs = api
        .at("attributes/volume-attributes")
        .cloned()
        .unwrap_or_default();
    let a = &*ctx.a;
    let names: Vec<String> = a
        .svms
        .get(&svm_name)
        .map(|s| {
            volume_candidates(s, Some(&query))
                .filter(|(n, v)| query_matches(&query, &volume_record(a, &svm_name, n, v)))
                .map(|(n, _)| n.clone())
                .collect()
        })
        .unwrap_or_default();
    let svm = ctx.svm(&api.name)?;
    let mut ok = Node::new("success-list");
    let mut failed = Node::new("failure-list");
    let key = |n: &str| {
        Node::new("volume-key").with(
            Node::new("volume-attributes").with(
                Node::new("volume-id-attributes")
                    .with_leaf("name", n)
                    .with_leaf("owning-vserver-name", &svm_name),
            ),
        )
    };
    for n in &names {
        let Some(v) = svm.volumes.get_mut(n) else {
            continue;
        };
        let mut error: Option<(u32, String)> = None;
        if let Some(s) = attrs.text_at("volume-snapshot-attributes/snapdir-access-enabled") {
            v.snapdir = s == "true";
        }
        if let Some(p) = attrs.text_at("volume-export-attributes/policy") {
            if svm_has_policy(&svm.export_policies, p) {
                v.export_policy = p.to_string();
            } else {
                error = Some((
                    errno::EAPIERROR,
                    format!("Export policy \"{p}\" does not exist"),
                ));
            }
        }
        if let Some(p) =
            attrs.text_at("volume-security-attributes/volume-security-unix-attributes/permissions")
        {
            if valid_permissions(p) {
                v.unix_permissions = p.to_string();
            } else {
                error = Some((
                    errno::EINVALIDINPUTERROR,
                    format!("Invalid permissions \"{p}\""),
                ));
            }
        }
        if let Some(c) = attrs.text_at("volume-id-attributes/comment") {
            v.comment = c.to_string();
        }
        if attrs.text_at("volume-space-attributes/size").is_some() {
            error = Some((
                errno::EVOLOPNOTSUPP,
                "Unable to set volume attribute \"size\"".into(),
            ));
        }
        match error {
            None => ok.push(Node::new("volume-modify-iter-info").with(key(n))),
            Some((code, msg)) => failed.push(
                Node::new("volume-modify-iter-info")
                    .with_leaf("error-code", code.to_string())
                    .with_leaf("error-message", msg)
                    .with(key(n)),
            ),
        }
    }
    Ok(vec![
        leaf("num-succeeded", ok.children.len()),
        leaf("num-failed", failed.children.len()),
        ok,
        failed,
    ])
}

fn svm_has_policy(p: &BTreeMap<String, Vec<ExportRule>>, name: &str) -> bool {
    p.contains_key(name)
}

fn volume_clone_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "volume")?.to_string();
    let parent = arg(api, "parent-volume")?.to_string();
    let snap = opt(api, "parent-snapshot").map(str::to_string);
    if !valid_volume_name(&name) {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid volume name \"{name}\""),
        ));
    }
    let junction = opt(api, "junction-path").map(str::to_string);
    let svm = ctx.svm(&api.name)?;
    if svm.volumes.contains_key(&name) {
        return Err(fail(
            errno::EEXIST,
            format!("Duplicate volume name {name}."),
        ));
    }
    let p = svm
        .volumes
        .get(&parent)
        .cloned()
        .ok_or_else(|| vol_missing(&parent))?;
    if p.style != "flexvol" {
        return Err(fail(
            errno::EAPIERROR,
            "FlexClone of a FlexGroup is not supported",
        ));
    }
    if let Some(s) = &snap
        && !p.snapshots.contains_key(s)
    {
        return Err(fail(
            errno::EOBJECTNOTFOUND,
            format!("Snapshot \"{s}\" does not exist in volume {parent}"),
        ));
    }
    if let Some(j) = &junction {
        check_junction(svm, j)?;
    }
    let guarantee = opt(api, "space-reserve")
        .unwrap_or(&p.space_guarantee)
        .to_string();
    let alloc = if guarantee == "volume" {
        ctx.a
            .plan_alloc(&p.aggregates, p.size)
            .ok_or_else(|| no_space(&format!("clone {name}")))?
    } else {
        BTreeMap::new()
    };
    let now = now_secs();
    let uuid = ctx.a.uuid();
    let snap = match snap {
        Some(s) => s,
        None => {
            let s = format!("clone_{name}.0");
            let su = ctx.a.uuid();
            if let Some(pv) = ctx.svm(&api.name)?.volumes.get_mut(&parent) {
                pv.snapshots.insert(
                    s.clone(),
                    Snapshot {
                        access_time: now,
                        total_kib: 0,
                        uuid: su,
                    },
                );
            }
            s
        }
    };
    let mut luns = Vec::new();
    for (path, l) in &ctx.svm(&api.name)?.luns.clone() {
        if lun_volume(path) == Some(parent.as_str()) {
            let lun_name = path.rsplit('/').next().unwrap_or("lun0").to_string();
            luns.push((format!("/vol/{name}/{lun_name}"), l.clone()));
        }
    }
    let mut cloned_luns = Vec::new();
    for (path, mut l) in luns {
        l.serial = serial(ctx.a);
        l.uuid = ctx.a.uuid();
        l.maps.clear();
        cloned_luns.push((path, l));
    }
    let v = Volume {
        style: "flexvol".into(),
        aggregates: p.aggregates.clone(),
        size: p.size,
        space_guarantee: guarantee,
        state: "online".into(),
        junction,
        export_policy: p.export_policy.clone(),
        snapshot_policy: p.snapshot_policy.clone(),
        snapshot_reserve: p.snapshot_reserve,
        unix_permissions: p.unix_permissions.clone(),
        security_style: p.security_style.clone(),
        snapdir: p.snapdir,
        encrypt: p.encrypt,
        comment: p.comment.clone(),
        is_root: false,
        uuid,
        created: now,
        alloc,
        snapshots: BTreeMap::new(),
        clone_parent: Some((parent.clone(), snap)),
        qtrees: p.qtrees.clone(),
        quotas: p
            .quotas
            .iter()
            .map(|(t, l)| {
                (
                    t.replacen(&format!("/vol/{parent}/"), &format!("/vol/{name}/"), 1),
                    *l,
                )
            })
            .collect(),
        quota_on: p.quota_on,
    };
    let svm = ctx.svm(&api.name)?;
    svm.volumes.insert(name, v);
    svm.luns.extend(cloned_luns);
    Ok(vec![])
}

fn serial(a: &mut Array) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-+";
    let mut n = a.id().wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..12)
        .map(|_| {
            let c = ALPHABET[(n % 64) as usize] as char;
            n /= 64;
            c
        })
        .collect()
}

fn volume_clone_split(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "volume")?;
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(name)
        .ok_or_else(|| vol_missing(name))?;
    if v.clone_parent.is_none() {
        return Err(fail(13170, format!("Volume {name} is not a FlexClone")));
    }
    v.clone_parent = None;
    Ok(vec![leaf("result-status", "succeeded")])
}

// ---- snapshots ----

fn snapshot_busy(svm: &Svm, volume: &str, snapshot: &str) -> bool {
    svm.volumes.values().any(|v| {
        v.clone_parent
            .as_ref()
            .is_some_and(|(p, s)| p == volume && s == snapshot)
    })
}

fn snapshot_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let volume = arg(api, "volume")?.to_string();
    let snap = arg(api, "snapshot")?.to_string();
    if snap.is_empty()
        || snap.len() > 255
        || snap.contains('/')
        || snap.contains(char::is_whitespace)
    {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid snapshot name \"{snap}\""),
        ));
    }
    let uuid = ctx.a.uuid();
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    if v.state != "online" {
        return Err(fail(
            errno::ESNAPSHOTNOTALLOWED,
            format!("Volume {volume} is not online"),
        ));
    }
    if v.snapshots.contains_key(&snap) {
        return Err(fail(
            errno::EEXIST,
            format!("Snapshot \"{snap}\" already exists"),
        ));
    }
    v.snapshots.insert(
        snap,
        Snapshot {
            access_time: now_secs(),
            total_kib: 64,
            uuid,
        },
    );
    Ok(vec![])
}

fn snapshot_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&s) else {
            continue;
        };
        for (vname, v) in &svm.volumes {
            for (name, snap) in &v.snapshots {
                let busy = snapshot_busy(svm, vname, name);
                let mut owners = Node::new("snapshot-owners-list");
                if busy {
                    owners.push(Node::new("snapshot-owner").with_leaf("owner", "volume clone"));
                }
                records.push((
                    format!("{s}/{vname}/{name}"),
                    Node::new("snapshot-info")
                        .with_leaf("name", name)
                        .with_leaf("volume", vname)
                        .with_leaf("vserver", &s)
                        .with_leaf("access-time", snap.access_time.to_string())
                        .with_leaf("busy", busy.to_string())
                        .with(owners)
                        .with_leaf("snapshot-instance-uuid", &snap.uuid)
                        .with_leaf("state", "valid")
                        .with_leaf("total", snap.total_kib.to_string()),
                ));
            }
        }
    }
    iterate(ctx, api, records)
}

fn snapshot_delete(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let volume = arg(api, "volume")?;
    let snap = arg(api, "snapshot")?;
    let svm = ctx.svm(&api.name)?;
    let v = svm.volumes.get(volume).ok_or_else(|| vol_missing(volume))?;
    if !v.snapshots.contains_key(snap) {
        return Err(fail(
            errno::EOBJECTNOTFOUND,
            format!("Snapshot \"{snap}\" does not exist in volume {volume}"),
        ));
    }
    if snapshot_busy(svm, volume, snap) {
        return Err(fail(
            errno::ESNAPSHOTBUSY,
            format!("Snapshot \"{snap}\" is busy: it backs a FlexClone"),
        ));
    }
    if let Some(v) = svm.volumes.get_mut(volume) {
        v.snapshots.remove(snap);
    }
    Ok(vec![])
}

// ---- qtrees and quotas ----

/// `/vol/<volume>/<qtree>` → (volume, qtree).
fn qtree_path(p: &str) -> Result<(String, String), Fail> {
    lun_volume(p)
        .map(|v| {
            (
                v.to_string(),
                p.rsplit('/').next().unwrap_or("").to_string(),
            )
        })
        .ok_or_else(|| {
            fail(
                errno::EINVALIDINPUTERROR,
                format!("Invalid qtree path \"{p}\""),
            )
        })
}

fn qtree_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let volume = arg(api, "volume")?.to_string();
    let qtree = arg(api, "qtree")?.to_string();
    if qtree.is_empty() || qtree.len() > 64 || qtree.contains('/') {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid qtree name \"{qtree}\""),
        ));
    }
    let mode = opt(api, "mode").unwrap_or("0755").to_string();
    if !valid_permissions(&mode) {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid mode \"{mode}\""),
        ));
    }
    let style = opt(api, "security-style").unwrap_or("unix").to_string();
    let export = opt(api, "export-policy").unwrap_or("default").to_string();
    let id = ctx.a.id();
    let svm = ctx.svm(&api.name)?;
    if !svm.export_policies.contains_key(&export) {
        return Err(fail(
            errno::EAPIERROR,
            format!("Export policy \"{export}\" does not exist"),
        ));
    }
    let v = svm
        .volumes
        .get_mut(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    if v.qtrees.contains_key(&qtree) {
        return Err(fail(
            errno::EEXIST,
            format!("Qtree \"{qtree}\" already exists"),
        ));
    }
    v.qtrees.insert(
        qtree,
        Qtree {
            id,
            mode,
            security_style: style,
            export_policy: export,
        },
    );
    Ok(vec![])
}

fn qtree_delete(ctx: &mut Ctx<'_>, api: &Node, is_async: bool) -> R {
    let (volume, qtree) = qtree_path(arg(api, "qtree")?)?;
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    if v.qtrees.remove(&qtree).is_none() {
        return Err(fail(
            errno::EOBJECTNOTFOUND,
            format!("Qtree /vol/{volume}/{qtree} not found"),
        ));
    }
    if is_async {
        Ok(start_job(ctx, &format!("Delete qtree {qtree}")))
    } else {
        Ok(vec![])
    }
}

fn qtree_rename(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let (volume, from) = qtree_path(arg(api, "qtree")?)?;
    let (volume2, to) = qtree_path(arg(api, "new-qtree-name")?)?;
    if volume != volume2 {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            "A qtree cannot move to another volume",
        ));
    }
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    if v.qtrees.contains_key(&to) {
        return Err(fail(
            errno::EEXIST,
            format!("Qtree \"{to}\" already exists"),
        ));
    }
    let q = v.qtrees.remove(&from).ok_or_else(|| {
        fail(
            errno::EOBJECTNOTFOUND,
            format!("Qtree \"{from}\" not found"),
        )
    })?;
    v.qtrees.insert(to, q);
    Ok(vec![])
}

fn qtree_list_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&s) else {
            continue;
        };
        for (vname, v) in &svm.volumes {
            // Each volume reports itself as a qtree with an empty name.
            records.push((
                format!("{s}/{vname}/"),
                Node::new("qtree-info")
                    .with_leaf("volume", vname)
                    .with_leaf("qtree", "")
                    .with_leaf("id", "0")
                    .with_leaf("security-style", &v.security_style)
                    .with_leaf("mode", "0755")
                    .with_leaf("export-policy", &v.export_policy)
                    .with_leaf("status", "normal")
                    .with_leaf("vserver", &s),
            ));
            for (qname, q) in &v.qtrees {
                records.push((
                    format!("{s}/{vname}/{qname}"),
                    Node::new("qtree-info")
                        .with_leaf("volume", vname)
                        .with_leaf("qtree", qname)
                        .with_leaf("id", q.id.to_string())
                        .with_leaf("security-style", &q.security_style)
                        .with_leaf("mode", &q.mode)
                        .with_leaf("export-policy", &q.export_policy)
                        .with_leaf("is-export-policy-inherited", "false")
                        .with_leaf("oplocks", "enabled")
                        .with_leaf("status", "normal")
                        .with_leaf("vserver", &s),
                ));
            }
        }
    }
    iterate(ctx, api, records)
}

fn quota_set_entry(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let volume = arg(api, "volume")?.to_string();
    let target = arg(api, "quota-target")?.to_string();
    let kind = arg(api, "quota-type")?;
    if kind != "tree" {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            "Only tree quotas are simulated",
        ));
    }
    let limit = match opt(api, "disk-limit") {
        Some(l) => l.parse::<u64>().map_err(|_| {
            fail(
                errno::EINVALIDINPUTERROR,
                format!("Invalid disk-limit \"{l}\""),
            )
        })?,
        None => 0,
    };
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    v.quotas.insert(target, limit);
    Ok(vec![])
}

fn quota_delete_entry(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let volume = arg(api, "volume")?.to_string();
    let target = arg(api, "quota-target")?.to_string();
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    if v.quotas.remove(&target).is_none() {
        return Err(fail(
            errno::EOBJECTNOTFOUND,
            format!("No quota rule for {target}"),
        ));
    }
    Ok(vec![])
}

fn quota_list_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&s) else {
            continue;
        };
        for (vname, v) in &svm.volumes {
            for (target, kib) in &v.quotas {
                records.push((
                    format!("{s}/{vname}/{target}"),
                    Node::new("quota-entry")
                        .with_leaf("volume", vname)
                        .with_leaf("qtree", "")
                        .with_leaf("quota-target", target)
                        .with_leaf("quota-type", "tree")
                        .with_leaf("disk-limit", kib.to_string())
                        .with_leaf("vserver", &s),
                ));
            }
        }
    }
    iterate(ctx, api, records)
}

fn quota_switch(ctx: &mut Ctx<'_>, api: &Node, on: bool) -> R {
    let volume = arg(api, "volume")?.to_string();
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    v.quota_on = on;
    Ok(start_job(ctx, &format!("{} {volume}", api.name)))
}

fn quota_status(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let volume = arg(api, "volume")?;
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get(volume)
        .ok_or_else(|| vol_missing(volume))?;
    Ok(vec![leaf("status", if v.quota_on { "on" } else { "off" })])
}

// ---- LUNs ----

fn lun_missing(path: &str) -> Fail {
    fail(
        errno::EOBJECTNOTFOUND,
        format!("LUN \"{path}\" does not exist"),
    )
}

fn lun_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let path = arg(api, "path")?.to_string();
    let size = parse_size(arg(api, "size")?)?;
    let ostype = opt(api, "ostype").unwrap_or("linux").to_string();
    if !matches!(
        ostype.as_str(),
        "linux"
            | "windows"
            | "windows_2008"
            | "vmware"
            | "xen"
            | "hyper_v"
            | "solaris"
            | "aix"
            | "hpux"
    ) {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid ostype \"{ostype}\""),
        ));
    }
    let reserved = flag(api, "space-reservation-enabled");
    let Some(volume) = lun_volume(&path).map(str::to_string) else {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid LUN path \"{path}\""),
        ));
    };
    let serial = serial(ctx.a);
    let uuid = ctx.a.uuid();
    let svm = ctx.svm(&api.name)?;
    let Some(v) = svm.volumes.get(&volume) else {
        return Err(fail(
            errno::NO_SUCH_VOLUME,
            format!("Volume \"{volume}\" does not exist"),
        ));
    };
    if svm.luns.contains_key(&path) {
        return Err(fail(
            errno::VDISK_EXISTS,
            format!("LUN \"{path}\" already exists"),
        ));
    }
    if size < MIN_LUN {
        return Err(fail(errno::SIZE_TOO_SMALL, "The LUN size is too small"));
    }
    let used: u64 = svm
        .luns
        .iter()
        .filter(|(p, _)| lun_volume(p) == Some(volume.as_str()))
        .map(|(_, l)| l.size)
        .sum();
    if used + size > v.size {
        return Err(fail(
            errno::ENOSPC,
            format!("Not enough space in volume {volume} for a LUN of {size} bytes"),
        ));
    }
    svm.luns.insert(
        path,
        Lun {
            size,
            serial,
            uuid,
            online: true,
            ostype,
            space_reserved: reserved,
            maps: BTreeMap::new(),
        },
    );
    Ok(vec![leaf("actual-size", size)])
}

fn lun_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&s) else {
            continue;
        };
        for (path, l) in &svm.luns {
            records.push((
                format!("{s}/{path}"),
                Node::new("lun-info")
                    .with_leaf("path", path)
                    .with_leaf("volume", lun_volume(path).unwrap_or(""))
                    .with_leaf("qtree", "")
                    .with_leaf("vserver", &s)
                    .with_leaf("size", l.size.to_string())
                    .with_leaf("size-used", "0")
                    .with_leaf("online", l.online.to_string())
                    .with_leaf("mapped", (!l.maps.is_empty()).to_string())
                    .with_leaf("serial-number", &l.serial)
                    .with_leaf("multiprotocol-type", &l.ostype)
                    .with_leaf("is-space-reservation-enabled", l.space_reserved.to_string())
                    .with_leaf("block-size", "512")
                    .with_leaf("uuid", &l.uuid)
                    .with_leaf("state", if l.online { "online" } else { "offline" }),
            ));
        }
    }
    iterate(ctx, api, records)
}

fn lun_map(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let igroup = arg(api, "initiator-group")?.to_string();
    let path = arg(api, "path")?.to_string();
    let wanted = match opt(api, "lun-id") {
        Some(id) => Some(
            id.parse::<u32>()
                .map_err(|_| fail(errno::EINVALIDINPUTERROR, "Invalid lun-id"))?,
        ),
        None => None,
    };
    let svm = ctx.svm(&api.name)?;
    if !svm.igroups.contains_key(&igroup) {
        return Err(fail(
            errno::NO_SUCH_INITGROUP,
            format!("Initiator group \"{igroup}\" does not exist"),
        ));
    }
    let l = svm.luns.get(&path).ok_or_else(|| lun_missing(&path))?;
    if l.maps.contains_key(&igroup) {
        return Err(fail(
            errno::INITGROUP_HAS_VDISK,
            format!("LUN {path} is already mapped to initiator group {igroup}"),
        ));
    }
    let taken: Vec<u32> = svm
        .luns
        .values()
        .filter_map(|l| l.maps.get(&igroup).copied())
        .collect();
    let id = match wanted {
        Some(id) if taken.contains(&id) => {
            return Err(fail(
                errno::INITGROUP_HAS_LUN,
                format!("LUN ID {id} is already used in initiator group {igroup}"),
            ));
        }
        Some(id) => id,
        None => (0..).find(|i| !taken.contains(i)).unwrap_or(0),
    };
    if let Some(l) = svm.luns.get_mut(&path) {
        l.maps.insert(igroup, id);
    }
    Ok(vec![leaf("lun-id-assigned", id)])
}

fn lun_unmap(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let igroup = arg(api, "initiator-group")?.to_string();
    let path = arg(api, "path")?.to_string();
    let svm = ctx.svm(&api.name)?;
    let l = svm.luns.get_mut(&path).ok_or_else(|| lun_missing(&path))?;
    if l.maps.remove(&igroup).is_none() {
        return Err(fail(
            errno::NO_SUCH_LUNMAP,
            format!("LUN {path} is not mapped to initiator group {igroup}"),
        ));
    }
    Ok(vec![])
}

fn lun_map_list_info(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let path = arg(api, "path")?.to_string();
    let svm = ctx.svm(&api.name)?;
    let l = svm.luns.get(&path).ok_or_else(|| lun_missing(&path))?;
    let mut groups = Node::new("initiator-groups");
    for (g, id) in &l.maps {
        let ig = svm.igroups.get(g);
        groups.push(
            Node::new("initiator-group-info")
                .with_leaf("initiator-group-name", g)
                .with_leaf("lun-id", id.to_string())
                .with_leaf(
                    "initiator-group-type",
                    ig.map(|i| i.kind.clone()).unwrap_or_default(),
                )
                .with_leaf(
                    "initiator-group-os-type",
                    ig.map(|i| i.os_type.clone()).unwrap_or_default(),
                ),
        );
    }
    Ok(vec![groups])
}

fn lun_online(ctx: &mut Ctx<'_>, api: &Node, online: bool) -> R {
    let path = arg(api, "path")?.to_string();
    let l = ctx
        .svm(&api.name)?
        .luns
        .get_mut(&path)
        .ok_or_else(|| lun_missing(&path))?;
    if l.online == online {
        return Err(if online {
            fail(
                errno::VDISK_NOT_DISABLED,
                format!("LUN {path} is already online"),
            )
        } else {
            fail(
                errno::VDISK_NOT_ENABLED,
                format!("LUN {path} is already offline"),
            )
        });
    }
    l.online = online;
    Ok(vec![])
}

fn lun_destroy(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let path = arg(api, "path")?.to_string();
    let force = flag(api, "force");
    let svm = ctx.svm(&api.name)?;
    let l = svm.luns.get(&path).ok_or_else(|| lun_missing(&path))?;
    if !force && !l.maps.is_empty() {
        return Err(fail(
            errno::EAPIERROR,
            format!("LUN {path} is mapped; unmap it first"),
        ));
    }
    if !force && l.online {
        return Err(fail(
            errno::EAPIERROR,
            format!("LUN {path} is online; offline it first"),
        ));
    }
    svm.luns.remove(&path);
    Ok(vec![])
}

fn lun_resize(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let path = arg(api, "path")?.to_string();
    let size = parse_size(arg(api, "size")?)?;
    let svm = ctx.svm(&api.name)?;
    let l = svm.luns.get(&path).ok_or_else(|| lun_missing(&path))?;
    let volume = lun_volume(&path).unwrap_or("").to_string();
    let vol_size = svm.volumes.get(&volume).map(|v| v.size).unwrap_or(0);
    let others: u64 = svm
        .luns
        .iter()
        .filter(|(p, _)| *p != &path && lun_volume(p) == Some(volume.as_str()))
        .map(|(_, l)| l.size)
        .sum();
    if size < MIN_LUN {
        return Err(fail(errno::SIZE_TOO_SMALL, "The LUN size is too small"));
    }
    if others + size > vol_size {
        return Err(fail(
            errno::ENOSPC,
            format!("Not enough space in volume {volume}"),
        ));
    }
    let _ = l;
    if let Some(l) = svm.luns.get_mut(&path) {
        l.size = size;
    }
    Ok(vec![leaf("actual-size", size)])
}

// ---- igroups ----

fn igroup_missing(name: &str) -> Fail {
    fail(
        errno::NO_SUCH_INITGROUP,
        format!("Initiator group \"{name}\" does not exist"),
    )
}

fn igroup_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "initiator-group-name")?.to_string();
    let kind = opt(api, "initiator-group-type")
        .unwrap_or("iscsi")
        .to_string();
    let os = opt(api, "os-type").unwrap_or("linux").to_string();
    if !matches!(kind.as_str(), "iscsi" | "fcp" | "mixed") {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid initiator-group-type \"{kind}\""),
        ));
    }
    let uuid = ctx.a.uuid();
    let svm = ctx.svm(&api.name)?;
    if svm.igroups.contains_key(&name) {
        return Err(fail(
            errno::INITGROUP_EXISTS,
            format!("Initiator group \"{name}\" already exists"),
        ));
    }
    svm.igroups.insert(
        name,
        Igroup {
            kind,
            os_type: os,
            uuid,
            initiators: Vec::new(),
        },
    );
    Ok(vec![])
}

fn igroup_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&s) else {
            continue;
        };
        for (name, g) in &svm.igroups {
            let mut inits = Node::new("initiators");
            for i in &g.initiators {
                inits.push(Node::new("initiator-info").with_leaf("initiator-name", i));
            }
            records.push((
                format!("{s}/{name}"),
                Node::new("initiator-group-info")
                    .with_leaf("initiator-group-name", name)
                    .with_leaf("initiator-group-type", &g.kind)
                    .with_leaf("initiator-group-os-type", &g.os_type)
                    .with_leaf("initiator-group-uuid", &g.uuid)
                    .with_leaf("initiator-group-alua-enabled", "true")
                    .with(inits)
                    .with_leaf("vserver", &s),
            ));
        }
    }
    iterate(ctx, api, records)
}

fn igroup_add(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "initiator-group-name")?.to_string();
    let init = arg(api, "initiator")?.to_string();
    if !(init.starts_with("iqn.") || init.starts_with("eui.") || init.starts_with("naa.")) {
        return Err(fail(
            errno::EAPIERROR,
            format!("Invalid initiator name \"{init}\""),
        ));
    }
    let g = ctx
        .svm(&api.name)?
        .igroups
        .get_mut(&name)
        .ok_or_else(|| igroup_missing(&name))?;
    if g.initiators.contains(&init) {
        return Err(fail(
            errno::INITGROUP_HAS_NODE,
            format!("Initiator {init} is already in {name}"),
        ));
    }
    g.initiators.push(init);
    Ok(vec![])
}

fn igroup_remove(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "initiator-group-name")?.to_string();
    let init = arg(api, "initiator")?.to_string();
    let g = ctx
        .svm(&api.name)?
        .igroups
        .get_mut(&name)
        .ok_or_else(|| igroup_missing(&name))?;
    let before = g.initiators.len();
    g.initiators.retain(|i| *i != init);
    if g.initiators.len() == before {
        return Err(fail(
            errno::NODE_NOT_IN_INITGROUP,
            format!("Initiator {init} is not in {name}"),
        ));
    }
    Ok(vec![])
}

fn igroup_destroy(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "initiator-group-name")?.to_string();
    let svm = ctx.svm(&api.name)?;
    if !svm.igroups.contains_key(&name) {
        return Err(igroup_missing(&name));
    }
    if svm.luns.values().any(|l| l.maps.contains_key(&name)) {
        return Err(fail(
            errno::INITGROUP_MAPS_EXIST,
            format!("Initiator group {name} still has LUN maps"),
        ));
    }
    svm.igroups.remove(&name);
    Ok(vec![])
}

// ---- export policies ----

fn policy_missing(name: &str) -> Fail {
    fail(
        errno::EOBJECTNOTFOUND,
        format!("Export policy \"{name}\" does not exist"),
    )
}

fn export_policy_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "policy-name")?.to_string();
    let svm = ctx.svm(&api.name)?;
    if svm.export_policies.contains_key(&name) {
        return Err(fail(
            errno::EDUPLICATEENTRY,
            format!("Duplicate entry: export policy \"{name}\" already exists"),
        ));
    }
    svm.export_policies.insert(name, Vec::new());
    Ok(vec![])
}

fn export_policy_get(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "policy-name")?.to_string();
    let svm_name = ctx.svm_name(&api.name)?;
    let svm = ctx.svm(&api.name)?;
    if !svm.export_policies.contains_key(&name) {
        return Err(policy_missing(&name));
    }
    Ok(vec![
        Node::new("attributes").with(
            Node::new("export-policy-info")
                .with_leaf("policy-name", &name)
                .with_leaf("vserver", svm_name),
        ),
    ])
}

fn export_policy_destroy(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "policy-name")?.to_string();
    let svm = ctx.svm(&api.name)?;
    if svm.export_policies.remove(&name).is_none() {
        return Err(policy_missing(&name));
    }
    Ok(vec![])
}

fn export_rule_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "policy-name")?.to_string();
    let client = arg(api, "client-match")?.to_string();
    let items = |path: &str| -> Vec<String> {
        let l = api.list_at(path);
        if l.is_empty() { vec!["any".into()] } else { l }
    };
    let rule = ExportRule {
        index: 0,
        client_match: client.clone(),
        protocols: items("protocol"),
        ro_rule: items("ro-rule"),
        rw_rule: items("rw-rule"),
        superuser: items("super-user-security"),
    };
    let svm = ctx.svm(&api.name)?;
    let rules = svm
        .export_policies
        .get_mut(&name)
        .ok_or_else(|| policy_missing(&name))?;
    if rules.iter().any(|r| r.client_match == client) {
        return Err(fail(
            errno::EAPIERROR,
            format!("Export policy {name} already contains a rule for client-match {client}"),
        ));
    }
    let index = rules.iter().map(|r| r.index).max().unwrap_or(0) + 1;
    rules.push(ExportRule { index, ..rule });
    Ok(vec![])
}

fn export_rule_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&s) else {
            continue;
        };
        for (policy, rules) in &svm.export_policies {
            for r in rules {
                records.push((
                    format!("{s}/{policy}/{:010}", r.index),
                    Node::new("export-rule-info")
                        .with_leaf("policy-name", policy)
                        .with_leaf("rule-index", r.index.to_string())
                        .with_leaf("client-match", &r.client_match)
                        .with(list("protocol", "access-protocol", &r.protocols))
                        .with(list("ro-rule", "security-flavor", &r.ro_rule))
                        .with(list("rw-rule", "security-flavor", &r.rw_rule))
                        .with(list("super-user-security", "security-flavor", &r.superuser))
                        .with_leaf("anonymous-user-id", "65534")
                        .with_leaf("vserver-name", &s),
                ));
            }
        }
    }
    iterate(ctx, api, records)
}

fn export_rule_destroy(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "policy-name")?.to_string();
    let index: u32 = arg(api, "rule-index")?
        .parse()
        .map_err(|_| fail(errno::EINVALIDINPUTERROR, "Invalid rule-index"))?;
    let rules = ctx
        .svm(&api.name)?
        .export_policies
        .get_mut(&name)
        .ok_or_else(|| policy_missing(&name))?;
    let before = rules.len();
    rules.retain(|r| r.index != index);
    if rules.len() == before {
        return Err(fail(
            errno::EOBJECTNOTFOUND,
            format!("Rule {index} not found in {name}"),
        ));
    }
    Ok(vec![])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(pattern_matches("abc", "abc"));
        assert!(!pattern_matches("abc", "abcd"));
        assert!(pattern_matches("ab*", "abcd"));
        assert!(pattern_matches("*", "x"));
        assert!(pattern_matches("!ab*", "xy"));
        assert!(!pattern_matches("!ab*", "abc"));
        assert!(pattern_matches("a|b", "b"));
        assert!(pattern_matches(">5", "6"));
        assert!(!pattern_matches(">5", "5"));
    }

    #[test]
    fn queries_and_projection() {
        let r = Node::new("volume-attributes")
            .with(
                Node::new("volume-id-attributes")
                    .with_leaf("name", "trident_a")
                    .with_leaf("style-extended", "flexvol"),
            )
            .with(Node::new("volume-state-attributes").with_leaf("state", "online"));
        let q = Node::new("volume-attributes").with(
            Node::new("volume-id-attributes")
                .with_leaf("name", "trident_*")
                .with_leaf("style-extended", "flexvol"),
        );
        assert!(query_matches(&q, &r));
        let q2 = Node::new("volume-attributes")
            .with(Node::new("volume-state-attributes").with_leaf("state", "offline"));
        assert!(!query_matches(&q2, &r));
        let d = Node::new("volume-attributes")
            .with(Node::new("volume-id-attributes").with(Node::new("name")));
        let p = project(&d, &r);
        assert_eq!(p.children.len(), 1);
        assert_eq!(p.str_at("volume-id-attributes/name"), "trident_a");
        assert_eq!(p.text_at("volume-id-attributes/style-extended"), None);
    }

    #[test]
    fn volume_candidates_narrow_like_the_query() {
        let a = Array::new(
            "s",
            &crate::sim::ontap::AggregateSpec::parse_list("aggr1:ssd:1TiB").unwrap(),
            (1, 180),
        );
        let mut svm = a.svms["s"].clone();
        let root = svm.volumes.values().next().unwrap().clone();
        svm.volumes.clear();
        for n in ["a", "ab", "abc", "b", "ba"] {
            svm.volumes.insert(n.to_string(), root.clone());
        }
        let names = |pattern: Option<&str>| -> Vec<String> {
            let q = pattern.map(|p| {
                Node::new("volume-attributes")
                    .with(Node::new("volume-id-attributes").with_leaf("name", p))
            });
            volume_candidates(&svm, q.as_ref())
                .map(|(n, _)| n.clone())
                .collect()
        };
        assert_eq!(names(Some("ab")), ["ab"]);
        assert_eq!(names(Some("zz")), Vec::<String>::new());
        assert_eq!(names(Some("ab*")), ["ab", "abc"]);
        // Patterns the index cannot narrow keep every volume (the query filters them).
        assert_eq!(names(Some("a|b")).len(), 5);
        assert_eq!(names(Some("!a")).len(), 5);
        assert_eq!(names(Some("*b*")).len(), 5);
        assert_eq!(names(Some("")).len(), 5);
        assert_eq!(names(None).len(), 5);
    }

    #[test]
    fn sizes_and_names() {
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("1048576").unwrap(), 1 << 20);
        assert!(parse_size("lots").is_err());
        assert!(valid_volume_name("trident_a1"));
        assert!(!valid_volume_name("a-b"));
        assert!(!valid_volume_name("1a"));
        assert!(valid_permissions("---rwxrwxrwx"));
        assert!(valid_permissions("rwxr-x---"));
        assert!(valid_permissions("0755"));
        assert!(!valid_permissions("0855"));
        assert!(!valid_permissions("rwxrwxrwz"));
    }
}

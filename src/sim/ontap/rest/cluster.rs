//! The cluster and its version, nodes, SVMs, aggregates, IP interfaces, iSCSI services, jobs,
//! and the EMS log a driver may write to.

use serde_json::{Value, json};

use super::collection::{Kind, list, one};
use super::{Answer, Ctx, Reply, Req, check_body, err, job_id, job_uuid, no_method, not_found};
use crate::sim::ontap::UserScope;
use crate::wire::zapi::errno;

const CLUSTER: Kind = Kind {
    keys: &["name", "uuid"],
    known: &[
        "name",
        "uuid",
        "version",
        "san_optimized",
        "disaggregated",
        "management_interfaces",
    ],
};
const NODE: Kind = Kind {
    keys: &["uuid", "name"],
    known: &["uuid", "name", "serial_number", "model", "state"],
};
const SVM: Kind = Kind {
    keys: &["uuid", "name"],
    known: &[
        "uuid",
        "name",
        "state",
        "subtype",
        "aggregates",
        "nfs",
        "iscsi",
    ],
};
const AGGREGATE: Kind = Kind {
    keys: &["uuid", "name"],
    known: &[
        "uuid",
        "name",
        "node",
        "state",
        "block_storage",
        "space",
        "is_nve_capable",
    ],
};
const INTERFACE: Kind = Kind {
    keys: &["uuid", "name"],
    known: &[
        "uuid", "name", "ip", "state", "services", "svm", "location", "enabled",
    ],
};
const ISCSI: Kind = Kind {
    keys: &["svm"],
    known: &["svm", "target", "enabled"],
};
const JOB: Kind = Kind {
    keys: &["uuid"],
    known: &[
        "uuid",
        "description",
        "state",
        "message",
        "code",
        "start_time",
        "end_time",
        "error",
        "svm",
    ],
};

fn cluster_only(ctx: &Ctx<'_>) -> Result<(), super::RestError> {
    match &ctx.scope {
        UserScope::Cluster => Ok(()),
        UserScope::Svm(s) => Err(err(
            403,
            errno::EAPIPRIVILEGE,
            format!("User of SVM {s} is not authorized for this cluster-level resource"),
        )),
    }
}

fn node_uuid(name: &str) -> String {
    format!("c1a50000-0000-4000-8000-{:012x}", name.len() as u64 + 1)
}

pub(super) fn route(ctx: &mut Ctx<'_>, r: &Req, m: &str, segs: &[&str]) -> Answer {
    match (m, segs) {
        ("GET", ["cluster"]) => one(r, &CLUSTER, &cluster(ctx)),
        ("GET", ["cluster", "nodes"]) => {
            cluster_only(ctx)?;
            let recs = nodes(ctx).into_iter().map(|n| (key(&n, "name"), n));
            list(ctx.tuning, r, &NODE, recs.collect())
        }
        ("GET", ["cluster", "jobs", uuid]) => job(ctx, r, uuid),
        ("GET", ["svm", "svms"]) => list(ctx.tuning, r, &SVM, keyed(svms(ctx), "name")),
        ("GET", ["svm", "svms", uuid]) => {
            let rec = svms(ctx).into_iter().find(|s| s["uuid"] == *uuid);
            one(
                r,
                &SVM,
                &rec.ok_or_else(|| not_found(&format!("SVM {uuid}")))?,
            )
        }
        ("GET", ["storage", "aggregates"]) => {
            cluster_only(ctx)?;
            list(ctx.tuning, r, &AGGREGATE, keyed(aggregates(ctx), "name"))
        }
        ("GET", ["storage", "aggregates", uuid]) => {
            cluster_only(ctx)?;
            let rec = aggregates(ctx).into_iter().find(|s| s["uuid"] == *uuid);
            one(
                r,
                &AGGREGATE,
                &rec.ok_or_else(|| not_found(&format!("aggregate {uuid}")))?,
            )
        }
        ("GET", ["network", "ip", "interfaces"]) => {
            list(ctx.tuning, r, &INTERFACE, keyed(interfaces(ctx), "name"))
        }
        ("GET", ["protocols", "san", "iscsi", "services"]) => {
            list(ctx.tuning, r, &ISCSI, keyed(iscsi(ctx), "svm.name"))
        }
        ("GET", ["protocols", "san", "iscsi", "services", uuid]) => {
            let rec = iscsi(ctx).into_iter().find(|s| s["svm"]["uuid"] == *uuid);
            one(
                r,
                &ISCSI,
                &rec.ok_or_else(|| not_found(&format!("iSCSI service {uuid}")))?,
            )
        }
        ("POST", ["support", "ems", "application-logs"]) => {
            check_body(
                r,
                &[
                    "computer_name",
                    "event_id",
                    "event_source",
                    "app_version",
                    "category",
                    "severity",
                    "autosupport_required",
                    "event_description",
                ],
            )?;
            Ok(Reply::Created(
                json!({}),
                "/api/support/ems/application-logs".into(),
            ))
        }
        (
            _,
            ["cluster"]
            | ["cluster", "nodes" | "jobs", ..]
            | ["svm", "svms", ..]
            | ["storage", "aggregates", ..]
            | ["network", "ip", "interfaces"]
            | ["protocols", "san", "iscsi", "services", ..]
            | ["support", "ems", "application-logs"],
        ) => Err(no_method(r)),
        _ => Err(err(404, 4, format!("API not found: {m} /api{}", r.path))),
    }
}

fn key(v: &Value, path: &str) -> String {
    super::text(v, path).unwrap_or_default()
}

fn keyed(records: Vec<Value>, path: &str) -> Vec<(String, Value)> {
    records.into_iter().map(|v| (key(&v, path), v)).collect()
}

fn cluster(ctx: &Ctx<'_>) -> Value {
    let [g, ma, mi] = ctx.a.release();
    json!({
        "name": ctx.a.cluster,
        "uuid": "c1a50000-0000-4000-8000-000000000000",
        "version": {
            "full": format!("NetApp Release {g}.{ma}.{mi}: storch-sim"),
            "generation": g, "major": ma, "minor": mi,
        },
        "san_optimized": false,
        "disaggregated": false,
    })
}

fn nodes(ctx: &Ctx<'_>) -> Vec<Value> {
    let mut names: Vec<&String> = ctx.a.aggregates.values().map(|a| &a.node).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|n| {
            json!({"uuid": node_uuid(n), "name": n, "serial_number": ctx.a.serial,
                   "model": "SIMBOX", "state": "up"})
        })
        .collect()
}

fn aggr_uuid(name: &str) -> String {
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("a9900000-0000-4000-8000-{:012x}", h & 0xffff_ffff_ffff)
}

/// `{name, uuid}` of an aggregate, as volumes and SVMs name it.
pub(super) fn aggr_ref(name: &str) -> Value {
    json!({"name": name, "uuid": aggr_uuid(name)})
}

/// The aggregate named by a `{name}` or `{uuid}` reference.
pub(super) fn aggr_name(ctx: &Ctx<'_>, r: &Value) -> Option<String> {
    if let Some(n) = r.get("name").and_then(Value::as_str) {
        return Some(n.to_string());
    }
    let u = r.get("uuid").and_then(Value::as_str)?;
    ctx.a.aggregates.keys().find(|n| aggr_uuid(n) == u).cloned()
}

fn svms(ctx: &Ctx<'_>) -> Vec<Value> {
    ctx.visible()
        .iter()
        .filter_map(|n| ctx.a.svms.get(n).map(|s| (n, s)))
        .map(|(n, s)| {
            let aggrs: Vec<Value> = s.aggregates.iter().map(|a| aggr_ref(a)).collect();
            json!({
                "uuid": s.uuid, "name": n, "state": "running", "subtype": "default",
                "aggregates": aggrs,
                "nfs": {"enabled": true},
                "iscsi": {"enabled": !s.iqn.is_empty()},
            })
        })
        .collect()
}

fn aggregates(ctx: &Ctx<'_>) -> Vec<Value> {
    ctx.a
        .aggregates
        .iter()
        .map(|(name, a)| {
            let used = ctx.a.used(name);
            json!({
                "uuid": aggr_uuid(name), "name": name,
                "node": {"name": a.node, "uuid": node_uuid(&a.node)},
                "state": "online",
                "block_storage": {"storage_type": a.media,
                                  "primary": {"disk_type": if a.media == "hdd" { "sas" } else { "ssd" }}},
                "space": {"footprint": used,
                          "block_storage": {"size": a.size, "used": used,
                                            "available": a.size.saturating_sub(used)}},
                "is_nve_capable": a.nve_capable,
            })
        })
        .collect()
}

fn interfaces(ctx: &Ctx<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    for n in ctx.visible() {
        let Some(s) = ctx.a.svms.get(&n) else {
            continue;
        };
        for (i, l) in s.lifs.iter().enumerate() {
            let services: Vec<String> = l.protocols.iter().map(|p| format!("data_{p}")).collect();
            out.push(json!({
                "uuid": format!("1f000000-0000-4000-8000-{}{:06x}", &s.uuid[s.uuid.len() - 6..], i + 1),
                "name": l.name,
                "ip": {"address": l.address,
                       "netmask": if l.address.contains(':') { "64" } else { "24" }},
                "state": if l.up { "up" } else { "down" },
                "enabled": true,
                "services": services,
                "svm": {"name": n, "uuid": s.uuid},
                "location": {"node": {"name": "sim-01"}, "home_node": {"name": "sim-01"}},
            }));
        }
    }
    out
}

fn iscsi(ctx: &Ctx<'_>) -> Vec<Value> {
    ctx.visible()
        .iter()
        .filter_map(|n| ctx.a.svms.get(n).map(|s| (n, s)))
        .filter(|(_, s)| !s.iqn.is_empty())
        .map(|(n, s)| {
            json!({"svm": {"name": n, "uuid": s.uuid},
                   "target": {"name": s.iqn, "alias": n}, "enabled": true})
        })
        .collect()
}

/// A job: `running` for the configured polls, then `success` or `failure` with its code.
/// Finished jobs stay readable (Trident re-reads a finished job with `fields=**`).
fn job(ctx: &mut Ctx<'_>, r: &Req, uuid: &str) -> Answer {
    let id = job_id(uuid).ok_or_else(|| not_found(&format!("job {uuid}")))?;
    let visible = ctx.visible();
    let j = ctx
        .a
        .jobs
        .get_mut(&id)
        .filter(|j| j.vserver.is_empty() || visible.contains(&j.vserver))
        .ok_or_else(|| not_found(&format!("job {uuid}")))?;
    let (state, code, message) = if j.polls_left > 0 {
        j.polls_left -= 1;
        ("running", 0, "Job is running".to_string())
    } else {
        match &j.error {
            Some((c, m)) => ("failure", *c, m.clone()),
            None => ("success", 0, "success".to_string()),
        }
    };
    let mut rec = json!({
        "uuid": job_uuid(id),
        "description": j.description,
        "state": state,
        "message": message,
        "code": code,
        "svm": {"name": j.vserver},
    });
    if state == "failure" {
        rec["error"] = json!({"message": message, "code": code.to_string()});
    }
    one(r, &JOB, &rec)
}

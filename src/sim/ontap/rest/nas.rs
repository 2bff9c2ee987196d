//! Qtrees, tree quota rules, export policies and their rules.

use serde_json::{Value, json};

use super::collection::{Kind, created, list, one};
use super::volumes::{find_volume, mode_number, mode_text, named_volume};
use super::{
    Answer, Ctx, Reply, Req, RestError, bad_field, bytes, check_body, err, mapped, need, no_method,
    not_found, text,
};
use crate::sim::ontap::state::Array;
use crate::wire::zapi::{Node, errno};

const QTREE: Kind = Kind {
    keys: &["volume", "id", "name"],
    known: &[
        "volume",
        "id",
        "name",
        "svm",
        "path",
        "security_style",
        "unix_permissions",
        "export_policy",
    ],
};
const QUOTA: Kind = Kind {
    keys: &["uuid"],
    known: &["uuid", "svm", "volume", "qtree", "type", "space"],
};
const POLICY: Kind = Kind {
    keys: &["id", "name"],
    known: &["id", "name", "svm", "rules"],
};
const RULE: Kind = Kind {
    keys: &["index"],
    known: &[
        "index",
        "clients",
        "protocols",
        "ro_rule",
        "rw_rule",
        "superuser",
    ],
};

fn fnv(parts: &[&str]) -> u64 {
    parts
        .iter()
        .flat_map(|p| p.bytes().chain([0]))
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
}

/// The integer id of an export policy: stable for its SVM and name.
fn policy_id(svm_uuid: &str, name: &str) -> u64 {
    fnv(&[svm_uuid, name]) & 0xff_ffff_ffff
}

/// The uuid of a tree quota rule: stable for its volume and target.
fn quota_uuid(volume_uuid: &str, target: &str) -> String {
    let h = fnv(&[volume_uuid, target]);
    format!("9a070000-0000-4000-8000-{:012x}", h & 0xffff_ffff_ffff)
}

pub(super) fn route(ctx: &mut Ctx<'_>, r: &Req, m: &str, segs: &[&str]) -> Answer {
    match (m, segs) {
        ("GET", ["storage", "qtrees"]) => list(ctx.tuning, r, &QTREE, qtrees(ctx)),
        ("POST", ["storage", "qtrees"]) => qtree_create(ctx, r),
        ("GET", ["storage", "qtrees", vol, id]) => {
            let rec = qtree(ctx, vol, id)?;
            one(r, &QTREE, &rec)
        }
        ("PATCH", ["storage", "qtrees", vol, id]) => qtree_rename(ctx, r, vol, id),
        ("DELETE", ["storage", "qtrees", vol, id]) => {
            let rec = qtree(ctx, vol, id)?;
            let (svm, _) = find_volume(ctx, vol)?;
            let path = format!(
                "/vol/{}/{}",
                rec["volume"]["name"].as_str().unwrap_or(""),
                rec["name"].as_str().unwrap_or("")
            );
            let what = format!("DELETE /api/storage/qtrees/{vol}/{id}");
            if ctx.job_error.is_some() {
                return Ok(Reply::Job(ctx.job(&svm, what), None));
            }
            ctx.zapi(
                &svm,
                Node::new("qtree-delete-async").with_leaf("qtree", path),
            )
            .map_err(|f| mapped(f, &[(errno::EOBJECTNOTFOUND, 404, 5_242_927)]))?;
            Ok(Reply::Job(ctx.job(&svm, what), None))
        }
        ("GET", ["storage", "quota", "rules"]) => list(ctx.tuning, r, &QUOTA, quotas(ctx)),
        ("POST", ["storage", "quota", "rules"]) => quota_set(ctx, r, None),
        ("GET", ["storage", "quota", "rules", uuid]) => {
            let rec = quotas(ctx).into_iter().find(|(_, q)| q["uuid"] == *uuid);
            one(
                r,
                &QUOTA,
                &rec.ok_or_else(|| not_found(&format!("quota rule {uuid}")))?
                    .1,
            )
        }
        ("PATCH", ["storage", "quota", "rules", uuid]) => quota_set(ctx, r, Some(uuid)),
        ("DELETE", ["storage", "quota", "rules", uuid]) => {
            let (svm, rec) = quota(ctx, uuid)?;
            let call = Node::new("quota-delete-entry")
                .with_leaf("volume", rec["volume"]["name"].as_str().unwrap_or(""))
                .with_leaf("quota-target", target_of(&rec))
                .with_leaf("quota-type", "tree")
                .with_leaf("qtree", "");
            ctx.zapi(&svm, call)
                .map_err(|f| mapped(f, &[(errno::EOBJECTNOTFOUND, 404, 4)]))?;
            Ok(Reply::Ok(json!({})))
        }
        ("GET", ["protocols", "nfs", "export-policies"]) => {
            list(ctx.tuning, r, &POLICY, policies(ctx))
        }
        ("POST", ["protocols", "nfs", "export-policies"]) => policy_create(ctx, r),
        ("GET", ["protocols", "nfs", "export-policies", id]) => {
            let (_, rec) = policy(ctx, id)?;
            one(r, &POLICY, &rec)
        }
        ("DELETE", ["protocols", "nfs", "export-policies", id]) => {
            let (svm, rec) = policy(ctx, id)?;
            let call = Node::new("export-policy-destroy")
                .with_leaf("policy-name", rec["name"].as_str().unwrap_or(""));
            ctx.zapi(&svm, call)
                .map_err(|f| mapped(f, &[(errno::EAPIERROR, 409, 1_703_945)]))?;
            Ok(Reply::Ok(json!({})))
        }
        ("GET", ["protocols", "nfs", "export-policies", id, "rules"]) => {
            let (_, rec) = policy(ctx, id)?;
            let rules = rec["rules"].as_array().cloned().unwrap_or_default();
            let recs = rules
                .into_iter()
                .map(|x| (format!("{:010}", x["index"].as_u64().unwrap_or(0)), x))
                .collect();
            list(ctx.tuning, r, &RULE, recs)
        }
        ("POST", ["protocols", "nfs", "export-policies", id, "rules"]) => rule_create(ctx, r, id),
        ("DELETE", ["protocols", "nfs", "export-policies", id, "rules", index]) => {
            let (svm, rec) = policy(ctx, id)?;
            let call = Node::new("export-rule-destroy")
                .with_leaf("policy-name", rec["name"].as_str().unwrap_or(""))
                .with_leaf("rule-index", *index);
            ctx.zapi(&svm, call)
                .map_err(|f| mapped(f, &[(errno::EOBJECTNOTFOUND, 404, 4)]))?;
            Ok(Reply::Ok(json!({})))
        }
        (
            _,
            ["storage", "qtrees", ..]
            | ["storage", "quota", "rules", ..]
            | ["protocols", "nfs", "export-policies", ..],
        ) if segs.len() <= 6 => Err(no_method(r)),
        _ => Err(not_found(&format!("/api{}", r.path))),
    }
}

fn qtree_records(a: &Array, svm: &str) -> Vec<(String, Value)> {
    let s = &a.svms[svm];
    let mut out = Vec::new();
    for (vn, v) in &s.volumes {
        let base =
            json!({"volume": {"name": vn, "uuid": v.uuid}, "svm": {"name": svm, "uuid": s.uuid}});
        // Each volume lists itself as qtree 0 with an empty name.
        let mut own = base.clone();
        own["id"] = json!(0);
        own["name"] = json!("");
        own["path"] = json!(format!("/vol/{vn}"));
        own["security_style"] = json!(v.security_style);
        own["unix_permissions"] = json!(mode_number(&v.unix_permissions));
        own["export_policy"] = json!({"name": v.export_policy});
        out.push((format!("{svm}/{vn}/"), own));
        for (qn, q) in &v.qtrees {
            let mut rec = base.clone();
            rec["id"] = json!(q.id);
            rec["name"] = json!(qn);
            rec["path"] = json!(format!("/vol/{vn}/{qn}"));
            rec["security_style"] = json!(q.security_style);
            rec["unix_permissions"] = json!(mode_number(&q.mode));
            rec["export_policy"] = json!({"name": q.export_policy});
            out.push((format!("{svm}/{vn}/{qn}"), rec));
        }
    }
    out
}

fn qtrees(ctx: &Ctx<'_>) -> Vec<(String, Value)> {
    ctx.visible()
        .iter()
        .flat_map(|s| qtree_records(ctx.a, s))
        .collect()
}

fn qtree(ctx: &Ctx<'_>, vol: &str, id: &str) -> Result<Value, RestError> {
    let (svm, _) = find_volume(ctx, vol)?;
    qtree_records(ctx.a, &svm)
        .into_iter()
        .map(|(_, q)| q)
        .find(|q| q["volume"]["uuid"] == *vol && q["id"].as_u64() == id.parse::<u64>().ok())
        .ok_or_else(|| err(404, 5_242_927, format!("Qtree {vol}/{id} does not exist")))
}

fn qtree_create(ctx: &mut Ctx<'_>, r: &Req) -> Answer {
    check_body(
        r,
        &[
            "name",
            "volume.name",
            "volume.uuid",
            "svm.uuid",
            "svm.name",
            "unix_permissions",
            "export_policy.name",
            "security_style",
            "qos_policy.name",
        ],
    )?;
    if text(&r.body, "qos_policy.name").is_some() {
        return Err(RestError {
            target: Some("qos_policy.name".into()),
            ..err(
                400,
                3,
                "Qtree QoS policies are not supported by the simulator",
            )
        });
    }
    let svm = ctx.svm_of(r)?;
    let name = need(r, "name")?;
    let volume = named_volume(ctx, r, &svm)?;
    let mut call = Node::new("qtree-create")
        .with_leaf("volume", &volume)
        .with_leaf("qtree", &name);
    if let Some(m) = mode_text(r, "unix_permissions")? {
        call.push(Node::leaf("mode", m));
    }
    if let Some(s) = text(&r.body, "security_style") {
        call.push(Node::leaf("security-style", s));
    }
    if let Some(p) = text(&r.body, "export_policy.name") {
        call.push(Node::leaf("export-policy", p));
    }
    ctx.zapi(&svm, call).map_err(|f| {
        mapped(
            f,
            &[
                (errno::EVOLUMEDOESNOTEXIST, 404, 917_927),
                (errno::EEXIST, 409, 1),
            ],
        )
    })?;
    let v = &ctx.a.svms[&svm].volumes[&volume];
    let loc = format!("/api/storage/qtrees/{}/{}", v.uuid, v.qtrees[&name].id);
    let rec = qtree_records(ctx.a, &svm)
        .into_iter()
        .find(|(k, _)| *k == format!("{svm}/{volume}/{name}"))
        .map(|(_, q)| q)
        .unwrap_or_default();
    created(r, rec, loc)
}

/// `PATCH /storage/qtrees/{volume.uuid}/{id}`: a rename (`name`).
fn qtree_rename(ctx: &mut Ctx<'_>, r: &Req, vol: &str, id: &str) -> Answer {
    check_body(r, &["name"])?;
    let rec = qtree(ctx, vol, id)?;
    let to = need(r, "name")?;
    let (svm, volume) = find_volume(ctx, vol)?;
    let from = rec["name"].as_str().unwrap_or_default();
    if from.is_empty() {
        return Err(err(
            400,
            3,
            "The volume's own qtree (id 0) cannot be renamed",
        ));
    }
    let call = Node::new("qtree-rename")
        .with_leaf("qtree", format!("/vol/{volume}/{from}"))
        .with_leaf("new-qtree-name", format!("/vol/{volume}/{to}"));
    ctx.zapi(&svm, call)
        .map_err(|f| mapped(f, &[(errno::EEXIST, 409, 1)]))?;
    Ok(Reply::Ok(json!({})))
}

fn target_of(rec: &Value) -> String {
    format!(
        "/vol/{}/{}",
        rec["volume"]["name"].as_str().unwrap_or(""),
        rec["qtree"]["name"].as_str().unwrap_or("")
    )
}

fn quotas(ctx: &Ctx<'_>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for svm in ctx.visible() {
        let s = &ctx.a.svms[&svm];
        for (vn, v) in &s.volumes {
            for (target, kib) in &v.quotas {
                let qtree = target.rsplit('/').next().unwrap_or_default();
                let mut rec = json!({
                    "uuid": quota_uuid(&v.uuid, target),
                    "svm": {"name": svm, "uuid": s.uuid},
                    "volume": {"name": vn, "uuid": v.uuid},
                    "qtree": {"name": qtree},
                    "type": "tree",
                    "space": {},
                });
                if let Some(q) = v.qtrees.get(qtree) {
                    rec["qtree"]["id"] = json!(q.id);
                }
                // ZAPI keeps KiB; 0 is "no limit" (REST -1).
                rec["space"]["hard_limit"] = if *kib == 0 {
                    json!(-1)
                } else {
                    json!(kib * 1024)
                };
                out.push((format!("{svm}/{vn}/{target}"), rec));
            }
        }
    }
    out
}

fn quota(ctx: &Ctx<'_>, uuid: &str) -> Result<(String, Value), RestError> {
    quotas(ctx)
        .into_iter()
        .find(|(_, q)| q["uuid"] == *uuid)
        .map(|(_, q)| (q["svm"]["name"].as_str().unwrap_or_default().to_string(), q))
        .ok_or_else(|| not_found(&format!("quota rule {uuid}")))
}

/// Create (`uuid` None) or change a tree quota rule: `quota-set-entry` in KiB (resize is
/// implicit over REST).
fn quota_set(ctx: &mut Ctx<'_>, r: &Req, uuid: Option<&str>) -> Answer {
    let (svm, volume, target) = match uuid {
        Some(u) => {
            check_body(r, &["space.hard_limit"])?;
            let (svm, rec) = quota(ctx, u)?;
            let v = rec["volume"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (svm, v, target_of(&rec))
        }
        None => {
            check_body(
                r,
                &[
                    "volume.name",
                    "volume.uuid",
                    "qtree.name",
                    "type",
                    "svm.uuid",
                    "svm.name",
                    "space.hard_limit",
                ],
            )?;
            let svm = ctx.svm_of(r)?;
            let volume = named_volume(ctx, r, &svm)?;
            let qtree = need(r, "qtree.name")?;
            if need(r, "type")? != "tree" {
                return Err(bad_field("type", "Only tree quota rules are supported"));
            }
            let v = ctx.a.svms[&svm].volumes.get(&volume);
            let target = format!("/vol/{volume}/{qtree}");
            if v.is_some_and(|v| v.quotas.contains_key(&target)) {
                return Err(err(
                    409,
                    1,
                    format!("A quota rule for {target} already exists"),
                ));
            }
            (svm, volume, target)
        }
    };
    let limit = bytes(r, "space.hard_limit")?.unwrap_or(-1);
    let mut call = Node::new("quota-set-entry")
        .with_leaf("volume", &volume)
        .with_leaf("quota-target", &target)
        .with_leaf("quota-type", "tree")
        .with_leaf("qtree", "");
    if limit >= 0 {
        call.push(Node::leaf(
            "disk-limit",
            (limit as u64).div_ceil(1024).to_string(),
        ));
    }
    ctx.zapi(&svm, call)
        .map_err(|f| mapped(f, &[(errno::EVOLUMEDOESNOTEXIST, 404, 917_927)]))?;
    let vu = ctx.a.svms[&svm].volumes[&volume].uuid.clone();
    let qu = quota_uuid(&vu, &target);
    match uuid {
        Some(_) => Ok(Reply::Ok(json!({}))),
        None => created(
            r,
            json!({"uuid": qu}),
            format!("/api/storage/quota/rules/{qu}"),
        ),
    }
}

fn policies(ctx: &Ctx<'_>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for svm in ctx.visible() {
        let s = &ctx.a.svms[&svm];
        for (name, rules) in &s.export_policies {
            let rules: Vec<Value> = rules
                .iter()
                .map(|x| {
                    json!({
                        "index": x.index,
                        "clients": x.client_match.split(',').map(|c| json!({"match": c})).collect::<Vec<_>>(),
                        "protocols": x.protocols, "ro_rule": x.ro_rule,
                        "rw_rule": x.rw_rule, "superuser": x.superuser,
                    })
                })
                .collect();
            out.push((
                format!("{svm}/{name}"),
                json!({"id": policy_id(&s.uuid, name), "name": name,
                       "svm": {"name": svm, "uuid": s.uuid}, "rules": rules}),
            ));
        }
    }
    out
}

fn policy(ctx: &Ctx<'_>, id: &str) -> Result<(String, Value), RestError> {
    policies(ctx)
        .into_iter()
        .find(|(_, p)| p["id"].as_u64() == id.parse::<u64>().ok())
        .map(|(_, p)| (p["svm"]["name"].as_str().unwrap_or_default().to_string(), p))
        .ok_or_else(|| err(404, 1_703_954, format!("Export policy {id} does not exist")))
}

fn policy_create(ctx: &mut Ctx<'_>, r: &Req) -> Answer {
    check_body(r, &["name", "svm.uuid", "svm.name"])?;
    let svm = ctx.svm_of(r)?;
    let name = need(r, "name")?;
    ctx.zapi(
        &svm,
        Node::new("export-policy-create").with_leaf("policy-name", &name),
    )
    .map_err(|f| mapped(f, &[(errno::EDUPLICATEENTRY, 409, 1)]))?;
    let id = policy_id(&ctx.a.svms[&svm].uuid, &name);
    let rec = json!({"id": id, "name": name});
    created(r, rec, format!("/api/protocols/nfs/export-policies/{id}"))
}

fn strings(r: &Req, field: &str) -> Result<Vec<String>, RestError> {
    match r.body.get(field) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad_field(field, format!("\"{field}\" holds strings")))
            })
            .collect(),
        Some(_) => Err(bad_field(field, format!("\"{field}\" must be a list"))),
    }
}

fn rule_create(ctx: &mut Ctx<'_>, r: &Req, id: &str) -> Answer {
    check_body(
        r,
        &[
            "clients.match",
            "protocols",
            "ro_rule",
            "rw_rule",
            "superuser",
            "anonymous_user",
        ],
    )?;
    let (svm, rec) = policy(ctx, id)?;
    let clients: Vec<String> = r
        .body
        .get("clients")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("match").and_then(Value::as_str).map(str::to_string))
        .collect();
    if clients.is_empty() {
        return Err(bad_field("clients", "Missing value: \"clients\""));
    }
    let mut call = Node::new("export-rule-create")
        .with_leaf("policy-name", rec["name"].as_str().unwrap_or_default())
        .with_leaf("client-match", clients.join(","));
    for (field, input, item) in [
        ("protocols", "protocol", "access-protocol"),
        ("ro_rule", "ro-rule", "security-flavor"),
        ("rw_rule", "rw-rule", "security-flavor"),
        ("superuser", "super-user-security", "security-flavor"),
    ] {
        let values = strings(r, field)?;
        if !values.is_empty() {
            let mut n = Node::new(input);
            for v in values {
                n.push(Node::leaf(item, v));
            }
            call.push(n);
        }
    }
    ctx.zapi(&svm, call).map_err(|f| {
        mapped(
            f,
            &[
                (errno::EAPIERROR, 409, 1_704_070),
                (errno::EOBJECTNOTFOUND, 404, 1_703_954),
            ],
        )
    })?;
    let index = ctx.a.svms[&svm].export_policies[rec["name"].as_str().unwrap_or_default()]
        .iter()
        .map(|x| x.index)
        .max()
        .unwrap_or(0);
    created(
        r,
        json!({"index": index}),
        format!("/api/protocols/nfs/export-policies/{id}/rules/{index}"),
    )
}

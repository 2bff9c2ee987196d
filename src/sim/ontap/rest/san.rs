//! LUNs, initiator groups and their initiators, LUN maps.

use serde_json::{Value, json};

use super::collection::{Kind, created, list, one};
use super::{
    Answer, Ctx, Reply, Req, RestError, bad_field, boolean, bytes, check_body, err, mapped, need,
    no_method, not_found, text,
};
use crate::wire::zapi::{Node, errno};

const LUN: Kind = Kind {
    keys: &["uuid", "name"],
    known: &[
        "uuid",
        "name",
        "svm",
        "location",
        "os_type",
        "serial_number",
        "space",
        "status",
        "enabled",
        "comment",
        "lun_maps",
    ],
};
const IGROUP: Kind = Kind {
    keys: &["uuid", "name"],
    known: &[
        "uuid",
        "name",
        "svm",
        "protocol",
        "os_type",
        "initiators",
        "lun_maps",
    ],
};
const INITIATOR: Kind = Kind {
    keys: &["name"],
    known: &["name"],
};
const MAP: Kind = Kind {
    keys: &["lun", "igroup"],
    known: &["svm", "lun", "igroup", "logical_unit_number"],
};

pub(super) fn route(ctx: &mut Ctx<'_>, r: &Req, m: &str, segs: &[&str]) -> Answer {
    match (m, segs) {
        ("GET", ["storage", "luns"]) => list(ctx.tuning, r, &LUN, luns(ctx)),
        ("POST", ["storage", "luns"]) => lun_create(ctx, r),
        ("GET", ["storage", "luns", uuid]) => one(r, &LUN, &lun(ctx, uuid)?.1),
        ("PATCH", ["storage", "luns", uuid]) => lun_patch(ctx, r, uuid),
        ("DELETE", ["storage", "luns", uuid]) => lun_delete(ctx, r, uuid),
        ("GET", ["protocols", "san", "igroups"]) => list(ctx.tuning, r, &IGROUP, igroups(ctx)),
        ("POST", ["protocols", "san", "igroups"]) => igroup_create(ctx, r),
        ("GET", ["protocols", "san", "igroups", uuid]) => one(r, &IGROUP, &igroup(ctx, uuid)?.1),
        ("DELETE", ["protocols", "san", "igroups", uuid]) => {
            let (svm, g) = igroup(ctx, uuid)?;
            let call = Node::new("igroup-destroy").with_leaf("initiator-group-name", name(&g));
            ctx.zapi(&svm, call)
                .map_err(|f| mapped(f, &[(errno::INITGROUP_MAPS_EXIST, 409, 1_254_213)]))?;
            Ok(Reply::Ok(json!({})))
        }
        ("GET", ["protocols", "san", "igroups", uuid, "initiators"]) => {
            let (_, g) = igroup(ctx, uuid)?;
            let recs = g["initiators"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|i| (name(&i), i))
                .collect();
            list(ctx.tuning, r, &INITIATOR, recs)
        }
        ("POST", ["protocols", "san", "igroups", uuid, "initiators"]) => {
            check_body(r, &["name", "records.name", "comment"])?;
            let (svm, g) = igroup(ctx, uuid)?;
            let mut names: Vec<String> = text(&r.body, "name").into_iter().collect();
            for x in r
                .body
                .get("records")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                names.extend(x.get("name").and_then(Value::as_str).map(str::to_string));
            }
            if names.is_empty() {
                return Err(bad_field("name", "Missing value: \"name\""));
            }
            add_initiators(ctx, &svm, &name(&g), &names)?;
            created(
                r,
                json!({"name": names[0]}),
                format!("/api{}/{}", r.path, names[0]),
            )
        }
        ("DELETE", ["protocols", "san", "igroups", uuid, "initiators", init]) => {
            let (svm, g) = igroup(ctx, uuid)?;
            let call = Node::new("igroup-remove")
                .with_leaf("initiator-group-name", name(&g))
                .with_leaf("initiator", *init);
            ctx.zapi(&svm, call)
                .map_err(|f| mapped(f, &[(errno::NODE_NOT_IN_INITGROUP, 404, 4)]))?;
            Ok(Reply::Ok(json!({})))
        }
        ("GET", ["protocols", "san", "lun-maps"]) => list(ctx.tuning, r, &MAP, maps(ctx)),
        ("POST", ["protocols", "san", "lun-maps"]) => map_create(ctx, r),
        ("GET", ["protocols", "san", "lun-maps", lun, ig]) => {
            let rec = maps(ctx)
                .into_iter()
                .find(|(_, x)| x["lun"]["uuid"] == *lun && x["igroup"]["uuid"] == *ig);
            let rec = rec.ok_or_else(|| err(404, 5_374_922, "The LUN map does not exist"))?;
            one(r, &MAP, &rec.1)
        }
        ("DELETE", ["protocols", "san", "lun-maps", lun_uuid, ig]) => {
            let absent = || err(404, 5_374_922, "The LUN map does not exist");
            let (svm, l) = lun(ctx, lun_uuid).map_err(|_| absent())?;
            let (_, g) = igroup(ctx, ig).map_err(|_| absent())?;
            let call = Node::new("lun-unmap")
                .with_leaf("path", name(&l))
                .with_leaf("initiator-group", name(&g));
            ctx.zapi(&svm, call)
                .map_err(|f| mapped(f, &[(errno::NO_SUCH_LUNMAP, 404, 5_374_922)]))?;
            Ok(Reply::Ok(json!({})))
        }
        (_, ["storage", "luns", ..] | ["protocols", "san", "igroups" | "lun-maps", ..])
            if segs.len() <= 6 =>
        {
            Err(no_method(r))
        }
        _ => Err(not_found(&format!("/api{}", r.path))),
    }
}

fn name(v: &Value) -> String {
    v["name"].as_str().unwrap_or_default().to_string()
}

fn luns(ctx: &Ctx<'_>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for svm in ctx.visible() {
        let s = &ctx.a.svms[&svm];
        for (path, l) in &s.luns {
            let mut parts = path.trim_start_matches("/vol/").splitn(2, '/');
            let vol = parts.next().unwrap_or_default();
            let vuuid = s
                .volumes
                .get(vol)
                .map(|v| v.uuid.clone())
                .unwrap_or_default();
            let maps: Vec<Value> = l
                .maps
                .iter()
                .map(|(g, id)| {
                    let gu = s.igroups.get(g).map(|x| x.uuid.clone()).unwrap_or_default();
                    json!({"igroup": {"name": g, "uuid": gu}, "logical_unit_number": id})
                })
                .collect();
            out.push((
                format!("{svm}/{path}"),
                json!({
                    "uuid": l.uuid, "name": path,
                    "svm": {"name": svm, "uuid": s.uuid},
                    "location": {"volume": {"name": vol, "uuid": vuuid},
                                 "logical_unit": parts.next().unwrap_or_default()},
                    "os_type": l.ostype, "serial_number": l.serial,
                    "space": {"size": l.size, "used": 0,
                              "guarantee": {"requested": l.space_reserved,
                                            "reserved": l.space_reserved}},
                    "status": {"state": if l.online { "online" } else { "offline" },
                               "mapped": !l.maps.is_empty()},
                    "enabled": l.online,
                    "comment": l.comment,
                    "lun_maps": maps,
                }),
            ));
        }
    }
    out
}

fn lun(ctx: &Ctx<'_>, uuid: &str) -> Result<(String, Value), RestError> {
    luns(ctx)
        .into_iter()
        .find(|(_, l)| l["uuid"] == *uuid)
        .map(|(_, l)| (l["svm"]["name"].as_str().unwrap_or_default().to_string(), l))
        .ok_or_else(|| err(404, 5_374_875, format!("LUN {uuid} does not exist")))
}

fn lun_create(ctx: &mut Ctx<'_>, r: &Req) -> Answer {
    check_body(
        r,
        &[
            "name",
            "os_type",
            "space.size",
            "space.guarantee.requested",
            "space.scsi_thin_provisioning_support_enabled",
            "qos_policy.name",
            "svm.uuid",
            "svm.name",
            "comment",
        ],
    )?;
    let svm = ctx.svm_of(r)?;
    let path = need(r, "name")?;
    let size = bytes(r, "space.size")?
        .ok_or_else(|| bad_field("space.size", "Missing value: \"space.size\""))?;
    if size < 0 {
        return Err(bad_field("space.size", "The size must not be negative"));
    }
    let os = text(&r.body, "os_type")
        .ok_or_else(|| bad_field("os_type", "Missing value: \"os_type\""))?;
    let mut call = Node::new("lun-create-by-size")
        .with_leaf("path", &path)
        .with_leaf("size", size.to_string())
        .with_leaf("ostype", os);
    if let Some(g) = boolean(r, "space.guarantee.requested")? {
        call.push(Node::leaf("space-reservation-enabled", g.to_string()));
    }
    if let Some(t) = boolean(r, "space.scsi_thin_provisioning_support_enabled")? {
        call.push(Node::leaf("space-allocation-enabled", t.to_string()));
    }
    if let Some(q) = text(&r.body, "qos_policy.name") {
        call.push(Node::leaf("qos-policy-group", q));
    }
    if let Some(c) = text(&r.body, "comment") {
        call.push(Node::leaf("comment", c));
    }
    ctx.zapi(&svm, call).map_err(|f| {
        mapped(
            f,
            &[
                (errno::NO_SUCH_VOLUME, 404, 917_927),
                (errno::VDISK_EXISTS, 409, 5_374_242),
                (errno::SIZE_TOO_SMALL, 400, 5_374_124),
            ],
        )
    })?;
    let uuid = ctx.a.svms[&svm].luns[&path].uuid.clone();
    let rec = lun(ctx, &uuid)?.1;
    created(r, rec, format!("/api/storage/luns/{uuid}"))
}

fn lun_patch(ctx: &mut Ctx<'_>, r: &Req, uuid: &str) -> Answer {
    check_body(r, &["space.size", "comment", "enabled"])?;
    let (svm, l) = lun(ctx, uuid)?;
    let path = name(&l);
    if let Some(size) = bytes(r, "space.size")? {
        let call = Node::new("lun-resize")
            .with_leaf("path", &path)
            .with_leaf("size", size.max(0).to_string());
        ctx.zapi(&svm, call)
            .map_err(|f| mapped(f, &[(errno::SIZE_TOO_SMALL, 400, 5_374_124)]))?;
    }
    if let Some(on) = boolean(r, "enabled")?
        && on != l["enabled"].as_bool().unwrap_or(true)
    {
        let call = if on { "lun-online" } else { "lun-offline" };
        ctx.zapi(&svm, Node::new(call).with_leaf("path", &path))
            .map_err(|f| mapped(f, &[]))?;
    }
    if let Some(c) = text(&r.body, "comment")
        && let Some(x) = ctx.a.svms.get_mut(&svm).and_then(|s| s.luns.get_mut(&path))
    {
        x.comment = c;
    }
    Ok(Reply::Ok(json!({})))
}

/// A mapped LUN is refused (1254197) unless `allow_delete_while_mapped=true`; an online one
/// is deleted (REST has no separate offline step).
fn lun_delete(ctx: &mut Ctx<'_>, r: &Req, uuid: &str) -> Answer {
    let (svm, l) = lun(ctx, uuid)?;
    if l["status"]["mapped"] == true && !r.flag("allow_delete_while_mapped") {
        return Err(err(409, 1_254_197, format!("LUN {} is mapped", name(&l))));
    }
    let call = Node::new("lun-destroy")
        .with_leaf("path", name(&l))
        .with_leaf("force", "true");
    ctx.zapi(&svm, call)
        .map_err(|f| mapped(f, &[(errno::EOBJECTNOTFOUND, 404, 5_374_875)]))?;
    Ok(Reply::Ok(json!({})))
}

fn igroups(ctx: &Ctx<'_>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for svm in ctx.visible() {
        let s = &ctx.a.svms[&svm];
        for (n, g) in &s.igroups {
            let maps: Vec<Value> = s
                .luns
                .iter()
                .filter_map(|(p, l)| l.maps.get(n).map(|id| (p, l, id)))
                .map(|(p, l, id)| {
                    json!({"lun": {"name": p, "uuid": l.uuid}, "logical_unit_number": id})
                })
                .collect();
            out.push((
                format!("{svm}/{n}"),
                json!({
                    "uuid": g.uuid, "name": n, "svm": {"name": svm, "uuid": s.uuid},
                    "protocol": g.kind, "os_type": g.os_type,
                    "initiators": g.initiators.iter().map(|i| json!({"name": i})).collect::<Vec<_>>(),
                    "lun_maps": maps,
                }),
            ));
        }
    }
    out
}

fn igroup(ctx: &Ctx<'_>, uuid: &str) -> Result<(String, Value), RestError> {
    igroups(ctx)
        .into_iter()
        .find(|(_, g)| g["uuid"] == *uuid)
        .map(|(_, g)| (g["svm"]["name"].as_str().unwrap_or_default().to_string(), g))
        .ok_or_else(|| {
            err(
                404,
                5_374_852,
                format!("Initiator group {uuid} does not exist"),
            )
        })
}

fn add_initiators(
    ctx: &mut Ctx<'_>,
    svm: &str,
    group: &str,
    names: &[String],
) -> Result<(), RestError> {
    for n in names {
        let call = Node::new("igroup-add")
            .with_leaf("initiator-group-name", group)
            .with_leaf("initiator", n);
        ctx.zapi(svm, call).map_err(|f| {
            mapped(
                f,
                &[
                    (errno::INITGROUP_HAS_NODE, 409, 5_374_035),
                    (errno::NO_SUCH_INITGROUP, 404, 5_374_852),
                    (errno::EAPIERROR, 400, 2),
                ],
            )
        })?;
    }
    Ok(())
}

fn igroup_create(ctx: &mut Ctx<'_>, r: &Req) -> Answer {
    check_body(
        r,
        &[
            "name",
            "protocol",
            "os_type",
            "svm.uuid",
            "svm.name",
            "initiators.name",
            "comment",
        ],
    )?;
    let svm = ctx.svm_of(r)?;
    let group = need(r, "name")?;
    let names: Vec<String> = r
        .body
        .get("initiators")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| i.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    if let Some(bad) = names
        .iter()
        .find(|i| !(i.starts_with("iqn.") || i.starts_with("eui.") || i.starts_with("naa.")))
    {
        return Err(bad_field(
            "initiators.name",
            format!("Invalid initiator name \"{bad}\""),
        ));
    }
    let mut call = Node::new("igroup-create").with_leaf("initiator-group-name", &group);
    if let Some(p) = text(&r.body, "protocol") {
        call.push(Node::leaf("initiator-group-type", p));
    }
    if let Some(o) = text(&r.body, "os_type") {
        call.push(Node::leaf("os-type", o));
    }
    ctx.zapi(&svm, call)
        .map_err(|f| mapped(f, &[(errno::INITGROUP_EXISTS, 409, 5_374_023)]))?;
    add_initiators(ctx, &svm, &group, &names)?;
    let uuid = ctx.a.svms[&svm].igroups[&group].uuid.clone();
    let rec = igroup(ctx, &uuid)?.1;
    created(r, rec, format!("/api/protocols/san/igroups/{uuid}"))
}

fn maps(ctx: &Ctx<'_>) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for svm in ctx.visible() {
        let s = &ctx.a.svms[&svm];
        for (path, l) in &s.luns {
            for (g, id) in &l.maps {
                let gu = s.igroups.get(g).map(|x| x.uuid.clone()).unwrap_or_default();
                out.push((
                    format!("{svm}/{path}/{g}"),
                    json!({
                        "svm": {"name": svm, "uuid": s.uuid},
                        "lun": {"name": path, "uuid": l.uuid},
                        "igroup": {"name": g, "uuid": gu},
                        "logical_unit_number": id,
                    }),
                ));
            }
        }
    }
    out
}

fn map_create(ctx: &mut Ctx<'_>, r: &Req) -> Answer {
    check_body(
        r,
        &[
            "igroup.name",
            "igroup.uuid",
            "lun.name",
            "lun.uuid",
            "svm.uuid",
            "svm.name",
            "logical_unit_number",
        ],
    )?;
    let svm = ctx.svm_of(r)?;
    let s = &ctx.a.svms[&svm];
    let path = match text(&r.body, "lun.name") {
        Some(p) => p,
        None => {
            let u = need(r, "lun.uuid").map_err(|_| bad_field("lun", "Missing value: \"lun\""))?;
            s.luns
                .iter()
                .find(|(_, l)| l.uuid == u)
                .map(|(p, _)| p.clone())
                .ok_or_else(|| err(404, 1_254_201, format!("LUN {u} does not exist")))?
        }
    };
    let group = match text(&r.body, "igroup.name") {
        Some(g) => g,
        None => {
            let u = need(r, "igroup.uuid")
                .map_err(|_| bad_field("igroup", "Missing value: \"igroup\""))?;
            s.igroups
                .iter()
                .find(|(_, g)| g.uuid == u)
                .map(|(n, _)| n.clone())
                .ok_or_else(|| {
                    err(
                        404,
                        5_374_852,
                        format!("Initiator group {u} does not exist"),
                    )
                })?
        }
    };
    let mut call = Node::new("lun-map")
        .with_leaf("initiator-group", &group)
        .with_leaf("path", &path);
    if let Some(n) = bytes(r, "logical_unit_number")? {
        call.push(Node::leaf("lun-id", n.to_string()));
    }
    ctx.zapi(&svm, call).map_err(|f| {
        mapped(
            f,
            &[
                (errno::EOBJECTNOTFOUND, 404, 1_254_201),
                (errno::NO_SUCH_INITGROUP, 404, 5_374_852),
                (errno::INITGROUP_HAS_VDISK, 409, 1_254_207),
                (errno::INITGROUP_HAS_LUN, 409, 1),
            ],
        )
    })?;
    let s = &ctx.a.svms[&svm];
    let l = &s.luns[&path];
    let rec = json!({
        "svm": {"name": svm, "uuid": s.uuid},
        "lun": {"name": path, "uuid": l.uuid},
        "igroup": {"name": group, "uuid": s.igroups[&group].uuid},
        "logical_unit_number": l.maps[&group],
    });
    let loc = format!(
        "/api/protocols/san/lun-maps/{}/{}",
        l.uuid, s.igroups[&group].uuid
    );
    created(r, rec, loc)
}

//! Volumes (FlexVol, FlexGroup, FlexClone) and their snapshots. Creates, deletes, resizes and
//! snapshot changes answer 202 with a job.

use serde_json::{Value, json};

use super::cluster::{aggr_name, aggr_ref};
use super::collection::{Kind, list, one};
use super::{
    Answer, Ctx, Reply, Req, RestError, bad_field, boolean, bytes, check_body, err, mapped, need,
    no_method, not_found, text,
};
use crate::sim::ontap::state::{Array, Volume};
use crate::wire::zapi::{Node, errno};

const VOLUME: Kind = Kind {
    keys: &["uuid", "name"],
    known: &[
        "uuid",
        "name",
        "svm",
        "style",
        "state",
        "type",
        "size",
        "comment",
        "create_time",
        "aggregates",
        "guarantee",
        "snapshot_policy",
        "space",
        "nas",
        "encryption",
        "snapshot_directory_access_enabled",
        "quota",
        "clone",
        "is_svm_root",
    ],
};

const SNAPSHOT: Kind = Kind {
    keys: &["uuid", "name"],
    known: &[
        "uuid",
        "name",
        "create_time",
        "volume",
        "svm",
        "size",
        "state",
        "owners",
    ],
};

/// ONTAP's REST mode: the decimal digits of the octal mode (`---rwxr-xr-x` → 755).
pub(super) fn mode_number(p: &str) -> u64 {
    let digits: String = if p.chars().all(|c| c.is_ascii_digit()) {
        p.to_string()
    } else {
        let bits: Vec<bool> = p.chars().rev().take(9).map(|c| c != '-').collect();
        if bits.len() < 9 {
            return 0;
        }
        (0..3)
            .rev()
            .map(|g| {
                let d = (0..3).fold(0, |acc, i| acc | (u32::from(bits[g * 3 + i]) << i));
                char::from_digit(d, 8).unwrap_or('0')
            })
            .collect()
    };
    digits.parse().unwrap_or(0)
}

/// A REST mode number as ZAPI's octal string (755 → `0755`); digits above 7 are refused.
pub(super) fn mode_text(req: &Req, field: &str) -> Result<Option<String>, RestError> {
    let Some(n) = bytes(req, field)? else {
        return Ok(None);
    };
    let s = n.to_string();
    if n < 0 || s.len() > 4 || s.chars().any(|c| c > '7') {
        return Err(bad_field(
            field,
            format!("Invalid mode {n}: use octal digits such as 755"),
        ));
    }
    Ok(Some(format!("{s:0>4}")))
}

fn iso(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

pub(super) fn volume_record(a: &Array, svm: &str, name: &str, v: &Volume) -> Value {
    let s = &a.svms[svm];
    let prefix = format!("/vol/{name}/");
    let used: u64 = s
        .luns
        .range(prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&prefix))
        .map(|(_, l)| if l.space_reserved { l.size } else { 0 })
        .sum();
    let mut rec = json!({
        "uuid": v.uuid, "name": name,
        "svm": {"name": svm, "uuid": s.uuid},
        "style": v.style, "state": v.state, "type": "rw", "size": v.size,
        "comment": v.comment, "create_time": iso(v.created),
        "aggregates": v.aggregates.iter().map(|x| aggr_ref(x)).collect::<Vec<_>>(),
        "guarantee": {"type": v.space_guarantee},
        "snapshot_policy": {"name": v.snapshot_policy},
        "space": {"size": v.size, "used": used, "available": v.size.saturating_sub(used),
                  "snapshot": {"reserve_percent": v.snapshot_reserve}},
        "nas": {"path": v.junction.clone().unwrap_or_default(),
                "export_policy": {"name": v.export_policy},
                "security_style": v.security_style,
                "unix_permissions": mode_number(&v.unix_permissions)},
        "encryption": {"enabled": v.encrypt},
        "snapshot_directory_access_enabled": v.snapdir,
        "quota": {"enabled": v.quota_on, "state": if v.quota_on { "on" } else { "off" }},
        "is_svm_root": v.is_root,
        "clone": {"is_flexclone": v.clone_parent.is_some()},
    });
    if let Some((p, snap)) = &v.clone_parent {
        let puuid = s.volumes.get(p).map(|x| x.uuid.clone()).unwrap_or_default();
        rec["clone"]["parent_volume"] = json!({"name": p, "uuid": puuid});
        rec["clone"]["parent_snapshot"] = json!({"name": snap});
    }
    rec
}

/// (svm, volume name) of a volume uuid among the SVMs the user sees.
pub(super) fn find_volume(ctx: &Ctx<'_>, uuid: &str) -> Result<(String, String), RestError> {
    for s in ctx.visible() {
        if let Some(n) = ctx.a.svms.get(&s).and_then(|x| {
            x.volumes
                .iter()
                .find(|(_, v)| v.uuid == uuid)
                .map(|(n, _)| n.clone())
        }) {
            return Ok((s, n));
        }
    }
    Err(not_found(&format!("volume {uuid}")))
}

/// The volume a body names by `volume.name` or `volume.uuid`, in `svm`.
pub(super) fn named_volume(ctx: &Ctx<'_>, req: &Req, svm: &str) -> Result<String, RestError> {
    if let Some(n) = text(&req.body, "volume.name") {
        return Ok(n);
    }
    let u = need(req, "volume.uuid")?;
    ctx.a.svms[svm]
        .volumes
        .iter()
        .find(|(_, v)| v.uuid == u)
        .map(|(n, _)| n.clone())
        .ok_or_else(|| err(404, 917927, format!("Volume {u} does not exist")))
}

fn vol_uuid(ctx: &Ctx<'_>, svm: &str, name: &str) -> String {
    ctx.a.svms[svm]
        .volumes
        .get(name)
        .map(|v| v.uuid.clone())
        .unwrap_or_default()
}

pub(super) fn route(ctx: &mut Ctx<'_>, r: &Req, m: &str, segs: &[&str]) -> Answer {
    match (m, segs) {
        ("GET", []) => {
            let mut recs = Vec::new();
            for s in ctx.visible() {
                for (n, v) in &ctx.a.svms[&s].volumes {
                    recs.push((format!("{s}/{n}"), volume_record(ctx.a, &s, n, v)));
                }
            }
            let recs = ctx.listed(recs, "uuid");
            list(ctx.tuning, r, &VOLUME, recs)
        }
        ("POST", []) => create(ctx, r),
        ("GET", [uuid]) => {
            let (s, n) = find_volume(ctx, uuid)?;
            one(
                r,
                &VOLUME,
                &volume_record(ctx.a, &s, &n, &ctx.a.svms[&s].volumes[&n]),
            )
        }
        ("PATCH", [uuid]) => patch(ctx, r, uuid),
        ("DELETE", [uuid]) => {
            let (s, n) = find_volume(ctx, uuid)?;
            if let Some(j) = injected_job(ctx, &s, &format!("DELETE /api/storage/volumes/{uuid}")) {
                return Ok(j);
            }
            destroy(ctx, &s, &n, uuid, r.flag("force"))
                .map_err(|f| mapped(f, &[(errno::EVOLDEL_NOT_ALLOW_BY_CLONE, 409, 524615)]))?;
            Ok(Reply::Job(
                ctx.job(&s, format!("DELETE /api/storage/volumes/{uuid}")),
                None,
            ))
        }
        ("GET", [uuid, "snapshots"]) => {
            let (s, n) = find_volume(ctx, uuid)?;
            let recs = snapshots(ctx.a, &s, &n);
            list(ctx.tuning, r, &SNAPSHOT, recs)
        }
        ("POST", [uuid, "snapshots"]) => snapshot_create(ctx, r, uuid),
        ("GET", [uuid, "snapshots", snap]) => {
            let (s, n) = find_volume(ctx, uuid)?;
            let rec = snapshots(ctx.a, &s, &n)
                .into_iter()
                .find(|(_, x)| x["uuid"] == *snap)
                .ok_or_else(|| not_found(&format!("snapshot {snap}")))?;
            one(r, &SNAPSHOT, &rec.1)
        }
        ("DELETE", [uuid, "snapshots", snap]) => snapshot_delete(ctx, uuid, snap),
        (_, [] | [_] | [_, "snapshots"] | [_, "snapshots", _]) => Err(no_method(r)),
        _ => Err(not_found(&format!("/api{}", r.path))),
    }
}

/// `volume-destroy-async` (unmounted and offlined on the way); `force` skips the recovery
/// queue.
fn destroy(
    ctx: &mut Ctx<'_>,
    svm: &str,
    name: &str,
    uuid: &str,
    force: bool,
) -> Result<(), crate::sim::ontap::api::Fail> {
    let call = Node::new("volume-destroy-async")
        .with_leaf("volume-name", name)
        .with_leaf("unmount-and-offline", "true");
    ctx.zapi(svm, call)?;
    if force && let Some(s) = ctx.a.svms.get_mut(svm) {
        s.recovery_queue.retain(|_, q| q.volume.uuid != uuid);
    }
    Ok(())
}

/// A `…:job/CODE` fault: the request changes nothing and its job fails.
fn injected_job(ctx: &mut Ctx<'_>, svm: &str, what: &str) -> Option<Reply> {
    ctx.job_error
        .is_some()
        .then(|| Reply::Job(ctx.job(svm, what.to_string()), None))
}

const CREATE_FIELDS: &[&str] = &[
    "name",
    "size",
    "svm.uuid",
    "svm.name",
    "aggregates.name",
    "aggregates.uuid",
    "style",
    "state",
    "type",
    "guarantee.type",
    "snapshot_policy.name",
    "comment",
    "space.snapshot.reserve_percent",
    "encryption.enabled",
    "qos.policy.name",
    "tiering.policy",
    "nas.security_style",
    "nas.unix_permissions",
    "nas.export_policy.name",
    "nas.path",
    "snapshot_directory_access_enabled",
    "constituents_per_aggregate",
];

/// What a clone's create takes: a FlexClone has its parent's size, aggregate and settings.
const CLONE_FIELDS: &[&str] = &[
    "name",
    "svm.uuid",
    "svm.name",
    "clone.parent_volume.name",
    "clone.parent_volume.uuid",
    "clone.parent_snapshot.name",
    "clone.is_flexclone",
    "guarantee.type",
    "nas.path",
    "snapshot_directory_access_enabled",
];

/// `POST /storage/volumes`: a FlexVol, a FlexGroup (`style: flexgroup` or several
/// aggregates) or a FlexClone (`clone`), through the ZAPI call that makes each; mounted at
/// `nas.path` by that call, and its `snapshot_directory_access_enabled` set by a modify in
/// the same job (a refused modify takes the new volume away again).
fn create(ctx: &mut Ctx<'_>, r: &Req) -> Answer {
    let is_clone = r.body.get("clone").is_some();
    check_body(
        r,
        if is_clone {
            CLONE_FIELDS
        } else {
            CREATE_FIELDS
        },
    )?;
    let svm = ctx.svm_of(r)?;
    let name = need(r, "name")?;
    if name.len() > 203 {
        return Err(RestError {
            target: Some("name".into()),
            ..err(400, 917886, "The volume name is longer than 203 characters")
        });
    }
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        return Err(RestError {
            target: Some("name".into()),
            ..err(
                400,
                917887,
                format!("Volume name \"{name}\" must start with a letter or _"),
            )
        });
    }
    if let Some(t) = text(&r.body, "type").filter(|t| !t.eq_ignore_ascii_case("rw")) {
        return Err(RestError {
            target: Some("type".into()),
            ..err(
                400,
                3,
                format!("Volume type \"{t}\" is not supported by the simulator"),
            )
        });
    }
    if let Some(s) = text(&r.body, "state").filter(|s| s != "online") {
        return Err(bad_field(
            "state",
            format!("A new volume is online, not \"{s}\""),
        ));
    }
    let snapdir = boolean(r, "snapshot_directory_access_enabled")?;
    let what = "POST /api/storage/volumes".to_string();
    if let Some(j) = injected_job(ctx, &svm, &what) {
        return Ok(j);
    }
    let call = if is_clone {
        clone_call(ctx, r, &svm, &name)?
    } else {
        create_call(ctx, r, &name)?
    };
    ctx.zapi(&svm, call).map_err(|f| {
        mapped(
            f,
            &[
                (errno::EEXIST, 409, 917526),
                (errno::EAGGRDOESNOTEXIST, 404, 917508),
                (errno::EVOLUMEDOESNOTEXIST, 404, 524601),
            ],
        )
    })?;
    let uuid = vol_uuid(ctx, &svm, &name);
    if let Some(visible) = snapdir {
        let attrs = Node::new("volume-attributes").with(
            Node::new("volume-snapshot-attributes")
                .with_leaf("snapdir-access-enabled", visible.to_string()),
        );
        if let Err(e) = modify_iter(ctx, &svm, &name, attrs) {
            let _ = destroy(ctx, &svm, &name, &uuid, true);
            return Err(e);
        }
    }
    ctx.unlist(uuid.clone());
    let loc = format!("/api/storage/volumes/{uuid}");
    Ok(Reply::Job(ctx.job(&svm, what), Some(loc)))
}

fn clone_call(ctx: &Ctx<'_>, r: &Req, svm: &str, name: &str) -> Result<Node, RestError> {
    if boolean(r, "clone.is_flexclone")? == Some(false) {
        return Err(bad_field(
            "clone.is_flexclone",
            "Only FlexClones are supported",
        ));
    }
    let parent = match text(&r.body, "clone.parent_volume.name") {
        Some(p) => p,
        None => {
            let u = need(r, "clone.parent_volume.name")
                .or_else(|_| need(r, "clone.parent_volume.uuid"))?;
            ctx.a.svms[svm]
                .volumes
                .iter()
                .find(|(_, v)| v.uuid == u)
                .map(|(n, _)| n.clone())
                .ok_or_else(|| err(404, 524601, format!("Parent volume {u} does not exist")))?
        }
    };
    let mut call = Node::new("volume-clone-create")
        .with_leaf("volume", name)
        .with_leaf("parent-volume", parent);
    if let Some(s) = text(&r.body, "clone.parent_snapshot.name") {
        call.push(Node::leaf("parent-snapshot", s));
    }
    if let Some(g) = text(&r.body, "guarantee.type") {
        call.push(Node::leaf("space-reserve", g));
    }
    if let Some(p) = text(&r.body, "nas.path").filter(|p| !p.is_empty()) {
        call.push(Node::leaf("junction-path", p));
    }
    Ok(call)
}

fn create_call(ctx: &Ctx<'_>, r: &Req, name: &str) -> Result<Node, RestError> {
    let mut aggrs = Vec::new();
    for a in r
        .body
        .get("aggregates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        aggrs.push(aggr_name(ctx, a).ok_or_else(|| RestError {
            target: Some("aggregates".into()),
            ..err(404, 917508, "Aggregate does not exist")
        })?);
    }
    if aggrs.is_empty() {
        return Err(bad_field("aggregates", "Missing value: \"aggregates\""));
    }
    let size = bytes(r, "size")?.ok_or_else(|| bad_field("size", "Missing value: \"size\""))?;
    if size < 0 {
        return Err(bad_field("size", "The size must not be negative"));
    }
    let style = text(&r.body, "style").unwrap_or_else(|| {
        if aggrs.len() > 1 {
            "flexgroup"
        } else {
            "flexvol"
        }
        .into()
    });
    let mut call = match style.as_str() {
        "flexvol" if aggrs.len() == 1 => Node::new("volume-create")
            .with_leaf("volume", name)
            .with_leaf("containing-aggr-name", &aggrs[0]),
        "flexvol" => return Err(bad_field("aggregates", "A FlexVol lives on one aggregate")),
        "flexgroup" => {
            let mut list = Node::new("aggr-list");
            for a in &aggrs {
                list.push(Node::leaf("aggr-name", a));
            }
            let mut c = Node::new("volume-create-async")
                .with_leaf("volume-name", name)
                .with(list);
            if let Some(n) = bytes(r, "constituents_per_aggregate")? {
                c.push(Node::leaf("aggr-multiplier", n.to_string()));
            }
            c
        }
        other => return Err(bad_field("style", format!("Unknown style \"{other}\""))),
    };
    call.push(Node::leaf("size", size.to_string()));
    let leaves = [
        ("guarantee.type", "space-reserve"),
        ("snapshot_policy.name", "snapshot-policy"),
        (
            "space.snapshot.reserve_percent",
            "percentage-snapshot-reserve",
        ),
        ("nas.export_policy.name", "export-policy"),
        ("nas.security_style", "volume-security-style"),
        ("comment", "volume-comment"),
        ("encryption.enabled", "encrypt"),
        ("qos.policy.name", "qos-policy-group-name"),
        ("tiering.policy", "tiering-policy"),
    ];
    for (field, input) in leaves {
        if let Some(v) = text(&r.body, field) {
            call.push(Node::leaf(input, v));
        }
    }
    if let Some(m) = mode_text(r, "nas.unix_permissions")? {
        call.push(Node::leaf("unix-permissions", m));
    }
    if let Some(p) = text(&r.body, "nas.path").filter(|p| !p.is_empty()) {
        call.push(Node::leaf("junction-path", p));
    }
    Ok(call)
}

const PATCH_FIELDS: &[&str] = &[
    "size",
    "nas.path",
    "nas.export_policy.name",
    "nas.unix_permissions",
    "snapshot_directory_access_enabled",
    "comment",
    "quota.enabled",
    "clone.split_initiated",
    "state",
    "name",
    "qos.policy.name",
    "movement.destination_aggregate.name",
];

/// `PATCH /storage/volumes/{uuid}`: each concern through its ZAPI call; a resize answers 202
/// with a job, everything else 200.
fn patch(ctx: &mut Ctx<'_>, r: &Req, uuid: &str) -> Answer {
    let (svm, name) = find_volume(ctx, uuid)?;
    if r.param("restore_to.snapshot.name").is_some() {
        return Err(err(
            400,
            3,
            "Snapshot restore is not supported by the simulator",
        ));
    }
    check_body(r, PATCH_FIELDS)?;
    for unsupported in [
        "name",
        "qos.policy.name",
        "movement.destination_aggregate.name",
    ] {
        if text(&r.body, unsupported).is_some() {
            return Err(RestError {
                target: Some(unsupported.into()),
                ..err(
                    400,
                    3,
                    format!("Changing {unsupported} is not supported by the simulator"),
                )
            });
        }
    }
    let what = format!("PATCH /api/storage/volumes/{uuid}");
    if let Some(j) = injected_job(ctx, &svm, &what) {
        return Ok(j);
    }
    let plain = |f| mapped(f, &[]);
    let mut modify = Node::new("volume-attributes");
    if let Some(p) = text(&r.body, "nas.export_policy.name") {
        modify.push(Node::new("volume-export-attributes").with_leaf("policy", p));
    }
    if let Some(m) = mode_text(r, "nas.unix_permissions")? {
        modify.push(
            Node::new("volume-security-attributes")
                .with(Node::new("volume-security-unix-attributes").with_leaf("permissions", m)),
        );
    }
    if let Some(s) = boolean(r, "snapshot_directory_access_enabled")? {
        modify.push(
            Node::new("volume-snapshot-attributes")
                .with_leaf("snapdir-access-enabled", s.to_string()),
        );
    }
    if let Some(c) = text(&r.body, "comment") {
        modify.push(Node::new("volume-id-attributes").with_leaf("comment", c));
    }
    if !modify.children.is_empty() {
        modify_iter(ctx, &svm, &name, modify)?;
    }
    if let Some(state) = text(&r.body, "state") {
        let call = match state.as_str() {
            "online" => "volume-online",
            "offline" => "volume-offline",
            _ => return Err(bad_field("state", format!("Unknown state \"{state}\""))),
        };
        ctx.zapi(&svm, Node::new(call).with_leaf("name", &name))
            .map_err(plain)?;
    }
    if let Some(path) = text(&r.body, "nas.path") {
        mount(ctx, &svm, &name, &path)?;
    }
    if let Some(q) = boolean(r, "quota.enabled")? {
        let call = if q { "quota-on" } else { "quota-off" };
        ctx.zapi(&svm, Node::new(call).with_leaf("volume", &name))
            .map_err(plain)?;
    }
    if boolean(r, "clone.split_initiated")? == Some(true) {
        ctx.zapi(
            &svm,
            Node::new("volume-clone-split-start").with_leaf("volume", &name),
        )
        .map_err(plain)?;
    }
    if let Some(size) = bytes(r, "size")? {
        let call = Node::new("volume-size-async")
            .with_leaf("volume-name", &name)
            .with_leaf("new-size", size.max(0).to_string());
        ctx.zapi(&svm, call)
            .map_err(|f| mapped(f, &[(errno::EINVALIDINPUTERROR, 400, 917534)]))?;
        return Ok(Reply::Job(ctx.job(&svm, what), None));
    }
    Ok(Reply::Ok(json!({})))
}

/// `volume-modify-iter-async` for one volume; its failure list becomes the error.
fn modify_iter(ctx: &mut Ctx<'_>, svm: &str, name: &str, attrs: Node) -> Result<(), RestError> {
    let call = Node::new("volume-modify-iter-async")
        .with(
            Node::new("query").with(
                Node::new("volume-attributes")
                    .with(Node::new("volume-id-attributes").with_leaf("name", name)),
            ),
        )
        .with(Node::new("attributes").with(attrs));
    let out = ctx.zapi(svm, call).map_err(|f| mapped(f, &[]))?;
    let failure = out
        .iter()
        .find(|n| n.name == "failure-list")
        .and_then(|l| l.children.first());
    match failure {
        Some(f) => {
            let code: u32 = f.str_at("error-code").parse().unwrap_or(errno::EAPIERROR);
            Err(mapped(
                crate::sim::ontap::api::Fail {
                    errno: code,
                    reason: f.str_at("error-message").to_string(),
                },
                &[],
            ))
        }
        None => Ok(()),
    }
}

/// `nas.path`: `""` unmounts, a path mounts there (moving the junction if needed).
fn mount(ctx: &mut Ctx<'_>, svm: &str, name: &str, path: &str) -> Result<(), RestError> {
    let current = ctx.a.svms[svm].volumes[name].junction.clone();
    if current.as_deref() == Some(path) || (path.is_empty() && current.is_none()) {
        return Ok(());
    }
    if current.is_some() {
        ctx.zapi(
            svm,
            Node::new("volume-unmount").with_leaf("volume-name", name),
        )
        .map_err(|f| mapped(f, &[]))?;
    }
    if !path.is_empty() {
        let call = Node::new("volume-mount")
            .with_leaf("volume-name", name)
            .with_leaf("junction-path", path);
        if let Err(f) = ctx.zapi(svm, call) {
            // Put the old junction back, so a refused move changes nothing.
            if let Some(old) = current {
                let back = Node::new("volume-mount")
                    .with_leaf("volume-name", name)
                    .with_leaf("junction-path", old);
                let _ = ctx.zapi(svm, back);
            }
            return Err(RestError {
                target: Some("nas.path".into()),
                ..mapped(f, &[])
            });
        }
    }
    Ok(())
}

fn snapshots(a: &Array, svm: &str, volume: &str) -> Vec<(String, Value)> {
    let s = &a.svms[svm];
    let v = &s.volumes[volume];
    v.snapshots
        .iter()
        .map(|(n, snap)| {
            let busy = s.volumes.values().any(|c| {
                c.clone_parent
                    .as_ref()
                    .is_some_and(|(p, sn)| p == volume && sn == n)
            });
            (
                n.clone(),
                json!({
                    "uuid": snap.uuid, "name": n, "create_time": iso(snap.access_time),
                    "volume": {"name": volume, "uuid": v.uuid},
                    "svm": {"name": svm, "uuid": s.uuid},
                    "size": snap.total_kib * 1024, "state": "valid",
                    "owners": if busy { vec!["volume_clone"] } else { Vec::new() },
                }),
            )
        })
        .collect()
}

fn snapshot_create(ctx: &mut Ctx<'_>, r: &Req, uuid: &str) -> Answer {
    let (svm, volume) = find_volume(ctx, uuid)?;
    check_body(r, &["name", "svm.uuid", "svm.name", "comment"])?;
    let name = need(r, "name")?;
    let what = format!("POST /api/storage/volumes/{uuid}/snapshots");
    if let Some(j) = injected_job(ctx, &svm, &what) {
        return Ok(j);
    }
    let call = Node::new("snapshot-create")
        .with_leaf("volume", &volume)
        .with_leaf("snapshot", &name);
    ctx.zapi(&svm, call)
        .map_err(|f| mapped(f, &[(errno::EEXIST, 409, 1)]))?;
    let su = ctx.a.svms[&svm].volumes[&volume].snapshots[&name]
        .uuid
        .clone();
    let loc = format!("/api/storage/volumes/{uuid}/snapshots/{su}");
    Ok(Reply::Job(ctx.job(&svm, what), Some(loc)))
}

/// A snapshot that backs a clone is busy: the delete's job fails with 1638555.
fn snapshot_delete(ctx: &mut Ctx<'_>, uuid: &str, snap: &str) -> Answer {
    let (svm, volume) = find_volume(ctx, uuid)?;
    let name = ctx.a.svms[&svm].volumes[&volume]
        .snapshots
        .iter()
        .find(|(_, s)| s.uuid == snap)
        .map(|(n, _)| n.clone())
        .ok_or_else(|| not_found(&format!("snapshot {snap}")))?;
    let what = format!("DELETE /api/storage/volumes/{uuid}/snapshots/{snap}");
    if let Some(j) = injected_job(ctx, &svm, &what) {
        return Ok(j);
    }
    let call = Node::new("snapshot-delete")
        .with_leaf("volume", &volume)
        .with_leaf("snapshot", &name);
    match ctx.zapi(&svm, call) {
        Ok(_) => Ok(Reply::Job(ctx.job(&svm, what), None)),
        Err(f) if f.errno == errno::ESNAPSHOTBUSY => {
            ctx.job_error = Some((1_638_555, f.reason));
            Ok(Reply::Job(ctx.job(&svm, what), None))
        }
        Err(f) => Err(mapped(f, &[])),
    }
}

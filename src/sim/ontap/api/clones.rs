//! Volume clones: create (with the 13114 fault) and split.

use super::*;

pub(super) fn svm_has_policy(p: &BTreeMap<String, Vec<ExportRule>>, name: &str) -> bool {
    p.contains_key(name)
}

pub(super) fn volume_clone_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
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
        None => clone_snapshot(ctx, &api.name, &parent, &name, now)?,
    };
    let cloned_luns = clone_luns(ctx, &api.name, &parent, &name)?;
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

/// Takes the snapshot `clone_<name>.0` of `parent` that a clone without `parent-snapshot`
/// starts from.
fn clone_snapshot(
    ctx: &mut Ctx<'_>,
    api_name: &str,
    parent: &str,
    name: &str,
    now: u64,
) -> Result<String, Fail> {
    let s = format!("clone_{name}.0");
    let su = ctx.a.uuid();
    if let Some(pv) = ctx.svm(api_name)?.volumes.get_mut(parent) {
        pv.snapshots.insert(
            s.clone(),
            Snapshot {
                access_time: now,
                total_kib: 0,
                uuid: su,
            },
        );
    }
    Ok(s)
}

/// Copies of the LUNs in `parent`, for the clone `name`: new paths, serials and uuids, no maps.
fn clone_luns(
    ctx: &mut Ctx<'_>,
    api_name: &str,
    parent: &str,
    name: &str,
) -> Result<Vec<(String, Lun)>, Fail> {
    let mut luns = Vec::new();
    for (path, l) in &ctx.svm(api_name)?.luns.clone() {
        if lun_volume(path) == Some(parent) {
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
    Ok(cloned_luns)
}

pub(super) fn serial(a: &mut Array) -> String {
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

pub(super) fn volume_clone_split(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

//! Qtrees and quotas.

use super::*;

/// `/vol/<volume>/<qtree>` → (volume, qtree).
pub(super) fn qtree_path(p: &str) -> Result<(String, String), Fail> {
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

pub(super) fn qtree_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn qtree_delete(ctx: &mut Ctx<'_>, api: &Node, is_async: bool) -> R {
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

pub(super) fn qtree_rename(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn qtree_list_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn quota_set_entry(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn quota_delete_entry(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn quota_list_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn quota_switch(ctx: &mut Ctx<'_>, api: &Node, on: bool) -> R {
    let volume = arg(api, "volume")?.to_string();
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    v.quota_on = on;
    Ok(start_job(ctx, &format!("{} {volume}", api.name)))
}

pub(super) fn quota_status(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let volume = arg(api, "volume")?;
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get(volume)
        .ok_or_else(|| vol_missing(volume))?;
    Ok(vec![leaf("status", if v.quota_on { "on" } else { "off" })])
}

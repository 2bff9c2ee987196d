//! Initiator groups.

use super::*;

pub(super) fn igroup_missing(name: &str) -> Fail {
    fail(
        errno::NO_SUCH_INITGROUP,
        format!("Initiator group \"{name}\" does not exist"),
    )
}

pub(super) fn igroup_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn igroup_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn igroup_add(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn igroup_remove(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn igroup_destroy(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

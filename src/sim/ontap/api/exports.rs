//! Export policies and their rules.

use super::*;

pub(super) fn policy_missing(name: &str) -> Fail {
    fail(
        errno::EOBJECTNOTFOUND,
        format!("Export policy \"{name}\" does not exist"),
    )
}

pub(super) fn export_policy_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn export_policy_get(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn export_policy_destroy(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "policy-name")?.to_string();
    let svm = ctx.svm(&api.name)?;
    if !svm.export_policies.contains_key(&name) {
        return Err(policy_missing(&name));
    }
    // ONTAP keeps a policy that a volume or qtree still uses (errno unverified; EAPIERROR).
    let in_use = svm
        .volumes
        .values()
        .any(|v| v.export_policy == name || v.qtrees.values().any(|q| q.export_policy == name));
    if in_use {
        return Err(fail(
            errno::EAPIERROR,
            format!("Export policy \"{name}\" is in use by a volume or qtree"),
        ));
    }
    svm.export_policies.remove(&name);
    Ok(vec![])
}

pub(super) fn export_rule_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn export_rule_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn export_rule_destroy(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

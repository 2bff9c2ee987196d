//! System, SVMs, aggregates, LIFs, iSCSI service and jobs.

use super::*;

pub(super) fn ontapi_version(ctx: &mut Ctx<'_>) -> R {
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

pub(super) fn vserver_record(a: &Array, name: &str, svm: &Svm) -> Node {
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

pub(super) fn vserver_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn vserver_get(ctx: &mut Ctx<'_>) -> R {
    let name = ctx.svm_name("vserver-get")?;
    let svm = ctx.svm("vserver-get")?.clone();
    Ok(vec![
        Node::new("attributes").with(vserver_record(ctx.a, &name, &svm)),
    ])
}

pub(super) fn vserver_show_aggr(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn aggr_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn net_interface_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn iscsi_service_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn iscsi_node_get_name(ctx: &mut Ctx<'_>) -> R {
    let svm = ctx.svm("iscsi-node-get-name")?;
    if svm.iqn.is_empty() {
        return Err(fail(errno::EOBJECTNOTFOUND, "iSCSI service does not exist"));
    }
    Ok(vec![leaf("node-name", &svm.iqn)])
}

pub(super) fn iscsi_interface_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn start_job(ctx: &mut Ctx<'_>, description: &str) -> Vec<Node> {
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
            error: None,
        },
    );
    vec![
        leaf("result-jobid", id),
        leaf("result-status", "in_progress"),
        leaf("result-error-code", 0),
    ]
}

pub(super) fn job_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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
        } else if job.error.is_some() {
            "failure"
        } else {
            "success"
        };
        let (code, message) = job.error.clone().unwrap_or((0, String::new()));
        records.push((
            format!("{id:020}"),
            Node::new("job-info")
                .with_leaf("job-id", id.to_string())
                .with_leaf("job-state", state)
                .with_leaf("job-status-code", code.to_string())
                .with_leaf("job-failure-reason", message)
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
            .any(|(_, r)| r.str_at("job-state") != "running")
    {
        ctx.a.jobs.remove(&w);
    }
    iterate(ctx, api, records)
}

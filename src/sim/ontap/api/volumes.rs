//! Volumes: create, list, mount, state, destroy, size, modify.

use super::*;

pub(super) fn volume_record(a: &Array, svm: &str, name: &str, v: &Volume) -> Node {
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
pub(super) fn lun_volume(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/vol/")?;
    let (vol, lun) = rest.split_once('/')?;
    (!vol.is_empty() && !lun.is_empty() && !lun.contains('/')).then_some(vol)
}

pub(super) fn vol_missing(name: &str) -> Fail {
    fail(
        errno::EVOLUMEDOESNOTEXIST,
        format!("Volume \"{name}\" does not exist"),
    )
}

pub(super) fn no_space(what: &str) -> Fail {
    fail(
        errno::ENOSPC,
        format!("Insufficient space in aggregate for {what}"),
    )
}

pub(super) fn volume_create(ctx: &mut Ctx<'_>, api: &Node, flexgroup: bool) -> R {
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
    let reserve = snapshot_reserve(api, &policy)?;
    let junction = opt(api, "junction-path").map(str::to_string);
    let (ontapi, nve): (u32, Vec<bool>) = (
        ctx.a.ontapi_minor,
        aggregates
            .iter()
            .map(|a| ctx.a.aggregates.get(a).is_some_and(|x| x.nve_capable))
            .collect(),
    );
    let svm = ctx.svm(&api.name)?;
    svm.expire_recovery_queue(now_secs());
    if svm.volumes.contains_key(&name) || svm.recovery_queue.contains_key(&name) {
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
    check_volume_options(size, &guarantee, &policy, &perms, &style)?;
    if !svm.export_policies.contains_key(&export) {
        return Err(fail(
            errno::EAPIERROR,
            format!("Export policy \"{export}\" does not exist"),
        ));
    }
    if encrypt && (ontapi < 110 || nve.iter().any(|c| !c)) {
        return Err(fail(
            errno::EAPIERROR,
            format!(
                "Volume encryption is not supported on aggregate {}: it is not NVE capable",
                aggregates.join(", ")
            ),
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

/// `percentage-snapshot-reserve`: at most 90; by default 0 without snapshots, else 5.
fn snapshot_reserve(api: &Node, policy: &str) -> Result<u64, Fail> {
    Ok(match opt(api, "percentage-snapshot-reserve") {
        Some(r) => r.parse::<u64>().ok().filter(|r| *r <= 90).ok_or_else(|| {
            fail(
                errno::EINVALIDINPUTERROR,
                "Invalid percentage-snapshot-reserve",
            )
        })?,
        None if policy == "none" => 0,
        None => 5,
    })
}

/// The checks of a new volume's size and options that need no array state.
fn check_volume_options(
    size: u64,
    guarantee: &str,
    policy: &str,
    perms: &str,
    style: &str,
) -> Result<(), Fail> {
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
    if !SNAPSHOT_POLICIES.contains(&policy) {
        return Err(fail(
            errno::EAPIERROR,
            format!("Snapshot policy \"{policy}\" does not exist"),
        ));
    }
    if !valid_permissions(perms) {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid unix-permissions \"{perms}\""),
        ));
    }
    if !matches!(style, "unix" | "ntfs" | "mixed") {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid volume-security-style \"{style}\""),
        ));
    }
    Ok(())
}

pub(super) fn check_junction(svm: &Svm, j: &str) -> Result<(), Fail> {
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
pub(super) fn volume_candidates<'a>(
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

pub(super) fn volume_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn volume_mount(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn volume_unmount(ctx: &mut Ctx<'_>, api: &Node) -> R {
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

pub(super) fn volume_state(ctx: &mut Ctx<'_>, api: &Node, state: &str) -> R {
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

pub(super) fn volume_destroy(ctx: &mut Ctx<'_>, api: &Node, is_async: bool) -> R {
    let name = if is_async {
        arg(api, "volume-name")?
    } else {
        arg(api, "name")?
    }
    .to_string();
    let force = flag(api, "unmount-and-offline");
    // The volume's DSID, which names it in the recovery queue.
    let dsid = 1000 + ctx.a.id();
    let svm = ctx.svm(&api.name)?;
    svm.expire_recovery_queue(now_secs());
    let v = svm.volumes.get(&name).ok_or_else(|| vol_missing(&name))?;
    if !is_async {
        flexgroup_needs_async(&name, v, "volume-destroy-async")?;
    }
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
    let queue_name = format!("{name}_{dsid}");
    let Some(v) = svm.volumes.remove(&name) else {
        return Err(vol_missing(&name));
    };
    svm.luns.retain(|p, _| lun_volume(p) != Some(name.as_str()));
    if svm.retention_hours > 0 {
        svm.recovery_queue.insert(
            queue_name,
            QueuedVolume {
                original: name.clone(),
                deleted: now_secs(),
                volume: v,
            },
        );
    }
    if is_async {
        Ok(start_job(ctx, &format!("Destroy {name}")))
    } else {
        Ok(vec![])
    }
}

pub(super) fn volume_size(ctx: &mut Ctx<'_>, api: &Node, is_async: bool) -> R {
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
    if !is_async && new.is_some() {
        flexgroup_needs_async(&name, v, "volume-size-async")?;
    }
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
    let mut shrunk = v.clone();
    shrunk.size = target;
    if usable_for_luns(&shrunk) < lun_bytes {
        return Err(fail(
            errno::EVOLOPNOTSUPP,
            format!(
                "Unable to set volume attribute \"size\": the LUNs need {lun_bytes} bytes \
                 outside the snapshot reserve"
            ),
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

/// ONTAP changes a FlexGroup only through the `-async` variant of a call. (The errno ONTAP
/// answers is unverified; EVOLOPNOTSUPP is the simulator's choice.)
fn flexgroup_needs_async(name: &str, v: &Volume, use_instead: &str) -> Result<(), Fail> {
    if v.style == "flexgroup" {
        return Err(fail(
            errno::EVOLOPNOTSUPP,
            format!("Volume {name} is a FlexGroup: use {use_instead}"),
        ));
    }
    Ok(())
}

/// `volume-modify-iter`, or its `-async` variant (required for FlexGroups), whose success
/// entries carry a job.
pub(super) fn volume_modify_iter(ctx: &mut Ctx<'_>, api: &Node, is_async: bool) -> R {
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
    let info = format!("{}-info", api.name);
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
        let svm = ctx.svm(&api.name)?;
        let Some(v) = svm.volumes.get_mut(n) else {
            continue;
        };
        let mut error: Option<(u32, String)> = None;
        if !is_async && v.style == "flexgroup" {
            failed.push(
                Node::new(&info)
                    .with_leaf("error-code", errno::EVOLOPNOTSUPP.to_string())
                    .with_leaf(
                        "error-message",
                        format!("Volume {n} is a FlexGroup: use volume-modify-iter-async"),
                    )
                    .with(key(n)),
            );
            continue;
        }
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
            None if is_async => {
                let job = start_job(ctx, &format!("Modify {n}"));
                let mut entry = Node::new(&info).with(key(n));
                for j in job {
                    let renamed = match j.name.as_str() {
                        "result-jobid" => "jobid",
                        "result-status" => "status",
                        "result-error-code" => "error-code",
                        _ => continue,
                    };
                    entry.push(Node::leaf(renamed, j.text));
                }
                ok.push(entry);
            }
            None => ok.push(Node::new(&info).with(key(n))),
            Some((code, msg)) => failed.push(
                Node::new(&info)
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

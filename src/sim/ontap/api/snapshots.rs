//! Snapshots: create, list, delete.

use super::*;

pub(super) fn snapshot_busy(svm: &Svm, volume: &str, snapshot: &str) -> bool {
    svm.volumes.values().any(|v| {
        v.clone_parent
            .as_ref()
            .is_some_and(|(p, s)| p == volume && s == snapshot)
    })
}

pub(super) fn snapshot_create(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let volume = arg(api, "volume")?.to_string();
    let snap = arg(api, "snapshot")?.to_string();
    if snap.is_empty()
        || snap.len() > 255
        || snap.contains('/')
        || snap.contains(char::is_whitespace)
    {
        return Err(fail(
            errno::EINVALIDINPUTERROR,
            format!("Invalid snapshot name \"{snap}\""),
        ));
    }
    let uuid = ctx.a.uuid();
    let v = ctx
        .svm(&api.name)?
        .volumes
        .get_mut(&volume)
        .ok_or_else(|| vol_missing(&volume))?;
    if v.state != "online" {
        return Err(fail(
            errno::ESNAPSHOTNOTALLOWED,
            format!("Volume {volume} is not online"),
        ));
    }
    if v.snapshots.contains_key(&snap) {
        return Err(fail(
            errno::EEXIST,
            format!("Snapshot \"{snap}\" already exists"),
        ));
    }
    v.snapshots.insert(
        snap,
        Snapshot {
            access_time: now_secs(),
            total_kib: 64,
            uuid,
        },
    );
    Ok(vec![])
}

pub(super) fn snapshot_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get(&s) else {
            continue;
        };
        for (vname, v) in &svm.volumes {
            for (name, snap) in &v.snapshots {
                let busy = snapshot_busy(svm, vname, name);
                let mut owners = Node::new("snapshot-owners-list");
                if busy {
                    owners.push(Node::new("snapshot-owner").with_leaf("owner", "volume clone"));
                }
                records.push((
                    format!("{s}/{vname}/{name}"),
                    Node::new("snapshot-info")
                        .with_leaf("name", name)
                        .with_leaf("volume", vname)
                        .with_leaf("vserver", &s)
                        .with_leaf("access-time", snap.access_time.to_string())
                        .with_leaf("busy", busy.to_string())
                        .with(owners)
                        .with_leaf("snapshot-instance-uuid", &snap.uuid)
                        .with_leaf("state", "valid")
                        .with_leaf("total", snap.total_kib.to_string()),
                ));
            }
        }
    }
    iterate(ctx, api, records)
}

pub(super) fn snapshot_delete(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let volume = arg(api, "volume")?;
    let snap = arg(api, "snapshot")?;
    let svm = ctx.svm(&api.name)?;
    let v = svm.volumes.get(volume).ok_or_else(|| vol_missing(volume))?;
    if !v.snapshots.contains_key(snap) {
        return Err(fail(
            errno::EOBJECTNOTFOUND,
            format!("Snapshot \"{snap}\" does not exist in volume {volume}"),
        ));
    }
    if snapshot_busy(svm, volume, snap) {
        return Err(fail(
            errno::ESNAPSHOTBUSY,
            format!("Snapshot \"{snap}\" is busy: it backs a FlexClone"),
        ));
    }
    if let Some(v) = svm.volumes.get_mut(volume) {
        v.snapshots.remove(snap);
    }
    Ok(vec![])
}

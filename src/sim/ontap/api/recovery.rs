//! The recovery queue: destroyed volumes ONTAP keeps, renamed `<name>_<dsid>`, for the SVM's
//! `volume-delete-retention-hours` (their space still held), until they expire or are purged.

use super::*;

pub(super) fn recovery_queue_get_iter(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let now = now_secs();
    let mut records = Vec::new();
    for s in visible_svms(ctx) {
        let Some(svm) = ctx.a.svms.get_mut(&s) else {
            continue;
        };
        svm.expire_recovery_queue(now);
        for (name, q) in &svm.recovery_queue {
            let left = (q.deleted + svm.retention_hours * 3600).saturating_sub(now);
            records.push((
                format!("{s}/{name}"),
                Node::new("volume-recovery-queue-info")
                    .with_leaf("volume-name", name)
                    .with_leaf("vserver-name", &s)
                    .with_leaf("deletion-request-time", q.deleted.to_string())
                    .with_leaf("retention-hours", svm.retention_hours.to_string())
                    .with_leaf("time-until-purge", left.to_string())
                    .with_leaf("volume-size", q.volume.size.to_string()),
            ));
        }
    }
    iterate(ctx, api, records)
}

/// Purges one entry: an SVM admin may not (14719); an unknown one is 15661.
pub(super) fn recovery_queue_purge(ctx: &mut Ctx<'_>, api: &Node) -> R {
    let name = arg(api, "volume-name")?.to_string();
    let vserver = arg(api, "vserver-name")?.to_string();
    if ctx.svm_user {
        return Err(fail(
            errno::EVSERVER_OP_NOT_ALLOWED,
            "volume recovery-queue purge is not allowed for a Vserver administrator",
        ));
    }
    if ctx.svm.as_deref().is_some_and(|s| s != vserver) {
        return Err(fail(
            errno::EVSERVER_OP_NOT_ALLOWED,
            format!("vserver-name {vserver} is not the Vserver of this call"),
        ));
    }
    let svm = ctx.a.svms.get_mut(&vserver).ok_or_else(|| {
        fail(
            errno::EVSERVERNOTFOUND,
            format!("Vserver {vserver} not found"),
        )
    })?;
    svm.expire_recovery_queue(now_secs());
    if svm.recovery_queue.remove(&name).is_none() {
        return Err(fail(
            errno::EOBJECTNOTFOUND,
            format!("Volume \"{name}\" is not in the recovery queue of Vserver {vserver}"),
        ));
    }
    Ok(vec![])
}

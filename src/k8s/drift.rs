//! Warnings on claims whose volumes went missing from their arrays: while the Lease is held,
//! every volume shown `missing` when it was taken, then every `VolumeMissing` (a Warning) and
//! `VolumeFound` (Normal) as it is committed, is reported on the claim its PV is bound to.
//! A volume without a PV (no claim is bound to it yet) has no one to tell.

use std::future::Future;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume};
use kube::Api;

use super::Ctx;
use crate::actors::{EventFilter, EventRecord};

/// Runs until `stop` completes.
pub(super) async fn run(ctx: Arc<Ctx>, stop: impl Future<Output = ()>) {
    tokio::select! {
        () = stop => {}
        () = report(&ctx) => {}
    }
}

async fn report(ctx: &Ctx) {
    let head = ctx.core.log_head();
    match ctx.core.missing_volumes() {
        Ok(names) => {
            for name in names {
                tell(ctx, &name, true).await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not list missing volumes"),
    }
    let filter = EventFilter {
        since: head + 1,
        ..EventFilter::default()
    };
    let mut events = match ctx.core.follow(filter) {
        Ok(rx) => rx,
        Err(e) => {
            tracing::warn!(error = %e, "could not follow the event log; no warnings for missing volumes");
            return;
        }
    };
    while let Some(record) = events.recv().await {
        let Ok(record) = record else {
            continue;
        };
        if let Some((volume, missing)) = drift_of(&record) {
            tell(ctx, volume, missing).await;
        }
    }
}

/// The volume and whether it went missing (`false`: found again), for those two events.
fn drift_of(record: &EventRecord) -> Option<(&str, bool)> {
    let volume = record.stream.strip_prefix("volume/")?;
    match record.kind.as_str() {
        "VolumeMissing" => Some((volume, true)),
        "VolumeFound" => Some((volume, false)),
        _ => None,
    }
}

/// Publishes the event on the claim volume `name`'s PV is bound to.
async fn tell(ctx: &Ctx, name: &str, missing: bool) {
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let pv = match pvs.get_opt(name).await {
        Ok(Some(pv)) => pv,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(volume = %name, error = %e, "could not read the PV of a missing volume");
            return;
        }
    };
    let Some(claim) = pv.spec.and_then(|s| s.claim_ref) else {
        return;
    };
    let regarding = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        name: claim.name,
        namespace: claim.namespace,
        uid: claim.uid,
        ..ObjectReference::default()
    };
    let (reason, note) = if missing {
        (
            "VolumeMissing",
            format!(
                "volume {name} is missing from its array; storch deletes nothing on that basis \
                 (see storch get volume {name})"
            ),
        )
    } else {
        (
            "VolumeFound",
            format!("volume {name} is on its array again"),
        )
    };
    ctx.event(&regarding, missing, reason, "Reconcile", note)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{DriftEvent, Event, Noticed, VolumeEvent};

    fn record(stream: &str, kind: &str) -> EventRecord {
        EventRecord {
            seq: 1,
            time_ms: 0,
            id: uuid::Uuid::nil(),
            request_id: String::new(),
            schema: 1,
            kind: kind.into(),
            stream: stream.into(),
            hash: String::new(),
            event: Event::volume(
                "v",
                VolumeEvent::Drift(DriftEvent::Missing {
                    noticed_at: 0,
                    how: Noticed::Start,
                }),
            ),
        }
    }

    #[test]
    fn only_missing_and_found_volumes_are_told() {
        assert_eq!(
            drift_of(&record("volume/v", "VolumeMissing")),
            Some(("v", true))
        );
        assert_eq!(
            drift_of(&record("volume/v", "VolumeFound")),
            Some(("v", false))
        );
        assert_eq!(drift_of(&record("volume/v", "VolumeCreated")), None);
        assert_eq!(drift_of(&record("backend/b", "VolumeMissing")), None);
    }
}

//! The orphan sweep (Lease holder only): a volume the frontend made for a claim that is gone,
//! and for which no PV exists, would otherwise stay forever — a claim deleted after its
//! volume was created and before its PV was written is never reconciled again.
//!
//! A volume is the frontend's when the event that asked for it (`VolumeRequested`) came from
//! a claim (request id `k8s:pvc/NS/NAME/UID`) whose derived name is the volume's. Its claim is
//! gone when no claim has that namespace, name *and* uid (a new claim of the same name is
//! another claim, with another volume). Once both hold for the grace period
//! (`--k8s-orphan-grace`), and the API server confirms them, the volume's class decides:
//! `Delete` deletes it through the core (request id `k8s:orphan/NS/NAME/UID`), anything else
//! (`Retain`, or a class no longer known) keeps it. Either way the claim's namespace gets an
//! event naming the claim and its uid, and the log says why.
//!
//! A volume that has had a PV is never deleted here: its PV was deleted by hand (e.g. a Retain
//! one), which never deletes a volume. The log records each volume's PV once
//! (`VolumeBound`, see `Ctx::record_pv`), so this holds across restarts; such a volume whose
//! claim is gone is kept with the same event as a Retain orphan, saying why.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};

use super::Ctx;
use crate::actors::{CoreError, EventFilter, RequestCtx, VolumeState};

/// The claim a volume was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Claim {
    namespace: String,
    name: String,
    uid: String,
}

impl Claim {
    /// The claim of a request id `k8s:pvc/NS/NAME/UID`, if it is one.
    fn from_request_id(id: &str) -> Option<Claim> {
        let mut parts = id.strip_prefix("k8s:pvc/")?.splitn(3, '/');
        let (namespace, name, uid) = (parts.next()?, parts.next()?, parts.next()?);
        if namespace.is_empty() || name.is_empty() || uid.is_empty() {
            return None;
        }
        Some(Claim {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        })
    }

    /// The volume name the frontend derives for this claim (`translate::unique_name`).
    fn volume_name(&self) -> String {
        let pvc = PersistentVolumeClaim {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                namespace: Some(self.namespace.clone()),
                name: Some(self.name.clone()),
                uid: Some(self.uid.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        super::translate::unique_name(&pvc)
    }

    fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: Some(self.namespace.clone()),
            name: Some(self.name.clone()),
            uid: Some(self.uid.clone()),
            ..ObjectReference::default()
        }
    }
}

impl std::fmt::Display for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} (uid {})", self.namespace, self.name, self.uid)
    }
}

/// What the sweep remembers between passes, per volume name (forgotten with the volume).
#[derive(Default)]
struct Memory {
    /// The claim each volume was made for (`None`: not made by the frontend).
    creators: HashMap<String, Option<Claim>>,
    /// Since when each volume has been seen without its claim and without a PV.
    orphaned_since: HashMap<String, Instant>,
    /// Orphans kept (Retain), already reported.
    kept: HashSet<String>,
}

/// How often a pass runs: a quarter of the grace, between 250 ms and 30 s.
fn interval(grace: Duration) -> Duration {
    (grace / 4).clamp(Duration::from_millis(250), Duration::from_secs(30))
}

/// Runs passes until `stop` completes.
pub(super) async fn run(
    ctx: Arc<Ctx>,
    claims: Store<PersistentVolumeClaim>,
    pvs: Store<PersistentVolume>,
    stop: impl Future<Output = ()>,
) {
    let passes = async {
        // Judging against a store still listing would see every claim as gone.
        if claims.wait_until_ready().await.is_err() || pvs.wait_until_ready().await.is_err() {
            return;
        }
        let mut memory = Memory::default();
        loop {
            if let Err(e) = pass(&ctx, &claims, &pvs, &mut memory).await {
                tracing::warn!(error = %e, "orphan sweep pass failed");
            }
            ctx.sweeps.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(interval(ctx.opts.orphan_grace)).await;
        }
    };
    tokio::select! {
        () = stop => {}
        () = passes => {}
    }
}

async fn pass(
    ctx: &Ctx,
    claims: &Store<PersistentVolumeClaim>,
    pvs: &Store<PersistentVolume>,
    memory: &mut Memory,
) -> Result<(), super::ReconcileError> {
    let names = ctx.core.list_volumes()?;
    let live: HashSet<&String> = names.iter().collect();
    memory.creators.retain(|n, _| live.contains(n));
    memory.orphaned_since.retain(|n, _| live.contains(n));
    memory.kept.retain(|n| live.contains(n));
    for name in &names {
        if pvs.get(&ObjectRef::new(name)).is_some() {
            memory.orphaned_since.remove(name);
            continue;
        }
        let online = ctx
            .core
            .get_volume(name)
            .is_ok_and(|v| v.state == VolumeState::Online);
        if !online {
            // Being created or deleted (its owner is at work), or missing from its array.
            memory.orphaned_since.remove(name);
            continue;
        }
        let creator = match memory.creators.get(name) {
            Some(c) => c.clone(),
            None => {
                let c = creator(ctx, name).await?;
                memory.creators.insert(name.clone(), c.clone());
                c
            }
        };
        let Some(claim) = creator else {
            continue;
        };
        let key = ObjectRef::new(&claim.name).within(&claim.namespace);
        let owner_here = claims
            .get(&key)
            .is_some_and(|c| c.metadata.uid.as_deref() == Some(claim.uid.as_str()));
        if owner_here {
            memory.orphaned_since.remove(name);
            continue;
        }
        let since = *memory
            .orphaned_since
            .entry(name.clone())
            .or_insert_with(Instant::now);
        if since.elapsed() < ctx.opts.orphan_grace || memory.kept.contains(name) {
            continue;
        }
        if !confirmed(ctx, name, &claim).await? {
            memory.orphaned_since.remove(name);
            continue;
        }
        if settle(ctx, name, &claim).await {
            memory.kept.insert(name.clone());
        }
    }
    Ok(())
}

/// The claim volume `name` was last requested for, from the log (`None`: not by a claim, or
/// not by one whose derived name is `name`).
async fn creator(ctx: &Ctx, name: &str) -> Result<Option<Claim>, CoreError> {
    let filter = EventFilter {
        object: Some(format!("volume/{name}")),
        ..EventFilter::default()
    };
    let requested = ctx
        .core
        .events(filter)
        .await?
        .into_iter()
        .rev()
        .find(|r| r.kind == "VolumeRequested");
    Ok(requested
        .and_then(|r| Claim::from_request_id(&r.request_id))
        .filter(|c| c.volume_name() == name))
}

/// Asks the API server (not the watch caches) whether the claim is still gone, no PV exists
/// for the volume, and the log still names the same claim.
async fn confirmed(ctx: &Ctx, name: &str, claim: &Claim) -> Result<bool, super::ReconcileError> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &claim.namespace);
    if let Some(pvc) = claims.get_opt(&claim.name).await?
        && pvc.metadata.uid.as_deref() == Some(claim.uid.as_str())
    {
        return Ok(false);
    }
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    if pvs.get_opt(name).await?.is_some() {
        return Ok(false);
    }
    Ok(creator(ctx, name).await?.as_ref() == Some(claim))
}

/// Applies the class's reclaim policy to the orphan `name` (a volume whose PV the log
/// records is always kept); true when it is kept.
async fn settle(ctx: &Ctx, name: &str, claim: &Claim) -> bool {
    let (class, bound) = match ctx.core.get_volume(name) {
        Ok(v) => (v.config.storage_class, v.bound),
        Err(_) => return false,
    };
    let policy = ctx.class(&class).map(|c| c.reclaim_policy);
    if bound || policy.as_deref() != Some("Delete") {
        let why = match &policy {
            _ if bound => format!(
                "its PV {name} was recorded in the log (VolumeBound) and has been deleted by \
                 hand, which never deletes a volume"
            ),
            Some(p) => format!("its class {class} has reclaim policy {p}"),
            None => format!("its class {class:?} is not one of storch's StorageClasses"),
        };
        tracing::info!(volume = %name, %claim, %why, "orphaned volume kept");
        ctx.event(
            &claim.reference(),
            false,
            "OrphanedVolumeRetained",
            "Delete",
            format!(
                "volume {name} was made for claim {claim}, which is gone without a PV; kept: \
                 {why}"
            ),
        )
        .await;
        return true;
    }
    let request = RequestCtx::new(format!(
        "k8s:orphan/{}/{}/{}",
        claim.namespace, claim.name, claim.uid
    ));
    match ctx.core.delete_volume(&request, name).await {
        Ok(()) | Err(CoreError::NotFound(_)) => {
            tracing::info!(volume = %name, %claim, "orphaned volume deleted: its claim is gone without a PV");
            ctx.event(
                &claim.reference(),
                false,
                "OrphanedVolumeDeleted",
                "Delete",
                format!(
                    "volume {name} was made for claim {claim}, which is gone without a PV; \
                     deleted (class {class}, reclaim policy Delete)"
                ),
            )
            .await;
        }
        Err(e) => {
            tracing::warn!(volume = %name, %claim, error = %e, "orphaned volume not deleted");
            ctx.event(
                &claim.reference(),
                true,
                "FailedOrphanedVolumeDelete",
                "Delete",
                format!(
                    "volume {name} was made for claim {claim}, which is gone without a PV; \
                     deleting it failed: {e}; retrying"
                ),
            )
            .await;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_claim_request_ids_name_a_claim() {
        let c = Claim::from_request_id("k8s:pvc/default/basic/6cb6b-1d2e-4f00").unwrap();
        assert_eq!(
            (c.namespace.as_str(), c.name.as_str(), c.uid.as_str()),
            ("default", "basic", "6cb6b-1d2e-4f00")
        );
        assert_eq!(c.volume_name(), "default-basic-6cb6b");
        for id in [
            "k8s:pv/x",
            "k8s:storageclasses",
            "k8s:pvc/default/basic",
            "k8s:pvc/default/basic/",
            "k8s:orphan/default/basic/6cb6b",
            "0b7c2f4e-rest-request",
        ] {
            assert_eq!(Claim::from_request_id(id), None, "{id}");
        }
    }

    #[test]
    fn passes_run_a_quarter_of_the_grace_apart_within_bounds() {
        assert_eq!(interval(Duration::from_secs(1)), Duration::from_millis(250));
        assert_eq!(interval(Duration::from_secs(60)), Duration::from_secs(15));
        assert_eq!(interval(Duration::from_secs(300)), Duration::from_secs(30));
    }
}

//! The PV controller (leader only): every PV of ours is recorded in the log once with its
//! volume (`Ctx::record_pv`; PVs written before storch recorded them get it at the first
//! reconcile). A PV of ours that is Released (or Failed) with reclaim policy Delete gets its
//! volume deleted, then the PV. A failure marks the PV Failed with the reason, is reported as
//! a Warning event, and is retried with backoff. Retain PVs are left alone: deleting such a PV
//! never deletes its volume.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::translate::{self, PROVISIONED_BY};
use super::{Ctx, ReconcileError, is_not_found};
use crate::actors::{CoreError, RequestCtx};

/// The PV controller; its store is the sweep's view of PVs.
pub(super) fn controller(ctx: &Ctx) -> Controller<PersistentVolume> {
    let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
    Controller::new(api, watcher::Config::default())
}

pub(super) async fn run(
    controller: Controller<PersistentVolume>,
    ctx: Arc<Ctx>,
    quit: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    controller
        .graceful_shutdown_on(quit)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| {
            match result {
                // A PV deleted while a retry was pending: its retry state goes with it.
                Err(controller::Error::ObjectNotFound(gone)) => {
                    ctx.succeeded(&format!("pv/{}", gone.name))
                }
                Err(e) => tracing::debug!(error = %e, "PV controller"),
                Ok(_) => {}
            }
            std::future::ready(())
        })
        .await;
}

fn key(pv: &PersistentVolume) -> String {
    format!("pv/{}", pv.name_any())
}

fn error_policy(pv: Arc<PersistentVolume>, e: &ReconcileError, ctx: Arc<Ctx>) -> Action {
    let delay = ctx.backoff(&key(&pv));
    tracing::warn!(pv = %pv.name_any(), error = %e, retry_in = ?delay, "PV not reconciled");
    Action::requeue(delay)
}

async fn reconcile(pv: Arc<PersistentVolume>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let action = reconcile_pv(&pv, &ctx).await?;
    ctx.succeeded(&key(&pv));
    Ok(action)
}

/// Whether one of our provisioner names made this PV.
fn ours(pv: &PersistentVolume, ctx: &Ctx) -> bool {
    pv.annotations()
        .get(PROVISIONED_BY)
        .is_some_and(|p| ctx.opts.provisioners.iter().any(|n| n == p))
}

async fn reconcile_pv(pv: &PersistentVolume, ctx: &Ctx) -> Result<Action, ReconcileError> {
    if !ours(pv, ctx) || pv.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    ctx.record_pv(&pv.name_any()).await?;
    let phase = pv
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default();
    let policy = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("Delete");
    if !matches!(phase, "Released" | "Failed") || policy != "Delete" {
        return Ok(Action::await_change());
    }
    let name = pv.name_any();
    let request = RequestCtx::new(format!("k8s:pv/{name}"));
    match ctx.core.delete_volume(&request, &name).await {
        Ok(()) | Err(CoreError::NotFound(_)) => {}
        Err(e) => {
            let why = e.to_string();
            mark_failed(pv, ctx, &why).await;
            return Err(e.into());
        }
    }
    let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
    match api.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e.into()),
    }
    tracing::info!(pv = %name, "released PV and its volume deleted");
    Ok(Action::await_change())
}

/// Marks the PV Failed with the reason (unless it already says exactly that) and reports a
/// Warning event.
async fn mark_failed(pv: &PersistentVolume, ctx: &Ctx, why: &str) {
    let name = pv.name_any();
    let status = pv.status.as_ref();
    let already = status.and_then(|s| s.phase.as_deref()) == Some("Failed")
        && status.and_then(|s| s.message.as_deref()) == Some(why);
    if !already {
        let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
        let patch = serde_json::json!({"status": {"phase": "Failed", "message": why}});
        if let Err(e) = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::warn!(pv = %name, error = %e, "could not mark the PV Failed");
        }
    }
    let reference = translate::reference_of("PersistentVolume", "v1", &pv.metadata);
    ctx.event(
        &reference,
        true,
        "FailedVolumeDelete",
        "Delete",
        format!("storch could not delete volume {name}: {why}; retrying with backoff"),
    )
    .await;
}

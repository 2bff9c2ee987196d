//! StorageClasses → storch storage classes. Runs on every replica, leader or not.
//!
//! The watcher's view of every StorageClass of ours is declared to the core as one whole
//! (source `kubernetes`, see `Core::apply_declared`): new classes are added, changed
//! parameters applied (unlike Trident), deleted classes removed — including those deleted
//! while storch was down, found at the first full list. Unchanged classes record nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use super::Ctx;
use super::translate;
use crate::actors::{Declared, RequestCtx};

/// The `Declared` source of classes that come from Kubernetes.
pub const SOURCE: &str = "kubernetes";

/// Watches StorageClasses forever; bumps `synced` after each applied change (the PVC
/// controller re-examines its claims then).
pub(super) async fn run(ctx: Arc<Ctx>, synced: watch::Sender<u64>) {
    let api: Api<StorageClass> = Api::all(ctx.client.clone());
    let mut stream = watcher(api).boxed();
    let mut all: BTreeMap<String, StorageClass> = BTreeMap::new();
    let mut listing: Option<BTreeMap<String, StorageClass>> = None;
    // (name, resourceVersion) of invalid classes already reported.
    let mut reported: BTreeSet<(String, String)> = BTreeSet::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => listing = Some(BTreeMap::new()),
            Ok(Event::InitApply(sc)) => {
                if let Some(l) = listing.as_mut() {
                    l.insert(sc.metadata.name.clone().unwrap_or_default(), sc);
                }
            }
            Ok(Event::InitDone) => {
                if let Some(l) = listing.take() {
                    all = l;
                }
                sync(&ctx, &all, &mut reported).await;
                synced.send_modify(|n| *n += 1);
            }
            Ok(Event::Apply(sc)) => {
                all.insert(sc.metadata.name.clone().unwrap_or_default(), sc);
                sync(&ctx, &all, &mut reported).await;
                synced.send_modify(|n| *n += 1);
            }
            Ok(Event::Delete(sc)) => {
                all.remove(sc.metadata.name.as_deref().unwrap_or_default());
                sync(&ctx, &all, &mut reported).await;
                synced.send_modify(|n| *n += 1);
            }
            Err(e) => tracing::warn!(error = %e, "StorageClass watch failed; retrying"),
        }
    }
}

fn watcher(
    api: Api<StorageClass>,
) -> impl futures::Stream<Item = Result<Event<StorageClass>, watcher::Error>> + Send {
    watcher::watcher(api, watcher::Config::default()).default_backoff()
}

/// Declares every valid class of ours to the core; reports invalid ones once per version.
async fn sync(
    ctx: &Ctx,
    all: &BTreeMap<String, StorageClass>,
    reported: &mut BTreeSet<(String, String)>,
) {
    // Forget reports of classes that are gone (or fixed and changed since).
    reported.retain(|(name, version)| {
        all.get(name).is_some_and(|sc| {
            sc.metadata.resource_version.as_deref().unwrap_or_default() == version
        })
    });
    let mut good = BTreeMap::new();
    for (name, sc) in all {
        match translate::storage_class(sc, &ctx.opts.provisioners) {
            Ok(Some(class)) => {
                good.insert(name.clone(), class);
            }
            Ok(None) => {}
            Err(why) => {
                let version = sc.metadata.resource_version.clone().unwrap_or_default();
                if reported.insert((name.clone(), version)) {
                    tracing::warn!(class = %name, %why, "StorageClass refused");
                    let reference =
                        translate::reference_of("StorageClass", "storage.k8s.io/v1", &sc.metadata);
                    ctx.event(
                        &reference,
                        true,
                        "InvalidStorageClass",
                        "AddStorageClass",
                        format!("storch cannot use this class: {why}"),
                    )
                    .await;
                }
            }
        }
    }
    let declared = Declared {
        source: SOURCE.to_string(),
        backends: Vec::new(),
        storage_classes: good.values().map(|c| c.config.clone()).collect(),
    };
    let request = RequestCtx::new("k8s:storageclasses");
    let _sync = ctx.class_sync.write().await;
    match ctx.core.apply_declared(&request, declared).await {
        Ok(report) => {
            if !(report.classes_added.is_empty()
                && report.classes_updated.is_empty()
                && report.classes_removed.is_empty())
            {
                tracing::info!(
                    added = ?report.classes_added,
                    updated = ?report.classes_updated,
                    removed = ?report.classes_removed,
                    "StorageClasses applied"
                );
            }
            for e in &report.errors {
                tracing::error!(error = %e, "StorageClass not applied");
            }
        }
        Err(e) => tracing::error!(error = %e, "StorageClasses not applied"),
    }
    *ctx.classes.write().unwrap_or_else(|e| e.into_inner()) = good;
}

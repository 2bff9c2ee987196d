//! Drift: reconciling a backend with its array on request, the orphans on every array, and
//! importing an array volume.

use serde::Serialize;

use super::Core;
use crate::actors::drift::{self, DriftReport, ImportVolume, Orphan, ReconcileBackend};
use crate::actors::error::{CoreError, RequestCtx, observe};
use crate::actors::volume;
use crate::drivers::StorageDriver;
use crate::events::Noticed;
use crate::model::ImportRequest;
use crate::projections::VolumeView;

/// The orphans of every backend that could list its volumes, and why the others could not.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Orphans {
    pub orphans: Vec<Orphan>,
    /// Backends not listed (not running, or their listing failed): backend → why.
    pub unlisted: std::collections::BTreeMap<String, String>,
}

impl Core {
    /// The sequence of the last event applied to the projection.
    pub fn log_head(&self) -> u64 {
        self.shared.projection.read(|s| s.head)
    }

    /// The volumes whose arrays no longer hold them (sorted).
    pub fn missing_volumes(&self) -> Result<Vec<String>, CoreError> {
        self.shared.ensure_readable()?;
        let mut names: Vec<String> = self.shared.projection.read(|s| {
            s.volumes
                .iter()
                .filter(|(_, v)| v.state == crate::projections::VolumeState::Missing)
                .map(|(n, _)| n.to_string())
                .collect()
        });
        names.sort();
        Ok(names)
    }

    /// Compares backend `name` with its array now and records what differs.
    pub async fn reconcile_backend(&self, name: &str) -> Result<DriftReport, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            let slot = self
                .shared
                .backend(name)
                .ok_or_else(|| CoreError::NotFound(format!("backend {name} was not found")))?;
            slot.reconcile
                .send(ReconcileBackend {
                    how: Noticed::Requested,
                })
                .await
                .map_err(|_| CoreError::Unavailable(format!("backend {name} stopped; try again")))?
        }
        .await;
        observe("reconcile_backend", started, &result);
        result
    }

    /// Array volumes no storch volume claims, listed now from every backend (sorted by
    /// backend and name).
    pub async fn orphans(&self) -> Result<Orphans, CoreError> {
        self.shared.ensure_ready()?;
        let names: Vec<String> = self
            .shared
            .projection
            .read(|s| s.backends.keys().cloned().collect());
        let lists = names.iter().map(|name| async move {
            let listed = async {
                let slot = self
                    .shared
                    .backend(name)
                    .ok_or_else(|| "not running".to_string())?;
                let driver = slot.status.usable_driver(name).map_err(|e| e.to_string())?;
                let listed = driver.list_volumes().await.map_err(|e| e.to_string())?;
                Ok::<_, String>(drift::orphans_of(&self.shared, name, &*driver, listed))
            }
            .await;
            (name, listed)
        });
        let mut out = Orphans::default();
        for (name, listed) in futures::future::join_all(lists).await {
            match listed {
                Ok(mut orphans) => out.orphans.append(&mut orphans),
                Err(why) => {
                    out.unlisted.insert(name.clone(), why);
                }
            }
        }
        Ok(out)
    }

    /// Adopts an array volume under a storch name and class. Answers the volume and whether it
    /// was recorded now (`false`: the same import was done before).
    pub async fn import_volume(
        &self,
        ctx: &RequestCtx,
        request: ImportRequest,
    ) -> Result<(VolumeView, bool), CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            let name = request.name.clone();
            let recorded = volume::send(&self.shared, &name, || ImportVolume {
                ctx: ctx.clone(),
                request: request.clone(),
            })
            .await??;
            let view = self
                .shared
                .projection
                .read(|s| s.volume_view(&name))
                .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))?;
            Ok((view, recorded))
        }
        .await;
        observe("import_volume", started, &result);
        result
    }
}

//! Volumes: create (and clone), delete, resize and binding go to the volume's actor; reads.

use std::collections::BTreeMap;

use super::Core;
use crate::actors::error::{CoreError, RequestCtx, observe};
use crate::actors::messages::{BindVolume, CreateVolume, DeleteVolume, ResizeVolume};
use crate::actors::volume;
use crate::model::{ResizeRequest, VolumeRequest};
use crate::projections::VolumeView;

impl Core {
    /// Creates a volume (or a clone when `cloneSourceVolume` is set); returns it once the
    /// outcome is durable.
    pub async fn add_volume(
        &self,
        ctx: &RequestCtx,
        request: VolumeRequest,
    ) -> Result<VolumeView, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            let name = request.name().to_string();
            volume::send(&self.shared, &name, || CreateVolume {
                ctx: ctx.clone(),
                request: request.clone(),
            })
            .await??;
            self.volume_view(&name)
        }
        .await;
        observe("create_volume", started, &result);
        result
    }

    pub async fn delete_volume(&self, ctx: &RequestCtx, name: &str) -> Result<(), CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            if !self
                .shared
                .projection
                .read(|s| s.volumes.contains_key(name))
            {
                return Err(CoreError::NotFound(format!("volume {name} not found")));
            }
            volume::send(&self.shared, name, || DeleteVolume { ctx: ctx.clone() }).await?
        }
        .await;
        observe("delete_volume", started, &result);
        result
    }

    /// Grows a volume to the requested size (stored as given).
    pub async fn resize_volume(
        &self,
        ctx: &RequestCtx,
        request: &ResizeRequest,
    ) -> Result<VolumeView, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            let name = &request.volume;
            volume::send(&self.shared, name, || ResizeVolume {
                ctx: ctx.clone(),
                size: request.size.clone(),
            })
            .await??;
            self.volume_view(name)
        }
        .await;
        observe("resize_volume", started, &result);
        result
    }

    /// Records that a consumer took the volume (`VolumeBound`); `to` names it in the
    /// frontend's words (`k8s:pv/NAME`). Once: true when this call recorded it, false when the
    /// volume was bound already (nothing is recorded). Refuses an empty `to` (`Invalid`) and
    /// an unknown volume (`NotFound`).
    pub async fn bind_volume(
        &self,
        ctx: &RequestCtx,
        name: &str,
        to: &str,
    ) -> Result<bool, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            if to.trim().is_empty() {
                return Err(CoreError::Invalid(
                    "to: name the consumer the volume is bound to".into(),
                ));
            }
            self.shared.ensure_ready()?;
            // Already bound (every resync of a bound consumer asks again): no actor needed.
            if self.volume_view(name)?.bound {
                return Ok(false);
            }
            volume::send(&self.shared, name, || BindVolume {
                ctx: ctx.clone(),
                to: to.to_string(),
            })
            .await?
        }
        .await;
        observe("bind_volume", started, &result);
        result
    }

    pub fn get_volume(&self, name: &str) -> Result<VolumeView, CoreError> {
        self.shared.ensure_readable()?;
        self.volume_view(name)
    }

    fn volume_view(&self, name: &str) -> Result<VolumeView, CoreError> {
        self.shared
            .projection
            .read(|s| s.volume_view(name))
            .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))
    }

    /// The CHAP secrets of a volume's access information, unsealed (`iscsiInitiatorSecret`,
    /// `iscsiTargetSecret`; empty when it has none). Only for frontends that must hand them
    /// to a host, like the Kubernetes frontend's CHAP Secret; never for API output.
    pub fn volume_access_secrets(
        &self,
        name: &str,
    ) -> Result<BTreeMap<String, serde_json::Value>, CoreError> {
        self.shared.ensure_readable()?;
        let sealed = self
            .shared
            .projection
            .read(|s| s.volumes.get(name).map(|v| v.access_secrets().cloned()))
            .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))?;
        match sealed {
            None => Ok(BTreeMap::new()),
            Some(sealed) => self
                .shared
                .secrets
                .unseal(&sealed)
                .map_err(|e| CoreError::Internal(format!("volume {name}: {e}"))),
        }
    }

    /// One page of the volume names, sorted: at most `limit` names after `after`, and
    /// whether more follow. Names created or deleted between pages never shift a page.
    pub fn list_volumes_page(
        &self,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<(Vec<String>, bool), CoreError> {
        self.shared.ensure_readable()?;
        Ok(self.shared.projection.read(|s| {
            let names = s.volumes.keys().filter(|n| after.is_none_or(|a| *n > a));
            let (page, more) = crate::model::page::smallest(names, limit);
            (page.into_iter().map(String::from).collect(), more)
        }))
    }

    pub fn list_volumes(&self) -> Result<Vec<String>, CoreError> {
        self.shared.ensure_readable()?;
        let mut names: Vec<String> = self
            .shared
            .projection
            .read(|s| s.volumes.keys().map(String::from).collect());
        names.sort();
        Ok(names)
    }
}

//! Volumes: create (and clone), delete and resize go to the volume's actor; reads.

use std::collections::BTreeMap;

use super::Core;
use crate::actors::error::{CoreError, RequestCtx, observe};
use crate::actors::messages::{CreateVolume, DeleteVolume, ResizeVolume};
use crate::actors::volume;
use crate::model::VolumeConfig;
use crate::projections::VolumeView;

impl Core {
    /// Creates a volume (or a clone when `cloneSourceVolume` is set); returns it once the
    /// outcome is durable.
    pub async fn add_volume(
        &self,
        ctx: &RequestCtx,
        config: VolumeConfig,
    ) -> Result<VolumeView, CoreError> {
        let started = std::time::Instant::now();
        let result = self.add_volume_impl(ctx, config).await;
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

    /// Grows a volume to `size` (parsed like a create's size and stored verbatim).
    pub async fn resize_volume(
        &self,
        ctx: &RequestCtx,
        name: &str,
        size: &str,
    ) -> Result<VolumeView, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            let size_bytes = crate::model::parse_size(size)
                .map_err(|e| CoreError::Invalid(format!("invalid size: {e}")))?;
            if size_bytes == 0 {
                return Err(CoreError::Invalid(
                    "invalid size: size must be greater than zero".into(),
                ));
            }
            volume::send(&self.shared, name, || ResizeVolume {
                ctx: ctx.clone(),
                size: size.to_string(),
                size_bytes,
            })
            .await??;
            self.volume_view(name)
        }
        .await;
        observe("resize_volume", started, &result);
        result
    }

    async fn add_volume_impl(
        &self,
        ctx: &RequestCtx,
        mut config: VolumeConfig,
    ) -> Result<VolumeView, CoreError> {
        self.shared.ensure_ready()?;
        let invalid = |m: String| CoreError::Invalid(m);
        crate::model::validate_name("name", &config.name).map_err(|e| invalid(e.to_string()))?;
        if !config.clone_source_volume.is_empty() {
            crate::model::validate_name("cloneSourceVolume", &config.clone_source_volume)
                .map_err(|e| invalid(e.to_string()))?;
        }
        let size_bytes = if config.clone_source_volume.is_empty() {
            let size = crate::model::parse_size(&config.size)
                .map_err(|e| invalid(format!("invalid size: {e}")))?;
            if size == 0 {
                return Err(invalid(
                    "invalid size: size must be greater than zero".into(),
                ));
            }
            size
        } else {
            0
        };
        let mode = crate::model::AccessMode::parse(&config.access_mode).ok_or_else(|| {
            invalid(format!(
                "invalid accessMode: {:?} is not one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany",
                config.access_mode
            ))
        })?;
        config.protocol =
            crate::model::volume::resolve_protocol(mode, config.protocol).map_err(invalid)?;
        let name = config.name.clone();
        volume::send(&self.shared, &name, || CreateVolume {
            ctx: ctx.clone(),
            config: config.clone(),
            size_bytes,
        })
        .await??;
        self.volume_view(&name)
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

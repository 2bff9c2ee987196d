//! Storage classes: add and delete, and reads.

use std::sync::Arc;

use super::Core;
use crate::actors::class;
use crate::actors::error::{CoreError, RequestCtx, observe};
use crate::actors::shared::write;
use crate::events::{Event, StorageClassEvent};
use crate::model::{CompiledClass, StorageClassConfig};
use crate::projections::StorageClassView;

impl Core {
    pub async fn add_storage_class(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
    ) -> Result<String, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            crate::model::validate_name("name", &config.name)
                .map_err(|e| CoreError::Invalid(e.to_string()))?;
            let compiled =
                Arc::new(CompiledClass::compile(config.clone()).map_err(CoreError::Invalid)?);
            let _admin = self.shared.admin.lock().await;
            self.add_class_locked(ctx, config, compiled).await
        }
        .await;
        observe("add_storage_class", started, &result);
        result
    }

    pub async fn delete_storage_class(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> Result<(), CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            let _admin = self.shared.admin.lock().await;
            self.delete_class_locked(ctx, name).await
        }
        .await;
        observe("delete_storage_class", started, &result);
        result
    }

    /// Adds a validated class; the caller holds `admin`.
    pub(in crate::actors) async fn add_class_locked(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
        compiled: Arc<CompiledClass>,
    ) -> Result<String, CoreError> {
        let name = config.name.clone();
        if self
            .shared
            .projection
            .read(|s| s.classes.contains_key(&name))
        {
            return Err(CoreError::AlreadyExists(format!(
                "storage class {name} already exists"
            )));
        }
        let config = crate::secrets::seal_class(&self.shared.secrets, config);
        let ev = Event::class(&name, StorageClassEvent::Added { config });
        self.shared.append(&ctx.request_id, vec![ev]).await?;
        class::start(&self.shared, &name, compiled);
        Ok(name)
    }

    /// Replaces a class's config; the caller holds `admin`.
    pub(in crate::actors) async fn update_class_locked(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
        compiled: Arc<CompiledClass>,
    ) -> Result<(), CoreError> {
        let name = config.name.clone();
        let config = crate::secrets::seal_class(&self.shared.secrets, config);
        let ev = Event::class(&name, StorageClassEvent::Updated { config });
        self.shared.append(&ctx.request_id, vec![ev]).await?;
        class::start(&self.shared, &name, compiled);
        Ok(())
    }

    /// Deletes a class; the caller holds `admin`.
    pub(in crate::actors) async fn delete_class_locked(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> Result<(), CoreError> {
        if !self
            .shared
            .projection
            .read(|s| s.classes.contains_key(name))
        {
            return Err(CoreError::NotFound(format!(
                "storage class {name} not found"
            )));
        }
        let ev = Event::class(name, StorageClassEvent::Deleted);
        self.shared.append(&ctx.request_id, vec![ev]).await?;
        write(&self.shared.classes).remove(name);
        Ok(())
    }

    pub fn get_storage_class(&self, name: &str) -> Result<StorageClassView, CoreError> {
        self.shared.ensure_readable()?;
        self.shared
            .projection
            .read(|s| s.class_view(name))
            .ok_or_else(|| CoreError::NotFound(format!("storage class {name} was not found")))
    }

    pub fn list_storage_classes(&self) -> Result<Vec<String>, CoreError> {
        self.shared.ensure_readable()?;
        Ok(self
            .shared
            .projection
            .read(|s| s.classes.keys().cloned().collect()))
    }
}

//! What the handlers need from the core, as a trait, so that the HTTP layer (routing, error
//! envelopes, body limits, request ids) can be tested against an in-memory fake. Production
//! code only ever uses the [`Core`] implementation, which delegates one to one.

use std::future::Future;

use crate::actors::{BackendView, Core, CoreError, RequestCtx, StorageClassView, VolumeView};
use crate::model::{StorageClassConfig, VolumeConfig};

pub(crate) trait CoreApi: Clone + Send + Sync + 'static {
    fn add_backend(
        &self,
        ctx: &RequestCtx,
        doc: serde_json::Value,
    ) -> impl Future<Output = Result<String, CoreError>> + Send;
    fn update_backend(
        &self,
        ctx: &RequestCtx,
        name: &str,
        doc: serde_json::Value,
    ) -> impl Future<Output = Result<String, CoreError>> + Send;
    fn delete_backend(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> impl Future<Output = Result<(), CoreError>> + Send;
    fn get_backend(&self, name: &str) -> Result<BackendView, CoreError>;
    fn list_backends(&self) -> Result<Vec<String>, CoreError>;

    fn add_storage_class(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
    ) -> impl Future<Output = Result<String, CoreError>> + Send;
    fn delete_storage_class(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> impl Future<Output = Result<(), CoreError>> + Send;
    fn get_storage_class(&self, name: &str) -> Result<StorageClassView, CoreError>;
    fn list_storage_classes(&self) -> Result<Vec<String>, CoreError>;

    fn add_volume(
        &self,
        ctx: &RequestCtx,
        config: VolumeConfig,
    ) -> impl Future<Output = Result<VolumeView, CoreError>> + Send;
    fn delete_volume(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> impl Future<Output = Result<(), CoreError>> + Send;
    fn get_volume(&self, name: &str) -> Result<VolumeView, CoreError>;
    fn list_volumes(&self) -> Result<Vec<String>, CoreError>;
}

impl CoreApi for Core {
    fn add_backend(
        &self,
        ctx: &RequestCtx,
        doc: serde_json::Value,
    ) -> impl Future<Output = Result<String, CoreError>> + Send {
        Core::add_backend(self, ctx, doc)
    }
    fn update_backend(
        &self,
        ctx: &RequestCtx,
        name: &str,
        doc: serde_json::Value,
    ) -> impl Future<Output = Result<String, CoreError>> + Send {
        Core::update_backend(self, ctx, name, doc)
    }
    fn delete_backend(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> impl Future<Output = Result<(), CoreError>> + Send {
        Core::delete_backend(self, ctx, name)
    }
    fn get_backend(&self, name: &str) -> Result<BackendView, CoreError> {
        Core::get_backend(self, name)
    }
    fn list_backends(&self) -> Result<Vec<String>, CoreError> {
        Core::list_backends(self)
    }

    fn add_storage_class(
        &self,
        ctx: &RequestCtx,
        config: StorageClassConfig,
    ) -> impl Future<Output = Result<String, CoreError>> + Send {
        Core::add_storage_class(self, ctx, config)
    }
    fn delete_storage_class(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> impl Future<Output = Result<(), CoreError>> + Send {
        Core::delete_storage_class(self, ctx, name)
    }
    fn get_storage_class(&self, name: &str) -> Result<StorageClassView, CoreError> {
        Core::get_storage_class(self, name)
    }
    fn list_storage_classes(&self) -> Result<Vec<String>, CoreError> {
        Core::list_storage_classes(self)
    }

    fn add_volume(
        &self,
        ctx: &RequestCtx,
        config: VolumeConfig,
    ) -> impl Future<Output = Result<VolumeView, CoreError>> + Send {
        Core::add_volume(self, ctx, config)
    }
    fn delete_volume(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> impl Future<Output = Result<(), CoreError>> + Send {
        Core::delete_volume(self, ctx, name)
    }
    fn get_volume(&self, name: &str) -> Result<VolumeView, CoreError> {
        Core::get_volume(self, name)
    }
    fn list_volumes(&self) -> Result<Vec<String>, CoreError> {
        Core::list_volumes(self)
    }
}

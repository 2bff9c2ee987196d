//! Backends: add, update and delete (decided by the backend's actor), and reads.

use super::Core;
use crate::actors::backend;
use crate::actors::error::{CoreError, RequestCtx, observe};
use crate::actors::messages::{DeleteBackend, PreparedBackend, UpdateBackend};
use crate::actors::shared::BackendSlot;
use crate::events::{BackendEvent, Event};
use crate::model::UserState;
use crate::projections::{BackendState, BackendView};

impl Core {
    /// Adds a backend from its config document (JSON value; YAML is converted by the caller).
    /// An existing name is an update. Returns the backend name.
    pub async fn add_backend(
        &self,
        ctx: &RequestCtx,
        doc: serde_json::Value,
    ) -> Result<String, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            // An identical re-post records nothing and keeps the running driver.
            if let Some(name) = doc.get("backendName").and_then(serde_json::Value::as_str)
                && self.backend_unchanged(name, &doc)
            {
                return Ok(name.to_string());
            }
            let prepared = backend::prepare(&self.shared, doc, backend::Origin::Api).await?;
            let _admin = self.shared.admin.lock().await;
            self.add_locked(ctx, prepared).await
        }
        .await;
        observe("add_backend", started, &result);
        result
    }

    /// Updates backend `name` (an update never renames: a body naming another backend is
    /// refused; one naming none keeps `name`); returns the name. An identical config records
    /// nothing and keeps the running driver.
    pub async fn update_backend(
        &self,
        ctx: &RequestCtx,
        name: &str,
        mut doc: serde_json::Value,
    ) -> Result<String, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            if !self.backend_exists(name) {
                return Err(CoreError::NotFound(format!("backend {name} was not found")));
            }
            // A body naming no backend updates this one; one naming another is refused
            // once the body itself is known to be valid (the backend's actor decides).
            if let Some(obj) = doc.as_object_mut()
                && obj
                    .get("backendName")
                    .is_none_or(serde_json::Value::is_null)
            {
                obj.insert("backendName".into(), name.into());
            }
            if self.backend_unchanged(name, &doc) {
                return Ok(name.to_string());
            }
            let prepared = backend::prepare(&self.shared, doc, backend::Origin::Api).await?;
            let _admin = self.shared.admin.lock().await;
            self.update_locked(ctx, name, prepared).await
        }
        .await;
        observe("update_backend", started, &result);
        result
    }

    /// Deletes a backend without volumes, or takes one with volumes offline.
    pub async fn delete_backend(&self, ctx: &RequestCtx, name: &str) -> Result<(), CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            let _admin = self.shared.admin.lock().await;
            self.delete_locked(ctx, name).await
        }
        .await;
        observe("delete_backend", started, &result);
        result
    }

    /// Sets what an operator decided for backend `name`: `Suspended` (placement skips its
    /// pools; its volumes are still served) or `Normal`. The state it already has records
    /// nothing. Returns the backend as shown afterwards.
    pub async fn set_backend_state(
        &self,
        ctx: &RequestCtx,
        name: &str,
        state: UserState,
    ) -> Result<BackendView, CoreError> {
        let started = std::time::Instant::now();
        let result = async {
            self.shared.ensure_ready()?;
            // Serialised with adds, updates, renames and deletes of backends.
            let _admin = self.shared.admin.lock().await;
            let suspended = self
                .shared
                .projection
                .read(|s| s.backends.get(name).map(|b| b.suspended))
                .ok_or_else(|| CoreError::NotFound(format!("backend {name} was not found")))?;
            if suspended != state.is_suspended() {
                let event = match state {
                    UserState::Suspended => BackendEvent::Suspended,
                    UserState::Normal => BackendEvent::Resumed,
                };
                self.shared
                    .append(&ctx.request_id, vec![Event::backend(name, event)])
                    .await?;
                tracing::info!(backend = %name, state = state.as_str(), "backend user state set");
            }
            self.get_backend(name)
        }
        .await;
        observe("set_backend_state", started, &result);
        result
    }

    /// Whether backend `name` already has exactly this config (secrets included).
    pub(in crate::actors) fn backend_unchanged(&self, name: &str, doc: &serde_json::Value) -> bool {
        let Some(rec) = self
            .shared
            .projection
            .read(|s| s.backends.get(name).cloned())
        else {
            return false;
        };
        if !rec.online {
            return false;
        }
        let mut redacted = doc.clone();
        let secrets = crate::secrets::split(&mut redacted);
        let recorded: Option<serde_json::Value> = serde_json::from_str(&rec.config).ok();
        if recorded.as_ref() != Some(&redacted) {
            return false;
        }
        let recorded_secrets = match &rec.secrets {
            Some(sealed) => match self.shared.secrets.unseal(sealed) {
                Ok(s) => s,
                Err(_) => return false,
            },
            None => std::collections::BTreeMap::new(),
        };
        recorded_secrets == secrets
    }

    fn backend_exists(&self, name: &str) -> bool {
        self.shared
            .projection
            .read(|s| s.backends.contains_key(name))
    }

    /// Adds (or, for an existing name, updates) a prepared backend; the caller holds `admin`.
    pub(in crate::actors) async fn add_locked(
        &self,
        ctx: &RequestCtx,
        prepared: PreparedBackend,
    ) -> Result<String, CoreError> {
        if self.backend_exists(&prepared.name) {
            let name = prepared.name.clone();
            return self.update_locked(ctx, &name, prepared).await;
        }
        backend::add(&self.shared, ctx, prepared).await
    }

    async fn update_locked(
        &self,
        ctx: &RequestCtx,
        name: &str,
        prepared: PreparedBackend,
    ) -> Result<String, CoreError> {
        let not_found = || CoreError::NotFound(format!("backend {name} was not found"));
        let to = self.backend_actor(name, not_found)?.update;
        let msg = UpdateBackend {
            ctx: ctx.clone(),
            prepared,
        };
        to.send(msg).await.map_err(|_| gone(name))?
    }

    /// Deletes a backend without volumes, or takes one with volumes offline; the caller holds
    /// `admin`.
    pub(in crate::actors) async fn delete_locked(
        &self,
        ctx: &RequestCtx,
        name: &str,
    ) -> Result<(), CoreError> {
        let not_found = || CoreError::NotFound(format!("backend {name} not found"));
        let to = self.backend_actor(name, not_found)?.delete;
        let msg = DeleteBackend { ctx: ctx.clone() };
        to.send(msg).await.map_err(|_| gone(name))?
    }

    /// The actor of a recorded backend.
    fn backend_actor(
        &self,
        name: &str,
        not_found: impl FnOnce() -> CoreError,
    ) -> Result<BackendSlot, CoreError> {
        if !self.backend_exists(name) {
            return Err(not_found());
        }
        self.shared.backend(name).ok_or_else(|| gone(name))
    }

    pub fn get_backend(&self, name: &str) -> Result<BackendView, CoreError> {
        self.shared.ensure_readable()?;
        let live = self.live_state(name);
        self.shared
            .projection
            .read(|s| s.backend_view(name, live))
            .ok_or_else(|| CoreError::NotFound(format!("backend {name} was not found")))
    }

    /// Backend `name`'s health as its actor sees it; `None` where it is not run (a standby
    /// answers with what the leader recorded).
    pub(in crate::actors) fn live_state(&self, name: &str) -> Option<BackendState> {
        match self.shared.backend(name) {
            Some(slot) => Some(slot.status.state()),
            None if self.shared.standby_leader().is_some() => None,
            None => Some(BackendState::Failed("backend actor is not running".into())),
        }
    }

    /// Names of online backends, sorted.
    pub fn list_backends(&self) -> Result<Vec<String>, CoreError> {
        self.shared.ensure_readable()?;
        Ok(self.shared.projection.read(|s| {
            s.backends
                .iter()
                .filter(|(_, b)| b.online)
                .map(|(n, _)| n.clone())
                .collect()
        }))
    }
}

fn gone(name: &str) -> CoreError {
    CoreError::Unavailable(format!("backend {name} is not running"))
}

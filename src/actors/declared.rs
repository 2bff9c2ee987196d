//! Declarative configuration: make the backends and storage classes a config file declares
//! exist as declared. Volumes are never touched.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::core::Core;
use super::error::{CoreError, RequestCtx};
use crate::events::{BackendEvent, Event, StorageClassEvent};
use crate::model::{CompiledClass, StorageClassConfig};

/// What a config file declares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    /// Who declares: the config file's path, or `kubernetes` (recorded in the `Declared`
    /// events, so that each source removes only what it declared).
    pub source: String,
    /// Backend config documents, as for `POST /trident/v1/backend`.
    pub backends: Vec<serde_json::Value>,
    pub storage_classes: Vec<StorageClassConfig>,
}

/// What applying a declaration did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    pub backends_added: Vec<String>,
    pub backends_updated: Vec<String>,
    pub backends_unchanged: Vec<String>,
    /// Removed from the file: taken offline (or purged when empty), like a REST delete.
    pub backends_removed: Vec<String>,
    pub classes_added: Vec<String>,
    pub classes_updated: Vec<String>,
    pub classes_unchanged: Vec<String>,
    pub classes_removed: Vec<String>,
    /// Entries that are valid but could not be applied now (e.g. an array that does not
    /// answer): `backends[i] (name): why`. They are tried again at the next apply.
    pub errors: Vec<String>,
}

/// A declaration checked as a whole: every entry valid, no name twice.
struct Validated {
    /// `(index in the file, backendName if the config names it, config)`.
    backends: Vec<(usize, Option<String>, serde_json::Value)>,
    classes: Vec<(StorageClassConfig, Arc<CompiledClass>)>,
    class_names: BTreeSet<String>,
}

/// How errors and warnings name the backend at `index` of a declaration: `backends[1]`, or
/// `backends[1] (nas1)` when the config names it.
pub fn backend_entry(index: usize, doc: &serde_json::Value) -> String {
    match doc.get("backendName").and_then(serde_json::Value::as_str) {
        Some(name) => format!("backends[{index}] ({name})"),
        None => format!("backends[{index}]"),
    }
}

impl Declared {
    /// Checks every entry as [`Core::apply_declared`] will (driver configs, names, classes, no
    /// name twice) without changing anything: what a config file must pass at start and on
    /// reload. The error names the entry and the field (not the source).
    pub fn check(&self) -> Result<(), String> {
        self.checked().map(|_| ())
    }

    /// Like [`Declared::check`]; the error names the source too.
    fn validate(&self) -> Result<Validated, CoreError> {
        self.checked()
            .map_err(|e| CoreError::Invalid(format!("{}: {e}", self.source)))
    }

    fn checked(&self) -> Result<Validated, String> {
        let mut backend_names = BTreeSet::new();
        let mut backends = Vec::new();
        for (i, doc) in self.backends.iter().enumerate() {
            let at = backend_entry(i, doc);
            let built = crate::drivers::build_driver(doc).map_err(|e| format!("{at}: {e}"))?;
            let name = built.common.backend_name.clone();
            if let Some(n) = &name
                && !backend_names.insert(n.clone())
            {
                return Err(format!("{at}: backend {n} is declared twice"));
            }
            backends.push((i, name, doc.clone()));
        }
        let mut classes = Vec::new();
        let mut class_names = BTreeSet::new();
        for (i, config) in self.storage_classes.iter().enumerate() {
            crate::model::validate_name("name", &config.name)
                .map_err(|e| format!("storageClasses[{i}]: {e}"))?;
            if !class_names.insert(config.name.clone()) {
                return Err(format!(
                    "storageClasses[{i}]: storage class {} is declared twice",
                    config.name
                ));
            }
            let compiled = CompiledClass::compile(config.clone())
                .map_err(|e| format!("storageClasses[{i}] ({}): {e}", config.name))?;
            classes.push((config.clone(), Arc::new(compiled)));
        }
        Ok(Validated {
            backends,
            classes,
            class_names,
        })
    }
}

impl Core {
    /// Reconciles the core with a declaration. Every entry is validated first; an invalid
    /// declaration is refused as a whole (the error names the entry and the field) and changes
    /// nothing.
    pub async fn apply_declared(
        &self,
        ctx: &RequestCtx,
        declared: Declared,
    ) -> Result<ApplyReport, CoreError> {
        self.shared.ensure_ready()?;
        let source = declared.source.clone();
        let valid = declared.validate()?;
        let _admin = self.shared.admin.lock().await;
        let mut report = ApplyReport::default();
        let declared_now = self.apply_backends(ctx, valid.backends, &mut report).await;
        let mut marks = self
            .remove_backends(ctx, &source, &declared_now, &mut report)
            .await;
        let managed_classes = self.shared.projection.read(|s| s.declared_classes.clone());
        let classes = valid.classes;
        marks.extend(
            self.apply_classes(ctx, &source, classes, &managed_classes, &mut report)
                .await?,
        );
        for (name, by) in &managed_classes {
            if *by == source && !valid.class_names.contains(name) {
                match self.delete_class_locked(ctx, name).await {
                    Ok(()) => report.classes_removed.push(name.clone()),
                    Err(e) => report.errors.push(format!("storage class {name}: {e}")),
                }
            }
        }
        if !marks.is_empty() {
            self.shared.append(&ctx.request_id, marks).await?;
        }
        super::class::rematch_all(&self.shared).await;
        Ok(report)
    }

    /// Adds or updates the declared backends that differ; returns the names declared now.
    async fn apply_backends(
        &self,
        ctx: &RequestCtx,
        backends: Vec<(usize, Option<String>, serde_json::Value)>,
        report: &mut ApplyReport,
    ) -> BTreeSet<String> {
        let mut declared_now = BTreeSet::new();
        for (i, name, doc) in backends {
            let entry = |n: &str| format!("backends[{i}] ({n})");
            if let Some(n) = &name
                && self.backend_unchanged(n, &doc)
            {
                report.backends_unchanged.push(n.clone());
                declared_now.insert(n.clone());
                continue;
            }
            let prepared =
                match super::backend::prepare(&self.shared, doc, super::backend::Origin::Operator)
                    .await
                {
                    Ok(p) => p,
                    Err(e) => {
                        report
                            .errors
                            .push(format!("{}: {e}", entry(name.as_deref().unwrap_or("?"))));
                        if let Some(n) = name {
                            declared_now.insert(n);
                        }
                        continue;
                    }
                };
            let n = prepared.name.clone();
            let existed = self.shared.projection.read(|s| s.backends.contains_key(&n));
            match self.add_locked(ctx, prepared).await {
                Ok(n) if existed => report.backends_updated.push(n),
                Ok(n) => report.backends_added.push(n),
                Err(e) => report.errors.push(format!("{}: {e}", entry(&n))),
            }
            declared_now.insert(n);
        }
        declared_now
    }

    /// Takes offline the backends this source declared before and no longer does (never
    /// deleting volumes); returns the `Declared` marks to record for backends whose manager
    /// changes.
    async fn remove_backends(
        &self,
        ctx: &RequestCtx,
        source: &str,
        declared_now: &BTreeSet<String>,
        report: &mut ApplyReport,
    ) -> Vec<Event> {
        let managed: BTreeMap<String, Option<String>> = self.shared.projection.read(|s| {
            s.backends
                .iter()
                .map(|(n, b)| (n.clone(), b.declared_by.clone()))
                .collect()
        });
        let mut marks = Vec::new();
        for (name, by) in &managed {
            let ours = by.as_deref() == Some(source);
            if declared_now.contains(name) && !ours {
                marks.push(Event::backend(
                    name,
                    BackendEvent::Declared {
                        source: Some(source.to_string()),
                    },
                ));
            } else if !declared_now.contains(name) && ours {
                // Removed from the file: offline like a REST delete; never deletes volumes.
                match self.delete_locked(ctx, name).await {
                    Ok(()) => report.backends_removed.push(name.clone()),
                    Err(e) => report.errors.push(format!("backend {name}: {e}")),
                }
                if self
                    .shared
                    .projection
                    .read(|s| s.backends.contains_key(name))
                {
                    marks.push(Event::backend(
                        name,
                        BackendEvent::Declared { source: None },
                    ));
                }
            }
        }
        marks
    }

    /// Adds or updates the declared classes that differ; returns the `Declared` marks to
    /// record for classes whose manager changes.
    async fn apply_classes(
        &self,
        ctx: &RequestCtx,
        source: &str,
        classes: Vec<(StorageClassConfig, Arc<CompiledClass>)>,
        managed: &BTreeMap<String, String>,
        report: &mut ApplyReport,
    ) -> Result<Vec<Event>, CoreError> {
        let mut marks = Vec::new();
        for (config, compiled) in classes {
            let name = config.name.clone();
            let existing = self
                .shared
                .projection
                .read(|s| s.classes.get(&name).cloned());
            match existing {
                None => match self.add_class_locked(ctx, config, compiled).await {
                    Ok(n) => report.classes_added.push(n),
                    Err(e) => report.errors.push(format!("storage class {name}: {e}")),
                },
                Some(old)
                    if crate::secrets::class_unchanged(&self.shared.secrets, &old, &config) =>
                {
                    report.classes_unchanged.push(name.clone())
                }
                Some(_) => {
                    self.update_class_locked(ctx, config, compiled).await?;
                    report.classes_updated.push(name.clone());
                }
            }
            if managed.get(&name).map(String::as_str) != Some(source) {
                marks.push(Event::class(
                    &name,
                    StorageClassEvent::Declared {
                        source: Some(source.to_string()),
                    },
                ));
            }
        }
        Ok(marks)
    }
}

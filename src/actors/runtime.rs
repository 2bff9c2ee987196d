//! Start-up (open the log, replay, start actors, reconcile) and shutdown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use super::audit::Sink;
use super::backend::{self, DriverSource};
use super::core::Core;
use super::error::CoreError;
use super::messages::Reconcile;
use super::options::CoreOptions;
use super::replay::{checkpoint, publish_checkpoint, replay_log};
use super::shared::{Readiness, Shared, read, write};
use super::{class, volume};
use crate::log::EventLog;
use crate::projections::{Projection, VolumeState};
use crate::secrets::SecretBox;

/// The running core: its handle plus what is needed to stop it cleanly.
pub struct CoreRuntime {
    shared: Arc<Shared>,
    system: actix::System,
    thread: Option<std::thread::JoinHandle<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for CoreRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreRuntime").finish_non_exhaustive()
    }
}

impl CoreRuntime {
    /// Opens the log and starts the actors; replay runs in the background (reads answer
    /// `NotReady` until it is done). Fails at once if the data dir cannot be opened or is held
    /// by another process. Must be called inside a multi-thread tokio runtime.
    pub async fn start(opts: CoreOptions) -> Result<CoreRuntime, CoreError> {
        let dir = opts.data_dir.clone();
        let loose = crate::log::files::private_dir(&dir).map_err(|e| {
            CoreError::BootstrapFailed(format!("cannot create data dir {}: {e}", dir.display()))
        })?;
        if let Some(warning) = loose {
            tracing::warn!("data dir: {warning}");
        }
        let durability = opts.durability;
        let log_dir = dir.join("log");
        let log = tokio::task::spawn_blocking(move || EventLog::open(&log_dir, durability))
            .await
            .map_err(|e| CoreError::Internal(e.to_string()))?
            .map_err(|e| CoreError::BootstrapFailed(e.to_string()))?;
        log.set_min_free(opts.log_min_free);
        let secrets = match &opts.secrets_key {
            Some(path) => SecretBox::load(path),
            None => SecretBox::load_or_create(&dir),
        }
        .map_err(|e| CoreError::BootstrapFailed(e.to_string()))?;

        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("storch-actors".into())
            .spawn(move || {
                let sys = actix::System::new();
                sys.block_on(async {
                    let _ = tx.send((actix::System::current(), actix::Arbiter::current()));
                });
                if let Err(e) = sys.run() {
                    tracing::error!(error = %e, "actor system stopped with an error");
                }
            })
            .map_err(|e| CoreError::Internal(format!("cannot start the actor thread: {e}")))?;
        let (system, arbiter) = rx
            .recv()
            .map_err(|_| CoreError::Internal("the actor thread died".into()))?;

        let shared = Arc::new(Shared {
            opts,
            log: RwLock::new(Some(Arc::new(log))),
            projection: Arc::new(Projection::default()),
            secrets,
            arbiter,
            readiness: RwLock::new(Readiness::Replaying),
            appender: RwLock::new(None),
            backends: RwLock::new(HashMap::new()),
            classes: RwLock::new(HashMap::new()),
            volumes: Mutex::new(HashMap::new()),
            followers: tokio::sync::broadcast::channel(4096).0,
            streams: Default::default(),
            admin: tokio::sync::Mutex::new(()),
            config_pending: std::sync::atomic::AtomicBool::new(false),
            cut_back: Mutex::new(None),
        });
        let boot = tokio::spawn(boot(shared.clone()));
        Ok(CoreRuntime {
            shared,
            system,
            thread: Some(thread),
            tasks: vec![boot],
        })
    }

    pub fn core(&self) -> Core {
        Core {
            shared: self.shared.clone(),
        }
    }

    /// Stops accepting commands, lets in-flight work finish, stops the actors, writes a last
    /// checkpoint and closes the log.
    pub async fn shutdown(mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        self.system.stop();
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        write(&self.shared.backends).clear();
        write(&self.shared.classes).clear();
        self.shared
            .volumes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        if *read(&self.shared.readiness) == Readiness::Ready {
            checkpoint(&self.shared).await;
        }
        write(&self.shared.appender).take();
        *write(&self.shared.readiness) = Readiness::Failed("storch has stopped".into());
        let log = write(&self.shared.log).take();
        if let Some(log) = log
            && let Err(e) = log.shutdown().await
        {
            tracing::error!(error = %e, "event log did not close cleanly");
        }
        // Last, once every acknowledged batch is in etcd: a standby takes over at once.
        if let Some(node) = &self.shared.opts.replication {
            node.stop().await;
        }
    }
}

async fn boot(shared: Arc<Shared>) {
    let Some(log) = shared.log() else { return };
    let replicator = match shared.opts.replication.clone() {
        None => {
            let Some(state) = replay_log(&shared, &log).await else {
                return;
            };
            shared.projection.replace(state);
            None
        }
        Some(node) => {
            if !super::standby::follow_until_elected(&shared, &log, &node).await {
                return;
            }
            let mut lost = node.lost();
            let watcher = shared.clone();
            tokio::spawn(async move {
                let seen = lost.wait_for(Option::is_some).await.map(|r| r.clone());
                if let Ok(reason) = seen {
                    let reason = reason.unwrap_or_default();
                    *write(&watcher.readiness) =
                        Readiness::Failed(format!("lost the etcd leadership: {reason}"));
                }
            });
            let replicator: Arc<dyn crate::log::Replicator> =
                Arc::new(crate::replication::EtcdReplicator(node.clone()));
            Some(replicator)
        }
    };
    let (classes, backends, pending) = shared.projection.read(|state| {
        let pending: Vec<String> = state
            .volumes
            .iter()
            .filter(|(_, v)| {
                !matches!(v.state, VolumeState::Online | VolumeState::Missing)
                    || v.snapshots().values().any(|s| s.created_ms.is_none())
            })
            .map(|(n, _)| n.to_string())
            .collect();
        // A backend's config and secrets only: not its (possibly million-name) volume set.
        let backends: Vec<_> = state
            .backends
            .iter()
            .map(|(name, b)| (name.clone(), b.config.clone(), b.secrets.clone()))
            .collect();
        (state.classes.clone(), backends, pending)
    });
    let appender = log.start_writer_with(Arc::new(Sink::for_shared(&shared)), replicator);
    *write(&shared.appender) = Some(appender);
    let cut_back = shared
        .cut_back
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(event) = cut_back
        && let Err(e) = shared
            .append("boot", vec![crate::events::Event::Log { event }])
            .await
    {
        *write(&shared.readiness) = Readiness::Failed(format!(
            "cannot record that the event log was cut back: {e}"
        ));
        return;
    }

    for (name, config) in classes {
        match crate::model::CompiledClass::compile(config) {
            Ok(c) => class::start(&shared, &name, Arc::new(c)),
            Err(e) => {
                tracing::error!(class = %name, error = %e, "recorded storage class no longer compiles")
            }
        }
    }
    for (name, config, secrets) in backends {
        let mut source = serde_json::from_str::<serde_json::Value>(&config)
            .map(DriverSource::Build)
            .unwrap_or_else(|e| DriverSource::Broken(format!("recorded config is not JSON: {e}")));
        if let (DriverSource::Build(doc), Some(sealed)) = (&mut source, &secrets) {
            match shared.secrets.unseal(sealed) {
                Ok(secrets) => crate::secrets::merge(doc, &secrets),
                Err(e) => source = DriverSource::Broken(e.to_string()),
            }
        }
        if let DriverSource::Broken(why) = &source {
            tracing::error!(backend = %name, error = %why, "recorded backend cannot be started");
        }
        backend::start(&shared, &name, source);
    }
    class::rematch_all(&shared).await;
    *write(&shared.readiness) = Readiness::Ready;
    tracing::info!("storch core is ready");

    for name in pending {
        volume::activate(&shared, &name, |to| to.reconcile.do_send(Reconcile));
    }
    let mut last = shared.projection.read(|s| s.head);
    let mut last_in_etcd = 0;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let head = shared.projection.read(|s| s.head);
        if head.saturating_sub(last) >= shared.opts.checkpoint_every {
            checkpoint(&shared).await;
            last = head;
        }
        if let Some(node) = &shared.opts.replication
            && node.is_leader()
            && head.saturating_sub(last_in_etcd) >= node.checkpoint_every()
        {
            publish_checkpoint(&shared, node).await;
            last_in_etcd = head;
        }
    }
}

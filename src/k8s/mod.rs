//! The Kubernetes frontend: StorageClasses become storch classes, PVCs become volumes and the
//! PVs that bind to them, released PVs are cleaned up
//! (docs/trident-contract.md#kubernetes-frontend). The only module that imports kube.
//!
//! - `translate`: pure translations (StorageClass → class, PVC → volume config, volume → PV).
//! - `block`: raw block claims (`volumeMode: Block`), for iSCSI volumes only.
//! - `classes`: the StorageClass watcher, on every replica (keeps standbys warm).
//! - `claims`, `volumes`: the PVC and PV controllers (kube-runtime `Controller`s, with
//!   per-object retry and backoff), run only by the holder of the Lease (`lease`).
//! - `roles`: with etcd replication, the `storch.io/role` label on this replica's own pod,
//!   from the start on every replica (not waiting for the core).
//! - `expand`: PVC expansion of bound claims (run by the PVC controller).
//! - `sweep`: deletes (or keeps, per the class's reclaim policy) volumes the frontend made
//!   for claims that are gone without a PV (Lease holder only); a volume whose PV the log
//!   records (`VolumeBound`, written by `claims` and `volumes`) is always kept.
//!
//! Everything goes through [`Core`]; nothing here writes storch state directly.

pub mod block;
mod claims;
mod classes;
mod drift;
mod expand;
pub mod install;
mod lease;
mod roles;
mod sweep;
pub mod translate;
mod volumes;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kube::Client;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use tokio::sync::watch;

use crate::actors::Core;
pub use roles::ROLE_LABEL;
use translate::FrontendClass;

/// The provisioner names answered by default.
pub const DEFAULT_PROVISIONERS: [&str; 2] = ["netapp.io/trident", "storch.io/storch"];

/// The default of [`KubeOptions::orphan_grace`].
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(300);

/// Where the cluster is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeSource {
    /// A kubeconfig file (its current context).
    Kubeconfig(PathBuf),
    /// An API server URL without credentials (e.g. `kubectl proxy`), like Trident's
    /// `-k8s_api_server`.
    ApiServer(String),
    /// The pod's service account.
    InCluster,
}

/// Settings of the frontend.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeOptions {
    pub source: KubeSource,
    /// StorageClasses with one of these provisioners are storch's.
    pub provisioners: Vec<String>,
    /// storch's own namespace (Lease, CHAP Secrets); default: the pod's, else the
    /// kubeconfig context's, else `default`.
    pub namespace: Option<String>,
    /// The node this storch runs on (node affinity of `local` volumes).
    pub node_name: Option<String>,
    /// The Lease holder identity; default: the host name and a random suffix.
    pub identity: Option<String>,
    pub lease_name: String,
    pub lease_duration: Duration,
    /// Label this replica's pod ([`pod_name`](Self::pod_name)) with its etcd role
    /// ([`ROLE_LABEL`]): on with etcd replication.
    pub role_labels: bool,
    /// The pod storch runs in (`STORCH_POD_NAME`), in [`namespace`](Self::namespace).
    pub pod_name: Option<String>,
    /// How long a volume the frontend made must stay without its claim and without a PV
    /// before the sweep applies its class's reclaim policy to it (at least 1 s).
    pub orphan_grace: Duration,
}

impl KubeOptions {
    pub fn new(source: KubeSource) -> KubeOptions {
        KubeOptions {
            source,
            provisioners: DEFAULT_PROVISIONERS.map(String::from).to_vec(),
            namespace: None,
            node_name: None,
            identity: None,
            lease_name: "storch-leader".into(),
            lease_duration: Duration::from_secs(15),
            role_labels: false,
            pod_name: None,
            orphan_grace: DEFAULT_ORPHAN_GRACE,
        }
    }
}

/// Why the frontend could not start.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error("cannot use the kubeconfig {}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("invalid --k8s-api-server {url:?}: {why}")]
    ApiServer { url: String, why: String },
    #[error("--in-cluster: not running in a Kubernetes pod")]
    InCluster(#[source] kube::config::InClusterError),
    #[error("cannot build the Kubernetes client")]
    Client(#[source] kube::Error),
    #[error("{0}")]
    Options(String),
}

/// The file a pod's service account namespace is in.
const POD_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// What every part of the frontend shares.
pub(crate) struct Ctx {
    core: Core,
    client: Client,
    opts: KubeOptions,
    /// storch's namespace (Lease, CHAP secrets).
    namespace: String,
    identity: String,
    /// Our StorageClasses by name, as last seen (valid ones only).
    classes: RwLock<BTreeMap<String, FrontendClass>>,
    /// Held for writing while a class change reaches the core and then `classes`, for reading
    /// while a claim's class is chosen: a claim never sees the core's classes ahead of ours
    /// (a claim made once storch shows a new default class sees it as a default too).
    class_sync: tokio::sync::RwLock<()>,
    recorder: Recorder,
    /// Consecutive failures per object, for the retry backoff. An entry goes when its object
    /// reconciles, is seen deleted, or its next retry finds it gone, and all go when the
    /// controllers stop.
    failures: Mutex<HashMap<String, u32>>,
    /// Sweep passes finished (see [`FrontendStats`]).
    sweeps: AtomicU64,
}

impl Ctx {
    fn class(&self, name: &str) -> Option<FrontendClass> {
        self.classes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Our default classes, sorted.
    fn default_classes(&self) -> Vec<FrontendClass> {
        self.classes
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|c| c.is_default)
            .cloned()
            .collect()
    }

    /// The delay before retrying `key` after one more failure: 1 s doubling to 2 min.
    fn backoff(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = failures.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        doubling(*n, 120)
    }

    /// Forgets `key`'s failures: it reconciled, or it is gone.
    fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// Records in the log, once, that volume `name` has its PV (of the same name):
    /// `VolumeBound { to: "k8s:pv/NAME" }`, request id `k8s:pv/NAME`. The sweep never deletes a
    /// volume so recorded, across restarts (a PV deleted by hand never deletes its volume). A
    /// PV whose volume storch does not have is no error.
    async fn record_pv(&self, name: &str) -> Result<(), crate::actors::CoreError> {
        let to = format!("k8s:pv/{name}");
        match self
            .core
            .bind_volume(&crate::actors::RequestCtx::new(to.clone()), name, &to)
            .await
        {
            Ok(true) => {
                tracing::info!(volume = %name, pv = %name, "the volume's PV is recorded in the log");
                Ok(())
            }
            Ok(false) | Err(crate::actors::CoreError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Forgets the failures of every object: the controllers stopped.
    fn forget_failures(&self) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Publishes a Kubernetes Event about `regarding`; failures are only logged.
    async fn event(
        &self,
        regarding: &k8s_openapi::api::core::v1::ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let ev = KubeEvent {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_string(),
            note: Some(clip_note(note)),
            action: action.to_string(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, regarding).await {
            tracing::warn!(reason, error = %e, "could not publish a Kubernetes event");
        }
    }
}

/// Event notes are limited to 1 kB.
fn clip_note(mut note: String) -> String {
    const MAX: usize = 1000;
    if note.len() > MAX {
        let mut cut = MAX - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    note
}

/// Counters of the running frontend, for diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontendStats {
    /// Objects (claims, PVs) with failures pending a retry.
    pub retrying: usize,
    /// Passes of the orphan sweep finished so far.
    pub sweeps: u64,
}

/// The running frontend.
pub struct Frontend {
    ctx: Arc<Ctx>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// The pod role label's task, with etcd replication in a pod.
    roles: Option<tokio::task::JoinHandle<()>>,
}

impl Frontend {
    /// Connects (errors here are configuration errors) and starts watching in the background.
    pub async fn start(core: Core, opts: KubeOptions) -> Result<Frontend, KubeError> {
        if opts.provisioners.is_empty() {
            return Err(KubeError::Options(
                "at least one provisioner name is needed".into(),
            ));
        }
        if opts.lease_duration < Duration::from_secs(1) {
            return Err(KubeError::Options(
                "--k8s-lease-duration must be at least 1s".into(),
            ));
        }
        if opts.orphan_grace < Duration::from_secs(1) {
            return Err(KubeError::Options(
                "--k8s-orphan-grace must be at least 1s".into(),
            ));
        }
        let (config, pod_namespace) = client_config(&opts.source).await?;
        let default_namespace = config.default_namespace.clone();
        let api_server = config.cluster_url.to_string();
        let client = Client::try_from(config).map_err(KubeError::Client)?;
        let namespace = opts
            .namespace
            .clone()
            .or(pod_namespace)
            .unwrap_or(default_namespace);
        let identity = opts.identity.clone().unwrap_or_else(|| {
            let host = rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned();
            let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
            format!("{host}-{suffix}")
        });
        let reporter = Reporter {
            controller: opts.provisioners[0].clone(),
            instance: Some(identity.clone()),
        };
        let ctx = Arc::new(Ctx {
            recorder: Recorder::new(client.clone(), reporter),
            core,
            client,
            opts,
            namespace,
            identity,
            classes: RwLock::new(BTreeMap::new()),
            class_sync: tokio::sync::RwLock::new(()),
            failures: Mutex::new(HashMap::new()),
            sweeps: AtomicU64::new(0),
        });
        tracing::info!(
            %api_server,
            namespace = %ctx.namespace,
            identity = %ctx.identity,
            provisioners = ?ctx.opts.provisioners,
            "Kubernetes frontend starting"
        );
        let (stop, stopped) = watch::channel(false);
        let roles = match (ctx.opts.role_labels, &ctx.opts.pod_name) {
            (false, _) => None,
            (true, None) => {
                tracing::warn!(
                    "STORCH_POD_NAME is not set: the pod is not labelled with its etcd role \
                     ({ROLE_LABEL}), so a Service selecting the leader finds no pod"
                );
                None
            }
            (true, Some(pod)) => Some(tokio::spawn(roles::run(
                kube::Api::namespaced(ctx.client.clone(), &ctx.namespace),
                pod.clone(),
                ctx.core.clone(),
                stopped.clone(),
            ))),
        };
        let task = tokio::spawn(run(ctx.clone(), stopped));
        Ok(Frontend {
            ctx,
            stop,
            task,
            roles,
        })
    }

    /// The frontend's counters now.
    pub fn stats(&self) -> FrontendStats {
        FrontendStats {
            retrying: self
                .ctx
                .failures
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len(),
            sweeps: self.ctx.sweeps.load(Ordering::Relaxed),
        }
    }

    /// Stops the controllers and gives up the Lease (and, a leader, labels its pod standby).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        join_or_abort(self.task, "the Kubernetes frontend").await;
        if let Some(roles) = self.roles {
            join_or_abort(roles, "the pod role label").await;
        }
    }
}

async fn client_config(source: &KubeSource) -> Result<(kube::Config, Option<String>), KubeError> {
    match source {
        KubeSource::Kubeconfig(path) => {
            let err = |source| KubeError::Kubeconfig {
                path: path.clone(),
                source,
            };
            let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(err)?;
            let config = kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(err)?;
            Ok((config, None))
        }
        KubeSource::ApiServer(url) => {
            let uri: http::Uri = url.parse().map_err(|e| KubeError::ApiServer {
                url: url.clone(),
                why: format!("{e}"),
            })?;
            if uri.scheme().is_none() || uri.host().is_none() {
                return Err(KubeError::ApiServer {
                    url: url.clone(),
                    why: "expected http(s)://HOST[:PORT]".into(),
                });
            }
            Ok((kube::Config::new(uri), None))
        }
        KubeSource::InCluster => {
            let config = kube::Config::incluster().map_err(KubeError::InCluster)?;
            let namespace = std::fs::read_to_string(POD_NAMESPACE_FILE)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
            Ok((config, namespace))
        }
    }
}

/// Waits for the core, keeps classes in sync, and runs the controllers while holding the
/// Lease, until `stop`.
async fn run(ctx: Arc<Ctx>, mut stop: watch::Receiver<bool>) {
    tokio::select! {
        ready = ctx.core.wait_ready() => if let Err(why) = ready {
            tracing::error!(%why, "the core failed to start; the Kubernetes frontend stays off");
            return;
        },
        _ = stop.wait_for(|s| *s) => return,
    }
    let (synced, class_changes) = watch::channel(0u64);
    let classes = tokio::spawn(classes::run(ctx.clone(), synced));
    let lease = lease::Lease::new(&ctx);
    loop {
        // Controllers start after the first class sync, so that no claim is judged against an
        // empty class list.
        let mut first = class_changes.clone();
        tokio::select! {
            _ = first.wait_for(|n| *n > 0) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        if !lease.acquire(&mut stop).await {
            break;
        }
        tracing::info!(identity = %ctx.identity, "leading: the PVC and PV controllers run");
        let (quit, quitting) = watch::channel(false);
        let controllers = tokio::spawn(run_controllers(
            ctx.clone(),
            class_changes.clone(),
            quitting,
        ));
        let stopped = lease.hold(&mut stop).await;
        let _ = quit.send(true);
        join_or_abort(controllers, "the PVC and PV controllers").await;
        if stopped {
            lease.release().await;
            break;
        }
        tracing::warn!(identity = %ctx.identity, "lost the Lease: controllers stopped");
    }
    classes.abort();
}

/// Waits up to 10 s for a task that was asked to stop, then aborts it.
async fn join_or_abort(mut task: tokio::task::JoinHandle<()>, what: &str) {
    if tokio::time::timeout(Duration::from_secs(10), &mut task)
        .await
        .is_err()
    {
        tracing::warn!("{what} did not stop within 10 s; aborted");
        task.abort();
    }
}

async fn run_controllers(
    ctx: Arc<Ctx>,
    class_changes: watch::Receiver<u64>,
    quit: watch::Receiver<bool>,
) {
    let until = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|q| *q).await;
    };
    let claims = claims::controller(&ctx, class_changes);
    let pvs = volumes::controller(&ctx);
    let sweep = sweep::run(
        ctx.clone(),
        claims.store(),
        pvs.store(),
        until(quit.clone()),
    );
    tokio::join!(
        claims::run(claims, ctx.clone(), until(quit.clone())),
        volumes::run(pvs, ctx.clone(), until(quit.clone())),
        drift::run(ctx.clone(), until(quit)),
        sweep,
    );
    // A new term starts with fresh retries (the objects may have changed meanwhile).
    ctx.forget_failures();
}

/// The delay after `failures` failures in a row: 1 s, doubling, at most `cap_secs`.
fn doubling(failures: u32, cap_secs: u64) -> Duration {
    crate::net::backoff(
        failures,
        Duration::from_secs(1),
        Duration::from_secs(cap_secs),
    )
}

/// Whether a kube error is the API's "not found".
fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Why a reconcile failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReconcileError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Core(#[from] crate::actors::CoreError),
    #[error("{0}")]
    Other(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_clipped_on_a_char_boundary() {
        assert_eq!(clip_note("short".into()), "short");
        let long = "é".repeat(700);
        let clipped = clip_note(long);
        assert!(clipped.len() <= 1000, "{}", clipped.len());
        assert!(clipped.ends_with("..."));
    }
}

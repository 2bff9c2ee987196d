//! `storch bench provision`: creates (and deletes, clones) volumes through the whole
//! pipeline — validation, placement, durable intent, backend actor, outcome, projection — with
//! C concurrent clients against B fake backends, and measures it against the disk's floor.
//!
//! - `mod.rs` (this file): options, the report's types, the clients and the run's steps.
//! - `figures.rs`: recorder counts, replication figures, baselines and placement spread.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

mod arrays;
mod figures;

pub use self::arrays::ArrayTarget;

use self::figures::{baseline, count, distribution, finish_replication};
use super::recorder::BenchRecorder;
use super::{Percentiles, dir_bytes, peak_rss_bytes};
use crate::actors::{Core, CoreOptions, CoreRuntime, RequestCtx};
use crate::drivers::fake::Latency;
use crate::log::Durability;
use crate::model::{StorageClassConfig, VolumeConfig, VolumeRequest};

/// What each client does per volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    /// Create volumes.
    Create,
    /// Create each volume, then delete it (two operations).
    Churn,
    /// Clone a per-client source volume.
    Clone,
}

impl std::str::FromStr for Mix {
    type Err = String;

    fn from_str(s: &str) -> Result<Mix, String> {
        match s {
            "create" => Ok(Mix::Create),
            "churn" => Ok(Mix::Churn),
            "clone" => Ok(Mix::Clone),
            other => Err(format!("mix {other:?} is not create, churn or clone")),
        }
    }
}

/// How to run the provisioning benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct ProvisionOptions {
    pub volumes: u64,
    pub clients: usize,
    pub backends: usize,
    pub pools: usize,
    /// Concurrent driver calls per backend.
    pub backend_limit: usize,
    /// Fake backend latency: `0ms`, `50ms`, `lognormal:200ms`.
    pub latency: String,
    /// Probability that a fake create fails (the scheduler then tries the next pool).
    pub fail_rate: f64,
    pub mix: Mix,
    #[serde(serialize_with = "durability_name")]
    pub durability: Durability,
    /// Where the log goes; a temporary directory (removed afterwards) when `None`.
    pub data_dir: Option<PathBuf>,
    /// Send every operation through the REST API on 127.0.0.1 (HTTP, JSON) instead of calling
    /// the core in-process.
    pub via_rest: bool,
    /// Provision on a running array (or simulator) instead of fake backends.
    pub target: Option<ArrayTarget>,
    /// Also write the same records to this etcd, one transaction per object change.
    pub etcd: Option<String>,
    /// Replicate storch's own log through this etcd while it runs.
    pub replicate_etcd: Option<String>,
}

fn durability_name<S: serde::Serializer>(d: &Durability, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match d {
        Durability::Flush => "flush",
        Durability::Write => "write",
        Durability::Memory => "memory",
    })
}

impl Default for ProvisionOptions {
    fn default() -> Self {
        ProvisionOptions {
            volumes: 10_000,
            clients: 64,
            backends: 4,
            pools: 4,
            backend_limit: 32,
            latency: "0ms".into(),
            fail_rate: 0.0,
            mix: Mix::Create,
            durability: Durability::Flush,
            data_dir: None,
            via_rest: false,
            target: None,
            etcd: None,
            replicate_etcd: None,
        }
    }
}

impl ProvisionOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.volumes == 0 || self.clients == 0 || self.backends == 0 || self.pools == 0 {
            return Err("--volumes, --clients, --backends and --pools must be at least 1".into());
        }
        if self.backend_limit == 0 || self.backend_limit > 10_000 {
            return Err("--backend-limit must be from 1 to 10000".into());
        }
        if !(0.0..=1.0).contains(&self.fail_rate) {
            return Err("--fail-rate must be from 0 to 1".into());
        }
        if self.fail_rate >= 1.0 {
            return Err("--fail-rate 1 would make every create fail; use less than 1".into());
        }
        Latency::parse(&self.latency)
            .map(|_| ())
            .map_err(|e| format!("--latency: {e}"))
    }
}

/// Time spent in each stage of an operation, across all operations.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Split {
    /// Waiting for a backend's concurrency permit.
    pub queueing: Option<Percentiles>,
    /// Durable log append (group commit), per append.
    pub append: Option<Percentiles>,
    /// The driver call itself.
    pub backend: Option<Percentiles>,
    /// Applying a committed batch to the projection.
    pub projection: Option<Percentiles>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolShare {
    pub backend: String,
    pub pool: String,
    pub volumes: u64,
}

/// How evenly random placement spread the volumes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub pools: Vec<PoolShare>,
    /// Pearson's chi-square against a uniform spread.
    pub chi_square: f64,
    pub degrees_of_freedom: u64,
}

/// The floors measured in the same run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Baseline {
    /// One 4 KiB write + fdatasync, median.
    pub fsync_p50_us: u64,
    /// Raw durable group-commit appends of same-sized records straight into sled, with the
    /// batch size storch achieved.
    pub raw_sled_records_per_sec: f64,
    pub raw_record_bytes: usize,
    pub raw_batch: usize,
    /// Events storch made durable per second in this run.
    pub storch_events_per_sec: f64,
    /// storch events/s ÷ raw records/s.
    pub ratio_to_raw: f64,
    /// B·L/latency, when the backends have a latency.
    pub littles_law_ops_per_sec: Option<f64>,
    /// operations/s ÷ that bound.
    pub share_of_bound: Option<f64>,
    /// With `--etcd`: the same records written to etcd one transaction each.
    pub etcd: Option<super::etcd::EtcdBaseline>,
    /// storch events/s ÷ etcd records/s.
    pub ratio_to_etcd: Option<f64>,
    /// With `--replicate-etcd`: storch's own log replicated through etcd.
    pub replicated: Option<Replicated>,
}

/// Replication through etcd in this run: every event counted here was acknowledged only once
/// etcd held it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Replicated {
    pub endpoint: String,
    pub events_per_sec: f64,
    /// Events per etcd transaction (the batching).
    pub events_per_txn: f64,
}

/// The result of a run. JSON field names are stable.
#[derive(Debug, Clone, Serialize)]
pub struct ProvisionReport {
    pub options: ProvisionOptions,
    pub operations: u64,
    pub failed: u64,
    pub elapsed_s: f64,
    pub ops_per_sec: f64,
    pub latency: Percentiles,
    pub split: Split,
    pub events_per_op: f64,
    pub flushes_per_op: f64,
    pub peak_rss_bytes: Option<u64>,
    pub log_bytes_per_volume: f64,
    pub distribution: Distribution,
    pub baseline: Baseline,
    /// With `--target`: the volumes the run made, removed from the arrays once it was
    /// measured (not part of any figure above).
    pub removed_from_arrays: Option<u64>,
}

/// `run` names this run on an array: an array keeps its volumes between runs, so the same
/// internal names in a second run would collide with the first run's (errno 17) and every
/// such create would fall through to another pool.
fn backend_doc(i: usize, opts: &ProvisionOptions, run: &str) -> serde_json::Value {
    if let Some(t) = &opts.target {
        return arrays::backend_doc(i, t, opts.backend_limit, run);
    }
    let pools: serde_json::Map<String, serde_json::Value> = (0..opts.pools)
        .map(|p| {
            (
                format!("p{p}"),
                json!({"attributes": {}, "sizeBytes": u64::MAX / 4}),
            )
        })
        .collect();
    json!({
        "version": 1, "storageDriverName": "fake", "backendName": format!("bench{i}"),
        "instanceName": format!("bench{i}"), "protocol": "file", "pools": pools,
        "latency": opts.latency, "failureRate": opts.fail_rate,
        "concurrencyLimit": opts.backend_limit,
    })
}

struct ClientResult {
    latency: hdrhistogram::Histogram<u64>,
    failed: u64,
    placed: BTreeMap<(String, String), u64>,
}

/// Where a client sends its operations: the core in-process, or the REST API over loopback.
#[derive(Clone)]
enum Frontend {
    Core(Core),
    Rest {
        http: crate::net::Client,
        base: String,
    },
}

impl Frontend {
    /// Creates a volume; the pool it landed on when the answer says so.
    async fn create(
        &self,
        ctx: &RequestCtx,
        cfg: VolumeConfig,
    ) -> Result<Option<(String, String)>, ()> {
        match self {
            Frontend::Core(core) => match VolumeRequest::parse(cfg) {
                Ok(request) => match core.add_volume(ctx, request).await {
                    Ok(v) => Ok(Some((v.backend, v.pool))),
                    Err(_) => Err(()),
                },
                Err(_) => Err(()),
            },
            Frontend::Rest { http, base } => {
                let r = http
                    .post(format!("{base}/trident/v1/volume"))
                    .json(&cfg)
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status() == crate::net::StatusCode::CREATED => Ok(None),
                    _ => Err(()),
                }
            }
        }
    }

    async fn delete(&self, ctx: &RequestCtx, name: &str) -> Result<(), ()> {
        match self {
            Frontend::Core(core) => core.delete_volume(ctx, name).await.map_err(|_| ()),
            Frontend::Rest { http, base } => {
                match http
                    .delete(format!("{base}/trident/v1/volume/{name}"))
                    .send()
                    .await
                {
                    Ok(r) if r.status() == crate::net::StatusCode::OK => Ok(()),
                    _ => Err(()),
                }
            }
        }
    }
}

async fn client(
    target: Frontend,
    next: Arc<AtomicU64>,
    id: usize,
    opts: Arc<ProvisionOptions>,
) -> ClientResult {
    let mut r = ClientResult {
        latency: super::micros_histogram(),
        failed: 0,
        placed: BTreeMap::new(),
    };
    let ctx = RequestCtx::new(format!("bench-{id}"));
    let source = format!("bench-src-{id}");
    if opts.mix == Mix::Clone {
        let cfg = VolumeConfig {
            name: source.clone(),
            size: "1Gi".into(),
            storage_class: "bench".into(),
            ..Default::default()
        };
        if target.create(&ctx, cfg).await.is_err() {
            r.failed += 1;
            return r;
        }
    }
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= opts.volumes {
            return r;
        }
        let name = format!("bench-{i}");
        let cfg = match opts.mix {
            // Trident's REST validation wants a size even for a clone (it is inherited).
            Mix::Clone => VolumeConfig {
                name: name.clone(),
                size: "1Gi".into(),
                clone_source_volume: source.clone(),
                ..Default::default()
            },
            _ => VolumeConfig {
                name: name.clone(),
                size: "1Gi".into(),
                storage_class: "bench".into(),
                ..Default::default()
            },
        };
        let t = Instant::now();
        match target.create(&ctx, cfg).await {
            Ok(placed) => {
                r.latency.saturating_record(t.elapsed().as_micros() as u64);
                if let Some(pool) = placed {
                    *r.placed.entry(pool).or_default() += 1;
                }
            }
            Err(()) => {
                r.failed += 1;
                continue;
            }
        }
        if opts.mix == Mix::Churn {
            let t = Instant::now();
            match target.delete(&ctx, &name).await {
                Ok(()) => r.latency.saturating_record(t.elapsed().as_micros() as u64),
                Err(()) => r.failed += 1,
            }
        }
    }
}

/// Runs the benchmark. `progress(done, total)` is called about ten times a second.
pub async fn run_provision(
    opts: ProvisionOptions,
    progress: impl Fn(u64, u64) + Send + 'static,
) -> Result<ProvisionReport, String> {
    opts.validate()?;
    // The metrics recorder is process-wide: one benchmark at a time, or their numbers mix.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _running = ONE_AT_A_TIME.lock().await;
    let given = opts.data_dir.clone();
    crate::bench::in_data_dir(
        given,
        |dir| async move { run_in(&dir, opts, progress).await },
    )
    .await
}

/// The server of a REST run: how to stop it, and its task.
type Serving = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
);

/// What the clients measured together.
struct Driven {
    latency: hdrhistogram::Histogram<u64>,
    failed: u64,
    placed: BTreeMap<(String, String), u64>,
    elapsed: Duration,
}

async fn run_in(
    dir: &std::path::Path,
    opts: ProvisionOptions,
    progress: impl Fn(u64, u64) + Send + 'static,
) -> Result<ProvisionReport, String> {
    let recorder = BenchRecorder::global();
    let (rt, replication, docs) = start_core(dir, &opts).await?;
    let core = rt.core();
    if let Some(r) = recorder {
        r.reset();
    }
    let (target, server) = frontend(&core, &opts).await?;
    let opts = Arc::new(opts);
    let mut driven = drive(target, opts.clone(), progress).await?;
    if let Some((stop, serving)) = server {
        let _ = stop.send(());
        let _ = serving.await;
        // Over REST the answers do not say where volumes landed; the core does.
        if opts.mix != Mix::Churn {
            for p in core.stats().pools {
                let volumes = p.used_bytes / (1 << 30);
                if volumes > 0 {
                    driven.placed.insert((p.backend, p.pool), volumes);
                }
            }
        }
    }
    let Driven {
        latency,
        failed,
        placed,
        elapsed,
    } = driven;

    let operations = latency.len();
    let counted = count(recorder);
    let pool_names: Vec<(String, String)> = core
        .stats()
        .pools
        .into_iter()
        .map(|p| (p.backend, p.pool))
        .collect();
    rt.shutdown().await;
    let replicated = finish_replication(&replication, &opts, &counted, elapsed).await;
    let removed_from_arrays = match &opts.target {
        Some(_) => Some(arrays::clean_up(&docs, opts.backend_limit).await?),
        None => None,
    };

    let log_bytes = dir_bytes(&dir.join("log"));
    let volumes_made = placed.values().sum::<u64>().max(1);
    let per_op = |n: u64| {
        if operations == 0 {
            0.0
        } else {
            n as f64 / operations as f64
        }
    };
    let ops_per_sec = operations as f64 / elapsed.as_secs_f64().max(1e-9);
    let baseline = baseline(dir, &opts, &counted, log_bytes, elapsed, ops_per_sec).await?;
    Ok(ProvisionReport {
        operations,
        failed,
        elapsed_s: elapsed.as_secs_f64(),
        ops_per_sec,
        latency: Percentiles::of(&latency),
        split: counted.split,
        events_per_op: per_op(counted.events),
        flushes_per_op: per_op(counted.flushes),
        peak_rss_bytes: peak_rss_bytes(),
        log_bytes_per_volume: log_bytes as f64 / volumes_made as f64,
        distribution: distribution(placed, &opts, pool_names),
        baseline: Baseline {
            replicated,
            ..baseline
        },
        removed_from_arrays,
        options: Arc::try_unwrap(opts).unwrap_or_else(|a| (*a).clone()),
    })
}

/// The running core, its replication and the backend documents it was given.
type Started = (
    CoreRuntime,
    Option<Arc<crate::replication::Node>>,
    Vec<serde_json::Value>,
);

/// Starts a core in `dir` (replicating to etcd if asked) with the benchmark's backends and
/// its storage class.
async fn start_core(dir: &std::path::Path, opts: &ProvisionOptions) -> Result<Started, String> {
    let replication = match &opts.replicate_etcd {
        Some(endpoint) => Some(
            crate::replication::Node::new(crate::replication::ReplicationOptions {
                endpoints: vec![endpoint.clone()],
                prefix: format!("/storch-bench/{}", uuid::Uuid::new_v4().simple()),
                lease_ttl: std::time::Duration::from_secs(10),
                identity: "storch-bench".into(),
                checkpoint_every: crate::replication::DEFAULT_CHECKPOINT_EVERY,
            })
            .map_err(|e| format!("--replicate-etcd: {e}"))?,
        ),
        None => None,
    };
    let rt = CoreRuntime::start(CoreOptions {
        data_dir: dir.to_path_buf(),
        durability: opts.durability,
        replication: replication.clone(),
        ..CoreOptions::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    let core = rt.core();
    core.wait_ready().await?;
    let setup = RequestCtx::new("bench-setup");
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
    let docs: Vec<_> = (0..opts.backends)
        .map(|i| backend_doc(i, opts, &run))
        .collect();
    for doc in &docs {
        core.add_backend(&setup, doc.clone())
            .await
            .map_err(|e| e.to_string())?;
    }
    let class = StorageClassConfig::from_json(br#"{"name":"bench"}"#)?;
    core.add_storage_class(&setup, class)
        .await
        .map_err(|e| e.to_string())?;
    Ok((rt, replication, docs))
}

/// Where the clients send their operations: the core itself, or (`via_rest`) a REST server
/// on loopback, which the caller stops.
async fn frontend(
    core: &Core,
    opts: &ProvisionOptions,
) -> Result<(Frontend, Option<Serving>), String> {
    if !opts.via_rest {
        return Ok((Frontend::Core(core.clone()), None));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(crate::api::serve(listener, core.clone(), async move {
        let _ = stopped.await;
    }));
    let http = crate::net::client_builder()
        .pool_max_idle_per_host(opts.clients)
        .build()
        .map_err(|e| e.to_string())?;
    Ok((Frontend::Rest { http, base }, Some((stop, serving))))
}

/// Runs the clients to the end, reporting progress, and adds up what they measured.
async fn drive(
    target: Frontend,
    opts: Arc<ProvisionOptions>,
    progress: impl Fn(u64, u64) + Send + 'static,
) -> Result<Driven, String> {
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let ticker = {
        let next = next.clone();
        let total = opts.volumes;
        tokio::spawn(async move {
            loop {
                progress(next.load(Ordering::Relaxed).min(total), total);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let clients: Vec<_> = (0..opts.clients)
        .map(|id| tokio::spawn(client(target.clone(), next.clone(), id, opts.clone())))
        .collect();
    let mut latency = super::micros_histogram();
    let mut failed = 0;
    let mut placed: BTreeMap<(String, String), u64> = BTreeMap::new();
    for c in clients {
        let r = c.await.map_err(|e| e.to_string())?;
        latency.add(&r.latency).map_err(|e| e.to_string())?;
        failed += r.failed;
        for (k, v) in r.placed {
            *placed.entry(k).or_default() += v;
        }
    }
    let elapsed = started.elapsed();
    ticker.abort();
    Ok(Driven {
        latency,
        failed,
        placed,
        elapsed,
    })
}

//! `storch bench replay`: builds a log of N volumes' lifecycles, then measures cold replay
//! (events/s, time until ready) with and without a checkpoint, and projection memory.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{dir_bytes, rss_bytes};
use crate::actors::{CoreOptions, CoreRuntime};
use crate::events::{BackendEvent, Event, StorageClassEvent, VolumeEvent};
use crate::log::{DiscardSink, Durability, EventLog, NewEvent};
use crate::model::{
    AccessInfo, Offer, PoolInfo, PoolRef, Protocol, StorageClassConfig, VolumeConfig,
};
use crate::projections::State;

#[derive(Debug, Clone, Serialize)]
pub struct ReplayOptions {
    pub volumes: u64,
    /// Where the log goes; a temporary directory (removed afterwards) when `None`.
    pub data_dir: Option<PathBuf>,
}

/// The result of a run. JSON field names are stable.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    pub options: ReplayOptions,
    pub events: u64,
    pub log_bytes: u64,
    pub build_s: f64,
    /// Reading, verifying, decoding and folding the whole log (`projections::replay`: read and
    /// checked on the log's reader thread, decoded and folded on the caller's).
    pub full_replay_s: f64,
    pub full_replay_events_per_sec: f64,
    /// `CoreRuntime::start` until ready, without a checkpoint (full replay, actors started).
    pub ready_without_checkpoint_s: f64,
    /// The same with the checkpoint written at the previous shutdown.
    pub ready_with_checkpoint_s: f64,
    pub checkpoint_bytes: u64,
    /// Resident memory the folded state takes, per volume: the RSS growth of a deep copy of
    /// the state made after the replay by decoding its checkpoint encoding (it allocates what
    /// the state holds, hash-map slack and shared names included, and nothing of the log's
    /// read cache; a `clone` would share the `Arc`ed names with the original).
    pub projection_bytes_per_volume: Option<f64>,
    /// RSS growth over the whole timed replay, per volume: the state plus what sled's page
    /// cache kept of the log read (the figure `projection_bytes_per_volume` used to be).
    pub replay_rss_bytes_per_volume: Option<f64>,
}

/// Writes a log of `volumes` created volumes (one fake backend, one pool, one class) under
/// `dir/log`; returns the number of events. `storch bench ui` serves the same log.
pub(crate) async fn build(dir: &std::path::Path, volumes: u64) -> Result<u64, String> {
    let log = EventLog::open(&dir.join("log"), Durability::Write).map_err(|e| e.to_string())?;
    let appender = log.start_writer(Arc::new(DiscardSink));
    let config = serde_json::json!({
        "version": 1, "storageDriverName": "fake", "backendName": "replay",
        "instanceName": "replay", "protocol": "file",
        "pools": {"p1": {"attributes": {}, "sizeBytes": u64::MAX / 4}},
    });
    let pool = PoolInfo {
        name: "p1".into(),
        offers: [(
            "backendType".to_string(),
            Offer::Strings(["fake".to_string()].into()),
        )]
        .into(),
        total_bytes: Some(u64::MAX / 4),
    };
    let class = StorageClassConfig::from_json(br#"{"name":"bench"}"#)?;
    let setup = [
        Event::backend(
            "replay",
            BackendEvent::Added {
                driver: "fake".into(),
                config: config.to_string(),
                secrets: None,
            },
        ),
        Event::backend(
            "replay",
            BackendEvent::PoolsDiscovered {
                protocol: Protocol::File,
                pools: vec![pool],
            },
        ),
        Event::class("bench", StorageClassEvent::Added { config: class }),
    ];
    let mut events = setup.len() as u64;
    appender
        .append("bench", setup.iter().map(NewEvent::from).collect())
        .await
        .map_err(|e| e.to_string())?;
    let mut v = 0;
    while v < volumes {
        let mut batch = Vec::new();
        for _ in 0..1000.min(volumes - v) {
            let name = format!("pvc-{v:08}");
            let internal = format!("trident-{name}");
            let cfg = VolumeConfig {
                version: "1".into(),
                name: name.clone(),
                size: "1073741824".into(),
                storage_class: "bench".into(),
                ..Default::default()
            };
            let pool = PoolRef::new("replay", "p1");
            batch.push(NewEvent::from(&Event::volume(
                &name,
                VolumeEvent::Requested {
                    config: Box::new(cfg),
                    size_bytes: 1 << 30,
                },
            )));
            batch.push(NewEvent::from(&Event::volume(
                &name,
                VolumeEvent::PlacementPlanned {
                    candidates: vec![pool.clone()],
                    seed: v,
                },
            )));
            let access = AccessInfo {
                nfs_server_ip: "192.0.2.1".into(),
                nfs_path: format!("/{internal}"),
                ..Default::default()
            };
            batch.push(NewEvent::from(&Event::volume(
                &name,
                VolumeEvent::Created {
                    pool,
                    internal_name: internal,
                    protocol: Protocol::File,
                    access: Box::new(access),
                    secrets: None,
                    adopted: false,
                },
            )));
            v += 1;
        }
        events += batch.len() as u64;
        appender
            .append("bench", batch)
            .await
            .map_err(|e| e.to_string())?;
    }
    drop(appender);
    log.shutdown().await.map_err(|e| e.to_string())?;
    Ok(events)
}

async fn time_to_ready(dir: &std::path::Path) -> Result<Duration, String> {
    let started = Instant::now();
    let rt = CoreRuntime::start(CoreOptions {
        data_dir: dir.to_path_buf(),
        ..CoreOptions::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    let core = rt.core();
    core.wait_ready().await?;
    let ready = started.elapsed();
    rt.shutdown().await;
    Ok(ready)
}

pub async fn run_replay(opts: ReplayOptions) -> Result<ReplayReport, String> {
    if opts.volumes == 0 {
        return Err("--volumes must be at least 1".into());
    }
    let given = opts.data_dir.clone();
    super::in_data_dir(given, |dir| async move { run_in(&dir, opts).await }).await
}

async fn run_in(dir: &std::path::Path, opts: ReplayOptions) -> Result<ReplayReport, String> {
    let started = Instant::now();
    let events = build(dir, opts.volumes).await?;
    let build_s = started.elapsed().as_secs_f64();
    let log_bytes = dir_bytes(&dir.join("log"));

    let log_dir = dir.join("log");
    let (full, per_volume, replay_rss) =
        tokio::task::spawn_blocking(move || -> Result<_, String> {
            let log = EventLog::open(&log_dir, Durability::Write).map_err(|e| e.to_string())?;
            let before = rss_bytes();
            let started = Instant::now();
            let state =
                crate::projections::replay(&log, State::default()).map_err(|e| e.to_string())?;
            let elapsed = started.elapsed();
            let volumes = state.volumes.len().max(1) as f64;
            let growth = |before: Option<u64>, after: Option<u64>| match (before, after) {
                (Some(b), Some(a)) if a > b => Some((a - b) as f64 / volumes),
                _ => None,
            };
            let replay_rss = growth(before, rss_bytes());
            let encoded = state.encode();
            let after = rss_bytes();
            let copy = State::decode(&encoded)?;
            let per_volume = growth(after, rss_bytes());
            assert_eq!(copy.volumes.len(), state.volumes.len());
            drop(copy);
            drop(encoded);
            drop(state);
            Ok((elapsed, per_volume, replay_rss))
        })
        .await
        .map_err(|e| e.to_string())??;

    let without = time_to_ready(dir).await?; // its shutdown writes a checkpoint
    let checkpoint_bytes = dir_bytes(&dir.join("log")).saturating_sub(log_bytes);
    let with = time_to_ready(dir).await?;
    Ok(ReplayReport {
        events,
        log_bytes,
        build_s,
        full_replay_s: full.as_secs_f64(),
        full_replay_events_per_sec: events as f64 / full.as_secs_f64().max(1e-9),
        ready_without_checkpoint_s: without.as_secs_f64(),
        ready_with_checkpoint_s: with.as_secs_f64(),
        checkpoint_bytes,
        projection_bytes_per_volume: per_volume,
        replay_rss_bytes_per_volume: replay_rss,
        options: opts,
    })
}

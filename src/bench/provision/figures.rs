//! The figures of a provision run beyond its latency: the metrics recorder's counts, the
//! replication figures, the baselines measured in the same run, and the placement spread.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{Baseline, Distribution, Mix, PoolShare, ProvisionOptions, Replicated, Split};
use crate::bench::recorder::BenchRecorder;
use crate::bench::{Percentiles, fsync_p50};
use crate::drivers::fake::Latency;

/// What the metrics recorder counted during the run.
pub(super) struct Counted {
    pub events: u64,
    pub flushes: u64,
    pub split: Split,
    pub etcd_txns: u64,
}

/// The recorder's counts and the split of the latency (all zero without a recorder).
pub(super) fn count(recorder: Option<&BenchRecorder>) -> Counted {
    let events = recorder
        .map(|r| r.counter("storch_events_appended_total"))
        .unwrap_or(0);
    let flushes = recorder
        .and_then(|r| r.histogram("storch_log_flush_seconds"))
        .map(|h| h.len())
        .unwrap_or(0);
    let split = match recorder {
        Some(r) => Split {
            queueing: r
                .histogram("storch_backend_queue_seconds")
                .map(|h| Percentiles::of(&h)),
            append: r
                .histogram("storch_log_append_seconds")
                .map(|h| Percentiles::of(&h)),
            backend: r
                .histogram("storch_driver_call_seconds")
                .map(|h| Percentiles::of(&h)),
            projection: r
                .histogram("storch_projection_apply_seconds")
                .map(|h| Percentiles::of(&h)),
        },
        None => Split::default(),
    };
    let etcd_txns = recorder
        .map(|r| r.counter("storch_replication_txns_total"))
        .unwrap_or(0);
    Counted {
        events,
        flushes,
        split,
        etcd_txns,
    }
}

/// The replication figures, after removing the benchmark's keys from etcd.
pub(super) async fn finish_replication(
    replication: &Option<Arc<crate::replication::Node>>,
    opts: &ProvisionOptions,
    counted: &Counted,
    elapsed: Duration,
) -> Option<Replicated> {
    match (replication, &opts.replicate_etcd) {
        (Some(node), Some(endpoint)) => {
            // Leave nothing behind in etcd.
            if let Err(e) = node.remove_all().await {
                tracing::warn!(error = %e, "could not remove the benchmark's keys from etcd");
            }
            Some(Replicated {
                endpoint: endpoint.clone(),
                events_per_sec: counted.events as f64 / elapsed.as_secs_f64().max(1e-9),
                events_per_txn: counted.events as f64 / counted.etcd_txns.max(1) as f64,
            })
        }
        _ => None,
    }
}

/// The baselines, in the same run and on the same disk: fsync, raw sled group commit with
/// the run's record size and batch, etcd (if asked) and Little's law. `replicated` is left
/// empty for the caller.
pub(super) async fn baseline(
    dir: &std::path::Path,
    opts: &ProvisionOptions,
    counted: &Counted,
    log_bytes: u64,
    elapsed: Duration,
    ops_per_sec: f64,
) -> Result<Baseline, String> {
    let (events, flushes) = (counted.events, counted.flushes);
    let fsync = fsync_p50(dir, 200).map_err(|e| format!("fsync baseline: {e}"))?;
    let record_bytes = if events == 0 {
        256
    } else {
        (log_bytes / events.max(1)).clamp(64, 4096) as usize
    };
    let batch = if flushes == 0 {
        64
    } else {
        (events / flushes.max(1)).max(1) as usize
    };
    let raw_dir = dir.join("raw-baseline");
    let raw_records = events.clamp(1_000, 200_000);
    let raw = crate::log::baseline::raw_group_commit(&raw_dir, raw_records, record_bytes, batch)
        .await
        .map_err(|e| format!("raw sled baseline: {e}"))?;
    let _ = std::fs::remove_dir_all(&raw_dir);
    let storch_events_per_sec = events as f64 / elapsed.as_secs_f64().max(1e-9);
    let etcd = match &opts.etcd {
        Some(endpoint) => Some(
            crate::bench::etcd::txn_per_record(
                endpoint,
                events.clamp(100, 20_000),
                record_bytes,
                opts.clients,
            )
            .await?,
        ),
        None => None,
    };
    let ratio_to_etcd = etcd
        .as_ref()
        .map(|e| storch_events_per_sec / e.records_per_sec.max(1e-9));
    let median = match Latency::parse(&opts.latency) {
        Ok(Latency::Fixed(d)) => Some(d),
        Ok(Latency::LogNormal { median, .. }) => Some(median),
        _ => None,
    }
    .filter(|d| !d.is_zero());
    let bound = median.map(|m| (opts.backends * opts.backend_limit) as f64 / m.as_secs_f64());
    Ok(Baseline {
        fsync_p50_us: fsync.as_micros() as u64,
        raw_sled_records_per_sec: raw.records_per_sec(),
        raw_record_bytes: record_bytes,
        raw_batch: batch,
        storch_events_per_sec,
        ratio_to_raw: storch_events_per_sec / raw.records_per_sec().max(1e-9),
        littles_law_ops_per_sec: bound,
        share_of_bound: bound.map(|b| ops_per_sec / b),
        etcd,
        ratio_to_etcd,
        replicated: None,
    })
}

/// Where the volumes landed, and the chi-square of that against an even spread over every
/// pool (0 for clones, which follow their source).
pub(super) fn distribution(
    placed: BTreeMap<(String, String), u64>,
    opts: &ProvisionOptions,
    pool_names: Vec<(String, String)>,
) -> Distribution {
    let total: u64 = placed.values().sum();
    let all_pools: Vec<(String, String)> = match &opts.target {
        None => (0..opts.backends)
            .flat_map(|b| (0..opts.pools).map(move |p| (format!("bench{b}"), format!("p{p}"))))
            .collect(),
        Some(_) => pool_names,
    };
    let k = all_pools.len().max(1) as u64;
    let expected = total as f64 / k as f64;
    let mut chi = 0.0;
    for pool in &all_pools {
        let o = placed.get(pool).copied().unwrap_or(0) as f64;
        if expected > 0.0 {
            chi += (o - expected).powi(2) / expected;
        }
    }
    Distribution {
        pools: placed
            .into_iter()
            .map(|((backend, pool), volumes)| PoolShare {
                backend,
                pool,
                volumes,
            })
            .collect(),
        chi_square: if opts.mix == Mix::Clone { 0.0 } else { chi },
        degrees_of_freedom: k.saturating_sub(1),
    }
}

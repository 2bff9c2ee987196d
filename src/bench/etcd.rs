//! The anchor system's persistence pattern as a baseline: the same records written to etcd,
//! one transaction per object change (create-only compare on the key), with as many
//! concurrent writers as clients.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::Serialize;

use crate::replication::etcd::{Compare, Etcd, Op, prefix_end};

/// What etcd achieved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EtcdBaseline {
    pub endpoint: String,
    pub records: u64,
    pub records_per_sec: f64,
}

/// Writes `records` records of `record_bytes` bytes, one transaction each, with `writers`
/// concurrent writers, under a fresh key prefix. Errors name the endpoint.
pub async fn txn_per_record(
    endpoint: &str,
    records: u64,
    record_bytes: usize,
    writers: usize,
) -> Result<EtcdBaseline, String> {
    let etcd = Arc::new(Etcd::new(&[endpoint.to_string()]).map_err(|e| format!("--etcd: {e}"))?);
    let base = etcd.endpoints()[0].clone();
    let prefix = format!("/storch-bench/{}/", uuid::Uuid::new_v4());
    let value = vec![b'x'; record_bytes];
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers.max(1))
        .map(|_| {
            let (etcd, prefix, value, next) =
                (etcd.clone(), prefix.clone(), value.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= records {
                        return Ok::<(), String>(());
                    }
                    let key = format!("{prefix}{i:012}").into_bytes();
                    etcd.txn(
                        &[Compare::CreateRevision(key.clone(), 0)],
                        &[Op::Put {
                            key,
                            value: value.clone(),
                            lease: None,
                        }],
                        &[],
                    )
                    .await
                    .map_err(|e| format!("etcd at {}: {e}", etcd.endpoints()[0]))?;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let elapsed = started.elapsed();
    // Leave nothing behind.
    let _ = etcd
        .delete_range(prefix.as_bytes(), &prefix_end(prefix.as_bytes()))
        .await;
    Ok(EtcdBaseline {
        endpoint: base,
        records,
        records_per_sec: records as f64 / elapsed.as_secs_f64().max(1e-9),
    })
}

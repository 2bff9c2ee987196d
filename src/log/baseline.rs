//! The floor storch's log sits on, for `storch bench`: durable group-commit appends of
//! same-sized records straight into sled, with no envelopes, hashing or projection.

use std::path::Path;
use std::time::{Duration, Instant};

use super::LogError;

/// What raw appends achieved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RawCommit {
    pub records: u64,
    pub record_bytes: usize,
    pub batch: usize,
    pub elapsed: Duration,
}

impl RawCommit {
    pub fn records_per_sec(&self) -> f64 {
        self.records as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Writes `records` records of `record_bytes` bytes into a fresh sled database in `dir`,
/// `batch` per `apply_batch` + `flush_async` (what the group-commit writer does at best).
pub async fn raw_group_commit(
    dir: &Path,
    records: u64,
    record_bytes: usize,
    batch: usize,
) -> Result<RawCommit, LogError> {
    let storage = |e: sled::Error| LogError::Storage(e.to_string());
    let db = sled::Config::new().path(dir).open().map_err(storage)?;
    let tree = db.open_tree("raw").map_err(storage)?;
    let value = vec![0x5au8; record_bytes];
    let batch = batch.max(1);
    let started = Instant::now();
    let mut seq = 0u64;
    while seq < records {
        let mut b = sled::Batch::default();
        for _ in 0..batch.min((records - seq) as usize) {
            seq += 1;
            b.insert(&seq.to_be_bytes(), value.as_slice());
        }
        tree.apply_batch(b).map_err(storage)?;
        db.flush_async().await.map_err(storage)?;
    }
    Ok(RawCommit {
        records,
        record_bytes,
        batch,
        elapsed: started.elapsed(),
    })
}

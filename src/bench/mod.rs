//! Offline benchmarks (`storch bench`): the whole provisioning pipeline in-process against
//! fake backends, with baselines measured in the same run, cold replay, and the dashboard's
//! page loads (`ui`).
//!
//! Everything here measures; nothing asserts a speed. Results come as a [`ProvisionReport`] or
//! [`ReplayReport`], printed as a table or as stable JSON (field names are part of the
//! interface: add fields, never rename them).

pub mod etcd;
pub mod provision;
pub mod recorder;
pub mod replay;
pub mod ui;

pub use provision::{ArrayTarget, Mix, ProvisionOptions, ProvisionReport, run_provision};
pub use replay::{ReplayOptions, ReplayReport, run_replay};
pub use ui::{UiOptions, UiReport, run_ui};

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;

/// Runs `run` in the data dir `given`, or in a new temporary one removed afterwards.
async fn in_data_dir<T, F, Fut>(given: Option<std::path::PathBuf>, run: F) -> Result<T, String>
where
    F: FnOnce(std::path::PathBuf) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let (dir, temporary) = match given {
        Some(d) => (d, false),
        None => (
            std::env::temp_dir().join(format!("storch-bench-{}", uuid::Uuid::new_v4())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = run(dir.clone()).await;
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

/// A histogram of microseconds from 1 µs to an hour, 3 significant figures. (A histogram
/// without bounds starts tiny, and `saturating_record` would clamp to its start.)
pub fn micros_histogram() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// Percentiles of a latency distribution, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Percentiles {
    pub fn of(h: &hdrhistogram::Histogram<u64>) -> Percentiles {
        Percentiles {
            count: h.len(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// Peak resident set size of this process, in bytes (Linux `VmHWM`).
pub fn peak_rss_bytes() -> Option<u64> {
    proc_status_kib("VmHWM:").map(|k| k * 1024)
}

/// Current resident set size of this process, in bytes (Linux `VmRSS`).
pub fn rss_bytes() -> Option<u64> {
    proc_status_kib("VmRSS:").map(|k| k * 1024)
}

fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Bytes of all files under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The disk's fsync floor: p50 of `n` write(4 KiB) + fdatasync pairs in `dir`.
pub fn fsync_p50(dir: &Path, n: usize) -> std::io::Result<Duration> {
    use std::io::Write;
    let path = dir.join(".storch-bench-fsync");
    let mut f = std::fs::File::create(&path)?;
    let block = [0u8; 4096];
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        f.write_all(&block)?;
        let t = Instant::now();
        f.sync_data()?;
        times.push(t.elapsed());
    }
    drop(f);
    let _ = std::fs::remove_file(&path);
    times.sort();
    Ok(times.get(times.len() / 2).copied().unwrap_or_default())
}

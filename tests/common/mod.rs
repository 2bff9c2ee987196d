//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use storch::actors::{Core, CoreOptions, CoreRuntime, Readiness};

/// A fake backend config with the given pools (each with the given offers and 100 GiB).
pub fn fake_backend(name: &str, protocol: &str, pools: &[(&str, Value)]) -> Value {
    let mut p = serde_json::Map::new();
    for (pool, attrs) in pools {
        p.insert(
            pool.to_string(),
            json!({"attributes": attrs, "sizeBytes": 100u64 << 30}),
        );
    }
    json!({
        "version": 1,
        "storageDriverName": "fake",
        "backendName": name,
        "instanceName": name,
        "protocol": protocol,
        "pools": p,
    })
}

/// Offers of a typical SSD pool.
pub fn ssd() -> Value {
    json!({"media": {"offer": ["ssd"]}, "snapshots": {"offer": true},
           "provisioningType": {"offer": ["thin", "thick"]}, "IOPS": {"min": 100, "max": 10000}})
}

/// Offers of a typical HDD pool.
pub fn hdd() -> Value {
    json!({"media": {"offer": ["hdd"]}, "snapshots": {"offer": false},
           "provisioningType": {"offer": ["thick"]}})
}

pub fn opts(dir: &Path) -> CoreOptions {
    CoreOptions {
        data_dir: dir.to_path_buf(),
        ..CoreOptions::default()
    }
}

/// Starts a core on `dir` and waits until it is ready.
pub async fn start(dir: &Path) -> CoreRuntime {
    let rt = CoreRuntime::start(opts(dir)).await.expect("core starts");
    wait_ready(&rt.core()).await;
    rt
}

pub async fn wait_ready(core: &Core) {
    for _ in 0..500 {
        match core.readiness() {
            Readiness::Ready => return,
            Readiness::Failed(e) => panic!("core failed to start: {e}"),
            Readiness::Replaying => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    panic!("core not ready after 5 s");
}

/// Polls `f` until it returns true (up to ~10 s); for background work like reconciliation.
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

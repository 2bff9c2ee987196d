//! Everything the integration tests share, once: a core ([`start`], [`start_with`]), backend
//! documents ([`fake_backend`]), waiting for background work ([`eventually`]), the REST server
//! in-process ([`http`]) and as a child process ([`server`]), the fake Kubernetes API
//! ([`fake_kube`]) and a storch with its Kubernetes frontend on it ([`kube_env`]), a real etcd
//! ([`etcd`]), the real helm for the chart tests ([`helm`]), the array simulators ([`ontap`], [`solidfire`], [`eseries`], [`nexentastor`]),
//! the `storch-sim` binary as a child process ([`sim_process`]), the crash tests' load
//! ([`load`]) and their SIGKILL loop ([`crash`]), and the two rules of a shared test process ([`heavy`],
//! [`in_own_process`]).

pub mod crash;
pub mod eseries;
pub mod etcd;
pub mod fake_kube;
pub mod helm;
pub mod http;
pub mod kube_env;
pub mod load;
pub mod nexentastor;
pub mod ontap;
pub mod server;
pub mod sim_process;
pub mod solidfire;
pub mod webdriver;

pub use load::{Acked, check_acknowledged, load};
pub use server::Server;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use storch::actors::{
    Core, CoreError, CoreOptions, CoreRuntime, RequestCtx, SnapshotView, VolumeView,
};
use storch::model::{ResizeRequest, SnapshotRequest, VolumeConfig, VolumeRequest};

/// Creates a volume as a frontend does: the config is parsed into a request first, and a
/// parse error is the core's `Invalid`.
pub async fn add_volume(
    core: &Core,
    ctx: &RequestCtx,
    config: VolumeConfig,
) -> Result<VolumeView, CoreError> {
    core.add_volume(ctx, VolumeRequest::parse(config)?).await
}

/// Resizes a volume as a frontend does (the size parsed first).
pub async fn resize_volume(
    core: &Core,
    ctx: &RequestCtx,
    volume: &str,
    size: &str,
) -> Result<VolumeView, CoreError> {
    core.resize_volume(ctx, &ResizeRequest::parse(volume, size)?)
        .await
}

/// Takes a snapshot as a frontend does (the name checked first).
pub async fn create_snapshot(
    core: &Core,
    ctx: &RequestCtx,
    volume: &str,
    snapshot: &str,
) -> Result<SnapshotView, CoreError> {
    core.create_snapshot(ctx, &SnapshotRequest::parse(volume, "snapshot", snapshot)?)
        .await
}

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
        // In-process tests put local pools in temporary directories of their own.
        local_roots: vec![std::env::temp_dir()],
        ..CoreOptions::default()
    }
}

/// Starts a core on `dir` and waits until it is ready.
pub async fn start(dir: &Path) -> CoreRuntime {
    start_with(opts(dir)).await
}

/// Starts a core with `options` and waits until it is ready: the one way tests start a core
/// that serves (a standby or a core whose boot fails is started with `CoreRuntime::start`).
pub async fn start_with(options: CoreOptions) -> CoreRuntime {
    let rt = CoreRuntime::start(options).await.expect("core starts");
    wait_ready(&rt.core()).await;
    rt
}

pub async fn wait_ready(core: &Core) {
    match tokio::time::timeout(Duration::from_secs(30), core.wait_ready()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("core failed to start: {e}"),
        Err(_) => panic!("core not ready after 30 s"),
    }
}

/// Crash-test rounds: the number in environment variable `var`, else `default`.
pub fn rounds(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// GET `url`: the status and the JSON body (`Null` when it is not JSON).
pub async fn get_json(client: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = client.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// POSTs `body` to `{url}/trident/v1/{kind}` and asserts it was created.
pub async fn create(client: &reqwest::Client, url: &str, kind: &str, body: &Value) {
    let r = client
        .post(format!("{url}/trident/v1/{kind}"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    assert_eq!(status, 201, "POST {kind}: {}", r.text().await.unwrap());
}

/// Waits until backend `name` of the server at `url` is online: its driver initialised after a
/// start, so that requests placed on it are not refused as "still initializing".
pub async fn backend_online(client: &reqwest::Client, url: &str, name: &str) {
    let url = format!("{url}/trident/v1/backend/{name}");
    eventually(&format!("backend {name} online"), async || {
        get_json(client, &url).await.1["backend"]["state"] == "online"
    })
    .await;
}

/// Polls `f` every 10 ms until it returns true, for background work (reconciliation, a
/// standby following, a server reloading its config). Gives up after 30 s, a deadline for a
/// test that hangs rather than a measure of speed: nothing is asserted about how long it took.
pub async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..3000 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Held by the tests that load the whole machine (SIGKILL rounds under load, etcd takeovers
/// with short leases, Kubernetes e2e, the benchmarks): one of them runs at a time, beside the
/// light tests, so that none of them depends on a machine shared with another.
pub struct Heavy(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

/// Waits until no other heavy test runs; the guard lasts until the end of the test.
pub fn heavy() -> Heavy {
    static HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A heavy test that failed poisons the lock; the next one may run all the same.
    Heavy(HEAVY.lock().unwrap_or_else(|e| e.into_inner()))
}

/// For a test that needs something a process has only one of (the global `metrics` recorder:
/// `/metrics` installs Prometheus's, `storch bench` its own, and the first one installed
/// stays): runs the test again, alone, in a child process of this binary. `module` is the
/// caller's `module_path!()` and `name` the test's name. Returns true in that child (the test
/// body runs there); in the parent, asserts that the child ran exactly that test and passed,
/// and returns false (the caller returns).
pub fn in_own_process(module: &str, name: &str) -> bool {
    const VAR: &str = "STORCH_TEST_OWN_PROCESS";
    // `integration::api::health` → `api::health::NAME`, the name the harness filters on.
    let module = module.split_once("::").map_or("", |(_, rest)| rest);
    let test = format!("{module}::{name}");
    if std::env::var(VAR).is_ok_and(|v| v == test) {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(VAR, &test)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{test} in its own process: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

//! Shared helpers for the integration tests.
#![allow(dead_code)]

pub mod etcd;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use storch::actors::{
    Core, CoreError, CoreOptions, CoreRuntime, RequestCtx, SnapshotView, VolumeView,
};
use storch::model::{ResizeRequest, SnapshotRequest, VolumeConfig, VolumeRequest};

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
    match tokio::time::timeout(Duration::from_secs(5), core.wait_ready()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("core failed to start: {e}"),
        Err(_) => panic!("core not ready after 5 s"),
    }
}

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

/// A real `storch serve` child on 127.0.0.1:0, killed when dropped.
pub struct Server {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    pub log_path: std::path::PathBuf,
}

impl Server {
    /// Starts the binary on `data_dir`; its log (stderr) goes to `data_dir/../storch-<n>.log`.
    pub fn start(data_dir: &Path, envs: &[(&str, &str)]) -> Server {
        Server::start_with(data_dir, &[], envs)
    }

    /// Like [`Server::start`], with extra `serve` arguments (e.g. `--config FILE`).
    pub fn start_with(data_dir: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Server {
        use std::io::BufRead;
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log_path = data_dir
            .parent()
            .unwrap()
            .join(format!("storch-{}-{n}.log", std::process::id()));
        let log = std::fs::File::create(&log_path).unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_storch"));
        cmd.args(["serve", "--port", "0", "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(log);
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("storch starts");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        let url = match line.trim().strip_prefix("storch listening on ") {
            Some(url) => url.to_string(),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "unexpected first line {line:?}; log:\n{}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                );
            }
        };
        Server {
            child,
            url,
            log_path,
        }
    }

    /// Polls until the API answers something other than 503 (replay done).
    pub async fn wait_ready(&self, client: &reqwest::Client) {
        for _ in 0..1000 {
            if let Ok(r) = client
                .get(format!("{}/trident/v1/backend", self.url))
                .send()
                .await
                && r.status() != reqwest::StatusCode::SERVICE_UNAVAILABLE
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("server not ready; log:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Sends a signal by name (`HUP`, `TERM`, …).
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().to_string();
        let ok = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name} {pid} failed");
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        for _ in 0..500 {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(
                    status.success(),
                    "storch exited with {status}; log:\n{}",
                    self.log()
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        panic!("storch did not stop on SIGTERM; log:\n{}", self.log());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

/// What a crash-test load saw acknowledged.
#[derive(Default)]
pub struct Acked {
    /// Volumes whose create was acknowledged (and not deleted since).
    pub live: std::collections::BTreeSet<String>,
    /// Volumes whose delete was acknowledged.
    pub deleted: std::collections::BTreeSet<String>,
}

/// Creates `TAG-0`, `TAG-1`, … of `size` in `class` until the server goes away, deleting an
/// acknowledged volume every third step; records what was acknowledged.
pub async fn load(
    client: reqwest::Client,
    url: String,
    acked: std::sync::Arc<std::sync::Mutex<Acked>>,
    tag: String,
    size: &'static str,
    class: &'static str,
) {
    for i in 0.. {
        let name = format!("{tag}-{i}");
        let body = serde_json::json!({"name": name, "size": size, "storageClass": class});
        match client
            .post(format!("{url}/trident/v1/volume"))
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status() == reqwest::StatusCode::CREATED => {
                acked.lock().unwrap().live.insert(name.clone());
            }
            Ok(_) => {}
            Err(_) => return, // the server is gone
        }
        if i % 3 == 2 {
            // A delete in flight when the server dies may or may not happen: the volume leaves
            // `live` before the request is sent, and joins `deleted` only once acknowledged.
            let victim = acked.lock().unwrap().live.pop_first();
            if let Some(v) = victim {
                match client
                    .delete(format!("{url}/trident/v1/volume/{v}"))
                    .send()
                    .await
                {
                    Ok(r) if r.status() == reqwest::StatusCode::OK => {
                        acked.lock().unwrap().deleted.insert(v);
                    }
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        }
    }
}

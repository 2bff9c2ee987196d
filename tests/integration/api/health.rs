//! Probes and metrics on a real socket: `/livez`, `/readyz` (ready, replaying, boot failed),
//! and `/metrics` values moving with operations.

use std::path::Path;
use std::time::Duration;

use crate::support::http::*;
use serde_json::json;
use storch::actors::{CoreOptions, CoreRuntime, Readiness, RequestCtx};
use storch::api::ServeOptions;
use storch::log::{Durability, EventLog};

/// The value of the first sample of `name` whose labels include every one of `labels`.
fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            let (series, _) = l.rsplit_once(' ').unwrap_or((l, ""));
            let metric = series.split('{').next().unwrap();
            metric == name && labels.iter().all(|want| series.contains(want))
        })
        .and_then(|l| l.rsplit_once(' ').unwrap().1.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_when_ready() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    let r = get(&c, &s.url("/livez")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json, json!({"status": "ok"}));
    let r = get(&c, &s.url("/readyz")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json, json!({"status": "ok"}));
    assert!(r.headers.contains_key("x-request-id"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_with_operations() {
    if !crate::support::in_own_process(module_path!(), "metrics_move_with_operations") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    let mut backend = crate::support::fake_backend("lab", "file", &[("p1", crate::support::ssd())]);
    backend["password"] = json!("canary-pw-9001");
    assert_eq!(
        post(&c, &s.url("/trident/v1/backend"), backend)
            .await
            .status,
        201
    );
    let class = json!({"name": "gold", "attributes": {"media": "ssd"}});
    assert_eq!(
        post(&c, &s.url("/trident/v1/storageclass"), class)
            .await
            .status,
        201
    );

    let scrape = || async {
        let r = c.get(s.url("/metrics")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain; version=0.0.4")
        );
        r.text().await.unwrap()
    };
    let create_ok = [r#"operation="create_volume""#, r#"outcome="ok""#];
    let before = scrape().await;
    assert_eq!(
        sample(&before, "storch_volumes", &[r#"state="online""#]),
        Some(0.0)
    );
    let creates_before = sample(
        &before,
        "storch_operation_duration_seconds_count",
        &create_ok,
    )
    .unwrap_or(0.0);
    assert_eq!(
        sample(
            &before,
            "storch_build_info",
            &[concat!("version=\"", env!("CARGO_PKG_VERSION"), "\"")]
        ),
        Some(1.0)
    );
    assert_eq!(sample(&before, "storch_ready", &[]), Some(1.0));
    assert_eq!(
        sample(&before, "storch_backends", &[r#"state="online""#]),
        Some(1.0)
    );
    let pool = [r#"backend="lab""#, r#"pool="p1""#];
    assert_eq!(
        sample(&before, "storch_pool_capacity_bytes", &pool),
        Some((100u64 << 30) as f64)
    );
    assert_eq!(sample(&before, "storch_pool_used_bytes", &pool), Some(0.0));
    assert_eq!(
        sample(&before, "storch_pool_free_bytes", &pool),
        Some((100u64 << 30) as f64)
    );
    assert_eq!(
        sample(&before, "storch_backend_queue_depth", &[r#"backend="lab""#]),
        Some(0.0)
    );
    assert_eq!(
        sample(&before, "storch_backend_in_flight", &[r#"backend="lab""#]),
        Some(0.0)
    );

    let body = json!({"name": "v1", "size": "1Gi", "storageClass": "gold"});
    assert_eq!(
        post(&c, &s.url("/trident/v1/volume"), body).await.status,
        201
    );

    let after = scrape().await;
    assert_eq!(
        sample(&after, "storch_volumes", &[r#"state="online""#]),
        Some(1.0)
    );
    let creates_after = sample(
        &after,
        "storch_operation_duration_seconds_count",
        &create_ok,
    )
    .unwrap();
    assert!(
        creates_after >= creates_before + 1.0,
        "{creates_before} → {creates_after}"
    );
    assert_eq!(
        sample(&after, "storch_pool_used_bytes", &pool),
        Some((1u64 << 30) as f64)
    );
    assert_eq!(
        sample(&after, "storch_pool_free_bytes", &pool),
        Some(((100u64 << 30) - (1u64 << 30)) as f64)
    );
    // The core's other metrics, and the HTTP ones by route template.
    for name in [
        "storch_log_append_seconds_count",
        "storch_log_flush_seconds_count",
        "storch_events_appended_total",
    ] {
        assert!(sample(&after, name, &[]).unwrap_or(0.0) > 0.0, "{name}");
    }
    assert!(
        sample(
            &after,
            "storch_driver_call_seconds_count",
            &[r#"backend="lab""#, r#"outcome="ok""#]
        )
        .unwrap_or(0.0)
            > 0.0,
        "{after}"
    );
    let http = [
        r#"route="/trident/v1/volume""#,
        r#"method="POST""#,
        r#"status="201""#,
    ];
    assert!(sample(&after, "storch_http_requests_total", &http).unwrap() >= 1.0);
    assert!(sample(&after, "storch_http_request_duration_seconds_count", &http).unwrap() >= 1.0);
    assert!(!after.contains("canary-pw-9001"));
    s.stop().await;
}

/// A data dir whose log cannot be replayed: one backend, then the first record damaged (and
/// the checkpoint dropped, so replay reads it).
async fn corrupt_data_dir(dir: &Path) {
    let rt = crate::support::start(dir).await;
    let doc = crate::support::fake_backend("lab", "file", &[("p1", crate::support::ssd())]);
    rt.core()
        .add_backend(&RequestCtx::new("setup"), doc)
        .await
        .unwrap();
    rt.shutdown().await;
    let log = EventLog::open(&dir.join("log"), Durability::Flush).unwrap();
    log.truncate_after(1).await.unwrap();
    log.corrupt_for_tests(1, |raw| {
        let i = raw.len() - 33;
        raw[i] ^= 0x01;
    });
    log.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_with_the_reason_when_boot_failed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    corrupt_data_dir(&data).await;
    let rt = CoreRuntime::start(crate::support::opts(&data))
        .await
        .unwrap();
    let core = rt.core();
    crate::support::eventually("the boot to fail", async || {
        matches!(core.readiness(), Readiness::Failed(_))
    })
    .await;
    let s = TestServer::start(rt, ServeOptions::default()).await;
    let c = storch::net::client();
    let r = get(&c, &s.url("/livez")).await;
    assert_eq!(r.status, 200);
    let r = get(&c, &s.url("/readyz")).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(r.json["status"], "unavailable");
    let reason = r.json["reasons"][0].as_str().unwrap();
    assert!(
        reason.contains("sequence 1") || reason.contains("seq"),
        "{reason}"
    );
    assert!(reason.contains("storch events verify"), "{reason}");
    let r = get(&c, &s.url("/trident/v1/backend")).await;
    assert_eq!(r.status, 500);
    let metrics = c
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(sample(&metrics, "storch_ready", &[]), Some(0.0));
    s.stop().await;
}

/// With a log of thousands of events and no checkpoint, `/readyz` is polled from the moment
/// the server is up: every answer is either 503 "being replayed" or (from some point on) 200,
/// never anything else, and never 503 again once 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_during_replay_of_a_large_log() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    {
        let rt = crate::support::start_with(CoreOptions {
            durability: Durability::Write,
            ..crate::support::opts(&data)
        })
        .await;
        let core = rt.core();
        let doc = crate::support::fake_backend("lab", "file", &[("p1", crate::support::ssd())]);
        core.add_backend(&RequestCtx::new("setup"), doc)
            .await
            .unwrap();
        let class = storch::model::StorageClassConfig::from_json(br#"{"name":"gold"}"#).unwrap();
        core.add_storage_class(&RequestCtx::new("setup"), class)
            .await
            .unwrap();
        // 1500 volumes × 3 events, 50 at a time.
        let names: Vec<String> = (0..1500).map(|i| format!("v{i}")).collect();
        for batch in names.chunks(50) {
            let creates =
                batch.iter().map(|name| {
                    let config: storch::model::VolumeConfig = serde_json::from_value(json!({
                        "name": name, "size": "1Mi", "storageClass": "gold"
                    }))
                    .unwrap();
                    let core = core.clone();
                    async move {
                        crate::support::add_volume(&core, &RequestCtx::new("load"), config).await
                    }
                });
            for r in futures::future::join_all(creates).await {
                r.unwrap();
            }
        }
        rt.shutdown().await;
        // Drop the shutdown checkpoint so the next boot replays every event.
        let log = EventLog::open(&data.join("log"), Durability::Flush).unwrap();
        let head = log.verify().events;
        assert!(head > 4000, "{head}");
        log.truncate_after(head - 1).await.unwrap();
        log.shutdown().await.unwrap();
    }

    let rt = CoreRuntime::start(crate::support::opts(&data))
        .await
        .unwrap();
    let s = TestServer::start(rt, ServeOptions::default()).await;
    let c = storch::net::client();
    let mut replaying = 0;
    let mut ready = false;
    for _ in 0..3000 {
        let r = get(&c, &s.url("/readyz")).await;
        match r.status {
            503 => {
                assert!(!ready, "not ready again after being ready");
                // Replaying, then (briefly) the backend from the log starting.
                let replay = json!({"status": "unavailable", "reasons": ["the event log is being replayed"]});
                let starting = json!({"status": "unavailable", "reasons": ["backends still initialising: lab"]});
                assert!(r.json == replay || r.json == starting, "{}", r.json);
                replaying += usize::from(r.json == replay);
            }
            200 => {
                ready = true;
                break;
            }
            other => panic!("unexpected {other}: {}", r.json),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(ready, "never ready");
    eprintln!("/readyz answered 503 (replaying) {replaying} times before 200");
    let r = get(&c, &s.url("/trident/v1/volume/v1499")).await;
    assert_eq!(r.status, 200);
    s.stop().await;
}

/// An ONTAP backend config whose management LIF is `lif`: a socket the test holds that accepts
/// connections and never answers, so the driver's first call waits (for an hour) until the
/// test closes it.
async fn ontap_backend_at(dir: &Path, lif: std::net::SocketAddr) -> serde_json::Value {
    let sim = crate::support::ontap::sim_in(dir, Default::default()).await;
    let mut doc = crate::support::ontap::backend(
        &sim,
        "ontap-nas",
        json!({"backendName": "slow", "apiTimeout": "1h"}),
    );
    sim.stop().await;
    doc["managementLIF"] = json!(lif.to_string());
    doc
}

async fn readyz_reasons(c: &reqwest::Client, url: &str) -> (u16, Vec<String>) {
    let r = get(c, &format!("{url}/readyz")).await;
    let reasons = r.json["reasons"]
        .as_array()
        .map(|a| a.iter().map(|r| r.as_str().unwrap().to_string()).collect())
        .unwrap_or_default();
    (r.status, reasons)
}

/// `/readyz` is not ready while the config file is being applied (here: its backend waits on
/// an array that does not answer), and becomes ready once the backend has definitively
/// failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_waits_for_the_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let doc = ontap_backend_at(tmp.path(), hole.local_addr().unwrap()).await;
    let config = tmp.path().join("storch.yaml");
    std::fs::write(&config, json!({"backends": [doc]}).to_string()).unwrap();
    let data = tmp.path().join("data");
    let mut server = crate::support::server::Server::start_with(
        &data,
        &["--config", config.to_str().unwrap()],
        &[],
    );
    let c = storch::net::client();
    crate::support::eventually("the config file pending in /readyz", async || {
        let (status, reasons) = readyz_reasons(&c, &server.url).await;
        status == 503
            && reasons
                .iter()
                .any(|r| r == "the config file is not applied yet")
    })
    .await;
    drop(hole);
    crate::support::eventually("/readyz ready once the backend failed", async || {
        readyz_reasons(&c, &server.url).await.0 == 200
    })
    .await;
    server.stop();
}

/// After a restart, a backend from the log that is still initialising holds `/readyz` back,
/// and a create that only it could serve is a 503 with `Retry-After` (retryable), not a 400;
/// nothing is recorded for it. Once the backend has failed, the same create is the usual 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_still_initialising_makes_creates_retryable() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = crate::support::ontap::sim_in(tmp.path(), Default::default()).await;
    let doc = crate::support::ontap::backend(
        &sim,
        "ontap-nas",
        json!({"backendName": "slow", "apiTimeout": "1h"}),
    );
    let lif: std::net::SocketAddr = sim.management_lif().parse().unwrap();
    let data = tmp.path().join("data");
    let c = storch::net::client();
    let mut server = crate::support::server::Server::start(&data, &[]);
    server.wait_ready(&c).await;
    let url = server.url.clone();
    assert_eq!(
        post(&c, &format!("{url}/trident/v1/backend"), doc)
            .await
            .status,
        201
    );
    let class = json!({"name": "any", "attributes": {"backendType": "ontap-nas"}});
    assert_eq!(
        post(&c, &format!("{url}/trident/v1/storageclass"), class)
            .await
            .status,
        201
    );
    server.stop();
    sim.stop().await;

    let hole = std::net::TcpListener::bind(lif).unwrap();
    let mut server = crate::support::server::Server::start(&data, &[]);
    let url = server.url.clone();
    crate::support::eventually("the backend initialising in /readyz", async || {
        let (status, reasons) = readyz_reasons(&c, &url).await;
        status == 503
            && reasons
                .iter()
                .any(|r| r == "backends still initialising: slow")
    })
    .await;
    let events = get(&c, &format!("{url}/trident/v1/events")).await.json;
    let volume = json!({"name": "v1", "size": "1Gi", "storageClass": "any"});
    let r = post(&c, &format!("{url}/trident/v1/volume"), volume.clone()).await;
    assert_eq!(r.status, 503, "{:?}", r.json);
    assert_eq!(r.headers["retry-after"], "1");
    let msg = r.json["error"].as_str().unwrap();
    assert!(msg.contains("slow still initialising"), "{msg}");
    assert_eq!(
        get(&c, &format!("{url}/trident/v1/events")).await.json,
        events,
        "nothing recorded"
    );

    drop(hole);
    crate::support::eventually("/readyz ready once the backend failed", async || {
        readyz_reasons(&c, &url).await.0 == 200
    })
    .await;
    let r = post(&c, &format!("{url}/trident/v1/volume"), volume).await;
    assert_eq!(r.status, 400, "{:?}", r.json);
    server.stop();
}

/// A core on `data` served in-process, with backend `lab` (pool `p1`, ssd).
async fn served_with_lab(data: &Path) -> (storch::actors::Core, TestServer) {
    let rt = crate::support::start(data).await;
    let core = rt.core();
    let s = TestServer::start(rt, ServeOptions::default()).await;
    let backend = crate::support::fake_backend("lab", "file", &[("p1", crate::support::ssd())]);
    let r = post(
        &storch::net::client(),
        &s.url("/trident/v1/backend"),
        backend,
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.json);
    (core, s)
}

/// A disk that fails under the log (the log's flush failpoint): writes get 503 with the
/// reason and `Retry-After`, `/readyz` says why, `storch_log_writable` drops to 0, reads go
/// on, and nothing acknowledged before is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_flush_refuses_writes_with_the_reason_and_reads_go_on() {
    if !crate::support::in_own_process(
        module_path!(),
        "a_failed_log_flush_refuses_writes_with_the_reason_and_reads_go_on",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (core, s) = served_with_lab(&data).await;
    let c = storch::net::client();
    let metrics = || async { get_text(&c, &s.url("/metrics")).await };
    assert_eq!(
        sample(&metrics().await, "storch_log_writable", &[]),
        Some(1.0)
    );

    core.fail_next_log_flush_for_tests();
    let class = json!({"name": "gold", "attributes": {"media": "ssd"}});
    let r = post(&c, &s.url("/trident/v1/storageclass"), class.clone()).await;
    assert_eq!(r.status, 503, "{:?}", r.json);
    assert_eq!(r.headers["retry-after"], "1");
    let msg = r.json["error"].as_str().unwrap();
    assert!(msg.contains("the event log's disk failed"), "{msg}");
    assert!(msg.contains("reads go on"), "{msg}");
    assert!(!msg.contains(data.to_str().unwrap()), "no paths: {msg}");
    // Later writes too, without another failure.
    let r = post(&c, &s.url("/trident/v1/storageclass"), class).await;
    assert_eq!(r.status, 503, "{:?}", r.json);

    let r = get(&c, &s.url("/readyz")).await;
    assert_eq!(r.status, 503);
    let reason = r.json["reasons"][0].as_str().unwrap();
    assert!(reason.contains("event log poisoned"), "{reason}");
    assert!(reason.contains("injected"), "{reason}");
    assert_eq!(
        sample(&metrics().await, "storch_log_writable", &[]),
        Some(0.0)
    );
    let r = get(&c, &s.url("/trident/v1/backend/lab")).await;
    assert_eq!(r.status, 200, "reads go on: {:?}", r.json);
    assert_eq!(
        get(&c, &s.url("/trident/v1/storageclass/gold"))
            .await
            .status,
        404
    );
    s.stop().await;

    // After a restart the log takes writes again, with what was acknowledged. (The refused
    // batch may or may not have reached the disk: it was never acknowledged either way.)
    let s = TestServer::plain(&data).await;
    let r = get(&c, &s.url("/trident/v1/backend/lab")).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let class = json!({"name": "silver", "attributes": {"media": "ssd"}});
    assert_eq!(
        post(&c, &s.url("/trident/v1/storageclass"), class)
            .await
            .status,
        201
    );
    s.stop().await;
}

/// A log disk that fills up (an injected free-space figure below the default reserve of
/// 64 MiB): writes get 503 naming free and reserved space, `/readyz` says so,
/// `storch_log_writable` drops to 0, reads go on; once space is freed everything comes back
/// without a restart. (A real filesystem that fills up: `cli::disk`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_log_disk_refuses_writes_until_space_is_freed() {
    if !crate::support::in_own_process(
        module_path!(),
        "a_full_log_disk_refuses_writes_until_space_is_freed",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (core, s) = served_with_lab(&data).await;
    let c = storch::net::client();
    let free = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1 << 20));
    let source = free.clone();
    core.set_log_free_bytes_for_tests(move || source.load(std::sync::atomic::Ordering::SeqCst));

    let class = json!({"name": "gold", "attributes": {"media": "ssd"}});
    let r = post(&c, &s.url("/trident/v1/storageclass"), class.clone()).await;
    assert_eq!(r.status, 503, "{:?}", r.json);
    assert_eq!(r.headers["retry-after"], "1");
    let msg = r.json["error"].as_str().unwrap();
    assert!(
        msg.contains("the event log's disk is full: 1 MiB free, 64 MiB reserved"),
        "{msg}"
    );
    assert!(msg.contains("resume by themselves"), "{msg}");
    assert!(!msg.contains(data.to_str().unwrap()), "no paths: {msg}");
    let (status, reasons) = readyz_reasons(&c, &s.url("")).await;
    assert_eq!(status, 503);
    assert!(reasons[0].contains("disk is full"), "{reasons:?}");
    let metrics = || async { get_text(&c, &s.url("/metrics")).await };
    assert_eq!(
        sample(&metrics().await, "storch_log_writable", &[]),
        Some(0.0)
    );
    let r = get(&c, &s.url("/trident/v1/backend/lab")).await;
    assert_eq!(r.status, 200, "reads go on: {:?}", r.json);

    free.store(1 << 30, std::sync::atomic::Ordering::SeqCst);
    crate::support::eventually("readiness to come back", async || {
        readyz_reasons(&c, &s.url("")).await.0 == 200
    })
    .await;
    assert_eq!(
        sample(&metrics().await, "storch_log_writable", &[]),
        Some(1.0)
    );
    let r = post(&c, &s.url("/trident/v1/storageclass"), class).await;
    assert_eq!(r.status, 201, "{:?}", r.json);
    assert_eq!(
        get(&c, &s.url("/trident/v1/storageclass/gold"))
            .await
            .status,
        200
    );
    s.stop().await;
}

async fn get_text(c: &reqwest::Client, url: &str) -> String {
    c.get(url).send().await.unwrap().text().await.unwrap()
}

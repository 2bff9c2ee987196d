//! Replication of the event log through a real etcd (Debian's `etcd-server`, started on free
//! loopback ports): standbys follow and serve reads, a SIGKILLed leader is replaced with every
//! acknowledged write, a fenced-out leader acknowledges nothing and its unacknowledged tail is
//! cut back when it rejoins, and an etcd restart loses nothing that was acknowledged.
//! `STORCH_ETCD_CRASH_ROUNDS` sets the takeover rounds (default 4).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::etcd::Etcd;
use crate::support::fake_kube::FakeKube;
use crate::support::http::TestServer;
use crate::support::*;
use serde_json::{Value, json};
use storch::actors::{CoreOptions, CoreRuntime, Readiness, RequestCtx};
use storch::k8s::{Frontend, KubeOptions, KubeSource};
use storch::log::{Durability, EventLog};
use storch::replication::{Node, ReplicationOptions};

/// The secrets key every instance of a test cluster shares, written into `dir`.
fn shared_key(dir: &Path) -> String {
    let path = dir.join("secret.key");
    std::fs::write(&path, rand::random::<[u8; 32]>()).unwrap();
    path.to_str().unwrap().to_string()
}

fn serve_args<'a>(etcd: &'a Etcd, key: &'a str, id: &'a str) -> Vec<&'a str> {
    serve_args_ttl(etcd, key, id, "2s")
}

fn serve_args_ttl<'a>(etcd: &'a Etcd, key: &'a str, id: &'a str, ttl: &'a str) -> Vec<&'a str> {
    vec![
        "--etcd-endpoints",
        &etcd.endpoint,
        "--etcd-lease-ttl",
        ttl,
        "--etcd-identity",
        id,
        "--secrets-key-file",
        key,
    ]
}

/// Waits until `/readyz` says what `role` expects: `leader` (200) or `standby of X`.
async fn wait_role(client: &reqwest::Client, server: &Server, role: &str) {
    let mut last = Value::Null;
    for _ in 0..1500 {
        if let Ok(r) = client.get(format!("{}/readyz", server.url)).send().await {
            let status = r.status().as_u16();
            last = r.json().await.unwrap_or(Value::Null);
            let ok = match role.strip_prefix("standby of ") {
                None => status == 200,
                Some(leader) => {
                    status == 503
                        && last["status"] == "standby"
                        && last["reasons"][0]
                            .as_str()
                            .is_some_and(|r| r.ends_with(&format!("the leader is {leader}")))
                }
            };
            if ok {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{} never became {role} (last /readyz: {last}); log:\n{}",
        server.url,
        server.log()
    );
}

const CANARY: &str = "canary-password-4471";

async fn volume_names(client: &reqwest::Client, url: &str) -> BTreeSet<String> {
    let (status, list) = get_json(client, &format!("{url}/trident/v1/volume")).await;
    assert_eq!(status, 200, "{list}");
    serde_json::from_value(list["volumes"].clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standbys_follow_and_take_over_from_a_killed_leader_with_every_acknowledged_write() {
    let _heavy = crate::support::heavy();
    let rounds = crate::support::rounds("STORCH_ETCD_CRASH_ROUNDS", 4);
    let etcd = Etcd::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let key = shared_key(tmp.path());
    let dirs = [tmp.path().join("a"), tmp.path().join("b")];
    let ids = ["a", "b"];
    let client = storch::net::client();

    let mut servers = [
        Some(Server::start_with(
            &dirs[0],
            &serve_args(&etcd, &key, ids[0]),
            &[],
        )),
        None,
    ];
    wait_role(&client, servers[0].as_ref().unwrap(), "leader").await;
    servers[1] = Some(Server::start_with(
        &dirs[1],
        &serve_args(&etcd, &key, ids[1]),
        &[],
    ));
    wait_role(&client, servers[1].as_ref().unwrap(), "standby of a").await;
    // Kubernetes' readiness probe, `/readyz?standby=ok`, counts the caught-up standby as
    // ready (the pod role label, not readiness, keeps clients on the leader).
    for (server, status) in [(&servers[0], "ok"), (&servers[1], "standby")] {
        let url = format!("{}/readyz?standby=ok", server.as_ref().unwrap().url);
        let (code, body) = get_json(&client, &url).await;
        assert_eq!(
            (code, body["status"].as_str()),
            (200, Some(status)),
            "{body}"
        );
    }

    // One array both instances reach (the fake array keeps its state in a file).
    let mut backend = fake_backend("shared", "file", &[("p1", ssd()), ("p2", ssd())]);
    backend["statePath"] = json!(tmp.path().join("array.json"));
    // A secret, sealed in the log: every leader must open it, and etcd never sees it.
    backend["password"] = json!(CANARY);
    let leader_url = servers[0].as_ref().unwrap().url.clone();
    create(&client, &leader_url, "backend", &backend).await;
    create(
        &client,
        &leader_url,
        "storageclass",
        &json!({"name": "any"}),
    )
    .await;

    // A standby serves reads and refuses writes, naming the leader.
    let standby_url = servers[1].as_ref().unwrap().url.clone();
    for _ in 0..500 {
        let (status, _) = get_json(
            &client,
            &format!("{standby_url}/trident/v1/storageclass/any"),
        )
        .await;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, class) = get_json(
        &client,
        &format!("{standby_url}/trident/v1/storageclass/any"),
    )
    .await;
    assert_eq!(
        status, 200,
        "the standby serves the replicated class: {class}"
    );
    let r = client
        .post(format!("{standby_url}/trident/v1/volume"))
        .json(&json!({"name": "on-standby", "size": "1Gi", "storageClass": "any"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("standby") && text.contains("the leader is a"),
        "{text}"
    );

    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut leader = 0;
    for round in 0..rounds {
        let url = servers[leader].as_ref().unwrap().url.clone();
        let tasks: Vec<_> = (0..6)
            .map(|c| {
                tokio::spawn(load(
                    client.clone(),
                    url.clone(),
                    acked.clone(),
                    format!("r{round}c{c}"),
                    "1Gi",
                    "any",
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(150 + rand::random::<u64>() % 400)).await;
        servers[leader].as_mut().unwrap().kill();
        for t in tasks {
            t.await.unwrap();
        }
        let other = 1 - leader;
        wait_role(&client, servers[other].as_ref().unwrap(), "leader").await;
        // The new leader opened the sealed password with the shared key.
        let url = &servers[other].as_ref().unwrap().url;
        let mut state = Value::Null;
        for _ in 0..500 {
            state = get_json(&client, &format!("{url}/trident/v1/backend/shared"))
                .await
                .1;
            if state["backend"]["state"] == "online" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            state["backend"]["state"], "online",
            "round {round}: {state}"
        );
        let names = volume_names(&client, &servers[other].as_ref().unwrap().url).await;
        {
            let acked = acked.lock().unwrap();
            for v in &acked.live {
                assert!(
                    names.contains(v),
                    "round {round}: acknowledged volume {v} is lost"
                );
            }
            for v in &acked.deleted {
                assert!(
                    !names.contains(v),
                    "round {round}: acknowledged delete of {v} came back"
                );
            }
        }
        // The killed one comes back as a standby of the new leader and catches up.
        servers[leader] = Some(Server::start_with(
            &dirs[leader],
            &serve_args(&etcd, &key, ids[leader]),
            &[],
        ));
        let back = servers[leader].as_ref().unwrap();
        wait_role(&client, back, &format!("standby of {}", ids[other])).await;
        let new_leader_url = servers[other].as_ref().unwrap().url.clone();
        let mut seen = (BTreeSet::new(), BTreeSet::new());
        for _ in 0..500 {
            seen = (
                volume_names(&client, &back.url).await,
                volume_names(&client, &new_leader_url).await,
            );
            if seen.0 == seen.1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            seen.0,
            seen.1,
            "round {round}: the standby did not catch up; its log:\n{}\nthe leader's log:\n{}",
            back.log(),
            servers[other].as_ref().unwrap().log()
        );
        leader = other;
    }
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    assert!(!acked.live.is_empty(), "the load made no volumes at all");
    let everything = etcd
        .call("/v3/kv/range", json!({"key": "AA==", "range_end": "AA=="}))
        .await;
    let kvs = everything["kvs"].as_array().expect("etcd holds the log");
    for kv in kvs {
        use base64::Engine;
        let value = base64::engine::general_purpose::STANDARD
            .decode(kv["value"].as_str().unwrap_or_default())
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&value).contains(CANARY),
            "the password is in etcd in clear text"
        );
    }

    // Both logs are the same chain, record for record.
    for s in servers.iter_mut().flatten() {
        s.stop();
    }
    let a = EventLog::open(&dirs[0].join("log"), Durability::Flush).unwrap();
    let b = EventLog::open(&dirs[1].join("log"), Durability::Flush).unwrap();
    assert_eq!(a.verify().first_bad, None);
    assert_eq!(b.verify().first_bad, None);
    assert_eq!(a.head(), b.head(), "both logs end at the same record");
    let head = a.head().0;
    for seq in 1..=head {
        assert_eq!(a.raw_frame(seq), b.raw_frame(seq), "record {seq} differs");
    }
    eprintln!(
        "{rounds} takeovers: {} volumes acknowledged, {} deletes, {head} events",
        acked.live.len(),
        acked.deleted.len()
    );
}

fn node(etcd: &Etcd, id: &str) -> Arc<Node> {
    node_checkpointing(etcd, id, storch::replication::DEFAULT_CHECKPOINT_EVERY)
}

/// A node whose leadership stores a checkpoint in etcd every `every` records.
fn node_checkpointing(etcd: &Etcd, id: &str, every: u64) -> Arc<Node> {
    Node::new(ReplicationOptions {
        endpoints: vec![etcd.endpoint.clone()],
        prefix: "/storch-test".into(),
        lease_ttl: Duration::from_secs(2),
        identity: id.into(),
        checkpoint_every: every,
    })
    .unwrap()
}

async fn start_replicated(dir: &Path, node: Arc<Node>) -> CoreRuntime {
    CoreRuntime::start(CoreOptions {
        data_dir: dir.to_path_buf(),
        replication: Some(node),
        ..CoreOptions::default()
    })
    .await
    .unwrap()
}

async fn wait_standby_of(rt: &CoreRuntime, leader: &str) {
    wait_readiness(
        "a standby",
        rt,
        |r| matches!(r, Readiness::Standby { leader: l } if l == leader),
    )
    .await;
}

async fn wait_readiness(what: &str, rt: &CoreRuntime, f: impl Fn(&Readiness) -> bool) {
    let core = rt.core();
    eventually(what, async || f(&core.readiness())).await;
}

fn volume(name: &str) -> storch::model::VolumeConfig {
    serde_json::from_value(json!({"name": name, "size": "1Gi", "storageClass": "any"})).unwrap()
}

/// A leader on `dir` with backend `f` and class `any`.
async fn set_up_leader(etcd: &Etcd, dir: &Path) -> CoreRuntime {
    let rt = start_replicated(dir, node(etcd, "a")).await;
    wait_ready(&rt.core()).await;
    set_up(&rt).await;
    rt
}

async fn set_up(rt: &CoreRuntime) {
    let ctx = RequestCtx::new("setup");
    let core = rt.core();
    core.add_backend(&ctx, fake_backend("f", "file", &[("p", ssd())]))
        .await
        .unwrap();
    core.add_storage_class(
        &ctx,
        serde_json::from_value(json!({"name": "any"})).unwrap(),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_out_leader_acknowledges_nothing_and_its_tail_is_cut_back_when_it_rejoins() {
    let _heavy = crate::support::heavy();
    let etcd = Etcd::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));

    let a = set_up_leader(&etcd, &dir_a).await;
    let ctx = RequestCtx::new("t");
    add_volume(&a.core(), &ctx, volume("before")).await.unwrap();

    // Another instance takes the leadership from under a (as after a's lease expired while it
    // was paused): the leader key is deleted, and b wins the election.
    let b64 = |s: &str| base64_encode(s.as_bytes());
    let r = etcd
        .call(
            "/v3/kv/deleterange",
            json!({"key": b64("/storch-test/leader")}),
        )
        .await;
    assert_eq!(r["deleted"], "1", "{r}");
    let b = start_replicated(&dir_b, node(&etcd, "b")).await;
    wait_ready(&b.core()).await;
    assert!(
        b.core().get_volume("before").is_ok(),
        "b took in a's history"
    );

    // a still thinks it leads: its next write is fenced out, acknowledged to nobody, and a
    // stops taking writes.
    let err = add_volume(&a.core(), &ctx, volume("fenced"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, storch::actors::CoreError::LogUnavailable(_)),
        "{err:?}"
    );
    wait_readiness(
        "a to give up",
        &a,
        |r| matches!(r, Readiness::Failed(why) if why.contains("lost the etcd leadership")),
    )
    .await;
    assert!(!a.core().health().ready());
    add_volume(&b.core(), &ctx, volume("after")).await.unwrap();
    a.shutdown().await;

    // a's log ends with the fenced write's intent, which etcd never took.
    let log_a = EventLog::open(&dir_a.join("log"), Durability::Flush).unwrap();
    let last = log_a.read_from(log_a.head().0).next().unwrap().unwrap();
    assert_eq!(last.stream, "volume/fenced", "{last:?}");
    drop(log_a);

    // Restarted, a cuts that tail back, follows b and serves what b acknowledged.
    let a = start_replicated(&dir_a, node(&etcd, "a")).await;
    wait_standby_of(&a, "b").await;
    eventually("a to see b's write", async || {
        a.core().get_volume("after").is_ok()
    })
    .await;
    assert!(a.core().get_volume("before").is_ok());
    assert!(
        a.core().get_volume("fenced").is_err(),
        "the unacknowledged create is gone"
    );
    let err = add_volume(&a.core(), &ctx, volume("x")).await.unwrap_err();
    assert_eq!(err, storch::actors::CoreError::Standby("b".into()));

    b.shutdown().await;
    // b resigned on a clean stop: a takes over at once, without waiting out a lease.
    wait_ready(&a.core()).await;
    add_volume(&a.core(), &ctx, volume("a-again"))
        .await
        .unwrap();
    a.shutdown().await;

    let la = EventLog::open(&dir_a.join("log"), Durability::Flush).unwrap();
    let lb = EventLog::open(&dir_b.join("log"), Durability::Flush).unwrap();
    assert_eq!(la.verify().first_bad, None);
    let shared = lb.head().0;
    assert!(la.head().0 > shared);
    for seq in 1..=shared {
        assert_eq!(la.raw_frame(seq), lb.raw_frame(seq), "record {seq} differs");
    }
    // So the fenced intent, once at one of these sequences, is gone from a's log.
    assert!(
        la.read_from(1)
            .all(|e| e.unwrap().stream != "volume/fenced")
    );
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_restart_loses_no_acknowledged_write_and_a_long_outage_stops_the_leader() {
    let _heavy = crate::support::heavy();
    let mut etcd = Etcd::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let key = shared_key(tmp.path());
    let dir = tmp.path().join("a");
    let client = storch::net::client();
    // A TTL that outlasts an etcd restart.
    let mut a = Server::start_with(&dir, &serve_args_ttl(&etcd, &key, "a", "6s"), &[]);
    wait_role(&client, &a, "leader").await;
    let mut backend = fake_backend("shared", "file", &[("p1", ssd())]);
    backend["statePath"] = json!(tmp.path().join("array.json"));
    create(&client, &a.url, "backend", &backend).await;
    create(&client, &a.url, "storageclass", &json!({"name": "any"})).await;

    // etcd dies under load and is back within the lease TTL: writes stall, then go on; none
    // that was acknowledged is missing afterwards.
    let acked = Arc::new(Mutex::new(Acked::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for c in 0..4 {
        let (client, url, acked, stop) =
            (client.clone(), a.url.clone(), acked.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let name = format!("c{c}-{i}");
                i += 1;
                let r = client
                    .post(format!("{url}/trident/v1/volume"))
                    .json(&json!({"name": name, "size": "1Gi", "storageClass": "any"}))
                    .send()
                    .await;
                if let Ok(r) = r
                    && r.status() == 201
                {
                    acked.lock().unwrap().live.insert(name);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    etcd.kill();
    tokio::time::sleep(Duration::from_millis(700)).await;
    etcd.restart().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    wait_role(&client, &a, "leader").await;
    let before = acked.lock().unwrap().live.len();
    assert!(before > 0, "the load made no volumes");

    // A standby started now gets everything from etcd alone.
    let mut b = Server::start_with(&tmp.path().join("b"), &serve_args(&etcd, &key, "b"), &[]);
    wait_role(&client, &b, "standby of a").await;
    let mut names = BTreeSet::new();
    for _ in 0..500 {
        names = volume_names(&client, &b.url).await;
        if acked.lock().unwrap().live.iter().all(|v| names.contains(v)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for v in &acked.lock().unwrap().live {
        assert!(names.contains(v), "acknowledged volume {v} is not in etcd");
    }
    b.stop();

    // etcd gone for longer than the TTL: the leader stops writing and exits, saying why.
    etcd.kill();
    let mut status = None;
    for _ in 0..1000 {
        if let Ok(Some(s)) = a.child.try_wait() {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = status.unwrap_or_else(|| panic!("the leader kept running; log:\n{}", a.log()));
    assert!(!status.success());
    assert!(a.log().contains("lost its etcd leadership"), "{}", a.log());

    // With etcd back, it starts again and leads with everything it had.
    etcd.restart().await;
    let a2 = Server::start_with(&dir, &serve_args(&etcd, &key, "a"), &[]);
    wait_role(&client, &a2, "leader").await;
    let names = volume_names(&client, &a2.url).await;
    for v in &acked.lock().unwrap().live {
        assert!(names.contains(v), "acknowledged volume {v} is lost");
    }
    drop(a2);
    a.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_never_serves_records_etcd_does_not_hold() {
    let _heavy = crate::support::heavy();
    let etcd = Etcd::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let a = set_up_leader(&etcd, &dir_a).await;
    let b = start_replicated(&dir_b, node(&etcd, "b")).await;
    wait_standby_of(&b, "a").await;
    eventually("b to follow", async || {
        b.core().get_storage_class("any").is_ok()
    })
    .await;
    b.shutdown().await;

    // b's log gets a record etcd never saw (as a leader killed between its local flush and
    // its etcd commit leaves behind).
    {
        let log = EventLog::open(&dir_b.join("log"), Durability::Flush).unwrap();
        let appender = log.start_writer(Arc::new(storch::log::DiscardSink));
        let phantom = storch::events::Event::StorageClass {
            name: "phantom".into(),
            event: storch::events::StorageClassEvent::Added {
                config: serde_json::from_value(json!({"name": "phantom"})).unwrap(),
            },
        };
        appender
            .append("test", vec![(&phantom).into()])
            .await
            .unwrap();
        drop(appender);
        log.shutdown().await.unwrap();
    }

    // While a leads (and writes nothing), b comes back without the phantom record.
    let b = start_replicated(&dir_b, node(&etcd, "b")).await;
    wait_standby_of(&b, "a").await;
    assert!(b.core().get_storage_class("any").is_ok());
    assert!(
        b.core().get_storage_class("phantom").is_err(),
        "the standby serves a record etcd does not hold"
    );
    b.shutdown().await;
    a.shutdown().await;
    let la = EventLog::open(&dir_a.join("log"), Durability::Flush).unwrap();
    let lb = EventLog::open(&dir_b.join("log"), Durability::Flush).unwrap();
    assert_eq!(la.head(), lb.head(), "b's log was cut back to etcd's");
}

/// The `storch.io/role` label of a pod in the fake API server.
fn pod_role(kube: &FakeKube, pod: &str) -> Option<String> {
    kube.get("pods", Some("storch"), pod)?
        .pointer("/metadata/labels/storch.io~1role")?
        .as_str()
        .map(String::from)
}

async fn wait_pod_role(kube: &FakeKube, pod: &str, role: &str) {
    kube.wait_for(
        |k| pod_role(k, pod).as_deref() == Some(role),
        Duration::from_secs(30),
        &format!("pod {pod} labelled {role}"),
    )
    .await;
}

/// A replicated core with the Kubernetes frontend, in pod `pod` of namespace `storch`.
async fn start_in_pod(rt: &CoreRuntime, kube: &FakeKube, pod: &str) -> Frontend {
    let mut opts = KubeOptions::new(KubeSource::ApiServer(kube.url.clone()));
    opts.namespace = Some("storch".into());
    opts.identity = Some(pod.into());
    opts.lease_duration = Duration::from_secs(2);
    opts.role_labels = true;
    opts.pod_name = Some(pod.into());
    Frontend::start(rt.core(), opts).await.unwrap()
}

/// With the Kubernetes frontend, each replica labels its own pod with its etcd role (what the
/// chart's Service selects): `standby` from the start, also while the rest of the frontend
/// waits for the core to lead, and after failed patches (retried); `leader` once it leads.
/// A leader stopped cleanly steps down to `standby`, and the standby that takes over becomes
/// `leader`. The pod's other labels are left alone (a merge patch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_labelled_with_their_etcd_role_and_the_labels_flip_on_takeover() {
    let _heavy = crate::support::heavy();
    let etcd = Etcd::start().await;
    let kube = FakeKube::start().await;
    for pod in ["storch-0", "storch-1"] {
        kube.put(
            "pods",
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod, "namespace": "storch", "labels": {"app": "storch"}},
                "spec": {"containers": [{"name": "storch", "image": "storch"}]},
            }),
        );
    }
    let tmp = tempfile::tempdir().unwrap();

    let a = start_replicated(&tmp.path().join("a"), node(&etcd, "storch-0")).await;
    wait_ready(&a.core()).await;
    let frontend_a = start_in_pod(&a, &kube, "storch-0").await;
    wait_pod_role(&kube, "storch-0", "leader").await;

    let b = start_replicated(&tmp.path().join("b"), node(&etcd, "storch-1")).await;
    wait_standby_of(&b, "storch-0").await;
    kube.fail("PATCH", "pods", 2, 500);
    let frontend_b = start_in_pod(&b, &kube, "storch-1").await;
    wait_pod_role(&kube, "storch-1", "standby").await;
    assert!(
        matches!(b.core().readiness(), Readiness::Standby { .. }),
        "labelled while still a standby"
    );
    let failed_patches = kube
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.name.as_deref() == Some("storch-1"))
        .count();
    assert!(
        failed_patches >= 3,
        "two failures, then the patch: {failed_patches}"
    );
    assert_eq!(pod_role(&kube, "storch-0").as_deref(), Some("leader"));

    // Takeover: the leader stops cleanly (frontend first, as `serve` does, then the core,
    // which resigns).
    frontend_a.shutdown().await;
    assert_eq!(pod_role(&kube, "storch-0").as_deref(), Some("standby"));
    a.shutdown().await;
    wait_ready(&b.core()).await;
    wait_pod_role(&kube, "storch-1", "leader").await;
    let labels = kube
        .get("pods", Some("storch"), "storch-1")
        .unwrap()
        .pointer("/metadata/labels")
        .cloned()
        .unwrap();
    assert_eq!(labels, json!({"app": "storch", "storch.io/role": "leader"}));

    frontend_b.shutdown().await;
    b.shutdown().await;
    kube.shutdown().await;
}

/// The first sequence of etcd's oldest chunk under `prefix` (`None`: no chunk).
async fn first_chunk(etcd: &Etcd, prefix: &str) -> Option<u64> {
    let r = etcd
        .call(
            "/v3/kv/range",
            json!({
                "key": base64_encode(format!("{prefix}/log/").as_bytes()),
                "range_end": base64_encode(format!("{prefix}/log0").as_bytes()),
                "limit": "1", "keys_only": true,
            }),
        )
        .await;
    let key = r["kvs"][0]["key"].as_str()?;
    use base64::Engine;
    let key = base64::engine::general_purpose::STANDARD
        .decode(key)
        .unwrap();
    let key = String::from_utf8(key).unwrap();
    Some(key.rsplit('/').next().unwrap().parse().unwrap())
}

/// etcd's history is bounded: a churn that writes more than etcd's quota keeps working,
/// because the leader stores checkpoints in etcd, deletes the records they cover and compacts
/// etcd; a standby that joins later starts its log from the checkpoint and follows the tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_churn_beyond_etcds_quota_keeps_working_and_a_late_standby_starts_from_the_checkpoint() {
    let _heavy = crate::support::heavy();
    const QUOTA: usize = 2 * 1024 * 1024;
    const TASKS: usize = 8;
    const CYCLES: usize = 500;
    let etcd = Etcd::start_with(&["--quota-backend-bytes", &QUOTA.to_string()]).await;
    let tmp = tempfile::tempdir().unwrap();
    let dirs = ["a", "b", "c"].map(|n| tmp.path().join(n));
    let [dir_a, dir_b, dir_c] = &dirs;

    let a = start_replicated(dir_a, node_checkpointing(&etcd, "a", 500)).await;
    wait_ready(&a.core()).await;
    set_up(&a).await;
    // b follows the start, then stops: its log will be older than etcd's history.
    let b = start_replicated(dir_b, node(&etcd, "b")).await;
    wait_standby_of(&b, "a").await;
    eventually("b to follow", async || {
        b.core().get_storage_class("any").is_ok()
    })
    .await;
    b.shutdown().await;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..TASKS {
        let core = a.core();
        tasks.spawn(async move {
            let ctx = RequestCtx::new("churn");
            for i in 0..CYCLES {
                let name = format!("churn-{t}-{i}");
                add_volume(&core, &ctx, volume(&name)).await.unwrap();
                core.delete_volume(&ctx, &name).await.unwrap();
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    // Still taking writes after the churn.
    let ctx = RequestCtx::new("t");
    add_volume(&a.core(), &ctx, volume("survivor"))
        .await
        .unwrap();

    // etcd holds a checkpoint and only the records since the one before it.
    eventually("etcd's oldest records to be deleted", async || {
        first_chunk(&etcd, "/storch-test")
            .await
            .is_some_and(|s| s > 1)
    })
    .await;
    let status = etcd.call("/v3/maintenance/status", json!({})).await;
    let db_size: usize = status["dbSize"].as_str().unwrap().parse().unwrap();
    assert!(db_size < QUOTA, "{status}");
    let alarms = etcd
        .call("/v3/maintenance/alarm", json!({"action": "GET"}))
        .await;
    assert!(
        alarms["alarms"].as_array().is_none_or(|a| a.is_empty()),
        "{alarms}"
    );

    // A standby with an older log (b) and one with an empty log (c) start from the
    // checkpoint and follow the tail.
    let b = start_replicated(dir_b, node(&etcd, "b")).await;
    let c = start_replicated(dir_c, node(&etcd, "c")).await;
    add_volume(&a.core(), &ctx, volume("later")).await.unwrap();
    for standby in [&b, &c] {
        wait_standby_of(standby, "a").await;
        eventually("a standby to follow", async || {
            standby.core().get_volume("later").is_ok()
        })
        .await;
        assert_eq!(
            standby.core().list_volumes().unwrap(),
            a.core().list_volumes().unwrap()
        );
    }
    b.shutdown().await;
    c.shutdown().await;
    a.shutdown().await;

    let la = EventLog::open(&dir_a.join("log"), Durability::Flush).unwrap();
    // The leader's log keeps the whole chain (the audit), more than etcd's quota: etcd,
    // keeping every revision of every record it was given, would have refused writes
    // ("mvcc: database space exceeded") long before the end without the checkpoints.
    let ra = la.verify();
    assert_eq!(
        (ra.first_bad.clone(), ra.anchor, ra.events),
        (None, None, ra.head_seq)
    );
    let written: usize = (1..=ra.head_seq)
        .map(|seq| la.raw_frame(seq).unwrap().len())
        .sum();
    assert!(written > QUOTA, "only {written} bytes were replicated");

    // The standbys' logs start from a checkpoint, with the leader's recorded hash, and match
    // the leader's record for record after it; `events verify` says where they start.
    for dir in [dir_b, dir_c] {
        let lb = EventLog::open(&dir.join("log"), Durability::Flush).unwrap();
        let rb = lb.verify();
        let anchor = rb
            .anchor
            .expect("the standby's log starts from a checkpoint");
        assert!(anchor.seq > 1 && anchor.seq < ra.head_seq, "{anchor:?}");
        eprintln!(
            "{} records ({written} bytes) replicated through an etcd of at most {QUOTA} bytes \
             (its database: {db_size} bytes); a standby starts from sequence {}",
            ra.head_seq, anchor.seq
        );
        assert_eq!(rb.first_bad, None);
        assert_eq!(Some(anchor.hash), la.hash_at(anchor.seq));
        // (The standbys stopped first: a may have written after their last pull.)
        let shared = lb.head().0;
        assert!(shared > anchor.seq && shared <= ra.head_seq, "{shared}");
        for seq in anchor.seq + 1..=shared {
            assert_eq!(lb.raw_frame(seq), la.raw_frame(seq), "record {seq} differs");
        }
        drop(lb);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch"))
            .args(["events", "verify", "--data-dir"])
            .arg(dir)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(
            stdout.contains(&format!(
                "starts from the checkpoint at sequence {} with recorded hash {}",
                anchor.seq,
                hex::encode(anchor.hash)
            )),
            "{stdout}"
        );
    }
}

/// A leader that rejoins with records etcd never acknowledged has them cut back, and its log
/// says why (not "by operator request").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejoining_leaders_log_says_its_unacknowledged_tail_was_cut_back() {
    let _heavy = crate::support::heavy();
    let etcd = Etcd::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let key = shared_key(tmp.path());
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let client = storch::net::client();

    let mut a = Server::start_with(&dir_a, &serve_args(&etcd, &key, "a"), &[]);
    wait_role(&client, &a, "leader").await;
    create(
        &client,
        &a.url,
        "backend",
        &fake_backend("f", "file", &[("p", ssd())]),
    )
    .await;
    create(&client, &a.url, "storageclass", &json!({"name": "any"})).await;
    create(
        &client,
        &a.url,
        "volume",
        &json!({"name": "v1", "size": "1Gi", "storageClass": "any"}),
    )
    .await;
    a.stop();

    // etcd loses a's last batch, as if a had died before that write was acknowledged.
    let last = etcd
        .call(
            "/v3/kv/range",
            json!({
                "key": base64_encode(b"/storch/log/"), "range_end": base64_encode(b"/storch/log0"),
                "limit": "1", "sort_order": "DESCEND", "sort_target": "KEY", "keys_only": true,
            }),
        )
        .await;
    let last_key = last["kvs"][0]["key"].as_str().unwrap().to_string();
    let r = etcd
        .call("/v3/kv/deleterange", json!({"key": last_key}))
        .await;
    assert_eq!(r["deleted"], "1", "{r}");

    let mut b = Server::start_with(&dir_b, &serve_args(&etcd, &key, "b"), &[]);
    wait_role(&client, &b, "leader").await;
    create(
        &client,
        &b.url,
        "volume",
        &json!({"name": "v2", "size": "1Gi", "storageClass": "any"}),
    )
    .await;

    let mut a = Server::start_with(&dir_a, &serve_args(&etcd, &key, "a"), &[]);
    wait_role(&client, &a, "standby of b").await;
    eventually("a to follow b", async || {
        volume_names(&client, &a.url).await.contains("v2")
    })
    .await;
    let log = a.log();
    assert!(
        log.contains("cut back to etcd's history on rejoining"),
        "{log}"
    );
    assert!(!log.contains("operator request"), "{log}");
    a.stop();
    b.stop();
}

/// A leader whose disk fails under its log (the log's flush failpoint) refuses the write,
/// gives the leadership up at once (it would otherwise keep renewing its lease), and the
/// standby takes over with every acknowledged write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_log_fails_steps_down_and_the_standby_takes_over() {
    a_leader_whose_log_takes_no_writes_steps_down(
        |core| core.fail_next_log_flush_for_tests(),
        "disk failed",
    )
    .await;
}

/// The same with a disk that fills up (below the log's reserve of free space): the leader
/// steps down rather than lead a cluster that takes no writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_log_disk_is_full_steps_down_and_the_standby_takes_over() {
    a_leader_whose_log_takes_no_writes_steps_down(
        |core| core.set_log_free_bytes_for_tests(|| 0),
        "disk is full",
    )
    .await;
}

async fn a_leader_whose_log_takes_no_writes_steps_down(
    fault: impl FnOnce(&storch::actors::Core),
    says: &str,
) {
    let _heavy = crate::support::heavy();
    let etcd = Etcd::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    let a = set_up_leader(&etcd, &dir_a).await;
    let ctx = RequestCtx::new("t");
    add_volume(&a.core(), &ctx, volume("before")).await.unwrap();
    let b = start_replicated(&dir_b, node(&etcd, "b")).await;
    wait_standby_of(&b, "a").await;

    fault(&a.core());
    let err = add_volume(&a.core(), &ctx, volume("doomed"))
        .await
        .unwrap_err();
    match &err {
        storch::actors::CoreError::LogUnavailable(why) => assert!(why.contains(says), "{why}"),
        other => panic!("expected LogUnavailable, got {other:?}"),
    }
    wait_readiness(
        "a to step down",
        &a,
        |r| matches!(r, Readiness::Failed(why) if why.contains("its event log takes no writes")),
    )
    .await;
    wait_ready(&b.core()).await;
    assert!(
        b.core().get_volume("before").is_ok(),
        "b has a's acknowledged write"
    );
    assert!(b.core().get_volume("doomed").is_err());
    add_volume(&b.core(), &ctx, volume("after")).await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

/// A standby whose log's disk falls below its reserve copies nothing (readiness says why),
/// and once space is freed it copies what it missed and follows again, without a restart.
#[tokio::test]
async fn a_standby_whose_disk_fills_up_follows_again_once_space_is_freed() {
    let _heavy = crate::support::heavy();
    let etcd = Etcd::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let a = set_up_leader(&etcd, &tmp.path().join("a")).await;
    let ctx = RequestCtx::new("t");
    add_volume(&a.core(), &ctx, volume("before")).await.unwrap();
    let b = start_replicated(&tmp.path().join("b"), node(&etcd, "b")).await;
    wait_standby_of(&b, "a").await;

    let free = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = free.clone();
    b.core()
        .set_log_free_bytes_for_tests(move || seen.load(std::sync::atomic::Ordering::SeqCst));
    // The leader acknowledges without the standby: its own disk is fine.
    add_volume(&a.core(), &ctx, volume("while-full"))
        .await
        .unwrap();
    wait_readiness(
        "b to say its disk is full",
        &b,
        |r| matches!(r, Readiness::Failed(why) if why.contains("disk is full")),
    )
    .await;
    assert!(
        b.core().get_volume("while-full").is_err(),
        "nothing copied while short of space"
    );

    free.store(u64::MAX, std::sync::atomic::Ordering::SeqCst);
    wait_standby_of(&b, "a").await;
    eventually("b to copy what it missed", async || {
        b.core().get_volume("while-full").is_ok()
    })
    .await;
    add_volume(&a.core(), &ctx, volume("after")).await.unwrap();
    eventually("b to follow again", async || {
        b.core().get_volume("after").is_ok()
    })
    .await;
    a.shutdown().await;
    b.shutdown().await;
}

/// The REST reads a standby answers from what the leader recorded of its backends: every
/// backend, the backend list, every class and the class list, and explain (with a size).
const RECORDED_READS: &[&str] = &[
    "/trident/v1/backend",
    "/trident/v1/backend/f1",
    "/trident/v1/backend/f2",
    "/trident/v1/backend/flaky",
    "/trident/v1/storageclass",
    "/trident/v1/storageclass/fast",
    "/trident/v1/storageclass/slow",
    "/trident/v1/storageclass/fast/explain?size=30Gi",
    "/trident/v1/storageclass/slow/explain?size=2Gi&protocol=file",
];

/// Each of [`RECORDED_READS`] on the leader and on the standby: `(path, leader's, standby's)`.
async fn recorded_reads(
    client: &reqwest::Client,
    leader: &str,
    standby: &str,
) -> Vec<(&'static str, Value, Value)> {
    let mut out = Vec::new();
    for path in RECORDED_READS {
        let (status, on_leader) = get_json(client, &format!("{leader}{path}")).await;
        assert_eq!(status, 200, "{path} on the leader: {on_leader}");
        let (status, on_standby) = get_json(client, &format!("{standby}{path}")).await;
        assert_eq!(status, 200, "{path} on the standby: {on_standby}");
        out.push((*path, on_leader, on_standby));
    }
    out
}

/// Waits until the standby answers every recorded read as the leader does, then asserts it
/// (so that a difference is shown).
async fn standby_answers_as_the_leader(client: &reqwest::Client, leader: &str, standby: &str) {
    let same = async || {
        recorded_reads(client, leader, standby)
            .await
            .iter()
            .all(|(_, l, s)| l == s)
    };
    let mut last = Vec::new();
    for _ in 0..1500 {
        if same().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    last.extend(recorded_reads(client, leader, standby).await);
    for (path, on_leader, on_standby) in last {
        assert_eq!(on_standby, on_leader, "{path}: the standby's answer (left)");
    }
}

/// A standby answers backend, class and explain reads as the leader does: the backends'
/// state, external config, free bytes (after creates, a resize and deletes) and classes per
/// pool, the classes' pools, explain's reasons, each marked with when the leader recorded
/// them; a backend that failed on the leader (after a takeover) shows failed, with the same
/// reason, on the standby.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_answers_backend_class_and_explain_reads_as_the_leader_does() {
    let _heavy = crate::support::heavy();
    let etcd = Etcd::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let (dir_a, dir_b) = (tmp.path().join("a"), tmp.path().join("b"));
    // The flaky backend's array state lives in a directory that goes away later.
    let mount = tmp.path().join("array-mount");
    std::fs::create_dir(&mount).unwrap();
    let client = reqwest::Client::new();

    let a = start_replicated(&dir_a, node(&etcd, "a")).await;
    wait_ready(&a.core()).await;
    let ctx = RequestCtx::new("setup");
    let core = a.core();
    let mut flaky = fake_backend("flaky", "file", &[("p", ssd())]);
    flaky["statePath"] = json!(mount.join("array.json"));
    for doc in [
        fake_backend("f1", "file", &[("p1", ssd()), ("p2", hdd())]),
        fake_backend("f2", "file", &[("p", ssd())]),
        flaky,
    ] {
        core.add_backend(&ctx, doc).await.unwrap();
    }
    for class in [
        json!({"name": "fast", "attributes": {"media": "ssd"}}),
        json!({"name": "slow", "attributes": {"media": "hdd"}}),
    ] {
        let config = serde_json::from_value(class).unwrap();
        core.add_storage_class(&ctx, config).await.unwrap();
    }
    for i in 0..6 {
        let class = if i % 2 == 0 { "fast" } else { "slow" };
        let config = json!({"name": format!("v{i}"), "size": format!("{}Gi", i + 1),
                            "storageClass": class});
        add_volume(&core, &ctx, serde_json::from_value(config).unwrap())
            .await
            .unwrap();
    }
    resize_volume(&core, &ctx, "v1", "20Gi").await.unwrap();
    for name in ["v2", "v3"] {
        core.delete_volume(&ctx, name).await.unwrap();
    }
    eventually("v2 and v3 deleted", async || {
        core.list_volumes().unwrap().len() == 4
    })
    .await;
    let leader = TestServer::serving(a.core(), Default::default()).await;

    let b = start_replicated(&dir_b, node(&etcd, "b")).await;
    wait_standby_of(&b, "a").await;
    let standby = TestServer::serving(b.core(), Default::default()).await;
    standby_answers_as_the_leader(&client, &leader.url, &standby.url).await;
    // What the answers hold: the leader's recording, not "not run here".
    let (_, f1) = get_json(&client, &standby.url("/trident/v1/backend/f1")).await;
    let f1 = &f1["backend"];
    assert_eq!(f1["state"], "online", "{f1}");
    assert!(f1["observedAt"].is_string(), "{f1}");
    assert_eq!(f1["storage"]["p1"]["storageClasses"], json!(["fast"]));
    assert_eq!(f1["storage"]["p2"]["storageClasses"], json!(["slow"]));
    // Each pool of f1 has 100 GiB less what its volumes take.
    let free = |pool: &str| f1["storage"][pool]["freeBytes"].as_u64().unwrap();
    let on = |pool: &str| {
        let names: Vec<String> = serde_json::from_value(f1["volumes"].clone()).unwrap();
        names
            .iter()
            .map(|n| b.core().get_volume(n).unwrap())
            .filter(|v| v.placed_pool == pool)
            .map(|v| v.config.size.trim_end_matches("Gi").parse::<u64>().unwrap() << 30)
            .sum::<u64>()
    };
    for pool in ["p1", "p2"] {
        assert_eq!(free(pool), (100 << 30) - on(pool), "f1/{pool}: {f1}");
    }
    let (_, fast) = get_json(&client, &standby.url("/trident/v1/storageclass/fast")).await;
    assert_eq!(
        fast["storageClass"]["storage"],
        json!({"f1": ["p1"], "f2": ["p"], "flaky": ["p"]})
    );
    leader.stop().await;
    standby.stop().await;

    // The flaky backend's array goes away; a stops cleanly and b takes over: its start of
    // the flaky backend fails, and a, back as b's standby, says so as b does.
    std::fs::remove_dir_all(&mount).unwrap();
    a.shutdown().await;
    wait_ready(&b.core()).await;
    let a = start_replicated(&dir_a, node(&etcd, "a")).await;
    wait_standby_of(&a, "b").await;
    let leader = TestServer::serving(b.core(), Default::default()).await;
    let standby = TestServer::serving(a.core(), Default::default()).await;
    eventually("flaky failed on the new leader", async || {
        let (_, r) = get_json(&client, &leader.url("/trident/v1/backend/flaky")).await;
        r["backend"]["state"] == "failed"
    })
    .await;
    standby_answers_as_the_leader(&client, &leader.url, &standby.url).await;
    let (_, flaky) = get_json(&client, &standby.url("/trident/v1/backend/flaky")).await;
    let flaky = &flaky["backend"];
    assert_eq!(flaky["state"], "failed", "{flaky}");
    assert!(
        flaky["stateReason"].as_str().is_some_and(|r| !r.is_empty()),
        "{flaky}"
    );
    let (_, explained) = get_json(
        &client,
        &standby.url("/trident/v1/storageclass/fast/explain"),
    )
    .await;
    let reasons = explained["explanation"]["pools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["backend"] == "flaky")
        .map(|p| p["reasons"].clone())
        .unwrap();
    assert!(
        reasons.to_string().contains("backend flaky has failed: "),
        "{reasons}"
    );
    leader.stop().await;
    standby.stop().await;
    a.shutdown().await;
    b.shutdown().await;
}

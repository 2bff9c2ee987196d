//! In-process tests of the core with the fake driver and a temporary data dir.

use crate::support::*;
use serde_json::json;
use storch::actors::{BackendState, CoreError, RequestCtx, VolumeState};
use storch::model::{StorageClassConfig, VolumeConfig};

fn ctx() -> RequestCtx {
    RequestCtx::random()
}

fn class(body: serde_json::Value) -> StorageClassConfig {
    StorageClassConfig::from_json(body.to_string().as_bytes()).expect("valid class")
}

fn volume(name: &str, size: &str, class: &str) -> VolumeConfig {
    VolumeConfig {
        name: name.into(),
        size: size.into(),
        storage_class: class.into(),
        ..VolumeConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_classes_volumes_survive_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("array.json");
    let mut be = fake_backend("fast", "file", &[("ssd1", ssd()), ("hdd1", hdd())]);
    be["statePath"] = json!(state);
    let (backend, class_view, vol) = {
        let rt = start(dir.path()).await;
        let core = rt.core();
        assert_eq!(core.add_backend(&ctx(), be.clone()).await.unwrap(), "fast");
        core.add_storage_class(
            &ctx(),
            class(json!({"name": "gold", "attributes": {"media": "ssd"}})),
        )
        .await
        .unwrap();
        let v = add_volume(&core, &ctx(), volume("v1", "1Gi", "gold"))
            .await
            .unwrap();
        assert_eq!(v.backend, "fast");
        assert_eq!(v.pool, "ssd1");
        assert_eq!(v.config.size, "1Gi", "size is stored verbatim");
        assert_eq!(v.config.internal_name, "trident-v1");
        assert_eq!(v.config.protocol, storch::model::Protocol::File);
        assert_eq!(v.config.access_information.nfs_path, "/trident-v1");
        assert_eq!(v.state, VolumeState::Online);
        let b = core.get_backend("fast").unwrap();
        let sc = core.get_storage_class("gold").unwrap();
        assert_eq!(sc.pools.get("fast").unwrap(), &vec!["ssd1".to_string()]);
        let out = (b, sc, v);
        rt.shutdown().await;
        out
    };
    let rt = start(dir.path()).await;
    let core = rt.core();
    eventually("backend online", async || {
        core.get_backend("fast")
            .map(|b| b.state == BackendState::Online)
            .unwrap_or(false)
    })
    .await;
    let mut b = core.get_backend("fast").unwrap();
    // Free capacity is what the restarted driver discovered, recorded anew (as is the fake's
    // external config, which shows each pool's free bytes as `sizeBytes`); compare the rest.
    for (p, q) in b.pools.iter_mut().zip(backend.pools.iter()) {
        p.free_bytes = q.free_bytes;
    }
    let mut backend = backend;
    for config in [&mut b.config, &mut backend.config] {
        for pool in config["pools"].as_object_mut().unwrap().values_mut() {
            pool.as_object_mut().unwrap().remove("sizeBytes");
        }
    }
    b.observed_ms = backend.observed_ms;
    assert_eq!(b, backend);
    assert_eq!(core.get_storage_class("gold").unwrap(), class_view);
    assert_eq!(core.get_volume("v1").unwrap(), vol);
    assert_eq!(core.list_volumes().unwrap(), vec!["v1"]);
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_falls_through_failing_pools_and_aggregates_errors() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    let mut be = fake_backend("b", "block", &[("p1", ssd()), ("p2", ssd()), ("p3", ssd())]);
    be["failPools"] = json!({"p1": "injected p1 failure", "p2": "injected p2 failure"});
    core.add_backend(&ctx(), be).await.unwrap();
    core.add_storage_class(&ctx(), class(json!({"name": "any"})))
        .await
        .unwrap();
    for i in 0..10 {
        let v = add_volume(&core, &ctx(), volume(&format!("v{i}"), "1Gi", "any"))
            .await
            .unwrap();
        assert_eq!(v.pool, "p3");
        assert_eq!(v.config.protocol, storch::model::Protocol::Block);
    }
    // all pools failing: every pool's reason in the error, and the name stays free
    let mut be = fake_backend("c", "file", &[("q1", hdd()), ("q2", hdd())]);
    be["failPools"] = json!({"q1": "q1 is broken", "q2": "q2 is broken"});
    core.add_backend(&ctx(), be).await.unwrap();
    core.add_storage_class(
        &ctx(),
        class(json!({"name": "slow", "attributes": {"media": "hdd"}})),
    )
    .await
    .unwrap();
    let err = add_volume(&core, &ctx(), volume("x", "1Gi", "slow"))
        .await
        .unwrap_err();
    let CoreError::Failed(msg) = err else {
        panic!("unexpected {err:?}")
    };
    assert!(
        msg.starts_with("encountered error(s) in creating the volume: "),
        "{msg}"
    );
    assert!(
        msg.contains("on storage pool q1 from backend c: q1 is broken"),
        "{msg}"
    );
    assert!(
        msg.contains("on storage pool q2 from backend c: q2 is broken"),
        "{msg}"
    );
    assert!(matches!(core.get_volume("x"), Err(CoreError::NotFound(_))));
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_rules() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    core.add_backend(&ctx(), fake_backend("nas", "file", &[("p", ssd())]))
        .await
        .unwrap();
    core.add_backend(&ctx(), fake_backend("san", "block", &[("p", ssd())]))
        .await
        .unwrap();
    core.add_storage_class(&ctx(), class(json!({"name": "any"})))
        .await
        .unwrap();

    // duplicate name
    add_volume(&core, &ctx(), volume("a", "1G", "any"))
        .await
        .unwrap();
    assert!(matches!(
        add_volume(&core, &ctx(), volume("a", "1G", "any")).await,
        Err(CoreError::AlreadyExists(_))
    ));
    // unknown class
    let err = add_volume(&core, &ctx(), volume("b", "1G", "nope"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        CoreError::Invalid("unknown storage class: nope".into())
    );
    // RWX + block refused; RWX + any lands on file
    let mut v = volume("c", "1G", "any");
    v.access_mode = "ReadWriteMany".into();
    v.protocol = storch::model::Protocol::Block;
    assert!(matches!(
        add_volume(&core, &ctx(), v.clone()).await,
        Err(CoreError::Invalid(_))
    ));
    v.protocol = storch::model::Protocol::Any;
    let made = add_volume(&core, &ctx(), v).await.unwrap();
    assert_eq!(made.backend, "nas");
    // block requested lands on the SAN backend
    let mut v = volume("d", "1G", "any");
    v.protocol = storch::model::Protocol::Block;
    assert_eq!(add_volume(&core, &ctx(), v).await.unwrap().backend, "san");
    // bad sizes and names
    for size in ["0", "-1", "1.5Gi", "lots", "99999999999999999999999"] {
        let err = add_volume(&core, &ctx(), volume("e", size, "any"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, CoreError::Invalid(ref m) if m.contains("size")),
            "{size}: {err:?}"
        );
    }
    for name in ["a/b", "..", "x\0y", &"n".repeat(300)] {
        assert!(matches!(
            add_volume(&core, &ctx(), volume(name, "1G", "any")).await,
            Err(CoreError::Invalid(_))
        ));
    }
    // delete, then 404
    core.delete_volume(&ctx(), "a").await.unwrap();
    assert!(matches!(
        core.delete_volume(&ctx(), "a").await,
        Err(CoreError::NotFound(_))
    ));
    assert!(matches!(core.get_volume("a"), Err(CoreError::NotFound(_))));
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone_lands_on_the_source_backend() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    core.add_backend(&ctx(), fake_backend("b1", "file", &[("p", ssd())]))
        .await
        .unwrap();
    core.add_backend(&ctx(), fake_backend("b2", "file", &[("p", ssd())]))
        .await
        .unwrap();
    core.add_storage_class(&ctx(), class(json!({"name": "any"})))
        .await
        .unwrap();
    let src = add_volume(&core, &ctx(), volume("src", "2Gi", "any"))
        .await
        .unwrap();
    let mut req = volume("copy", "", "");
    req.clone_source_volume = "src".into();
    let copy = add_volume(&core, &ctx(), req).await.unwrap();
    assert_eq!(copy.backend, src.backend);
    assert_eq!(copy.pool, "", "Trident shows clones with an empty pool");
    assert_eq!(copy.config.size, "2Gi");
    assert_eq!(copy.config.storage_class, "any");
    assert_eq!(copy.config.clone_source_volume_internal, "trident-src");
    let mut req = volume("bad", "", "");
    req.clone_source_volume = "missing".into();
    assert_eq!(
        add_volume(&core, &ctx(), req).await.unwrap_err(),
        CoreError::NotFound("source volume not found: missing".into())
    );
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_backend_with_volumes_takes_it_offline_until_empty() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    core.add_backend(&ctx(), fake_backend("b", "file", &[("p", ssd())]))
        .await
        .unwrap();
    core.add_storage_class(&ctx(), class(json!({"name": "any"})))
        .await
        .unwrap();
    add_volume(&core, &ctx(), volume("v", "1G", "any"))
        .await
        .unwrap();
    core.delete_backend(&ctx(), "b").await.unwrap();
    assert!(
        core.list_backends().unwrap().is_empty(),
        "offline backends are not listed"
    );
    let b = core.get_backend("b").unwrap();
    assert!(!b.online);
    assert_eq!(b.state, BackendState::Offline);
    assert!(
        core.get_storage_class("any").unwrap().pools.is_empty(),
        "its pools left the class"
    );
    assert!(matches!(
        add_volume(&core, &ctx(), volume("w", "1G", "any")).await,
        Err(CoreError::Failed(_))
    ));
    // adding it again brings it back
    core.add_backend(&ctx(), fake_backend("b", "file", &[("p", ssd())]))
        .await
        .unwrap();
    assert_eq!(core.list_backends().unwrap(), vec!["b"]);
    core.delete_backend(&ctx(), "b").await.unwrap();
    // the last volume purges it
    core.delete_volume(&ctx(), "v").await.unwrap();
    assert!(matches!(core.get_backend("b"), Err(CoreError::NotFound(_))));
    // a backend without volumes goes at once
    core.add_backend(&ctx(), fake_backend("e", "file", &[("p", ssd())]))
        .await
        .unwrap();
    core.delete_backend(&ctx(), "e").await.unwrap();
    assert!(matches!(core.get_backend("e"), Err(CoreError::NotFound(_))));
    assert!(matches!(
        core.delete_backend(&ctx(), "e").await,
        Err(CoreError::NotFound(_))
    ));
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_replaces_config_and_rename_moves_volumes() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("array.json");
    let rt = start(dir.path()).await;
    let core = rt.core();
    let mut be = fake_backend("old", "file", &[("p", ssd())]);
    be["statePath"] = json!(state);
    core.add_backend(&ctx(), be.clone()).await.unwrap();
    core.add_storage_class(&ctx(), class(json!({"name": "any"})))
        .await
        .unwrap();
    add_volume(&core, &ctx(), volume("v", "1G", "any"))
        .await
        .unwrap();
    // POST of an existing name is an update
    be["pools"]["p2"] = json!({"attributes": hdd(), "sizeBytes": 1u64 << 30});
    assert_eq!(core.add_backend(&ctx(), be.clone()).await.unwrap(), "old");
    assert_eq!(core.get_backend("old").unwrap().pools.len(), 2);
    // an identical re-post records nothing
    let head = core.events(Default::default()).await.unwrap().len();
    assert_eq!(core.add_backend(&ctx(), be.clone()).await.unwrap(), "old");
    assert_eq!(
        core.update_backend(&ctx(), "old", be.clone())
            .await
            .unwrap(),
        "old"
    );
    assert_eq!(core.events(Default::default()).await.unwrap().len(), head);
    // an update never renames: a body naming another backend is refused
    be["backendName"] = json!("new");
    let err = core
        .update_backend(&ctx(), "old", be.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CoreError::Invalid(m) if m.contains("does not rename")),
        "{err:?}"
    );
    assert!(matches!(
        core.get_backend("new"),
        Err(CoreError::NotFound(_))
    ));
    assert_eq!(core.get_backend("old").unwrap().volumes, vec!["v"]);
    assert_eq!(core.events(Default::default()).await.unwrap().len(), head);
    assert!(
        !core.get_volume("v").unwrap().orphaned,
        "the array still has it"
    );
    // a different driver type is refused; unknown backend is 404
    assert!(matches!(
        core.update_backend(&ctx(), "missing", be.clone()).await,
        Err(CoreError::NotFound(_))
    ));
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_backend_configs_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    for doc in [
        json!([1, 2]),
        json!({"version": 1}),
        json!({"version": 2, "storageDriverName": "fake"}),
        json!({"version": 1, "storageDriverName": "nope"}),
        json!({"version": 1, "storageDriverName": "fake", "backendName": "a/b", "instanceName": "x", "pools": {}}),
    ] {
        let err = core.add_backend(&ctx(), doc.clone()).await.unwrap_err();
        assert!(
            matches!(err, CoreError::Invalid(_) | CoreError::Failed(_)),
            "{doc}: {err:?}"
        );
    }
    assert!(core.list_backends().unwrap().is_empty());
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_core_on_the_same_dir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let err = storch::actors::CoreRuntime::start(opts(dir.path()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, CoreError::BootstrapFailed(ref m) if m.contains("in use")),
        "{err:?}"
    );
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_one_name_make_one_volume() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    core.add_backend(
        &ctx(),
        fake_backend("b", "file", &[("p1", ssd()), ("p2", ssd())]),
    )
    .await
    .unwrap();
    core.add_storage_class(&ctx(), class(json!({"name": "any"})))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let core = core.clone();
        tasks.push(tokio::spawn(async move {
            add_volume(&core, &ctx(), volume("same", "1G", "any")).await
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(CoreError::AlreadyExists(_)) => {}
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(ok, 1);
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_resize_and_clone_from_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    core.add_backend(
        &ctx(),
        fake_backend("b", "file", &[("fast", ssd()), ("slow", hdd())]),
    )
    .await
    .unwrap();
    core.add_storage_class(
        &ctx(),
        class(json!({"name": "fast", "attributes": {"media": "ssd"}})),
    )
    .await
    .unwrap();
    core.add_storage_class(
        &ctx(),
        class(json!({"name": "slow", "attributes": {"media": "hdd"}})),
    )
    .await
    .unwrap();
    add_volume(&core, &ctx(), volume("v", "1Gi", "fast"))
        .await
        .unwrap();
    let snap = create_snapshot(&core, &ctx(), "v", "s1").await.unwrap();
    assert_eq!(snap.volume, "v");
    assert!(snap.created_ms.is_some());
    assert!(matches!(
        create_snapshot(&core, &ctx(), "v", "s1").await,
        Err(CoreError::AlreadyExists(_))
    ));
    assert!(matches!(
        create_snapshot(&core, &ctx(), "v", "../x").await,
        Err(CoreError::Invalid(_))
    ));
    assert_eq!(core.list_snapshots(Some("v")).unwrap().len(), 1);
    // clone from the snapshot
    let mut req = volume("c", "", "");
    req.clone_source_volume = "v".into();
    req.clone_source_snapshot = "s1".into();
    let c = add_volume(&core, &ctx(), req.clone()).await.unwrap();
    assert_eq!(c.config.clone_source_snapshot, "s1");
    req.name = "c2".into();
    req.clone_source_snapshot = "nope".into();
    assert!(matches!(
        add_volume(&core, &ctx(), req).await,
        Err(CoreError::NotFound(_))
    ));
    // resize: grow, refuse shrink, size stored verbatim
    let v = resize_volume(&core, &ctx(), "v", "2Gi").await.unwrap();
    assert_eq!(v.config.size, "2Gi");
    assert!(matches!(
        resize_volume(&core, &ctx(), "v", "1Gi").await,
        Err(CoreError::Invalid(_))
    ));
    // a pool that does not offer snapshots refuses clearly
    add_volume(&core, &ctx(), volume("h", "1Gi", "slow"))
        .await
        .unwrap();
    let err = create_snapshot(&core, &ctx(), "h", "s").await.unwrap_err();
    assert!(
        matches!(err, CoreError::Failed(ref m) if m.contains("does not offer snapshots")),
        "{err:?}"
    );
    core.delete_snapshot(&ctx(), "v", "s1").await.unwrap();
    assert!(core.list_snapshots(Some("v")).unwrap().is_empty());
    assert!(matches!(
        core.delete_snapshot(&ctx(), "v", "s1").await,
        Err(CoreError::NotFound(_))
    ));
    rt.shutdown().await;
    // everything survives a restart
    let rt = start(dir.path()).await;
    let core = rt.core();
    assert_eq!(core.get_volume("v").unwrap().config.size, "2Gi");
    assert!(core.list_snapshots(None).unwrap().is_empty());
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_gives_every_pool_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    core.add_backend(
        &ctx(),
        fake_backend("nas", "file", &[("fast", ssd()), ("slow", hdd())]),
    )
    .await
    .unwrap();
    core.add_backend(&ctx(), fake_backend("san", "block", &[("fast", ssd())]))
        .await
        .unwrap();
    core.add_storage_class(
        &ctx(),
        class(json!({"name": "gold", "attributes": {"media": "ssd"}, "excludeStoragePools": {"san": ["fast"]}})),
    )
    .await
    .unwrap();
    let ex = core
        .explain("gold", storch::model::Protocol::File, Some(1 << 30))
        .unwrap();
    assert_eq!(ex.pools.len(), 3);
    let find = |b: &str, p: &str| {
        ex.pools
            .iter()
            .find(|x| x.backend == b && x.pool == p)
            .unwrap()
    };
    assert!(find("nas", "fast").candidate);
    let slow = find("nas", "slow");
    assert!(!slow.candidate);
    assert!(slow.reasons[0].contains("media"), "{:?}", slow.reasons);
    let san = find("san", "fast");
    assert!(
        san.reasons.iter().any(|r| r.contains("exclude")),
        "{:?}",
        san.reasons
    );
    assert!(
        san.reasons.iter().any(|r| r.contains("protocol")),
        "{:?}",
        san.reasons
    );
    let ex = core
        .explain("gold", storch::model::Protocol::Any, Some(1 << 50))
        .unwrap();
    assert!(find_reason(&ex, "nas", "fast", "capacity"));
    assert!(matches!(
        core.explain("nope", storch::model::Protocol::Any, None),
        Err(CoreError::NotFound(_))
    ));
    // a failed create points at the explanation
    let mut v = volume("x", "1Gi", "gold");
    v.protocol = storch::model::Protocol::Block;
    let err = add_volume(&core, &ctx(), v).await.unwrap_err();
    assert!(
        err.to_string().contains("storch explain storageclass gold"),
        "{err}"
    );
    rt.shutdown().await;
}

fn find_reason(ex: &storch::actors::Explanation, b: &str, p: &str, needle: &str) -> bool {
    ex.pools
        .iter()
        .any(|x| x.backend == b && x.pool == p && x.reasons.iter().any(|r| r.contains(needle)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_failing_at_boot_is_shown_failed_and_retried() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("array-mount");
    std::fs::create_dir(&sub).unwrap();
    let mut flaky = fake_backend("flaky", "file", &[("p", ssd())]);
    flaky["statePath"] = json!(sub.join("array.json"));
    {
        let rt = start(dir.path()).await;
        let core = rt.core();
        core.add_backend(&ctx(), flaky).await.unwrap();
        core.add_backend(&ctx(), fake_backend("solid", "file", &[("p", ssd())]))
            .await
            .unwrap();
        core.add_storage_class(&ctx(), class(json!({"name": "any"})))
            .await
            .unwrap();
        rt.shutdown().await;
    }
    // The array's "mount" is gone: the recorded config no longer builds.
    std::fs::remove_dir_all(&sub).unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    eventually("flaky shown failed", async || {
        matches!(
            core.get_backend("flaky").map(|b| b.state),
            Ok(BackendState::Failed(_))
        )
    })
    .await;
    eventually("solid online", async || {
        core.get_backend("solid")
            .map(|b| b.state == BackendState::Online)
            .unwrap_or(false)
    })
    .await;
    // the rest of the server works: volumes land on the healthy backend
    for i in 0..5 {
        let v = add_volume(&core, &ctx(), volume(&format!("v{i}"), "1Gi", "any"))
            .await
            .unwrap();
        assert_eq!(v.backend, "solid");
    }
    // the mount comes back: the backend recovers on its own
    std::fs::create_dir(&sub).unwrap();
    eventually("flaky back online", async || {
        core.get_backend("flaky")
            .map(|b| b.state == BackendState::Online)
            .unwrap_or(false)
    })
    .await;
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_by_object_and_live_following() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    let mut live = core.follow(storch::actors::EventFilter::default()).unwrap();
    let rid = RequestCtx::new("req-123");
    core.add_backend(&rid, fake_backend("b", "file", &[("p", ssd())]))
        .await
        .unwrap();
    core.add_storage_class(&ctx(), class(json!({"name": "any"})))
        .await
        .unwrap();
    add_volume(&core, &rid, volume("v", "1Gi", "any"))
        .await
        .unwrap();
    let filter = storch::actors::EventFilter {
        object: Some("volume/v".into()),
        ..Default::default()
    };
    let events = core.events(filter).await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["VolumeRequested", "PlacementPlanned", "VolumeCreated"]
    );
    assert!(events.iter().all(|e| e.request_id == "req-123"));
    assert_eq!(events[2].summary(), "volume v created on b/p (trident-v)");
    let json = serde_json::to_value(&events[2].event).unwrap();
    assert_eq!(json["name"], "v");
    assert_eq!(json["event"]["internalName"], "trident-v");
    let since = storch::actors::EventFilter {
        since: events[1].seq,
        limit: Some(1),
        ..Default::default()
    };
    assert_eq!(core.events(since).await.unwrap()[0].seq, events[1].seq);
    let bad = storch::actors::EventFilter {
        object: Some("disk/x".into()),
        ..Default::default()
    };
    assert!(matches!(core.events(bad).await, Err(CoreError::Invalid(_))));
    // the follower saw everything, in order
    let mut seen = Vec::new();
    while seen.len() < 6 {
        let e = tokio::time::timeout(std::time::Duration::from_secs(5), live.recv())
            .await
            .expect("a followed event arrives")
            .unwrap()
            .unwrap();
        seen.push(e.seq);
    }
    assert!(seen.windows(2).all(|w| w[1] == w[0] + 1), "{seen:?}");
    assert!(core.health().ready());
    let stats = core.stats();
    assert_eq!(stats.volumes_by_state.get("online"), Some(&1));
    assert_eq!(stats.backends_by_state.get("online"), Some(&1));
    assert_eq!(stats.pools[0].used_bytes, 1 << 30);
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_config_reconciles_without_touching_volumes() {
    use storch::actors::Declared;
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    let decl = |backends: Vec<serde_json::Value>, classes: Vec<serde_json::Value>| Declared {
        source: "/etc/storch.yaml".into(),
        backends,
        storage_classes: classes.into_iter().map(class).collect(),
    };
    let a = fake_backend("a", "file", &[("p", ssd())]);
    let b = fake_backend("b", "file", &[("p", hdd())]);
    let gold = json!({"name": "gold", "attributes": {"media": "ssd"}});
    let r = core
        .apply_declared(
            &RequestCtx::new("config:/etc/storch.yaml"),
            decl(vec![a.clone(), b.clone()], vec![gold.clone()]),
        )
        .await
        .unwrap();
    assert_eq!(r.backends_added, vec!["a", "b"]);
    assert_eq!(r.classes_added, vec!["gold"]);
    let events_before = core.events(Default::default()).await.unwrap().len();
    // applying the same file again changes nothing and records nothing
    let r = core
        .apply_declared(
            &RequestCtx::new("config:/etc/storch.yaml"),
            decl(vec![a.clone(), b.clone()], vec![gold.clone()]),
        )
        .await
        .unwrap();
    assert_eq!(r.backends_unchanged, vec!["a", "b"]);
    assert_eq!(r.classes_unchanged, vec!["gold"]);
    assert_eq!(
        core.events(Default::default()).await.unwrap().len(),
        events_before
    );
    let evs = core.events(Default::default()).await.unwrap();
    assert!(
        evs.iter()
            .all(|e| e.request_id == "config:/etc/storch.yaml")
    );

    add_volume(&core, &ctx(), volume("v", "1Gi", "gold"))
        .await
        .unwrap();
    // a REST-made backend is not the file's to remove
    core.add_backend(&ctx(), fake_backend("rest", "file", &[("p", ssd())]))
        .await
        .unwrap();
    // drop backend a (it has a volume: offline), change gold, remove nothing else
    let gold2 = json!({"name": "gold", "attributes": {"media": "ssd", "snapshots": "true"}});
    let r = core
        .apply_declared(
            &RequestCtx::new("config:/etc/storch.yaml"),
            decl(vec![b.clone()], vec![gold2]),
        )
        .await
        .unwrap();
    assert_eq!(r.backends_removed, vec!["a"]);
    assert_eq!(r.classes_updated, vec!["gold"]);
    assert!(!core.get_backend("a").unwrap().online);
    assert_eq!(
        core.get_volume("v").unwrap().backend,
        "a",
        "volumes are never deleted"
    );
    assert!(core.get_backend("rest").unwrap().online);
    // an invalid file changes nothing and names the entry
    let bad = json!({"version": 1, "storageDriverName": "nope"});
    let err = core
        .apply_declared(
            &RequestCtx::new("config:/etc/storch.yaml"),
            decl(vec![b.clone(), bad], vec![]),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("backends[1]"), "{err}");
    assert!(
        core.get_storage_class("gold").is_ok(),
        "nothing was removed"
    );
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limit_is_validated() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    for bad in [json!(0), json!(-1), json!("8"), json!(1_000_000)] {
        let mut b = fake_backend("b", "file", &[("p", ssd())]);
        b["concurrencyLimit"] = bad.clone();
        let err = core.add_backend(&ctx(), b).await.unwrap_err();
        assert!(err.to_string().contains("concurrencyLimit"), "{bad}: {err}");
    }
    let mut b = fake_backend("b", "file", &[("p", ssd())]);
    b["concurrencyLimit"] = json!(4);
    core.add_backend(&ctx(), b).await.unwrap();
    rt.shutdown().await;
}

/// A busy array gets no new work while another has free permits: with `slow` holding its
/// only permit for a long create, every create of a class that both backends serve lands on
/// `fast` (random placement alone would put about half of them behind the slow one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_prefers_the_backend_with_free_permits() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    let mut slow = fake_backend("slow", "file", &[("p", ssd())]);
    slow["latency"] = json!("1s");
    slow["concurrencyLimit"] = json!(1);
    core.add_backend(&ctx(), slow).await.unwrap();
    core.add_backend(&ctx(), fake_backend("fast", "file", &[("p", ssd())]))
        .await
        .unwrap();
    core.add_storage_class(
        &ctx(),
        class(json!({"name": "slow-only", "storagePools": {"slow": ["p"]}})),
    )
    .await
    .unwrap();
    core.add_storage_class(&ctx(), class(json!({"name": "any"})))
        .await
        .unwrap();
    // Occupy slow's only permit.
    let busy = {
        let core = core.clone();
        tokio::spawn(
            async move { add_volume(&core, &ctx(), volume("hog", "1Gi", "slow-only")).await },
        )
    };
    eventually("the slow create holding its permit", async || {
        core.stats()
            .backends
            .iter()
            .any(|b| b.backend == "slow" && b.in_flight == 1)
    })
    .await;
    for i in 0..6 {
        let v = add_volume(&core, &ctx(), volume(&format!("v{i}"), "1Gi", "any"))
            .await
            .unwrap();
        assert_eq!(v.backend, "fast", "v{i} was queued behind the busy array");
    }
    assert_eq!(busy.await.unwrap().unwrap().backend, "slow");
    rt.shutdown().await;
}

/// `bind_volume` records `VolumeBound` once, however many callers ask at once and after a
/// restart; bad input and unknown volumes change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_is_recorded_once_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let bindings = async |core: &storch::actors::Core| {
        let filter = storch::actors::EventFilter {
            object: Some("volume/v1".into()),
            ..Default::default()
        };
        let events = core.events(filter).await.unwrap();
        events
            .into_iter()
            .filter(|e| e.kind == "VolumeBound")
            .map(|e| (e.request_id, e.event.summary()))
            .collect::<Vec<_>>()
    };
    {
        let rt = start(dir.path()).await;
        let core = rt.core();
        let mut be = fake_backend("b", "file", &[("p1", ssd())]);
        be["statePath"] = json!(dir.path().join("array.json"));
        core.add_backend(&ctx(), be).await.unwrap();
        core.add_storage_class(&ctx(), class(json!({"name": "any"})))
            .await
            .unwrap();
        add_volume(&core, &ctx(), volume("v1", "1G", "any"))
            .await
            .unwrap();
        assert!(!core.get_volume("v1").unwrap().bound);
        let head = core.events(Default::default()).await.unwrap().len();
        for to in ["", "  "] {
            match core.bind_volume(&ctx(), "v1", to).await {
                Err(CoreError::Invalid(why)) => assert!(why.starts_with("to:"), "{why}"),
                other => panic!("an empty consumer: {other:?}"),
            }
        }
        assert!(matches!(
            core.bind_volume(&ctx(), "nope", "k8s:pv/nope").await,
            Err(CoreError::NotFound(_))
        ));
        assert_eq!(
            core.events(Default::default()).await.unwrap().len(),
            head,
            "refusals record nothing"
        );
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let core = core.clone();
            tasks.push(tokio::spawn(async move {
                let request = RequestCtx::new("k8s:pv/v1".to_string());
                core.bind_volume(&request, "v1", "k8s:pv/v1").await.unwrap()
            }));
        }
        let mut recorded = 0;
        for t in tasks {
            recorded += usize::from(t.await.unwrap());
        }
        assert_eq!(recorded, 1, "one caller records it");
        assert!(core.get_volume("v1").unwrap().bound);
        assert_eq!(
            bindings(&core).await,
            [(
                "k8s:pv/v1".to_string(),
                "volume v1 bound to k8s:pv/v1".to_string()
            )]
        );
        rt.shutdown().await;
    }
    let rt = start(dir.path()).await;
    let core = rt.core();
    assert!(core.get_volume("v1").unwrap().bound, "after a restart");
    assert!(!core.bind_volume(&ctx(), "v1", "k8s:pv/v1").await.unwrap());
    assert_eq!(bindings(&core).await.len(), 1);
    // A bound volume is still deleted when asked (the Kubernetes PV controller's reclaim).
    core.delete_volume(&ctx(), "v1").await.unwrap();
    assert!(core.get_volume("v1").is_err());
    rt.shutdown().await;
}

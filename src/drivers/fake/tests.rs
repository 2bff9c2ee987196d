//! Unit tests of the fake driver: config, behaviour, failure knobs, state file, load.
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::drivers::testing::{clone_req, free, merged, req};
use crate::model::Offer;

pub(super) const GIB: u64 = 1 << 30;
pub(super) const MIB: u64 = 1 << 20;

/// A fake config with pools `p1` (10 GiB, snapshots offered) and `p2` (1 GiB), plus
/// `extra` merged over the top level.
pub(super) fn cfg(extra: Value) -> Value {
    let doc = json!({
        "version": 1,
        "storageDriverName": "fake",
        "instanceName": "fake1",
        "protocol": "file",
        "pools": {
            "p1": {"attributes": {"snapshots": {"offer": true}, "media": {"offer": ["ssd"]}},
                   "sizeBytes": 10 * GIB},
            "p2": {"attributes": {}, "sizeBytes": GIB},
        },
    });
    merged(doc, extra)
}

pub(super) fn driver(extra: Value) -> FakeDriver {
    FakeDriver::new(&cfg(extra)).unwrap()
}

fn invalid(doc: Value) -> String {
    match FakeDriver::new(&doc) {
        Err(DriverError::Invalid(msg)) => msg,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

// ---- config ----

#[test]
fn backend_name_and_serials() {
    let d = driver(json!({}));
    assert_eq!(d.backend_name(), "fake1");
    let d = driver(json!({"backendName": "custom"}));
    assert_eq!(d.backend_name(), "custom");
    assert_eq!(d.external_config()["serialNumbers"], json!(["fake1_SN"]));
    // backendName alone is enough.
    let mut doc = cfg(json!({"backendName": "b"}));
    doc.as_object_mut().unwrap().remove("instanceName");
    assert_eq!(FakeDriver::new(&doc).unwrap().backend_name(), "b");
    // Neither: the error names both fields.
    let msg = invalid(cfg(json!({"instanceName": ""})));
    assert!(
        msg.contains("backendName") && msg.contains("instanceName"),
        "{msg}"
    );
    let msg = invalid(cfg(json!({"instanceName": "a/b"})));
    assert!(msg.contains("instanceName"), "{msg}");
    let msg = invalid(cfg(json!({"instanceName": 3})));
    assert!(msg.contains("instanceName"), "{msg}");
}

#[test]
fn protocol_config() {
    for (p, want) in [
        ("file", Protocol::File),
        ("block", Protocol::Block),
        ("", Protocol::Any),
    ] {
        assert_eq!(driver(json!({"protocol": p})).cfg.protocol, want);
    }
    let mut doc = cfg(json!({}));
    doc.as_object_mut().unwrap().remove("protocol");
    assert_eq!(FakeDriver::new(&doc).unwrap().cfg.protocol, Protocol::Any);
    let msg = invalid(cfg(json!({"protocol": "nfs"})));
    assert!(msg.contains("protocol"), "{msg}");
    let msg = invalid(cfg(json!({"protocol": 1})));
    assert!(msg.contains("protocol"), "{msg}");
}

#[test]
fn pool_config_errors_name_the_field() {
    let msg = invalid(cfg(json!({"pools": {"p": {"sizeBytes": 5}}})));
    assert!(msg.contains("pools.p.attributes"), "{msg}");
    let msg = invalid(cfg(
        json!({"pools": {"p": {"attributes": [], "sizeBytes": 5}}}),
    ));
    assert!(msg.contains("pools.p.attributes"), "{msg}");
    let msg = invalid(cfg(
        json!({"pools": {"p": {"attributes": {"colour": {"offer": true}}}}}),
    ));
    assert!(
        msg.contains("pools.p.attributes") && msg.contains("colour"),
        "{msg}"
    );
    let msg = invalid(cfg(
        json!({"pools": {"p": {"attributes": {"snapshots": {"min": 1, "max": 2}}}}}),
    ));
    assert!(
        msg.contains("pools.p.attributes") && msg.contains("snapshots"),
        "{msg}"
    );
    let msg = invalid(cfg(
        json!({"pools": {"p": {"attributes": {}, "sizeBytes": -1}}}),
    ));
    assert!(msg.contains("pools.p.sizeBytes"), "{msg}");
    let msg = invalid(cfg(
        json!({"pools": {"p": {"attributes": {}, "sizeBytes": "1G"}}}),
    ));
    assert!(msg.contains("pools.p.sizeBytes"), "{msg}");
    let msg = invalid(cfg(json!({"pools": {"p": 5}})));
    assert!(msg.contains("pools.p"), "{msg}");
    let msg = invalid(cfg(json!({"pools": []})));
    assert!(msg.contains("pools"), "{msg}");
    let msg = invalid(cfg(json!({"pools": {"a/b": {"attributes": {}}}})));
    assert!(msg.contains("pool name"), "{msg}");
    let msg = invalid(cfg(json!({"pools": {"..": {"attributes": {}}}})));
    assert!(msg.contains("pool name"), "{msg}");
}

#[test]
fn pools_without_size_or_at_all() {
    let d = driver(json!({"pools": {"p": {"attributes": {}}}}));
    assert_eq!(d.cfg.pools[0].size_bytes, 0);
    let d = driver(json!({"pools": null}));
    assert!(d.cfg.pools.is_empty());
}

#[test]
fn knob_errors_name_the_field() {
    for (extra, field) in [
        (json!({"latency": "soon"}), "latency"),
        (json!({"latency": 10}), "latency"),
        (json!({"latency": "lognormal:200ms:x"}), "latency"),
        (json!({"latency": "lognormal:200ms:-1"}), "latency"),
        (json!({"failureRate": 1.5}), "failureRate"),
        (json!({"failureRate": -0.1}), "failureRate"),
        (json!({"failureRate": "0.5"}), "failureRate"),
        (json!({"failPools": {"nope": "x"}}), "failPools"),
        (json!({"failPools": {"p1": 5}}), "failPools.p1"),
        (json!({"failPools": ["p1"]}), "failPools"),
        (json!({"statePath": 5}), "statePath"),
        (json!({"statePath": ""}), "statePath"),
        (
            json!({"statePath": "/nonexistent-dir-for-storch/state.json"}),
            "statePath",
        ),
        (json!({"username": 5}), "username"),
        (json!({"password": false}), "password"),
    ] {
        let msg = invalid(cfg(extra.clone()));
        assert!(msg.contains(field), "{extra}: {msg}");
    }
}

#[test]
fn latency_parsing_and_sampling() {
    assert_eq!(Latency::parse("0ms").unwrap(), Latency::None);
    assert_eq!(Latency::parse("0s").unwrap(), Latency::None);
    assert_eq!(
        Latency::parse("10ms").unwrap(),
        Latency::Fixed(Duration::from_millis(10))
    );
    assert_eq!(
        Latency::parse("fixed:1s").unwrap(),
        Latency::Fixed(Duration::from_secs(1))
    );
    assert_eq!(
        Latency::parse("lognormal:200ms").unwrap(),
        Latency::LogNormal {
            median: Duration::from_millis(200),
            sigma: 0.5
        }
    );
    assert_eq!(
        Latency::parse("lognormal:200ms:0.8").unwrap(),
        Latency::LogNormal {
            median: Duration::from_millis(200),
            sigma: 0.8
        }
    );
    assert_eq!(Latency::parse("lognormal:0ms").unwrap(), Latency::None);
    assert!(Latency::parse("lognormal:").is_err());
    assert!(Latency::parse("ten").is_err());
    assert_eq!(Latency::None.sample(), None);
    assert_eq!(
        Latency::Fixed(Duration::from_millis(3)).sample(),
        Some(Duration::from_millis(3))
    );
    // The lognormal's sample median is close to the configured median (a statistical check
    // on the sampled values, no clock involved).
    let l = Latency::parse("lognormal:200ms").unwrap();
    let mut samples: Vec<Duration> = (0..4001).map(|_| l.sample().unwrap()).collect();
    samples.sort();
    let median = samples[2000].as_secs_f64();
    assert!((0.17..0.235).contains(&median), "sample median {median}");
    assert!(
        samples
            .iter()
            .all(|s| *s <= Duration::from_millis(200) * 100)
    );
    assert!(samples[0] < samples[4000], "no spread");
}

#[tokio::test]
async fn latency_is_applied() {
    let d = driver(json!({"latency": "5ms"}));
    let start = std::time::Instant::now();
    d.create(&req("v", "p1", GIB)).await.unwrap();
    // Loose: the call slept at least once (no upper bound).
    assert!(start.elapsed() >= Duration::from_millis(5));
    let d = driver(json!({"latency": "lognormal:1ms"}));
    d.create(&req("v", "p1", GIB)).await.unwrap();
    assert!(d.get("v").await.unwrap().is_some());
}

#[test]
fn keys_are_case_insensitive() {
    let d = FakeDriver::new(&json!({
        "Version": 1, "StorageDriverName": "fake", "InstanceName": "i",
        "Pools": {"p": {"Attributes": {}, "SizeBytes": 5}}, "Protocol": "block",
    }))
    .unwrap();
    assert_eq!(d.backend_name(), "i");
    assert_eq!(d.cfg.pools[0].size_bytes, 5);
    assert_eq!(d.cfg.protocol, Protocol::Block);
}

#[tokio::test]
async fn secrets_are_never_shown() {
    let canary_user = "canary-user-7731";
    let canary = "canary-password-9917";
    let d = driver(json!({"username": canary_user, "password": canary}));
    let shown = d.external_config().to_string();
    assert!(
        !shown.contains(canary) && !shown.contains(canary_user),
        "{shown}"
    );
    let debug = format!("{d:?}");
    assert!(
        !debug.contains(canary) && !debug.contains(canary_user),
        "{debug}"
    );
    let mut errors = Vec::new();
    errors.push(d.create(&req("v", "nope", GIB)).await.unwrap_err());
    errors.push(d.create(&req("v", "p2", 100 * GIB)).await.unwrap_err());
    errors.push(d.access_info("x").await.unwrap_err());
    for e in &errors {
        assert!(!format!("{e} {e:?}").contains(canary));
    }
    // Config errors do not echo values either.
    let msg = invalid(cfg(json!({"password": canary, "failureRate": "x"})));
    assert!(!msg.contains(canary), "{msg}");
    let msg = invalid(cfg(json!({"password": [canary]})));
    assert!(!msg.contains(canary), "{msg}");
}

// ---- behaviour ----

#[test]
fn internal_name_ignores_storage_prefix() {
    let d = driver(json!({"storagePrefix": "custom_"}));
    assert_eq!(d.internal_name("pvc-1"), "trident-pvc-1");
    assert_eq!(d.internal_name("a.b_c"), "trident-a.b_c");
    assert_eq!(d.external_config()["storagePrefix"], "custom_");
    assert_eq!(
        driver(json!({})).external_config()["storagePrefix"],
        Value::Null
    );
}

#[tokio::test]
async fn discover_reports_pools_offers_and_capacity() {
    let d = driver(json!({}));
    let disc = d.discover().await.unwrap();
    assert_eq!(disc.backend_name, "fake1");
    assert_eq!(disc.protocol, Protocol::File);
    let names: Vec<&str> = disc.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["p1", "p2"]);
    let p1 = &disc.pools[0];
    assert_eq!(p1.total_bytes, Some(10 * GIB));
    assert_eq!(
        p1.offers["backendType"],
        Offer::Strings(BTreeSet::from(["fake".to_string()]))
    );
    assert_eq!(p1.offers["snapshots"], Offer::Bool(true));
    assert_eq!(
        p1.offers["media"],
        Offer::Strings(BTreeSet::from(["ssd".to_string()]))
    );
    assert_eq!(disc.pools[1].offers.len(), 1);
    assert_eq!(disc.free_bytes["p1"], 10 * GIB);
    d.create(&req("v", "p1", GIB)).await.unwrap();
    let disc = d.discover().await.unwrap();
    assert_eq!(disc.free_bytes["p1"], 9 * GIB);
    assert_eq!(
        disc.pools[0].total_bytes,
        Some(10 * GIB),
        "total stays the configured size"
    );
}

#[test]
fn configured_backend_type_is_overridden() {
    let d =
        driver(json!({"pools": {"p": {"attributes": {"backendType": {"offer": ["ontap-nas"]}}}}}));
    assert_eq!(
        d.cfg.pools[0].info.offers["backendType"],
        Offer::Strings(BTreeSet::from(["fake".to_string()]))
    );
}

#[tokio::test]
async fn external_config_shape() {
    let d = driver(json!({"backendName": "b", "password": "secret"}));
    d.create(&req("v", "p2", 256 * MIB)).await.unwrap();
    let ext = d.external_config();
    assert_eq!(
        ext,
        json!({
            "version": 1,
            "storageDriverName": "fake",
            "storagePrefix": null,
            "serialNumbers": ["fake1_SN"],
            "protocol": "file",
            "pools": {
                "p1": {"attributes": {"backendType": {"offer": ["fake"]},
                                      "media": {"offer": ["ssd"]},
                                      "snapshots": {"offer": true}},
                       "sizeBytes": 10 * GIB},
                "p2": {"attributes": {"backendType": {"offer": ["fake"]}},
                       "sizeBytes": GIB - 256 * MIB},
            },
            "InstanceName": "fake1",
        })
    );
}

#[tokio::test]
async fn create_get_destroy() {
    let d = driver(json!({}));
    assert_eq!(d.get("trident-v").await.unwrap(), None);
    let info = d.create(&req("trident-v", "p1", 2 * GIB)).await.unwrap();
    assert_eq!(
        info,
        VolumeInfo {
            internal_name: "trident-v".into(),
            pool: "p1".into(),
            size_bytes: 2 * GIB,
            access: AccessInfo {
                nfs_server_ip: "192.0.2.1".into(),
                nfs_path: "/trident-v".into(),
                ..AccessInfo::default()
            },
        }
    );
    assert_eq!(d.get("trident-v").await.unwrap(), Some(info.clone()));
    assert_eq!(free(&d, "p1").await, 8 * GIB);
    match d.create(&req("trident-v", "p2", GIB)).await {
        Err(DriverError::AlreadyExists(msg)) => assert!(msg.contains("trident-v"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        free(&d, "p2").await,
        GIB,
        "a duplicate create took no capacity"
    );
    assert_eq!(d.list_volumes().await.unwrap(), vec![info]);
    d.destroy("trident-v").await.unwrap();
    d.destroy("trident-v").await.unwrap();
    assert_eq!(d.get("trident-v").await.unwrap(), None);
    assert_eq!(free(&d, "p1").await, 10 * GIB);
    assert!(d.list_volumes().await.unwrap().is_empty());
}

#[tokio::test]
async fn create_size_rules() {
    let d = driver(json!({"defaults": {"size": "300M"}}));
    // 0 means defaults.size.
    let v = d.create(&req("zero", "p2", 0)).await.unwrap();
    assert_eq!(v.size_bytes, 300 * MIB);
    // Exactly 1 MiB is fine, one byte less is not.
    assert_eq!(
        d.create(&req("min", "p2", MIB)).await.unwrap().size_bytes,
        MIB
    );
    match d.create(&req("small", "p2", MIB - 1)).await {
        Err(DriverError::Invalid(msg)) => assert!(msg.contains("too small"), "{msg}"),
        other => panic!("{other:?}"),
    }
    // The rest of p2 fits exactly; one more byte does not.
    let left = free(&d, "p2").await;
    match d.create(&req("big", "p2", left + 1)).await {
        Err(DriverError::Conflict(msg)) => {
            assert!(msg.contains("p2") && msg.contains("too large"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    d.create(&req("rest", "p2", left)).await.unwrap();
    assert_eq!(free(&d, "p2").await, 0);
    assert!(matches!(
        d.create(&req("more", "p2", MIB)).await,
        Err(DriverError::Conflict(_))
    ));
    // Default size 1 GiB when defaults are absent.
    let d = driver(json!({}));
    assert_eq!(
        d.create(&req("zero", "p1", 0)).await.unwrap().size_bytes,
        GIB
    );
}

#[tokio::test]
async fn create_pool_and_name_rules() {
    let d = driver(json!({}));
    assert!(matches!(
        d.create(&req("v", "", GIB)).await,
        Err(DriverError::Invalid(_))
    ));
    match d.create(&req("v", "p3", GIB)).await {
        Err(DriverError::Invalid(msg)) => assert!(msg.contains("p3"), "{msg}"),
        other => panic!("{other:?}"),
    }
    for bad in ["", "a/b", "..", "a\nb"] {
        assert!(
            matches!(
                d.create(&req(bad, "p1", GIB)).await,
                Err(DriverError::Invalid(_))
            ),
            "{bad:?}"
        );
    }
    assert!(d.list_volumes().await.unwrap().is_empty());
}

#[tokio::test]
async fn access_info_per_protocol() {
    let block = AccessInfo {
        iscsi_target_portal: "192.0.2.1".into(),
        iscsi_portals: vec!["192.0.2.2".into()],
        iscsi_target_iqn: "iqn.2017-06.com.netapp:fake".into(),
        iscsi_lun_number: 0,
        ..AccessInfo::default()
    };
    let d = driver(json!({"protocol": "block"}));
    let v = d.create(&req("b", "p1", GIB)).await.unwrap();
    assert_eq!(v.access, block);
    assert_eq!(d.access_info("b").await.unwrap(), block);
    assert!(matches!(
        d.access_info("nope").await,
        Err(DriverError::NotFound(_))
    ));

    // A backend of protocol "" serves each volume as its config asks (file when open).
    let d = driver(json!({"protocol": ""}));
    let mut r = req("b", "p1", GIB);
    r.config.protocol = Protocol::Block;
    assert_eq!(d.create(&r).await.unwrap().access, block);
    let f = d.create(&req("f", "p1", GIB)).await.unwrap();
    assert_eq!(f.access.nfs_path, "/f");
    assert_eq!(f.access.nfs_server_ip, "192.0.2.1");
    // A clone keeps its source's protocol.
    let c = d.clone_volume(&clone_req("c", "b", None)).await.unwrap();
    assert_eq!(c.access, block);
}

#[tokio::test]
async fn clones() {
    let d = driver(json!({}));
    d.create(&req("src", "p2", 300 * MIB)).await.unwrap();
    let c = d.clone_volume(&clone_req("c1", "src", None)).await.unwrap();
    assert_eq!((c.pool.as_str(), c.size_bytes), ("p2", 300 * MIB));
    assert_eq!(c.access.nfs_path, "/c1");
    assert_eq!(free(&d, "p2").await, GIB - 600 * MIB);

    // From a snapshot: the snapshot's size, even after the source grew.
    d.create_snapshot("src", "s1").await.unwrap();
    d.resize("src", 400 * MIB).await.unwrap();
    let c2 = d
        .clone_volume(&clone_req("c2", "src", Some("s1")))
        .await
        .unwrap();
    assert_eq!(c2.size_bytes, 300 * MIB);
    assert_eq!(free(&d, "p2").await, GIB - 1000 * MIB);

    assert!(matches!(
        d.clone_volume(&clone_req("c3", "missing", None)).await,
        Err(DriverError::NotFound(_))
    ));
    match d.clone_volume(&clone_req("c3", "src", Some("nope"))).await {
        Err(DriverError::NotFound(msg)) => assert!(msg.contains("nope"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        d.clone_volume(&clone_req("c1", "src", None)).await,
        Err(DriverError::AlreadyExists(_))
    ));
    // No room left for another 400 MiB clone.
    assert!(matches!(
        d.clone_volume(&clone_req("c3", "src", None)).await,
        Err(DriverError::Conflict(_))
    ));
    assert_eq!(d.get("c3").await.unwrap(), None);
    // A clone is independent of its source.
    d.destroy("src").await.unwrap();
    assert!(d.get("c2").await.unwrap().is_some());
}

#[tokio::test]
async fn snapshots() {
    let d = driver(json!({}));
    assert!(matches!(
        d.create_snapshot("v", "s").await,
        Err(DriverError::NotFound(_))
    ));
    assert!(matches!(
        d.list_snapshots("v").await,
        Err(DriverError::NotFound(_))
    ));
    d.delete_snapshot("v", "s").await.unwrap();

    d.create(&req("v", "p1", GIB)).await.unwrap();
    let s = d.create_snapshot("v", "s1").await.unwrap();
    assert_eq!(
        (
            s.name.as_str(),
            s.volume_internal_name.as_str(),
            s.size_bytes
        ),
        ("s1", "v", GIB)
    );
    assert!(s.created_ms > 0);
    assert!(matches!(
        d.create_snapshot("v", "s1").await,
        Err(DriverError::AlreadyExists(_))
    ));
    assert!(matches!(
        d.create_snapshot("v", "a/b").await,
        Err(DriverError::Invalid(_))
    ));
    d.create_snapshot("v", "s2").await.unwrap();
    let names: Vec<String> = d
        .list_snapshots("v")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["s1", "s2"]);
    d.delete_snapshot("v", "s1").await.unwrap();
    d.delete_snapshot("v", "s1").await.unwrap();
    assert_eq!(d.list_snapshots("v").await.unwrap().len(), 1);
    // Snapshots take no pool capacity, and go with their volume.
    assert_eq!(free(&d, "p1").await, 9 * GIB);
    d.destroy("v").await.unwrap();
    d.create(&req("v", "p1", GIB)).await.unwrap();
    assert!(d.list_snapshots("v").await.unwrap().is_empty());
}

#[tokio::test]
async fn limit_volume_size_caps_creates_and_resizes() {
    let d = driver(json!({"limitVolumeSize": "512Mi"}));
    assert_eq!(d.size_limits().max_bytes, Some(512 * MIB));
    assert_eq!(d.external_config()["limitVolumeSize"], "512Mi");
    match d.create(&req("big", "p1", 513 * MIB)).await {
        Err(DriverError::Invalid(msg)) => assert!(msg.contains("too large"), "{msg}"),
        other => panic!("{other:?}"),
    }
    d.create(&req("v", "p1", 256 * MIB)).await.unwrap();
    match d.resize("v", 513 * MIB).await {
        Err(DriverError::Invalid(msg)) => assert!(msg.contains("too large"), "{msg}"),
        other => panic!("{other:?}"),
    }
    d.resize("v", 512 * MIB).await.unwrap();
    assert_eq!(driver(json!({})).size_limits().max_bytes, None);
    for bad in [json!("lots"), json!("1Ki"), json!(5)] {
        let msg = invalid(cfg(json!({"limitVolumeSize": bad})));
        assert!(msg.contains("limitVolumeSize"), "{msg}");
    }
}

#[tokio::test]
async fn resize() {
    let d = driver(json!({}));
    assert!(matches!(
        d.resize("v", GIB).await,
        Err(DriverError::NotFound(_))
    ));
    d.create(&req("v", "p2", 256 * MIB)).await.unwrap();
    d.resize("v", 512 * MIB).await.unwrap();
    assert_eq!(d.get("v").await.unwrap().unwrap().size_bytes, 512 * MIB);
    assert_eq!(free(&d, "p2").await, 512 * MIB);
    d.resize("v", 512 * MIB).await.unwrap();
    match d.resize("v", 100 * MIB).await {
        Err(DriverError::Invalid(msg)) => assert!(msg.contains("shrink"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        d.resize("v", GIB + 1).await,
        Err(DriverError::Conflict(_))
    ));
    assert_eq!(d.get("v").await.unwrap().unwrap().size_bytes, 512 * MIB);
    d.resize("v", GIB).await.unwrap();
    assert_eq!(free(&d, "p2").await, 0);
    d.destroy("v").await.unwrap();
    assert_eq!(free(&d, "p2").await, GIB);
}

#[tokio::test]
async fn list_volumes_is_sorted() {
    let d = driver(json!({}));
    for n in ["c", "a", "b"] {
        d.create(&req(n, "p1", GIB)).await.unwrap();
    }
    let names: Vec<String> = d
        .list_volumes()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.internal_name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
}

// ---- failure knobs ----

#[tokio::test]
async fn failure_rate_one_always_fails() {
    let d = driver(json!({"failureRate": 1.0}));
    for i in 0..50 {
        let e = d
            .create(&req(&format!("v{i}"), "p1", GIB))
            .await
            .unwrap_err();
        assert!(matches!(e, DriverError::Unavailable(_)), "{e:?}");
        assert!(e.is_retryable());
    }
    assert!(d.list_volumes().await.unwrap().is_empty());
    assert_eq!(free(&d, "p1").await, 10 * GIB);
    // Clones fail too; other calls do not.
    let d2 = driver(json!({}));
    d2.create(&req("src", "p1", GIB)).await.unwrap();
    let state = d2.lock().volumes.clone();
    d.lock().volumes = state;
    assert!(matches!(
        d.clone_volume(&clone_req("c", "src", None)).await,
        Err(DriverError::Unavailable(_))
    ));
    d.create_snapshot("src", "s").await.unwrap();
    d.destroy("src").await.unwrap();
}

#[tokio::test]
async fn failure_rate_zero_never_fails() {
    let d = driver(
        json!({"failureRate": 0.0, "pools": {"p": {"attributes": {}, "sizeBytes": 1000 * GIB}}}),
    );
    for i in 0..500 {
        d.create(&req(&format!("v{i}"), "p", GIB)).await.unwrap();
    }
}

#[tokio::test]
async fn failure_rate_half_fails_sometimes() {
    let d = driver(
        json!({"failureRate": 0.5, "pools": {"p": {"attributes": {}, "sizeBytes": 1000 * GIB}}}),
    );
    let mut failed = 0;
    for i in 0..400 {
        if d.create(&req(&format!("v{i}"), "p", GIB)).await.is_err() {
            failed += 1;
        }
    }
    // Far outside these bounds has probability below 1e-20.
    assert!((100..300).contains(&failed), "{failed} of 400 failed");
}

#[tokio::test]
async fn fail_pools() {
    let d = driver(json!({"failPools": {"p2": "pool p2 is on fire"}}));
    match d.create(&req("v", "p2", GIB)).await {
        Err(DriverError::Other(msg)) => assert_eq!(msg, "pool p2 is on fire"),
        other => panic!("{other:?}"),
    }
    assert_eq!(free(&d, "p2").await, GIB);
    d.create(&req("v", "p1", GIB)).await.unwrap();
    // A clone on the failing pool fails too.
    let d = driver(json!({"failPools": {"p1": "nope"}}));
    d.lock().volumes.insert(
        "src".into(),
        Volume {
            pool: 0,
            size_bytes: GIB,
            protocol: Protocol::File,
            snapshots: vec![],
            hosts: Default::default(),
        },
    );
    assert!(matches!(
        d.clone_volume(&clone_req("c", "src", None)).await,
        Err(DriverError::Other(m)) if m == "nope"
    ));
}

#[tokio::test]
async fn fail_destroy_refuses_deletes_of_held_volumes() {
    let d = driver(json!({"failDestroy": "array busy"}));
    d.create(&req("v", "p1", GIB)).await.unwrap();
    match d.destroy("v").await {
        Err(DriverError::Unavailable(msg)) => assert_eq!(msg, "array busy"),
        other => panic!("{other:?}"),
    }
    assert!(d.get("v").await.unwrap().is_some(), "the volume stays");
    // a volume the array does not hold is gone already
    d.destroy("nothing").await.unwrap();
    let msg = invalid(cfg(json!({"failDestroy": 1})));
    assert!(msg.contains("failDestroy"), "{msg}");
}

#[tokio::test]
async fn use_chap_gives_block_volumes_credentials() {
    let d = driver(json!({"useCHAP": true, "protocol": "block"}));
    let mut r = req("v", "p1", GIB);
    r.config.protocol = Protocol::Block;
    let info = d.create(&r).await.unwrap();
    assert_eq!(info.access.iscsi_username, "fake-chap-fake1");
    assert_eq!(info.access.iscsi_initiator_secret, CHAP_INITIATOR_SECRET);
    assert_eq!(info.access.iscsi_target_secret, CHAP_TARGET_SECRET);
    assert_eq!(d.access_info("v").await.unwrap(), info.access);
    let msg = invalid(cfg(json!({"useCHAP": "yes"})));
    assert!(msg.contains("useCHAP"), "{msg}");
}

// ---- statePath ----

pub(super) fn state_cfg(path: &Path) -> Value {
    cfg(json!({"statePath": path.to_str().unwrap()}))
}

#[tokio::test]
async fn state_survives_drop_and_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.json");
    {
        let d = FakeDriver::new(&state_cfg(&path)).unwrap();
        d.create(&req("a", "p1", 2 * GIB)).await.unwrap();
        d.create(&req("b", "p2", 300 * MIB)).await.unwrap();
        d.create_snapshot("a", "s1").await.unwrap();
        d.clone_volume(&clone_req("c", "a", Some("s1")))
            .await
            .unwrap();
        d.resize("b", 400 * MIB).await.unwrap();
        d.create(&req("gone", "p1", GIB)).await.unwrap();
        d.destroy("gone").await.unwrap();
        assert!(path.exists());
        assert!(
            !dir.path().join("fake.json.tmp").exists(),
            "temp file renamed away"
        );
    }
    let d = FakeDriver::new(&state_cfg(&path)).unwrap();
    let names: Vec<String> = d
        .list_volumes()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.internal_name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(d.get("b").await.unwrap().unwrap().size_bytes, 400 * MIB);
    assert_eq!(d.get("c").await.unwrap().unwrap().size_bytes, 2 * GIB);
    assert_eq!(d.list_snapshots("a").await.unwrap()[0].name, "s1");
    assert_eq!(free(&d, "p1").await, 6 * GIB);
    assert_eq!(free(&d, "p2").await, GIB - 400 * MIB);
    assert!(matches!(
        d.create(&req("a", "p1", GIB)).await,
        Err(DriverError::AlreadyExists(_))
    ));
    d.destroy("a").await.unwrap();
    drop(d);
    let d = FakeDriver::new(&state_cfg(&path)).unwrap();
    assert_eq!(d.get("a").await.unwrap(), None);
    assert_eq!(free(&d, "p1").await, 8 * GIB);
}

#[tokio::test]
async fn state_block_protocol_survives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.json");
    let doc = cfg(json!({"statePath": path.to_str().unwrap(), "protocol": ""}));
    {
        let d = FakeDriver::new(&doc).unwrap();
        let mut r = req("blk", "p1", GIB);
        r.config.protocol = Protocol::Block;
        d.create(&r).await.unwrap();
    }
    let d = FakeDriver::new(&doc).unwrap();
    assert_eq!(
        d.access_info("blk").await.unwrap().iscsi_target_iqn,
        ISCSI_TARGET_IQN
    );
}

#[tokio::test]
async fn torn_temp_file_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.json");
    {
        let d = FakeDriver::new(&state_cfg(&path)).unwrap();
        d.create(&req("a", "p1", GIB)).await.unwrap();
    }
    // A crash mid-write leaves a torn temp file next to the good state file.
    fs::write(
        dir.path().join("fake.json.tmp"),
        b"{\"format\":1,\"instanceNa",
    )
    .unwrap();
    let d = FakeDriver::new(&state_cfg(&path)).unwrap();
    assert!(d.get("a").await.unwrap().is_some());
    // The next write replaces the temp file and works.
    d.create(&req("b", "p1", GIB)).await.unwrap();
    drop(d);
    let d = FakeDriver::new(&state_cfg(&path)).unwrap();
    assert_eq!(d.list_volumes().await.unwrap().len(), 2);

    // A torn temp file and no state file at all: an empty array.
    let path2 = dir.path().join("other.json");
    fs::write(dir.path().join("other.json.tmp"), b"garbage").unwrap();
    let d = FakeDriver::new(&state_cfg(&path2)).unwrap();
    assert!(d.list_volumes().await.unwrap().is_empty());
}

#[tokio::test]
async fn bad_state_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake.json");
    fs::write(&path, b"not json").unwrap();
    let msg = invalid(state_cfg(&path));
    assert!(
        msg.contains("statePath") && msg.contains("fake.json"),
        "{msg}"
    );

    fs::remove_file(&path).unwrap();
    {
        let d = FakeDriver::new(&state_cfg(&path)).unwrap();
        d.create(&req("a", "p2", GIB)).await.unwrap();
    }
    // Another instance's file.
    let msg = invalid(cfg(
        json!({"statePath": path.to_str().unwrap(), "instanceName": "fake2"}),
    ));
    assert!(msg.contains("statePath") && msg.contains("fake1"), "{msg}");
    // A pool holding a volume is no longer configured.
    let msg = invalid(cfg(json!({
        "statePath": path.to_str().unwrap(),
        "pools": {"p1": {"attributes": {}, "sizeBytes": GIB}},
    })));
    assert!(msg.contains("statePath") && msg.contains("p2"), "{msg}");
    // A changed pool size keeps what is used.
    let d = FakeDriver::new(&cfg(json!({
        "statePath": path.to_str().unwrap(),
        "pools": {"p1": {"attributes": {}, "sizeBytes": GIB}, "p2": {"attributes": {}, "sizeBytes": 3 * GIB}},
    })))
    .unwrap();
    assert_eq!(free(&d, "p2").await, 2 * GIB);
}

// ---- load ----

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_keep_capacity_exact() {
    let d = Arc::new(driver(
        json!({"pools": {"p": {"attributes": {}, "sizeBytes": 1000 * MIB}}}),
    ));
    let tasks: Vec<_> = (0..2000)
        .map(|i| {
            let d = Arc::clone(&d);
            tokio::spawn(async move { d.create(&req(&format!("v{i}"), "p", MIB)).await })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(DriverError::Conflict(_)) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(ok, 1000);
    assert_eq!(free(d.as_ref(), "p").await, 0);
    assert_eq!(d.list_volumes().await.unwrap().len(), 1000);
}

#[tokio::test]
async fn hot_path_is_cheap() {
    // Not a benchmark: a smoke check that 50k zero-latency creates and destroys run
    // without any per-call I/O or timers.
    let d = driver(json!({"pools": {"p": {"attributes": {}, "sizeBytes": u64::MAX}}}));
    let names: Vec<String> = (0..50_000).map(|i| format!("v{i}")).collect();
    for n in &names {
        d.create(&req(n, "p", MIB)).await.unwrap();
    }
    for n in &names {
        d.destroy(n).await.unwrap();
    }
    assert_eq!(free(&d, "p").await, u64::MAX);
}

//! ONTAP driver behaviour beyond the conformance suite, against the in-process simulator:
//! discovery (pools and offers per docs/trident-contract.md#pools-and-offers-per-driver, derived
//! SVM and data LIF, default backend names), what lands on the array for each variant, clones,
//! fault injection, TLS, and the simulator's state file and binary.

use crate::support::ontap::*;
use serde_json::{Value, json};
use storch::drivers::testing::req;
use storch::drivers::{CloneRequest, DriverError, StorageDriver};
use storch::model::{Offer, Request, VolumeConfig};
use storch::sim::ontap::{AggregateSpec, FailRule, SimOptions, UserScope};

fn offers(d: &storch::drivers::Discovery, pool: &str) -> Value {
    let p = d.pools.iter().find(|p| p.name == pool).expect("pool");
    serde_json::to_value(&p.offers).unwrap()
}

async fn discovery_pools_offers_and_names(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;

    let nas = driver(&backend(&sim, "ontap-nas", json!({})));
    let d = discover(&nas).await;
    assert_eq!(
        d.backend_name, "ontapnas_192.0.2.10",
        "derived from the NFS data LIF"
    );
    assert_eq!(d.protocol, storch::model::Protocol::File);
    let names: Vec<&str> = d.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["aggr1", "aggr2"]);
    assert_eq!(
        offers(&d, "aggr1"),
        json!({"backendType": {"offer": ["ontap-nas"]}, "clones": {"offer": true},
               "encryption": {"offer": true}, "media": {"offer": ["ssd"]},
               "provisioningType": {"offer": ["thick", "thin"]}, "snapshots": {"offer": true}})
    );
    assert_eq!(offers(&d, "aggr2")["media"], json!({"offer": ["hdd"]}));
    assert_eq!(d.free_bytes["aggr1"], 10u64 << 40);
    assert_eq!(d.free_bytes["aggr2"], 50u64 << 40);
    let ext = nas.external_config();
    assert_eq!(ext["svm"], "svm1", "derived: the only data SVM");
    assert_eq!(ext["dataLIF"], "192.0.2.10");
    assert!(!ext.to_string().contains("netapp123"));

    let eco = driver(&backend(&sim, "ontap-nas-economy", json!({})));
    let d = discover(&eco).await;
    assert_eq!(d.backend_name, "ontapnaseco_192.0.2.10");
    assert_eq!(offers(&d, "aggr1")["snapshots"], json!({"offer": false}));
    assert_eq!(offers(&d, "aggr1")["clones"], json!({"offer": false}));

    let fg = driver(&backend(&sim, "ontap-nas-flexgroup", json!({})));
    let d = discover(&fg).await;
    assert_eq!(d.backend_name, "ontapnas_192.0.2.10");
    assert_eq!(d.pools.len(), 1);
    assert_eq!(
        offers(&d, "svm1"),
        json!({"backendType": {"offer": ["ontap-nas-flexgroup"]}, "clones": {"offer": false},
               "encryption": {"offer": true}, "snapshots": {"offer": true}})
    );
    assert_eq!(d.free_bytes["svm1"], 60u64 << 40);

    let san = driver(&backend(&sim, "ontap-san", json!({})));
    let d = discover(&san).await;
    assert_eq!(d.backend_name, "ontapsan_192.0.2.11", "the first iSCSI LIF");
    assert_eq!(d.protocol, storch::model::Protocol::Block);
    assert_eq!(
        offers(&d, "aggr2")["backendType"],
        json!({"offer": ["ontap-san"]})
    );

    // backendName wins; aggregate restricts the pools.
    let named = driver(&backend(
        &sim,
        "ontap-nas",
        json!({"backendName": "gold", "aggregate": "aggr1", "svm": "svm1"}),
    ));
    let d = discover(&named).await;
    assert_eq!(d.backend_name, "gold");
    assert_eq!(d.pools.len(), 1);
}

/// Issue 16, fault 6: encryption is offered per aggregate as `is-nve-capable` says, so an
/// encrypted create never tries an aggregate that cannot encrypt.
#[tokio::test]
async fn encryption_is_offered_per_aggregate_as_ontap_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(
        dir.path(),
        SimOptions {
            aggregates: AggregateSpec::parse_list("aggr1:ssd:10TiB,aggr2:hdd:50TiB:no-nve")
                .unwrap(),
            ..SimOptions::default()
        },
    )
    .await;
    let nas = driver(&backend(&sim, "ontap-nas", json!({})));
    let d = discover(&nas).await;
    assert_eq!(offers(&d, "aggr1")["encryption"], json!({"offer": true}));
    assert_eq!(offers(&d, "aggr2")["encryption"], json!({"offer": false}));
    // The array refuses what the offer no longer promises.
    let mut r = req("enc", "aggr2", GIB);
    r.requests
        .insert("encryption".to_string(), Request::Bool(true));
    let err = nas.create(&r).await.expect_err("aggr2 cannot encrypt");
    assert!(err.to_string().contains("encryption"), "{err}");
    assert!(
        array_volumes(&sim, "svm1").is_empty(),
        "nothing left behind"
    );

    // A FlexGroup spans every aggregate: one that cannot encrypt takes the offer away.
    let fg = driver(&backend(&sim, "ontap-nas-flexgroup", json!({})));
    let d = discover(&fg).await;
    assert_eq!(offers(&d, "svm1")["encryption"], json!({"offer": false}));
}

#[tokio::test]
async fn discovery_errors() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), SimOptions::default()).await;
    let err = |extra: Value| {
        let sim = &sim;
        async move {
            driver(&backend(sim, "ontap-nas", extra))
                .discover()
                .await
                .unwrap_err()
        }
    };
    let e = err(json!({"svm": "nope"})).await;
    assert!(e.to_string().contains("nope"), "{e}");
    let e = err(json!({"aggregate": "aggr9"})).await;
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("aggr9")),
        "{e:?}"
    );
    let e = err(json!({"dataLIF": "192.0.2.99"})).await;
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("dataLIF")),
        "{e:?}"
    );
    // A down LIF is not a data LIF either.
    let e = err(json!({"dataLIF": "192.0.2.19"})).await;
    assert!(matches!(&e, DriverError::Invalid(_)), "{e:?}");
    let e = err(json!({"password": "wrong-pw-123"})).await;
    assert!(e.to_string().contains("credentials"), "{e}");
    assert!(!e.to_string().contains("wrong-pw-123"));

    // Two data SVMs: the SVM cannot be derived.
    sim.with_array(|a| a.add_svm("svm2", 1));
    let e = err(json!({})).await;
    assert!(e.to_string().contains("set svm"), "{e}");
    let d = driver(&backend(&sim, "ontap-nas", json!({"svm": "svm2"})));
    assert_eq!(discover(&d).await.backend_name, "ontapnas_192.0.2.20");

    // Too old an ONTAP.
    sim.with_array(|a| a.ontapi_minor = 20);
    let e = err(json!({"svm": "svm1"})).await;
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("too old")),
        "{e:?}"
    );
}

#[tokio::test]
async fn svm_scoped_user_and_unreadable_media() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(
        dir.path(),
        SimOptions {
            scope: UserScope::Svm("svm1".into()),
            ..SimOptions::default()
        },
    )
    .await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    let disc = discover(&d).await;
    assert_eq!(disc.pools.len(), 2);
    // An aggregate of a type ONTAP reports as vmdisk gets no media offer.
    sim.with_array(|a| a.aggregates.get_mut("aggr2").unwrap().media = "vmdisk".into());
    let disc = discover(&d).await;
    assert!(offers(&disc, "aggr2").get("media").is_none());
    assert!(offers(&disc, "aggr1").get("media").is_some());
}

async fn nas_volume_lands_with_its_options(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(
        &sim,
        "ontap-nas",
        json!({"defaults": {"snapshotPolicy": "default", "snapshotReserve": "10",
                            "unixPermissions": "---rwxr-x---", "securityStyle": "mixed",
                            "exportPolicy": "default", "encryption": "true"}}),
    ));
    discover(&d).await;
    let mut r = req(&d.internal_name("pvc-1.a"), "aggr1", GIB);
    assert_eq!(r.internal_name, "trident_pvc_1_a");
    r.requests
        .insert("provisioningType".into(), Request::String("thick".into()));
    let info = d.create(&r).await.unwrap();
    assert_eq!(info.access.nfs_server_ip, "192.0.2.10");
    assert_eq!(info.access.nfs_path, "/trident_pvc_1_a");
    let v = sim.array().svms["svm1"].volumes["trident_pvc_1_a"].clone();
    assert_eq!(v.aggregates, ["aggr1"]);
    assert_eq!(v.size, GIB);
    assert_eq!(v.space_guarantee, "volume", "thick from the class");
    assert_eq!(v.snapshot_policy, "default");
    assert_eq!(v.snapshot_reserve, 10);
    // ZAPI sends the mode as given, REST as the integer 750: the same mode.
    assert_eq!(
        storch::drivers::ontap::permissions_to_octal(&v.unix_permissions),
        "0750"
    );
    assert_eq!(v.security_style, "mixed");
    assert!(v.encrypt);
    assert!(!v.snapdir, "snapshot directory hidden by default");
    assert_eq!(v.junction.as_deref(), Some("/trident_pvc_1_a"));
    assert_eq!(sim.array().available("aggr1"), (10u64 << 40) - GIB);

    // Volume config fields beat the class and the defaults; policy none → reserve 0.
    let mut r = req("trident_v2", "aggr2", GIB);
    r.config.snapshot_policy = "none".into();
    r.config.snapshot_directory = "true".into();
    r.config.encryption = "false".into();
    r.requests
        .insert("provisioningType".into(), Request::String("thick".into()));
    r.config.space_reserve = "none".into();
    d.create(&r).await.unwrap();
    let v = sim.array().svms["svm1"].volumes["trident_v2"].clone();
    assert_eq!(
        (
            v.space_guarantee.as_str(),
            v.snapshot_reserve,
            v.snapdir,
            v.encrypt
        ),
        ("none", 0, true, false)
    );
    assert_eq!(
        sim.array().available("aggr2"),
        50u64 << 40,
        "thin reserves nothing"
    );

    d.destroy("trident_pvc_1_a").await.unwrap();
    d.destroy("trident_v2").await.unwrap();
    assert!(array_volumes(&sim, "svm1").is_empty());
    // A volume already gone counts as destroyed.
    d.destroy("trident_v2").await.unwrap();
}

async fn economy_fills_flexvols_and_prunes_them(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(
        &sim,
        "ontap-nas-economy",
        json!({"qtreesPerFlexvol": 2, "defaults": {"spaceReserve": "volume"}}),
    ));
    discover(&d).await;
    let mut infos = Vec::new();
    for i in 0..5 {
        infos.push(
            d.create(&req(&format!("trident_q{i}"), "aggr1", 100 * MIB))
                .await
                .unwrap(),
        );
    }
    let a = sim.array();
    let pools: Vec<(&String, &storch::sim::ontap::state::Volume)> = a.svms["svm1"]
        .volumes
        .iter()
        .filter(|(n, _)| n.starts_with("trident_qtree_pool_trident_"))
        .collect();
    assert_eq!(pools.len(), 3, "2 + 2 + 1 qtrees");
    for (name, v) in &pools {
        assert_eq!(name.len(), "trident_qtree_pool_trident_".len() + 10);
        assert_eq!(v.export_policy, "trident_qtree_pool_export_policy");
        assert_eq!(
            v.size,
            v.qtrees.len() as u64 * 100 * MIB,
            "FlexVol = sum of its qtrees"
        );
        for q in v.qtrees.keys() {
            assert_eq!(v.quotas[&format!("/vol/{name}/{q}")], 100 * 1024, "KiB");
        }
    }
    assert!(
        a.svms["svm1"].export_policies["trident_qtree_pool_export_policy"]
            .iter()
            .any(|r| r.client_match == "0.0.0.0/0")
    );
    let q0 = &infos[0];
    assert!(
        q0.access
            .nfs_path
            .starts_with("/trident_qtree_pool_trident_")
    );
    assert!(q0.access.nfs_path.ends_with("/trident_q0"));
    assert_eq!(d.list_volumes().await.unwrap().len(), 5);

    match d.create_snapshot("trident_q0", "s").await {
        Err(DriverError::Unsupported(m)) => assert!(m.contains("not supported"), "{m}"),
        other => panic!("{other:?}"),
    }
    let c = CloneRequest {
        internal_name: "trident_c".into(),
        source_internal_name: "trident_q0".into(),
        source_snapshot: None,
        config: VolumeConfig::default(),
    };
    assert!(matches!(
        d.clone_volume(&c).await,
        Err(DriverError::Unsupported(_))
    ));

    d.resize("trident_q4", 200 * MIB).await.unwrap();
    assert_eq!(
        d.get("trident_q4").await.unwrap().unwrap().size_bytes,
        200 * MIB
    );
    for i in 0..5 {
        d.destroy(&format!("trident_q{i}")).await.unwrap();
    }
    assert!(
        array_volumes(&sim, "svm1").is_empty(),
        "emptied FlexVols are pruned"
    );
    assert_eq!(sim.array().available("aggr1"), 10u64 << 40);

    // A FlexVol left empty by a crash is pruned by the next discovery.
    d.create(&req("trident_x", "aggr1", 100 * MIB))
        .await
        .unwrap();
    sim.with_array(|a| {
        for v in a.svms.get_mut("svm1").unwrap().volumes.values_mut() {
            v.qtrees.clear();
        }
    });
    discover(&d).await;
    assert!(array_volumes(&sim, "svm1").is_empty());
}

async fn san_luns_igroup_and_access(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(
        &sim,
        "ontap-san",
        json!({"igroupName": "k8s-nodes"}),
    ));
    discover(&d).await;
    let a = d.create(&req("trident_lun_a", "aggr1", GIB)).await.unwrap();
    let b = d.create(&req("trident_lun_b", "aggr2", GIB)).await.unwrap();
    assert_eq!(a.access.iscsi_target_portal, "192.0.2.11");
    assert_eq!(a.access.iscsi_portals, ["192.0.2.12"]);
    assert!(
        a.access
            .iscsi_target_iqn
            .starts_with("iqn.1992-08.com.netapp:sn.")
    );
    assert_eq!(a.access.iscsi_igroup, "k8s-nodes");
    assert_eq!(
        (a.access.iscsi_lun_number, b.access.iscsi_lun_number),
        (0, 1)
    );
    let arr = sim.array();
    let svm = &arr.svms["svm1"];
    assert!(svm.igroups.contains_key("k8s-nodes"));
    assert_eq!(svm.luns["/vol/trident_lun_a/lun0"].maps["k8s-nodes"], 0);
    // ONTAP rounds the LUN up to whole cylinders; its FlexVol holds it with headroom, so a
    // full thin LUN cannot take the FlexVol offline (issue 16, fault 2).
    let lun = &svm.luns["/vol/trident_lun_b/lun0"];
    assert_eq!(lun.size, 1_077_511_680);
    assert_eq!(b.size_bytes, lun.size, "the size the array reports");
    assert!(!lun.space_reserved, "thickness is the FlexVol's guarantee");
    let fv = &svm.volumes["trident_lun_b"];
    assert!(
        fv.size * (100 - fv.snapshot_reserve) / 100 >= lun.size + lun.size / 10,
        "FlexVol {} bytes with a {} % reserve for a LUN of {}",
        fv.size,
        fv.snapshot_reserve,
        lun.size
    );

    // A clone from a snapshot gets its own LUN, mapped.
    d.create_snapshot("trident_lun_a", "snap").await.unwrap();
    let c = d
        .clone_volume(&CloneRequest {
            internal_name: "trident_lun_c".into(),
            source_internal_name: "trident_lun_a".into(),
            source_snapshot: Some("snap".into()),
            config: VolumeConfig::default(),
        })
        .await
        .unwrap();
    assert_eq!(c.access.iscsi_lun_number, 2);
    let arr = sim.array();
    let svm = &arr.svms["svm1"];
    assert_ne!(
        svm.luns["/vol/trident_lun_c/lun0"].serial,
        svm.luns["/vol/trident_lun_a/lun0"].serial
    );
    // The snapshot backs the clone: deleting it is a conflict until the clone goes.
    assert!(matches!(
        d.delete_snapshot("trident_lun_a", "snap").await,
        Err(DriverError::Conflict(_))
    ));
    d.destroy("trident_lun_c").await.unwrap();
    d.delete_snapshot("trident_lun_a", "snap").await.unwrap();

    d.resize("trident_lun_a", 2 * GIB).await.unwrap();
    let lun = sim.array().svms["svm1"].luns["/vol/trident_lun_a/lun0"].clone();
    assert!(lun.size >= 2 * GIB);
    assert_eq!(
        d.get("trident_lun_a").await.unwrap().unwrap().size_bytes,
        lun.size
    );
    let fv = sim.array().svms["svm1"].volumes["trident_lun_a"].clone();
    assert!(
        fv.size >= lun.size + lun.size / 10,
        "grown with its headroom"
    );
    for n in ["trident_lun_a", "trident_lun_b"] {
        d.destroy(n).await.unwrap();
    }
    assert!(sim.array().svms["svm1"].luns.is_empty());

    // dataLIF set: one portal only (no multipath).
    let one = driver(&backend(
        &sim,
        "ontap-san",
        json!({"dataLIF": "192.0.2.12"}),
    ));
    let disc = discover(&one).await;
    assert_eq!(disc.backend_name, "ontapsan_192.0.2.12");
    let v = one.create(&req("trident_one", "aggr1", GIB)).await.unwrap();
    assert_eq!(v.access.iscsi_target_portal, "192.0.2.12");
    assert!(v.access.iscsi_portals.is_empty());
    one.destroy("trident_one").await.unwrap();
}

#[tokio::test]
async fn clones_split_and_survive_a_lost_job_answer() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), SimOptions::default()).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    d.create(&req("trident_src", "aggr1", GIB)).await.unwrap();
    let cfg = VolumeConfig {
        split_on_clone: "true".into(),
        ..VolumeConfig::default()
    };
    let c = d
        .clone_volume(&CloneRequest {
            internal_name: "trident_split".into(),
            source_internal_name: "trident_src".into(),
            source_snapshot: None,
            config: cfg,
        })
        .await
        .unwrap();
    assert_eq!(c.access.nfs_path, "/trident_split");
    let arr = sim.array();
    let src = &arr.svms["svm1"].volumes["trident_src"];
    assert_eq!(src.snapshots.len(), 1, "a snapshot named after the time");
    let snap = src.snapshots.keys().next().unwrap();
    assert!(
        snap.len() == 16 && snap.ends_with('Z') && snap.as_bytes()[8] == b'T',
        "{snap}"
    );
    assert!(
        arr.svms["svm1"].volumes["trident_split"]
            .clone_parent
            .is_none(),
        "split"
    );

    // The array made the clone but the answer says "Failed to load job": the driver looks
    // and carries on.
    sim.set_fail_rules(vec![
        FailRule::parse("volume-clone-create:1:13114").unwrap(),
    ]);
    d.clone_volume(&CloneRequest {
        internal_name: "trident_lost".into(),
        source_internal_name: "trident_src".into(),
        source_snapshot: None,
        config: VolumeConfig::default(),
    })
    .await
    .unwrap();
    assert_eq!(
        sim.array().svms["svm1"].volumes["trident_lost"]
            .junction
            .as_deref(),
        Some("/trident_lost")
    );
    sim.set_fail_rules(vec![]);
    // A source with a live clone cannot go, and the refusal changes nothing: the parent
    // stays online at its junction (issue 16, fault 1: it used to be unmounted and taken
    // offline before ONTAP refused the destroy).
    let err = d.destroy("trident_src").await.expect_err("has a clone");
    assert!(matches!(err, DriverError::Conflict(_)), "{err:?}");
    assert!(err.to_string().contains("has FlexClones"), "{err}");
    let src = sim.array().svms["svm1"].volumes["trident_src"].clone();
    assert_eq!(src.state, "online");
    assert_eq!(src.junction.as_deref(), Some("/trident_src"));
    assert_eq!(sim.calls("volume-unmount") + sim.calls("volume-offline"), 0);
    for n in ["trident_lost", "trident_split", "trident_src"] {
        d.destroy(n).await.unwrap();
    }
}

/// Issue 16, fault 4: ONTAP changes a FlexGroup only through the `-async` calls, and destroys
/// it in one call with `unmount-and-offline`.
#[tokio::test]
async fn flexgroup_changes_go_through_the_async_calls() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), SimOptions::default()).await;
    let d = driver(&backend(&sim, "ontap-nas-flexgroup", json!({})));
    discover(&d).await;
    d.create(&req("trident_fg", "svm1", 100 * GIB))
        .await
        .unwrap();
    let v = sim.array().svms["svm1"].volumes["trident_fg"].clone();
    assert_eq!(v.style, "flexgroup");
    assert!(
        !v.snapdir,
        "snapshot directory hidden through volume-modify-iter-async"
    );
    assert_eq!(sim.calls("volume-modify-iter-async"), 1);
    assert_eq!(sim.calls("volume-modify-iter"), 0);

    d.resize("trident_fg", 200 * GIB).await.unwrap();
    assert_eq!(
        sim.array().svms["svm1"].volumes["trident_fg"].size,
        200 * GIB
    );
    assert_eq!(sim.calls("volume-size-async"), 1);
    assert_eq!(sim.calls("volume-size"), 0);

    d.destroy("trident_fg").await.unwrap();
    assert!(array_volumes(&sim, "svm1").is_empty());
    assert_eq!(sim.calls("volume-destroy-async"), 1);
    assert_eq!(
        sim.calls("volume-unmount") + sim.calls("volume-offline") + sim.calls("volume-destroy"),
        0
    );
    d.destroy("trident_fg").await.unwrap();
}

#[tokio::test]
async fn injected_failures_are_per_aggregate() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(
        dir.path(),
        SimOptions {
            fail: vec![FailRule::parse("volume-create@aggr1:1.0").unwrap()],
            ..SimOptions::default()
        },
    )
    .await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    let e = d.create(&req("trident_f", "aggr1", GIB)).await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Other(m) if m.contains("injected")),
        "{e:?}"
    );
    assert!(!e.is_retryable());
    d.create(&req("trident_f", "aggr2", GIB)).await.unwrap();
    assert_eq!(sim.calls("volume-create"), 2);
    d.destroy("trident_f").await.unwrap();
}

#[tokio::test]
async fn tls_verification() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), SimOptions::default()).await;
    let other = sim_in(dir.path(), SimOptions::default()).await;
    // Another server's certificate does not verify this one.
    let wrong = driver(&backend(
        &sim,
        "ontap-nas",
        json!({"trustedCACertificate": other.ca_pem().unwrap()}),
    ));
    let e = wrong.discover().await.unwrap_err();
    assert!(matches!(e, DriverError::Unavailable(_)), "{e:?}");
    assert!(!e.to_string().contains("netapp123"));
    // No CA given: the system roots do not know the simulator either.
    let system = driver(&backend(
        &sim,
        "ontap-nas",
        json!({"trustedCACertificate": null}),
    ));
    assert!(system.discover().await.is_err());
    // tlsVerify false accepts it.
    let insecure = driver(&backend(
        &sim,
        "ontap-nas",
        json!({"trustedCACertificate": null, "tlsVerify": false}),
    ));
    discover(&insecure).await;
}

#[tokio::test]
async fn registry_builds_every_ontap_driver() {
    for name in [
        "ontap-nas",
        "ontap-nas-economy",
        "ontap-nas-flexgroup",
        "ontap-san",
    ] {
        let built = storch::drivers::build_driver(&json!({
            "version": 1, "storageDriverName": name, "managementLIF": "10.0.0.1:8443",
            "username": "admin", "password": "pw"
        }))
        .unwrap();
        assert_eq!(built.driver.driver_name(), name);
        assert_eq!(built.driver.internal_name("pvc-1"), "trident_pvc_1");
    }
    let e = storch::drivers::build_driver(&json!({
        "version": 1, "storageDriverName": "ontap-nas", "username": "a", "password": "b"
    }))
    .unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("managementLIF")),
        "{e:?}"
    );
}

#[tokio::test]
async fn simulator_state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("array.json");
    let opts = || SimOptions {
        state: Some(state.clone()),
        ..SimOptions::default()
    };
    let sim = sim_in(dir.path(), opts()).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    d.create(&req("trident_keep", "aggr1", GIB)).await.unwrap();
    d.create_snapshot("trident_keep", "s1").await.unwrap();
    sim.stop().await;
    assert!(!dir.path().join("array.json.tmp").exists());

    let sim = sim_in(dir.path(), opts()).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    assert!(d.get("trident_keep").await.unwrap().is_some());
    assert_eq!(
        d.list_snapshots("trident_keep").await.unwrap()[0].name,
        "s1"
    );
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert!(on_disk["svms"]["svm1"]["volumes"]["trident_keep"].is_object());
}

#[test]
fn storch_sim_binary_serves_tls_and_persists() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("array.json");
    let cert = dir.path().join("sim.pem");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_storch-sim"))
        .args(["ontap", "--listen", "127.0.0.1:0", "--tls", "--svm", "vs0"])
        .args([
            "--aggregates",
            "fast:ssd:1TiB,slow:hdd:2TiB",
            "--fail",
            "lun-create-by-size:1",
        ])
        .arg("--state")
        .arg(&state)
        .arg("--cert-out")
        .arg(&cert)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let result = std::panic::catch_unwind(|| {
        let url = line
            .trim()
            .strip_prefix("storch-sim ontap listening on https://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let doc = json!({"version": 1, "storageDriverName": "ontap-nas",
                "managementLIF": url, "username": "admin", "password": "netapp123",
                "trustedCACertificate": std::fs::read_to_string(&cert).unwrap()});
            let d = driver(&doc);
            let disc = discover(&d).await;
            let pools: Vec<&str> = disc.pools.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(pools, ["fast", "slow"]);
            assert_eq!(d.external_config()["svm"], "vs0");
            d.create(&req("trident_bin", "fast", GIB)).await.unwrap();
            let san = driver(&json!({"version": 1, "storageDriverName": "ontap-san",
                "managementLIF": url, "username": "admin", "password": "netapp123",
                "tlsVerify": false}));
            discover(&san).await;
            let e = san
                .create(&req("trident_lun", "fast", GIB))
                .await
                .unwrap_err();
            assert!(e.to_string().contains("injected"), "{e}");
            assert!(
                san.get("trident_lun").await.unwrap().is_none(),
                "rolled back"
            );
        });
        let on_disk: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
        assert!(on_disk["svms"]["vs0"]["volumes"]["trident_bin"].is_object());
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

async fn offers_are_stable_between_discoveries(api: Api) {
    // Discovery results are recorded as events when they change: free bytes must not leak
    // into the pools.
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(
        &sim,
        "ontap-nas",
        json!({"defaults": {"spaceReserve": "volume"}}),
    ));
    let before = discover(&d).await;
    d.create(&req("trident_s", "aggr1", GIB)).await.unwrap();
    let after = discover(&d).await;
    assert_eq!(before.pools, after.pools);
    assert_ne!(before.free_bytes, after.free_bytes);
    assert!(matches!(
        after.pools[0].offers.get("encryption"),
        Some(Offer::Bool(true))
    ));
    d.destroy("trident_s").await.unwrap();
}

// The tests above that do not inject API-specific faults run over both APIs.
crate::over_both_apis!(
    discovery_pools_offers_and_names,
    nas_volume_lands_with_its_options,
    economy_fills_flexvols_and_prunes_them,
    san_luns_igroup_and_access,
    offers_are_stable_between_discoveries,
);

/// Over REST, faults the simulator injects synchronously or through a failed job reach the
/// driver as the same classified errors, and a refusal changes nothing on the array.
#[tokio::test]
async fn rest_faults_arrive_classified_whether_sync_or_by_job() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), Api::Rest.sim_options(SimOptions::default())).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    assert_eq!(d.chosen_api(), Some("rest"));

    // A create whose job fails: the job's code decides the class; nothing is left behind.
    sim.set_fail_rules(vec![
        FailRule::parse("POST@storage/volumes:1:job/917534").unwrap(),
    ]);
    let e = d
        .create(&req("trident_f1", "aggr1", GIB))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DriverError::Invalid(m) if m.contains("917534")),
        "{e}"
    );
    assert!(array_volumes(&sim, "svm1").is_empty());
    // The same code answered at once: the same class.
    sim.set_fail_rules(vec![
        FailRule::parse("POST@storage/volumes:1:400/917534").unwrap(),
    ]);
    let e = d
        .create(&req("trident_f1", "aggr1", GIB))
        .await
        .unwrap_err();
    assert!(matches!(&e, DriverError::Invalid(_)), "{e}");
    sim.set_fail_rules(vec![]);

    // A delete that stays busy is retried, then reported as unavailable; the volume stays.
    d.create(&req("trident_f2", "aggr1", GIB)).await.unwrap();
    sim.set_fail_rules(vec![
        FailRule::parse("DELETE@storage/volumes/*:1:job/524486").unwrap(),
    ]);
    let e = d.destroy("trident_f2").await.unwrap_err();
    assert!(matches!(&e, DriverError::Unavailable(_)), "{e}");
    assert_eq!(array_volumes(&sim, "svm1"), ["trident_f2"]);
    sim.set_fail_rules(vec![]);
    d.destroy("trident_f2").await.unwrap();
    assert!(array_volumes(&sim, "svm1").is_empty());
}

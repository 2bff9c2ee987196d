//! The drivers over REST where REST differs from ZAPI, against the simulator: a create that
//! meets another create of its name (13107405) waits it out with a bound, as ZAPI's "Job
//! exists"; encryption, which REST names no per-aggregate capability for, is left to the
//! array, which refuses it on an aggregate that cannot encrypt; a volume's UUID is remembered
//! between calls; and a create sets its junction and snapshot directory in its `POST`.

use crate::support::ontap::*;
use serde_json::json;
use storch::drivers::testing::req;
use storch::drivers::{DriverError, StorageDriver};
use storch::model::Request;
use storch::sim::ontap::{AggregateSpec, FailRule, OntapSim, SimOptions};

#[tokio::test]
async fn a_create_running_under_the_same_name_is_waited_out() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), Api::Rest.sim_options(SimOptions::default())).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    assert_eq!(d.chosen_api(), Some("rest"));
    let posts = || sim.calls("POST /api/storage/volumes");

    // Answered at once, twice, then the create goes through.
    sim.set_fail_rules(vec![
        FailRule::parse("POST@storage/volumes:1:409/13107405:2").unwrap(),
    ]);
    let before = posts();
    d.create(&req("trident_w1", "aggr1", GIB)).await.unwrap();
    assert_eq!(posts() - before, 3);
    // The same through a failed job.
    sim.set_fail_rules(vec![
        FailRule::parse("POST@storage/volumes:1:job/13107405:2").unwrap(),
    ]);
    let before = posts();
    d.create(&req("trident_w2", "aggr1", GIB)).await.unwrap();
    assert_eq!(posts() - before, 3);
    assert_eq!(array_volumes(&sim, "svm1"), ["trident_w1", "trident_w2"]);

    // Never ending: bounded by the retry policy (4 attempts in tests), then unavailable, and
    // nothing made.
    sim.set_fail_rules(vec![
        FailRule::parse("POST@storage/volumes:1:409/13107405").unwrap(),
    ]);
    let before = posts();
    let e = d
        .create(&req("trident_w3", "aggr1", GIB))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, DriverError::Unavailable(m) if m.contains("13107405")),
        "{e}"
    );
    assert_eq!(posts() - before, 4);
    sim.set_fail_rules(vec![]);
    assert_eq!(array_volumes(&sim, "svm1"), ["trident_w1", "trident_w2"]);
    for n in ["trident_w1", "trident_w2"] {
        d.destroy(n).await.unwrap();
    }
}

/// REST (wire-protocols §5.5) names no NVE capability per aggregate: every pool offers
/// encryption and the array decides, refusing an encrypted volume on an aggregate that cannot
/// hold one, with nothing left behind.
#[tokio::test]
async fn over_rest_the_array_decides_encryption() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SimOptions {
        aggregates: AggregateSpec::parse_list("aggr1:ssd:10TiB,aggr2:hdd:50TiB:no-nve").unwrap(),
        ..SimOptions::default()
    };
    let sim = sim_in(dir.path(), Api::Rest.sim_options(opts)).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    let disc = discover(&d).await;
    for pool in ["aggr1", "aggr2"] {
        let p = disc.pools.iter().find(|p| p.name == pool).unwrap();
        assert_eq!(
            serde_json::to_value(&p.offers).unwrap()["encryption"],
            json!({"offer": true}),
            "{pool}"
        );
    }
    let mut r = req("trident_enc", "aggr2", GIB);
    r.requests
        .insert("encryption".to_string(), Request::Bool(true));
    let e = d.create(&r).await.unwrap_err();
    assert!(
        e.to_string().contains("encryption") && e.to_string().contains("aggr2"),
        "{e}"
    );
    assert!(
        array_volumes(&sim, "svm1").is_empty(),
        "nothing left behind"
    );
    r.pool = "aggr1".into();
    d.create(&r).await.unwrap();
    assert!(sim.array().svms["svm1"].volumes["trident_enc"].encrypt);
    d.destroy("trident_enc").await.unwrap();
}

/// A change after a create reuses the UUID the create found, and a volume replaced on the
/// array behind storch's back under the same name is found again by name when the remembered
/// UUID no longer exists.
#[tokio::test]
async fn a_volume_uuid_is_looked_up_once_and_again_when_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, rest) = rest_sim(dir.path(), Api::Rest.sim_options(SimOptions::default())).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    assert_eq!(d.chosen_api(), Some("rest"));
    let lookups = || sim.calls("GET /api/storage/volumes");

    let before = lookups();
    d.create(&req("trident_u1", "aggr1", GIB)).await.unwrap();
    assert_eq!(
        lookups() - before,
        2,
        "the wait for the new volume to show and the read-back of what was made"
    );
    let old = rest.volume_uuid("trident_u1").await;
    // A resize reads the volume's size, then PATCHes the UUID the create's wait found,
    // without a lookup of its own.
    let before = lookups();
    d.resize("trident_u1", 2 * GIB).await.unwrap();
    assert_eq!(lookups() - before, 1);
    assert_eq!(sim.calls(&format!("PATCH /api/storage/volumes/{old}")), 1);

    // Replaced on the array: the old UUID is gone, the name is back with a new one.
    rest.job_ok(
        "DELETE",
        &format!("/storage/volumes/{old}?force=true"),
        None,
    )
    .await;
    let new = rest.make_volume("trident_u1", GIB).await;
    assert_ne!(old, new);
    d.resize("trident_u1", 3 * GIB).await.unwrap();
    let v = rest
        .get(&format!("/storage/volumes/{new}?fields=size"))
        .await;
    assert_eq!(v["size"], 3 * GIB, "{v}");
    d.destroy("trident_u1").await.unwrap();
    assert!(array_volumes(&sim, "svm1").is_empty());
}

/// The HTTP requests of one `create` of `driver`'s volume `name` in `pool`: (all, `POST`s and
/// `PATCH`es of volumes).
async fn create_requests(
    sim: &OntapSim,
    d: &dyn StorageDriver,
    name: &str,
    pool: &str,
) -> (u64, u64, u64) {
    let before = sim.call_counts();
    d.create(&req(name, pool, GIB)).await.unwrap();
    let made = |prefix: &str| -> u64 {
        sim.call_counts()
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(k, n)| n - before.get(k).copied().unwrap_or(0))
            .sum()
    };
    (
        made(""),
        made("POST /api/storage/volumes"),
        made("PATCH /api/storage/volumes/"),
    )
}

/// A NAS create sends its junction (`nas.path`) and the hidden snapshot directory
/// (`snapshot_directory_access_enabled`) in its `POST`, so no `PATCH` follows; only turning
/// quotas on, which wire-protocols §5.5 names for a `PATCH` only, stays one (a nas-economy
/// FlexVol). The numbers printed are the requests per create.
#[tokio::test]
async fn a_create_sets_its_junction_and_snapshot_directory_in_the_post() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), Api::Rest.sim_options(SimOptions::default())).await;
    for (driver_name, name, pool, patches) in [
        ("ontap-nas", "trident_p1", "aggr1", 0),
        ("ontap-nas-flexgroup", "trident_p2", "svm1", 0),
        ("ontap-nas-economy", "trident_p3", "aggr1", 1),
    ] {
        let d = driver(&backend(&sim, driver_name, json!({})));
        discover(&d).await;
        assert_eq!(d.chosen_api(), Some("rest"));
        let (all, posts, patched) = create_requests(&sim, &d, name, pool).await;
        eprintln!("{driver_name}: {all} requests per create, {posts} POST, {patched} PATCH");
        assert_eq!((posts, patched), (1, patches), "{driver_name}");
        let a = sim.array();
        let (flexvol, v) = a.svms["svm1"]
            .volumes
            .iter()
            .find(|(n, _)| *n == name || n.starts_with("trident_qtree_pool_"))
            .unwrap();
        assert_eq!(v.junction.as_deref(), Some(format!("/{flexvol}").as_str()));
        assert!(!v.snapdir, "{driver_name}: snapshot directory hidden");
        d.destroy(name).await.unwrap();
    }
}

//! The drivers over REST where REST differs from ZAPI, against the simulator: a create that
//! meets another create of its name (13107405) waits it out with a bound, as ZAPI's "Job
//! exists"; and encryption, which REST names no per-aggregate capability for, is left to the
//! array, which refuses it on an aggregate that cannot encrypt.

use crate::support::ontap::*;
use serde_json::json;
use storch::drivers::testing::req;
use storch::drivers::{DriverError, StorageDriver};
use storch::model::Request;
use storch::sim::ontap::{AggregateSpec, FailRule, SimOptions};

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

/// A create's follow-up `PATCH`es reuse the UUID the create found, and a volume replaced on the array behind storch's back under the same name is
/// found again by name when the remembered UUID no longer exists.
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
    let looked_up = lookups() - before;
    let old = rest.volume_uuid("trident_u1").await;
    let patched = sim.calls(&format!("PATCH /api/storage/volumes/{old}"));
    assert!(patched >= 2, "the create patches its volume ({patched})");
    // The wait for the new volume to show and the read-back of what was made; the PATCHes
    // in between reuse the UUID the wait found.
    assert_eq!(
        looked_up, 2,
        "{patched} PATCHes by UUID need no lookup of their own"
    );

    // Replaced on the array: the old UUID is gone, the name is back with a new one.
    rest.job_ok(
        "DELETE",
        &format!("/storage/volumes/{old}?force=true"),
        None,
    )
    .await;
    let new = rest.make_volume("trident_u1", GIB).await;
    assert_ne!(old, new);
    d.resize("trident_u1", 2 * GIB).await.unwrap();
    let v = rest
        .get(&format!("/storage/volumes/{new}?fields=size"))
        .await;
    assert_eq!(v["size"], 2 * GIB, "{v}");
    d.destroy("trident_u1").await.unwrap();
    assert!(array_volumes(&sim, "svm1").is_empty());
}

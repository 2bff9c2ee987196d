//! The nexentastor-iscsi driver against the `storch-sim nexentastor` binary over HTTPS: an HA
//! pair (two simulators sharing one state file) failing over mid-run and back, tokens
//! expiring mid-run, adoption of what an interrupted create or clone left (only as planned),
//! and deletes of volumes whose snapshots have clones.

use serde_json::{Value, json};
use storch::drivers::nexentastor::NexentaDriver;
use storch::drivers::testing::{clone_req, req};
use storch::drivers::{DriverError, PlannedVolume, StorageDriver};

use crate::support::nexentastor::{NexentaSim, esc};

const GIB: u64 = 1 << 30;

fn driver(sims: &[&NexentaSim], extra: Value) -> NexentaDriver {
    let urls: Vec<String> = sims.iter().map(|s| s.url.clone()).collect();
    // Each node has its own certificate: trust them all.
    let pems: Vec<String> = sims.iter().map(|s| s.ca_pem()).collect();
    let dynamic = json!({"dynamicTargetLunAllocation": true});
    let extra = storch::drivers::testing::merged(dynamic, extra);
    super::conformance::sim_driver(&urls.join(","), &pems.join("\n"), extra)
}

#[tokio::test]
async fn an_ha_pair_fails_over_mid_run_and_tokens_expire() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("appliance.json");
    let state = state.to_str().unwrap();
    let a = NexentaSim::start(dir.path(), &["--state", state]);
    let b = NexentaSim::start(dir.path(), &["--state", state]);
    let d = driver(&[&a, &b], json!({}));
    d.discover().await.unwrap();
    let v1 = d.create(&req("v1", "tank/csi", GIB)).await.unwrap();
    assert_eq!(d.active_endpoint(), a.url);

    // The first node goes down mid-run: the second one answers, with the same appliance.
    a.control("POST", "/__sim/down").await;
    let got = d
        .get("v1")
        .await
        .unwrap()
        .expect("v1 seen through the second node");
    assert_eq!(got.access, v1.access);
    assert_eq!(d.active_endpoint(), b.url);
    d.create(&req("v2", "tank/csi", GIB)).await.unwrap();
    d.create_snapshot("v2", "s1").await.unwrap();

    // Back up, the first node is not asked while the second answers.
    a.control("POST", "/__sim/up").await;
    d.resize("v1", 2 * GIB).await.unwrap();
    assert_eq!(d.active_endpoint(), b.url);

    // Tokens expire mid-run: the driver logs in again and carries on.
    b.control("POST", "/__sim/expire-tokens").await;
    assert_eq!(d.get("v1").await.unwrap().unwrap().size_bytes, 2 * GIB);

    // The second node goes down: back to the first.
    b.control("POST", "/__sim/down").await;
    let snaps = d.list_snapshots("v2").await.unwrap();
    assert_eq!(snaps.len(), 1);
    assert_eq!(d.active_endpoint(), a.url);

    // Neither answers: unavailable, and nothing changed.
    a.control("POST", "/__sim/down").await;
    match d.destroy("v1").await {
        Err(DriverError::Unavailable(msg)) => {
            assert!(msg.contains("no endpoint answered"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    a.control("POST", "/__sim/up").await;
    for name in ["v1", "v2"] {
        d.destroy(name).await.unwrap();
        assert_eq!(d.get(name).await.unwrap(), None);
    }
    let (_, maps) = a.request("GET", "/san/lunMappings", None).await;
    assert_eq!(maps["data"], json!([]));
}

#[tokio::test]
async fn adopt_takes_only_what_was_planned() {
    let dir = tempfile::tempdir().unwrap();
    let sim = NexentaSim::start(dir.path(), &[]);
    let d = driver(&[&sim], json!({"sparseVolume": false}));
    // An interrupted create: the zvol exists, its LUN was never mapped.
    let (s, v) = sim
        .run(
            "POST",
            "/storage/volumes",
            Some(&json!({"path": "tank/csi/a1",
            "volumeSize": GIB, "sparseVolume": false, "volumeBlockSize": 8192})),
        )
        .await;
    assert!(s < 300, "{s} {v}");
    let planned = PlannedVolume::Create(req("a1", "tank/csi", GIB));
    let info = d.adopt(&planned).await.unwrap().expect("adopted");
    assert_eq!(info.size_bytes, GIB);
    assert!(
        !info.access.iscsi_target_iqn.is_empty(),
        "adoption finishes the mapping"
    );
    // Nothing under the name: nothing to adopt.
    assert_eq!(
        d.adopt(&PlannedVolume::Create(req("a9", "tank/csi", GIB)))
            .await
            .unwrap(),
        None
    );
    // Another size than planned: refused, and left as it is.
    let (s, _) = sim
        .run(
            "POST",
            "/storage/volumes",
            Some(&json!({"path": "tank/csi/a2",
            "volumeSize": 2 * GIB, "sparseVolume": false})),
        )
        .await;
    assert!(s < 300);
    match d
        .adopt(&PlannedVolume::Create(req("a2", "tank/csi", GIB)))
        .await
    {
        Err(DriverError::Conflict(msg)) => assert!(msg.contains("volumeSize"), "{msg}"),
        other => panic!("{other:?}"),
    }
    let (s, _) = sim
        .request(
            "GET",
            &format!("/storage/volumes/{}", esc("tank/csi/a2")),
            None,
        )
        .await;
    assert_eq!(s, 200, "a refused volume is left as it is");
    // A clone is adopted only when it is a clone of the planned source.
    d.clone_volume(&clone_req("c1", "a1", None)).await.unwrap();
    let info = d
        .adopt(&PlannedVolume::Clone(clone_req("c1", "a1", None)))
        .await
        .unwrap();
    assert!(info.is_some());
    match d
        .adopt(&PlannedVolume::Clone(clone_req("a2", "a1", None)))
        .await
    {
        Err(DriverError::Conflict(msg)) => assert!(msg.contains("not a clone"), "{msg}"),
        other => panic!("{other:?}"),
    }
    // The source cannot go while its clone needs it; the clone takes its snapshot with it.
    d.destroy("c1").await.unwrap();
    d.destroy("a1").await.unwrap();
    d.destroy("a2").await.unwrap();
    let (_, snaps) = sim
        .request(
            "GET",
            "/storage/snapshots?parent=tank%2Fcsi&recursive=true",
            None,
        )
        .await;
    assert_eq!(snaps["data"], json!([]), "no temporary snapshot left");
}

#[tokio::test]
async fn a_volume_whose_snapshot_has_a_clone_is_deleted_by_promoting_the_clone() {
    let dir = tempfile::tempdir().unwrap();
    let sim = NexentaSim::start(dir.path(), &[]);
    let d = driver(&[&sim], json!({}));
    d.create(&req("src", "tank/csi", GIB)).await.unwrap();
    d.create_snapshot("src", "s1").await.unwrap();
    d.clone_volume(&clone_req("kid", "src", Some("s1")))
        .await
        .unwrap();
    d.destroy("src").await.unwrap();
    assert_eq!(d.get("src").await.unwrap(), None);
    assert!(d.get("kid").await.unwrap().is_some(), "the clone lives on");
    d.destroy("kid").await.unwrap();
    let (_, vols) = sim
        .request("GET", "/storage/volumes?parent=tank%2Fcsi", None)
        .await;
    assert_eq!(vols["data"], json!([]));
}

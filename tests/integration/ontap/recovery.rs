//! ONTAP's recovery queue: a destroyed volume is kept (renamed `<name>_<dsid>`, its space
//! held) until purged. The drivers purge it (ZAPI: `volume-recovery-queue-get-iter` and
//! `-purge`; REST: `DELETE …?force=true`), so a delete frees its space at once; the simulator
//! keeps the queue over both APIs (wire-protocols §1.5 volume-destroy, §5.5, §5.9 item 9).

use crate::support::ontap::*;
use serde_json::json;
use storch::drivers::StorageDriver;
use storch::drivers::testing::req;
use storch::sim::ontap::{OntapSim, SimOptions, UserScope};

fn queue(sim: &OntapSim) -> Vec<String> {
    sim.array().svms["svm1"]
        .recovery_queue
        .keys()
        .cloned()
        .collect()
}

async fn destroyed_volumes_free_their_space_at_once(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let thick = json!({"defaults": {"spaceReserve": "volume"}});
    for driver_name in ["ontap-nas", "ontap-san"] {
        let d = driver(&backend(&sim, driver_name, thick.clone()));
        let free = discover(&d).await.free_bytes["aggr1"];
        d.create(&req("trident_rq", "aggr1", 100 * GIB))
            .await
            .unwrap();
        assert!(discover(&d).await.free_bytes["aggr1"] < free);
        d.destroy("trident_rq").await.unwrap();
        assert_eq!(queue(&sim), Vec::<String>::new(), "{driver_name}");
        assert_eq!(
            discover(&d).await.free_bytes["aggr1"],
            free,
            "{driver_name}: the space is free again"
        );
        // The name can be used again at once.
        d.create(&req("trident_rq", "aggr1", GIB)).await.unwrap();
        d.destroy("trident_rq").await.unwrap();
        // A destroy of a volume already gone is still success.
        d.destroy("trident_rq").await.unwrap();
    }
}

crate::over_both_apis!(destroyed_volumes_free_their_space_at_once);

/// An SVM admin may not purge (14719): the destroy still succeeds and ONTAP's retention
/// takes the volume away later; its name is free meanwhile.
#[tokio::test]
async fn an_svm_admin_leaves_destroyed_volumes_to_the_retention() {
    let dir = tempfile::tempdir().unwrap();
    let opts = SimOptions {
        scope: UserScope::Svm("svm1".into()),
        ..SimOptions::default()
    };
    let sim = sim_in(dir.path(), opts).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    d.create(&req("trident_kept", "aggr1", GIB)).await.unwrap();
    d.destroy("trident_kept").await.unwrap();
    let q = queue(&sim);
    assert_eq!(q.len(), 1);
    assert!(q[0].starts_with("trident_kept_"), "{q:?}");
    assert!(sim.calls("volume-recovery-queue-purge") >= 1);
    d.create(&req("trident_kept", "aggr1", GIB)).await.unwrap();
    d.destroy("trident_kept").await.unwrap();
    assert_eq!(queue(&sim).len(), 2);
}

/// The simulator's ZAPI side: destroyed volumes are listed by the iterator (paged, with a
/// prefix query), their queue names are taken, the purge refuses what it does not know.
#[tokio::test]
async fn the_zapi_recovery_queue_lists_reserves_and_purges() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    for i in 0..4 {
        let name = format!("trident_q{i}");
        d.create(&req(&name, "aggr1", GIB)).await.unwrap();
        let out = zapi(
            &rest,
            &format!(
                "<volume-destroy><name>{name}</name>\
                 <unmount-and-offline>true</unmount-and-offline></volume-destroy>"
            ),
        )
        .await;
        assert!(out.contains("status=\"passed\""), "{out}");
    }
    let q = queue(&sim);
    assert_eq!(q.len(), 4, "{q:?}");
    // Listed a page at a time (the in-process simulator's pages hold 3), by prefix.
    let list = |tag: &str, pattern: &str| {
        format!(
            "<volume-recovery-queue-get-iter><max-records>100</max-records>{tag}<query>\
             <volume-recovery-queue-info><volume-name>{pattern}</volume-name>\
             </volume-recovery-queue-info></query></volume-recovery-queue-get-iter>"
        )
    };
    let page = zapi(&rest, &list("", "trident_q*")).await;
    assert!(page.contains("<num-records>3</num-records>"), "{page}");
    assert!(page.contains("<next-tag>"), "{page}");
    let one = zapi(&rest, &list("", "trident_q2*")).await;
    assert!(one.contains("<num-records>1</num-records>"), "{one}");
    assert!(
        one.contains(&format!("<volume-name>{}</volume-name>", q[2])),
        "{one}"
    );
    assert!(one.contains("<vserver-name>svm1</vserver-name>"), "{one}");

    // A queue name is taken; the original name is free.
    let create = |name: &str| {
        format!(
            "<volume-create><volume>{name}</volume><containing-aggr-name>aggr1\
             </containing-aggr-name><size>1g</size></volume-create>"
        )
    };
    let out = zapi(&rest, &create(&q[0])).await;
    assert!(out.contains("errno=\"17\""), "{out}");
    let out = zapi(&rest, &create("trident_q0")).await;
    assert!(out.contains("status=\"passed\""), "{out}");

    let purge = |name: &str, vserver: &str| {
        format!(
            "<volume-recovery-queue-purge><volume-name>{name}</volume-name>\
             <vserver-name>{vserver}</vserver-name></volume-recovery-queue-purge>"
        )
    };
    let out = zapi(&rest, &purge(&q[0], "svm1")).await;
    assert!(out.contains("status=\"passed\""), "{out}");
    let out = zapi(&rest, &purge(&q[0], "svm1")).await;
    assert!(out.contains("errno=\"15661\""), "{out}");
    let out = zapi(&rest, &purge(&q[1], "svm9")).await;
    assert!(out.contains("errno=\"14719\""), "{out}");
    let out = zapi(
        &rest,
        "<volume-recovery-queue-purge><volume-name>x</volume-name></volume-recovery-queue-purge>",
    )
    .await;
    assert!(out.contains("errno=\"13115\""), "{out}");
    assert_eq!(queue(&sim).len(), 3);
}

/// The simulator's REST side: a DELETE keeps the volume queued unless `force=true`; the
/// private CLI lists and purges the queue.
#[tokio::test]
async fn the_rest_recovery_queue_force_and_private_cli() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, rest) = rest_sim(dir.path(), SimOptions::default()).await;
    let kept = rest.make_volume("kept", GIB).await;
    rest.job_ok("DELETE", &format!("/storage/volumes/{kept}"), None)
        .await;
    let forced = rest.make_volume("forced", GIB).await;
    rest.job_ok(
        "DELETE",
        &format!("/storage/volumes/{forced}?force=true"),
        None,
    )
    .await;
    let q = queue(&sim);
    assert_eq!(q.len(), 1);
    assert!(q[0].starts_with("kept_"), "{q:?}");

    let listed = rest
        .get("/private/cli/volume/recovery-queue?volume=kept*&fields=vserver,volume")
        .await;
    assert_eq!(listed["num_records"], 1, "{listed}");
    assert_eq!(listed["records"][0]["volume"], q[0].as_str());
    assert_eq!(listed["records"][0]["vserver"], "svm1");

    let purge = "/private/cli/volume/recovery-queue/purge";
    let (s, v) = rest
        .call(
            "POST",
            purge,
            Some(json!({"vserver": "svm1", "volume": q[0]})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert!(queue(&sim).is_empty());
    rest.refused(
        "POST",
        purge,
        Some(json!({"vserver": "svm1", "volume": q[0]})),
        404,
        "4",
    )
    .await;
    rest.refused(
        "POST",
        purge,
        Some(json!({"vserver": "svm1", "volume": "x", "force": true})),
        400,
        "2",
    )
    .await;
    rest.refused("POST", purge, Some(json!({"vserver": "svm1"})), 400, "2")
        .await;
}

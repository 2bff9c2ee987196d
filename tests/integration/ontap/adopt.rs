//! Issue 16, fault 3: a volume found under a planned name is adopted only when storch made it
//! for this name (its comment carries storch's mark) and it matches the plan; anything else is
//! a name conflict and stays exactly as it is. Before, `adopt` trusted whatever `get` found,
//! so a later delete destroyed someone else's volume.

use crate::support::ontap::*;
use serde_json::json;
use storch::drivers::testing::req;
use storch::drivers::{CloneRequest, DriverError, PlannedVolume, StorageDriver};
use storch::model::VolumeConfig;
use storch::sim::ontap::{OntapSim, SimOptions};

fn clear_comment(sim: &OntapSim, name: &str) {
    sim.with_array(|a| {
        a.svms
            .get_mut("svm1")
            .unwrap()
            .volumes
            .get_mut(name)
            .unwrap()
            .comment = String::new()
    });
}

async fn nas_adopts_only_its_own_volume_as_planned(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;

    // Ours and as planned: a create that reports errno 17 is adopted.
    let plan = req("trident_mine", "aggr1", GIB);
    d.create(&plan).await.unwrap();
    let comment = sim.array().svms["svm1"].volumes["trident_mine"]
        .comment
        .clone();
    assert!(comment.contains("storch"), "marked at create: {comment}");
    assert!(matches!(
        d.create(&plan).await,
        Err(DriverError::AlreadyExists(_))
    ));
    let got = d
        .adopt(&PlannedVolume::Create(plan.clone()))
        .await
        .unwrap()
        .expect("adopted");
    assert_eq!((got.pool.as_str(), got.size_bytes), ("aggr1", GIB));

    // Ours but not as planned: refused, naming the field.
    let other_pool = req("trident_mine", "aggr2", GIB);
    let err = d
        .adopt(&PlannedVolume::Create(other_pool))
        .await
        .expect_err("another aggregate");
    assert!(matches!(err, DriverError::Conflict(_)), "{err:?}");
    assert!(
        err.to_string().contains("pool is aggr1, planned aggr2"),
        "{err}"
    );
    let bigger = req("trident_mine", "aggr1", 2 * GIB);
    let err = d
        .adopt(&PlannedVolume::Create(bigger))
        .await
        .expect_err("another size");
    assert!(err.to_string().contains("size is"), "{err}");

    // Not ours (another tool made a FlexVol of that name): a name conflict, untouched.
    clear_comment(&sim, "trident_mine");
    let before = sim.array().svms["svm1"].volumes["trident_mine"].clone();
    let err = d
        .adopt(&PlannedVolume::Create(plan))
        .await
        .expect_err("not storch's");
    assert!(matches!(err, DriverError::AlreadyExists(_)), "{err:?}");
    assert!(
        err.to_string().contains("storch did not create it"),
        "{err}"
    );
    assert_eq!(sim.array().svms["svm1"].volumes["trident_mine"], before);

    // Nothing under the name: nothing to adopt.
    assert_eq!(
        d.adopt(&PlannedVolume::Create(req("trident_none", "aggr1", GIB)))
            .await
            .unwrap(),
        None
    );
}

async fn san_finishes_its_interrupted_create_and_refuses_foreign_volumes(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(&sim, "ontap-san", json!({})));
    discover(&d).await;
    let plan = req("trident_lun", "aggr1", GIB);
    d.create(&plan).await.unwrap();
    // The crash came after the FlexVol, before its LUN.
    sim.with_array(|a| a.svms.get_mut("svm1").unwrap().luns.clear());
    let got = d
        .adopt(&PlannedVolume::Create(plan.clone()))
        .await
        .unwrap()
        .expect("adopted and finished");
    let lun = sim.array().svms["svm1"].luns["/vol/trident_lun/lun0"].clone();
    assert_eq!(got.size_bytes, lun.size);
    assert_eq!(
        lun.maps.get("trident").map(|n| *n as i32),
        Some(got.access.iscsi_lun_number)
    );

    clear_comment(&sim, "trident_lun");
    let err = d
        .adopt(&PlannedVolume::Create(plan))
        .await
        .expect_err("not storch's");
    assert!(matches!(err, DriverError::AlreadyExists(_)), "{err:?}");
}

async fn clones_are_marked_as_themselves_and_adopted_by_their_parent(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(&sim, "ontap-nas", json!({})));
    discover(&d).await;
    d.create(&req("trident_src", "aggr1", GIB)).await.unwrap();
    let clone = CloneRequest {
        internal_name: "trident_copy".into(),
        source_internal_name: "trident_src".into(),
        source_snapshot: None,
        config: VolumeConfig::default(),
    };
    d.clone_volume(&clone).await.unwrap();
    let comment = sim.array().svms["svm1"].volumes["trident_copy"]
        .comment
        .clone();
    assert!(
        comment.contains("trident_copy"),
        "not the parent's mark: {comment}"
    );
    let planned = PlannedVolume::Clone(clone.clone());
    assert!(d.adopt(&planned).await.unwrap().is_some());

    // Cut short before its mark: the FlexClone of the planned parent is ours and is marked.
    clear_comment(&sim, "trident_copy");
    assert!(d.adopt(&planned).await.unwrap().is_some());
    let comment = sim.array().svms["svm1"].volumes["trident_copy"]
        .comment
        .clone();
    assert!(comment.contains("trident_copy"), "{comment}");

    // A clone of another parent is not.
    let other = PlannedVolume::Clone(CloneRequest {
        source_internal_name: "trident_elsewhere".into(),
        ..clone
    });
    clear_comment(&sim, "trident_copy");
    assert!(matches!(
        d.adopt(&other).await,
        Err(DriverError::AlreadyExists(_))
    ));
}

async fn economy_adopts_only_qtrees_in_its_own_pool_flexvols(api: Api) {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_in(dir.path(), api.sim_options(SimOptions::default())).await;
    let d = driver(&backend(&sim, "ontap-nas-economy", json!({})));
    discover(&d).await;
    let plan = req("trident_qt", "aggr1", GIB);
    d.create(&plan).await.unwrap();
    let planned = PlannedVolume::Create(plan);
    assert!(d.adopt(&planned).await.unwrap().is_some());
    let err = d
        .adopt(&PlannedVolume::Create(req("trident_qt", "aggr1", 3 * GIB)))
        .await
        .expect_err("another size");
    assert!(matches!(err, DriverError::Conflict(_)), "{err:?}");

    let flexvol = array_volumes(&sim, "svm1").pop().unwrap();
    clear_comment(&sim, &flexvol);
    assert!(matches!(
        d.adopt(&planned).await,
        Err(DriverError::AlreadyExists(_))
    ));
}

crate::over_both_apis!(
    nas_adopts_only_its_own_volume_as_planned,
    san_finishes_its_interrupted_create_and_refuses_foreign_volumes,
    clones_are_marked_as_themselves_and_adopted_by_their_parent,
    economy_adopts_only_qtrees_in_its_own_pool_flexvols,
);

//! The eseries-iscsi driver's volume operations against canned SANtricity answers (the
//! server and answers of `canned`): create, the proxy's "422 but created" habit on create and
//! on map, full pools and mapping conflicts, names taken, destroy (unmap then delete, already
//! gone), expand and volume copy where the array has them and a refusal before any call where
//! it has not, and Trident's "no snapshots".

use serde_json::{Value, json};
use storch::drivers::testing::{clone_req, req};
use storch::drivers::{DriverError, StorageDriver};

use super::canned::*;

#[tokio::test]
async fn create_sends_kib_segment_size_and_tags_then_maps_to_the_group() {
    let n = name("pvc-1");
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                200,
                vol(VOL, &n, POOL_A, GIB, ours("pvc-1"), json!([])),
            ),
            ("POST", p("/volume-mappings"), 200, mapping(VOL, 7)),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    let mut r = req(&n, "pool_a", GIB);
    r.config.name = "pvc-1".into();
    r.config.file_system = "xfs".into();
    let info = d.create(&r).await.unwrap();
    assert_eq!(info.internal_name, n);
    assert_eq!(info.pool, "pool_a");
    assert_eq!(info.size_bytes, GIB);
    assert_eq!(info.access.iscsi_target_iqn, IQN);
    assert_eq!(info.access.iscsi_target_portal, "10.0.0.101:3260");
    assert_eq!(info.access.iscsi_lun_number, 7, "the LUN the array chose");
    assert_eq!(
        bodies(&c, "POST", &p("/volumes")),
        [
            json!({"poolId": POOL_A, "name": n, "sizeUnit": "kb", "size": 1048576, "segSize": 128,
            "metaTags": [{"key": "createdBy", "value": "storch"},
                {"key": "storchName", "value": "pvc-1"}, {"key": "fstype", "value": "xfs"}]})
        ]
    );
    assert_eq!(
        bodies(&c, "POST", &p("/volume-mappings")),
        [json!({"mappableObjectId": VOL, "targetId": GROUP})],
        "no LUN: the array picks"
    );
}

#[tokio::test]
async fn a_422_create_that_made_the_volume_with_our_tags_is_adopted() {
    let n = name("pvc-2");
    let made = vol(VOL, &n, POOL_A, GIB, ours(&n), json!([]));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            ("GET", p("/volumes"), 200, json!([made.clone()])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                422,
                error_body("An error occurred", "error", "symbol"),
            ),
            // The mapping answers 422 too, and was made.
            (
                "POST",
                p("/volume-mappings"),
                422,
                error_body("An error occurred", "error", "symbol"),
            ),
            (
                "GET",
                p(&format!("/volumes/{VOL}")),
                200,
                vol(VOL, &n, POOL_A, GIB, ours(&n), json!([mapping(VOL, 3)])),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    let info = d.create(&req(&n, "pool_a", GIB)).await.unwrap();
    assert_eq!(info.access.iscsi_lun_number, 3);
    assert!(
        !calls(&c).iter().any(|c| c.starts_with("DELETE")),
        "{:?}",
        calls(&c)
    );
}

#[tokio::test]
async fn a_422_create_without_our_tags_is_reported_and_nothing_is_touched() {
    let n = name("pvc-3");
    let theirs = vol(
        VOL,
        &n,
        POOL_A,
        GIB,
        json!([{"key": "createdBy", "value": "storch"}]),
        json!([]),
    );
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            ("GET", p("/volumes"), 200, json!([theirs])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                422,
                error_body("The operation failed", "error", "symbol"),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(e) => assert!(
            e.to_string().contains("422") && e.to_string().contains("The operation failed"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
    let calls = calls(&c);
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("DELETE") || c.contains("volume-mappings")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_full_pool_is_a_conflict_before_any_create() {
    let n = name("pvc-4");
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            (
                "GET",
                p(&format!("/storage-pools/{POOL_B}")),
                200,
                pool(POOL_B, "pool_b", "hdd", GIB - 1, false),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    match d.create(&req(&n, "pool_b", GIB)).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("pool_b") && m.contains("free"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(bodies(&c, "POST", &p("/volumes")).is_empty());
    // Below the minimum, a bad filesystem, an unknown pool: refused before any call.
    let before = calls(&c).len();
    for (r, want) in [
        (req(&n, "pool_b", (1 << 20) - 1), "minimum"),
        (
            {
                let mut r = req(&n, "pool_b", GIB);
                r.config.file_system = "ntfs".into();
                r
            },
            "fileSystem",
        ),
        (req(&n, "other", GIB), "not a pool of this backend"),
        (
            req("a-name-that-is-longer-than-thirty", "pool_b", GIB),
            "30",
        ),
    ] {
        match d.create(&r).await {
            Err(DriverError::Invalid(m)) => assert!(m.contains(want), "{m}"),
            other => panic!("{want}: {other:?}"),
        }
    }
    assert_eq!(calls(&c).len(), before);
}

#[tokio::test]
async fn a_mapping_conflict_is_reported_and_the_new_volume_removed() {
    let n = name("pvc-5");
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                200,
                vol(VOL, &n, POOL_A, GIB, ours(&n), json!([])),
            ),
            (
                "POST",
                p("/volume-mappings"),
                422,
                error_body("The LUN is already in use", "lunInUse", "symbol"),
            ),
            (
                "GET",
                p(&format!("/volumes/{VOL}")),
                200,
                vol(VOL, &n, POOL_A, GIB, ours(&n), json!([])),
            ),
            ("DELETE", p(&format!("/volumes/{VOL}")), 204, Value::Null),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("LUN is already in use"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        bodies(&c, "DELETE", &p(&format!("/volumes/{VOL}"))).len(),
        1
    );
}

#[tokio::test]
async fn existing_names_are_refused_and_adopted_only_when_ours_as_planned() {
    let n = name("pvc-6");
    let as_planned = vol(
        VOL,
        &n,
        POOL_A,
        GIB,
        ours("pvc-6"),
        json!([mapping(VOL, 2)]),
    );
    let otherwise = vol(
        VOL,
        &n,
        POOL_B,
        GIB,
        ours("pvc-6"),
        json!([mapping(VOL, 2)]),
    );
    let theirs = vol(VOL, &n, POOL_A, GIB, json!([]), json!([]));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([as_planned])),
            ("GET", p("/volumes"), 200, json!([otherwise])),
            ("GET", p("/volumes"), 200, json!([theirs])),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(DriverError::AlreadyExists(m)) => assert!(m.contains("as planned"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("not adopted"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.create(&req(&n, "pool_a", GIB)).await {
        Err(DriverError::AlreadyExists(m)) => assert!(m.contains("did not make"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(d.get(&n).await.unwrap(), None, "never adopted");
    d.destroy(&n).await.unwrap();
    let calls = calls(&c);
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("POST /volumes") || c.starts_with("DELETE")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn destroy_unmaps_then_deletes_and_gone_is_deleted() {
    let (a, b) = (name("pvc-7"), name("pvc-8"));
    let c = canned(with(
        discovery(),
        vec![
            (
                "GET",
                p("/volumes"),
                200,
                json!([vol(
                    VOL,
                    &a,
                    POOL_A,
                    GIB,
                    ours("pvc-7"),
                    json!([mapping(VOL, 4)])
                )]),
            ),
            (
                "GET",
                p("/volumes"),
                200,
                json!([vol(VOL2, &b, POOL_A, GIB, ours("pvc-8"), json!([]))]),
            ),
            ("GET", p("/volumes"), 200, json!([])),
            (
                "DELETE",
                p(&format!("/volume-mappings/{MAP}")),
                204,
                Value::Null,
            ),
            ("DELETE", p(&format!("/volumes/{VOL}")), 200, json!({})),
            // Answered 422 and gone: deleted.
            (
                "DELETE",
                p(&format!("/volumes/{VOL2}")),
                422,
                error_body("An error occurred", "error", "symbol"),
            ),
            (
                "GET",
                p(&format!("/volumes/{VOL2}")),
                404,
                error_body("Volume not found", "", "webservice"),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    d.destroy(&a).await.unwrap();
    d.destroy(&b).await.unwrap();
    d.destroy(&name("never-there")).await.unwrap();
    let deletes: Vec<String> = calls(&c)
        .into_iter()
        .filter(|c| c.starts_with("DELETE"))
        .collect();
    assert_eq!(
        deletes,
        [
            format!("DELETE /volume-mappings/{MAP}"),
            format!("DELETE /volumes/{VOL}"),
            format!("DELETE /volumes/{VOL2}"),
        ]
    );
}

#[tokio::test]
async fn a_422_delete_of_a_volume_still_there_is_reported() {
    let a = name("pvc-9");
    let v = vol(VOL, &a, POOL_A, GIB, ours("pvc-9"), json!([]));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([v.clone()])),
            (
                "DELETE",
                p(&format!("/volumes/{VOL}")),
                422,
                error_body("The volume is busy with a copy", "volumeInUse", "symbol"),
            ),
            ("GET", p(&format!("/volumes/{VOL}")), 200, v),
        ],
    ))
    .await;
    match driver(&c, json!({})).destroy(&a).await {
        Err(DriverError::Conflict(m)) => assert!(m.contains("busy with a copy"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn expand_where_the_array_can_and_a_refusal_where_it_cannot() {
    let a = name("pvc-10");
    let v = vol(
        VOL,
        &a,
        POOL_A,
        GIB,
        ours("pvc-10"),
        json!([mapping(VOL, 1)]),
    );
    let expand = p(&format!("/volumes/{VOL}/expand"));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([v])),
            (
                "GET",
                expand.clone(),
                200,
                json!({"percentComplete": 100, "timeToCompletion": 0, "action": "none"}),
            ),
            (
                "GET",
                expand.clone(),
                200,
                json!({"percentComplete": 40, "timeToCompletion": 5, "action": "initializing"}),
            ),
            (
                "GET",
                expand.clone(),
                200,
                json!({"percentComplete": 100, "timeToCompletion": 0, "action": "none"}),
            ),
            pool_a_read(),
            ("POST", expand.clone(), 200, json!({})),
            (
                "GET",
                p(&format!("/volumes/{VOL}")),
                200,
                vol(
                    VOL,
                    &a,
                    POOL_A,
                    2 * GIB,
                    ours("pvc-10"),
                    json!([mapping(VOL, 1)]),
                ),
            ),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    d.resize(&a, 2 * GIB).await.unwrap();
    assert_eq!(
        bodies(&c, "POST", &expand),
        [json!({"expansionSize": 2 * 1048576, "sizeUnit": "kb"})]
    );
    assert_eq!(
        bodies(&c, "GET", &expand).len(),
        3,
        "waited for the expansion to end"
    );
    match d.resize(&a, GIB / 2).await {
        Err(DriverError::Invalid(m)) => assert!(m.contains("shrink"), "{m}"),
        other => panic!("{other:?}"),
    }
    // The size asked for before the array rounded it up to a KiB: nothing to do.
    d.resize(&a, GIB - 512).await.unwrap();
    assert_eq!(bodies(&c, "POST", &expand).len(), 1);
    match d.resize(&name("missing"), 2 * GIB).await {
        Err(DriverError::NotFound(_)) => {}
        other => panic!("{other:?}"),
    }

    // An array without expansion: refused before any change.
    let v = vol(
        VOL,
        &a,
        POOL_A,
        GIB,
        ours("pvc-10"),
        json!([mapping(VOL, 1)]),
    );
    let c = canned(with(
        discovery(),
        vec![("GET", p("/volumes"), 200, json!([v]))],
    ))
    .await;
    match driver(&c, json!({})).resize(&a, 2 * GIB).await {
        Err(DriverError::Unsupported(m)) => {
            assert!(m.contains("not supported by this array"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !calls(&c)
            .iter()
            .any(|c| c.starts_with("POST") && c.contains("expand"))
    );
}

#[tokio::test]
async fn clones_run_a_volume_copy_job_where_the_array_can() {
    let (src, copy) = (name("src"), name("copy"));
    let source = vol(
        VOL,
        &src,
        POOL_A,
        GIB,
        ours("src"),
        json!([mapping(VOL, 1)]),
    );
    let mut target_tags = ours(&copy);
    target_tags
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "storchCloneSource", "value": src}));
    let target = vol(VOL2, &copy, POOL_A, GIB, target_tags.clone(), json!([]));
    let job = |status: &str| {
        json!({"volcopyRef": "18000000600A098000A4B28D00004E7E5F2E7A05", "status": status,
            "sourceVolume": VOL, "targetVolume": VOL2, "copyPriority": "priority2",
            "copyStartTime": "1764640000", "copyCompleteTime": "0"})
    };
    let job_path = p("/volume-copy-jobs/18000000600A098000A4B28D00004E7E5F2E7A05");
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([source.clone()])),
            pool_a_read(),
            ("POST", p("/volumes"), 200, target.clone()),
            ("POST", p("/volume-copy-jobs"), 200, job("inProgress")),
            ("GET", job_path.clone(), 200, job("inProgress")),
            ("GET", job_path.clone(), 200, job("complete")),
            ("DELETE", job_path.clone(), 204, Value::Null),
            ("GET", p(&format!("/volumes/{VOL2}")), 200, target),
            ("POST", p("/volume-mappings"), 200, mapping(VOL2, 5)),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    let info = d.clone_volume(&clone_req(&copy, &src, None)).await.unwrap();
    assert_eq!(info.internal_name, copy);
    assert_eq!(info.pool, "pool_a");
    assert_eq!(info.access.iscsi_lun_number, 5);
    assert_eq!(
        bodies(&c, "POST", &p("/volume-copy-jobs")),
        [
            json!({"sourceId": VOL, "targetId": VOL2, "copyPriority": "priority2",
            "targetWriteProtected": false, "onlineCopy": false})
        ]
    );
    let create = &bodies(&c, "POST", &p("/volumes"))[0];
    assert_eq!(create["size"], 1048576);
    assert_eq!(create["metaTags"], target_tags);
    assert_eq!(
        bodies(&c, "DELETE", &job_path).len(),
        1,
        "the finished job is removed"
    );
    match d.clone_volume(&clone_req(&copy, &src, Some("snap"))).await {
        Err(DriverError::Unsupported(m)) => assert!(m.contains("snapshots"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_failed_copy_removes_the_clone_and_an_unable_array_refuses_first() {
    let (src, copy) = (name("src"), name("copy"));
    let source = vol(VOL, &src, POOL_A, GIB, ours("src"), json!([]));
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([source.clone()])),
            pool_a_read(),
            (
                "POST",
                p("/volumes"),
                200,
                vol(VOL2, &copy, POOL_A, GIB, ours(&copy), json!([])),
            ),
            (
                "POST",
                p("/volume-copy-jobs"),
                200,
                json!({"volcopyRef": "18AA", "status": "inProgress"}),
            ),
            (
                "GET",
                p("/volume-copy-jobs/18AA"),
                200,
                json!({"volcopyRef": "18AA", "status": "failed"}),
            ),
            ("DELETE", p("/volume-copy-jobs/18AA"), 204, Value::Null),
            ("DELETE", p(&format!("/volumes/{VOL2}")), 204, Value::Null),
        ],
    ))
    .await;
    match driver(&c, json!({}))
        .clone_volume(&clone_req(&copy, &src, None))
        .await
    {
        Err(DriverError::Other(m)) => assert!(m.contains("failed"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        bodies(&c, "DELETE", &p(&format!("/volumes/{VOL2}"))).len(),
        1
    );
    assert!(bodies(&c, "POST", &p("/volume-mappings")).is_empty());

    // No copy jobs on this array (404): refused before any call after discovery.
    let mut answers = discovery();
    answers.pop();
    let c = canned(answers).await;
    let d = driver(&c, json!({}));
    d.discover().await.unwrap();
    let before = calls(&c).len();
    match d.clone_volume(&clone_req(&copy, &src, None)).await {
        Err(DriverError::Unsupported(m)) => {
            assert!(m.contains("not supported by this array"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(calls(&c).len(), before);
}

#[tokio::test]
async fn snapshots_are_trident_s_none() {
    let a = name("pvc-11");
    let c = canned(with(
        discovery(),
        vec![(
            "GET",
            p("/volumes"),
            200,
            json!([vol(
                VOL,
                &a,
                POOL_A,
                GIB,
                ours("pvc-11"),
                json!([mapping(VOL, 1)])
            )]),
        )],
    ))
    .await;
    let d = driver(&c, json!({}));
    assert!(d.list_snapshots(&a).await.unwrap().is_empty());
    assert!(matches!(
        d.create_snapshot(&a, "s").await,
        Err(DriverError::Unsupported(_))
    ));
    assert!(matches!(
        d.list_snapshots(&name("missing")).await,
        Err(DriverError::NotFound(_))
    ));
    d.delete_snapshot(&a, "s").await.unwrap();
    let listed = d.list_volumes().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].access.iscsi_lun_number, 1);
}

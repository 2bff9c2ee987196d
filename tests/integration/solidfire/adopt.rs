//! What `solidfire-san` adopts after an interrupted create, against canned Element answers:
//! storch's volume as planned is adopted (and joins the access group the create had not
//! reached); storch's volume of another size or QoS is refused naming the field; a volume
//! storch did not make is refused. A refused volume is never changed or deleted.

use serde_json::json;
use storch::drivers::testing::req;
use storch::drivers::{DriverError, PlannedVolume, StorageDriver};

use super::canned::*;

/// Element calls that change a volume.
const CHANGES: [&str; 6] = [
    "CreateVolume",
    "ModifyVolume",
    "DeleteVolume",
    "PurgeDeletedVolume",
    "AddVolumesToVolumeAccessGroup",
    "CloneVolume",
];

fn changes(c: &Canned) -> Vec<String> {
    methods(c)
        .into_iter()
        .filter(|m| CHANGES.contains(&m.as_str()))
        .collect()
}

fn gold(size: u64) -> PlannedVolume {
    PlannedVolume::Create(req("pvc-1", "Gold", size))
}

#[tokio::test]
async fn storch_volume_as_planned_is_adopted_and_granted() {
    let mut answers = discovery();
    answers.extend(listings(1, vec![vol(42, "pvc-1", true)]));
    answers.push(("AddVolumesToVolumeAccessGroup", 200, ok(json!({}))));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    let info = d.adopt(&gold(1_000_000_000)).await.unwrap().unwrap();
    assert_eq!(info.internal_name, "pvc-1");
    assert_eq!(info.pool, "Gold");
    assert_eq!(info.size_bytes, 1_000_000_000);
    assert_eq!(info.access.iscsi_vags, vec![5]);
    // The interrupted create had not added it to the access group yet: adoption does.
    assert_eq!(
        params_of(&c, "AddVolumesToVolumeAccessGroup"),
        [json!({"volumeAccessGroupID": 5, "volumes": [42]})]
    );
    assert_eq!(changes(&c), ["AddVolumesToVolumeAccessGroup"]);
}

#[tokio::test]
async fn nothing_under_the_name_is_nothing_to_adopt() {
    let mut answers = discovery();
    answers.extend(listings(1, vec![vol(41, "pvc-other", true)]));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    assert_eq!(d.adopt(&gold(1_000_000_000)).await.unwrap(), None);
    assert!(changes(&c).is_empty());
}

#[tokio::test]
async fn storch_volume_of_another_size_or_qos_is_refused_naming_the_field() {
    let mut other_qos = vol(42, "pvc-1", true);
    other_qos["qos"]["burstIOPS"] = json!(12000);
    let cases = [
        (
            vol(42, "pvc-1", true),
            gold(2_000_000_000),
            "totalSize is 1000000000, planned 2000000000",
        ),
        (
            other_qos,
            gold(1_000_000_000),
            "qos.burstIOPS is 12000, planned 10000",
        ),
        (
            vol(42, "pvc-1", true),
            PlannedVolume::Create(req("pvc-1", "Bronze", 1_000_000_000)),
            "qos.minIOPS is 6000, planned 1000",
        ),
    ];
    for (on_array, planned, field) in cases {
        let mut answers = discovery();
        answers.extend(listings(1, vec![on_array]));
        let c = canned(answers).await;
        let d = driver_with(&backend(&c, json!({})), 100);
        match d.adopt(&planned).await {
            Err(DriverError::Conflict(m)) => {
                assert!(m.contains(field), "{m}");
                assert!(m.contains("not adopted"), "{m}");
            }
            other => panic!("{field}: {other:?}"),
        }
        assert!(changes(&c).is_empty(), "{field}: {:?}", changes(&c));
    }
}

#[tokio::test]
async fn a_volume_storch_did_not_make_is_refused_and_untouched() {
    let mut other_name = vol(43, "pvc-1", true);
    other_name["attributes"]["storch"]["name"] = json!("pvc-9");
    for theirs in [vol(42, "pvc-1", false), other_name] {
        let mut answers = discovery();
        answers.extend(listings(3, vec![theirs.clone()]));
        let c = canned(answers).await;
        let d = driver_with(&backend(&c, json!({})), 100);
        match d.adopt(&gold(1_000_000_000)).await {
            Err(DriverError::AlreadyExists(m)) => assert!(m.contains("did not make"), "{m}"),
            other => panic!("{theirs}: {other:?}"),
        }
        // Neither a create nor a delete of that name touches it.
        assert!(
            d.create(&req("pvc-1", "Gold", 1_000_000_000))
                .await
                .is_err()
        );
        d.destroy("pvc-1").await.unwrap();
        assert!(changes(&c).is_empty(), "{:?}", changes(&c));
    }
}

#[tokio::test]
async fn a_delete_interrupted_before_the_purge_is_finished() {
    let mut deleted = vol(42, "pvc-1", true);
    deleted["status"] = json!("deleted");
    let mut answers = discovery();
    answers.extend(listings(1, vec![deleted, vol(43, "pvc-1", false)]));
    answers.push(("PurgeDeletedVolume", 200, ok(json!({}))));
    let c = canned(answers).await;
    let d = driver_with(&backend(&c, json!({})), 100);
    d.destroy("pvc-1").await.unwrap();
    assert_eq!(changes(&c), ["PurgeDeletedVolume"]);
    assert_eq!(
        params_of(&c, "PurgeDeletedVolume"),
        [json!({"volumeID": 42})]
    );
}

//! Snapshots (CT-21..24), volumes restored from them (CT-11) and clones (CT-12).

use storch::csi::proto::volume_content_source::{SnapshotSource, Type, VolumeSource};
use storch::csi::proto::{
    CreateSnapshotRequest, CreateVolumeRequest, DeleteSnapshotRequest, ListSnapshotsRequest,
    Snapshot, VolumeContentSource,
};
use tonic::Code;

use super::{Csi, GIB10, code, create_request, range, unique};

fn snap(name: &str, source: &str) -> CreateSnapshotRequest {
    CreateSnapshotRequest {
        source_volume_id: source.to_string(),
        name: name.to_string(),
        ..CreateSnapshotRequest::default()
    }
}

async fn create_snapshot(csi: &Csi, r: CreateSnapshotRequest) -> Result<Snapshot, tonic::Status> {
    csi.controller
        .clone()
        .create_snapshot(r)
        .await
        .map(|r| r.into_inner().snapshot.unwrap())
}

async fn list(csi: &Csi, r: ListSnapshotsRequest) -> (Vec<String>, String) {
    let r = csi
        .controller
        .clone()
        .list_snapshots(r)
        .await
        .unwrap()
        .into_inner();
    let ids = r
        .entries
        .into_iter()
        .map(|e| e.snapshot.unwrap().snapshot_id)
        .collect();
    (ids, r.next_token)
}

fn from_snapshot(id: &str) -> Option<VolumeContentSource> {
    Some(VolumeContentSource {
        r#type: Some(Type::Snapshot(SnapshotSource {
            snapshot_id: id.to_string(),
        })),
    })
}

fn from_volume(id: &str) -> Option<VolumeContentSource> {
    Some(VolumeContentSource {
        r#type: Some(Type::Volume(VolumeSource {
            volume_id: id.to_string(),
        })),
    })
}

/// CT-21, CT-22, CT-23: validation, idempotency by name, ALREADY_EXISTS for another source,
/// filters and deletes.
#[tokio::test]
async fn snapshots_are_idempotent_by_name_and_filtered() {
    let csi = Csi::start().await;
    let a = csi
        .create(CreateVolumeRequest {
            capacity_range: range(GIB10, 0),
            ..create_request(&unique("srca"))
        })
        .await;
    let b = csi.create(create_request(&unique("srcb"))).await;
    let mut c = csi.controller.clone();
    assert_eq!(
        code(c.create_snapshot(snap("", &a)).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(c.create_snapshot(snap("s", "")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            c.create_snapshot(snap(&unique("s"), "no-such-volume"))
                .await
        ),
        Code::NotFound
    );
    let name = unique("snap");
    let first = create_snapshot(&csi, snap(&name, &a)).await.unwrap();
    assert!(first.ready_to_use);
    assert_eq!(first.source_volume_id, a);
    assert_eq!(first.size_bytes, GIB10);
    assert!(first.creation_time.unwrap().seconds > 0);
    assert_eq!(create_snapshot(&csi, snap(&name, &a)).await.unwrap(), first);
    assert_eq!(
        code(create_snapshot(&csi, snap(&name, &b)).await),
        Code::AlreadyExists
    );
    let long: String = format!("{}{}", unique("l"), "y".repeat(128))
        .chars()
        .take(128)
        .collect();
    let long = create_snapshot(&csi, snap(&long, &b)).await.unwrap();

    let (all, _) = list(&csi, ListSnapshotsRequest::default()).await;
    assert_eq!(all.len(), 2);
    assert!(all.contains(&first.snapshot_id) && all.contains(&long.snapshot_id));
    let by_id = ListSnapshotsRequest {
        snapshot_id: first.snapshot_id.clone(),
        ..Default::default()
    };
    assert_eq!(
        list(&csi, by_id).await.0,
        std::slice::from_ref(&first.snapshot_id)
    );
    for unknown in ["non-existing-snapshot-id", "nope/nope"] {
        let r = ListSnapshotsRequest {
            snapshot_id: unknown.into(),
            ..Default::default()
        };
        assert!(list(&csi, r).await.0.is_empty(), "{unknown}");
    }
    let by_source = ListSnapshotsRequest {
        source_volume_id: b.clone(),
        ..Default::default()
    };
    assert_eq!(
        list(&csi, by_source).await.0,
        std::slice::from_ref(&long.snapshot_id)
    );
    let unknown_source = ListSnapshotsRequest {
        source_volume_id: "nope".into(),
        ..Default::default()
    };
    assert!(list(&csi, unknown_source).await.0.is_empty());
    let bad = ListSnapshotsRequest {
        starting_token: "invalid-token".into(),
        ..Default::default()
    };
    assert_eq!(code(c.list_snapshots(bad).await), Code::Aborted);

    let delete = |id: &str| DeleteSnapshotRequest {
        snapshot_id: id.to_string(),
        ..Default::default()
    };
    assert_eq!(
        code(c.delete_snapshot(delete("")).await),
        Code::InvalidArgument
    );
    // A volume with snapshots stays until they are gone (they live inside it).
    let refused = c
        .delete_volume(storch::csi::proto::DeleteVolumeRequest {
            volume_id: a.clone(),
            ..Default::default()
        })
        .await;
    assert_eq!(code(refused), Code::FailedPrecondition);
    for id in [
        first.snapshot_id.as_str(),
        &first.snapshot_id,
        "non-existing-snapshot-id",
        "gone/gone",
    ] {
        c.delete_snapshot(delete(id)).await.unwrap();
    }
    assert_eq!(
        list(&csi, ListSnapshotsRequest::default()).await.0,
        std::slice::from_ref(&long.snapshot_id)
    );
    csi.delete(&a).await;
}

/// CT-24: with five snapshots, a page of two and a token; the token without a limit returns
/// all the rest.
#[tokio::test]
async fn snapshot_lists_page() {
    let csi = Csi::start().await;
    let v = csi.create(create_request(&unique("paged"))).await;
    for i in 0..5 {
        create_snapshot(&csi, snap(&unique(&format!("p{i}")), &v))
            .await
            .unwrap();
    }
    let (page, token) = list(
        &csi,
        ListSnapshotsRequest {
            max_entries: 2,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(page.len(), 2);
    assert!(!token.is_empty());
    let (rest, end) = list(
        &csi,
        ListSnapshotsRequest {
            starting_token: token,
            ..Default::default()
        },
    )
    .await;
    assert_eq!(rest.len(), 3);
    assert!(end.is_empty());
    assert!(page.iter().all(|p| !rest.contains(p)));
}

/// CT-11 and CT-12: a volume from a snapshot and a clone of a volume carry their source in
/// the answer, and grow to a larger request; unknown sources are NOT_FOUND.
#[tokio::test]
async fn restores_and_clones_carry_their_source() {
    let csi = Csi::start().await;
    let source = csi
        .create(CreateVolumeRequest {
            capacity_range: range(GIB10, 0),
            ..create_request(&unique("origin"))
        })
        .await;
    let s = create_snapshot(&csi, snap(&unique("cut"), &source))
        .await
        .unwrap();
    let mut c = csi.controller.clone();
    let restore = CreateVolumeRequest {
        volume_content_source: from_snapshot(&s.snapshot_id),
        ..create_request(&unique("restored"))
    };
    let restored = c
        .create_volume(restore.clone())
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(restored.content_source, from_snapshot(&s.snapshot_id));
    assert_eq!(restored.capacity_bytes, GIB10);
    // The same call again is the same volume, also with parameters other than the source's
    // (a clone takes its source's class).
    let with_params = CreateVolumeRequest {
        parameters: super::params(&[("media", "ssd")]),
        ..restore.clone()
    };
    let again = c
        .create_volume(with_params)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(again, restored);
    assert_eq!(
        c.create_volume(restore)
            .await
            .unwrap()
            .into_inner()
            .volume
            .unwrap(),
        restored
    );
    let bigger = CreateVolumeRequest {
        volume_content_source: from_volume(&source),
        capacity_range: range(2 * GIB10, 0),
        ..create_request(&unique("clone"))
    };
    let clone = c
        .create_volume(bigger)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(clone.content_source, from_volume(&source));
    assert_eq!(clone.capacity_bytes, 2 * GIB10);
    let too_small = CreateVolumeRequest {
        volume_content_source: from_volume(&source),
        capacity_range: range(0, 1 << 30),
        ..create_request(&unique("small"))
    };
    assert_eq!(code(c.create_volume(too_small).await), Code::OutOfRange);
    for missing in [
        from_snapshot("non-existing-snapshot-id"),
        from_snapshot("nope/nope"),
        from_volume("nope"),
    ] {
        let r = CreateVolumeRequest {
            volume_content_source: missing,
            ..create_request(&unique("orphan"))
        };
        assert_eq!(code(c.create_volume(r).await), Code::NotFound);
    }
}

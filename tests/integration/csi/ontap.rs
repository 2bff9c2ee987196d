//! The Controller against the ONTAP simulator (ontap-nas and ontap-san over real HTTPS): a
//! whole lifecycle — volumes by capability, snapshot, restore, clone, expansion, paging,
//! publish and unpublish to nodes, deletes — ends with nothing left on the array.

use serde_json::json;
use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::volume_content_source::{SnapshotSource, Type, VolumeSource};
use storch::csi::proto::{
    ControllerExpandVolumeRequest, CreateSnapshotRequest, CreateVolumeRequest,
    DeleteSnapshotRequest, ListVolumesRequest, VolumeContentSource,
};
use storch::sim::ontap::SimOptions;

use super::publish::{publish_req, published_nodes, unpublish_req};
use super::{Csi, block, code, create_request, mount, range, unique};
use crate::support::ontap::{array_volumes, backend, sim_in};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_on_the_ontap_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = sim_in(
        tmp.path(),
        SimOptions {
            svm: "svm0".into(),
            ..SimOptions::default()
        },
    )
    .await;
    let nas = backend(
        &sim,
        "ontap-nas",
        json!({"backendName": "nas", "svm": "svm0"}),
    );
    let san = backend(
        &sim,
        "ontap-san",
        json!({"backendName": "san", "svm": "svm0"}),
    );
    let csi = Csi::start_on(&[], &[nas, san]).await;
    let mut c = csi.controller.clone();
    let gib = 1i64 << 30;

    let file = CreateVolumeRequest {
        capacity_range: range(gib, 0),
        volume_capabilities: vec![mount(Mode::MultiNodeMultiWriter)],
        ..create_request(&unique("nasvol"))
    };
    let file = c
        .create_volume(file)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(file.volume_context["storch.io/attachment"], "nfs");
    assert!(!file.volume_context["storch.io/nfsPath"].is_empty());
    let lun = CreateVolumeRequest {
        capacity_range: range(gib, 0),
        volume_capabilities: vec![block(Mode::SingleNodeWriter)],
        ..create_request(&unique("lun"))
    };
    let lun = c
        .create_volume(lun)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(lun.volume_context["storch.io/attachment"], "iscsi");
    assert!(!lun.volume_context["storch.io/iscsiTargetIqn"].is_empty());

    let snap = CreateSnapshotRequest {
        source_volume_id: file.volume_id.clone(),
        name: unique("cut"),
        ..CreateSnapshotRequest::default()
    };
    let snap = c
        .create_snapshot(snap)
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert!(snap.ready_to_use);
    let source = |t| Some(VolumeContentSource { r#type: Some(t) });
    let restored = CreateVolumeRequest {
        volume_content_source: source(Type::Snapshot(SnapshotSource {
            snapshot_id: snap.snapshot_id.clone(),
        })),
        volume_capabilities: vec![mount(Mode::MultiNodeMultiWriter)],
        ..create_request(&unique("restored"))
    };
    let restored = c
        .create_volume(restored)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert!(restored.content_source.is_some());
    let clone = CreateVolumeRequest {
        volume_content_source: source(Type::Volume(VolumeSource {
            volume_id: lun.volume_id.clone(),
        })),
        volume_capabilities: vec![block(Mode::SingleNodeWriter)],
        ..create_request(&unique("lunclone"))
    };
    let clone = c
        .create_volume(clone)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(clone.volume_context["storch.io/attachment"], "iscsi");

    for (v, node) in [(&file, false), (&lun, true)] {
        let grow = ControllerExpandVolumeRequest {
            volume_id: v.volume_id.clone(),
            capacity_range: range(2 * gib, 0),
            ..ControllerExpandVolumeRequest::default()
        };
        let grown = c.controller_expand_volume(grow).await.unwrap().into_inner();
        assert!(grown.capacity_bytes >= 2 * gib);
        assert_eq!(grown.node_expansion_required, node);
    }
    let page = ListVolumesRequest {
        max_entries: 3,
        starting_token: String::new(),
    };
    let first = c.list_volumes(page).await.unwrap().into_inner();
    assert_eq!(first.entries.len(), 3);
    let rest = ListVolumesRequest {
        max_entries: 0,
        starting_token: first.next_token,
    };
    assert_eq!(
        c.list_volumes(rest)
            .await
            .unwrap()
            .into_inner()
            .entries
            .len(),
        1
    );

    // Publish and unpublish (CT-20 on each kind): the LUN to one node with its initiator, the
    // export to two; whatever the array grants, the publication is recorded and a published
    // volume is not deleted.
    let node1 = "worker-1,iqn.1993-08.org.debian:01:worker1";
    for (v, cap, nodes) in [
        (&lun, block(Mode::SingleNodeWriter), vec![node1]),
        (
            &file,
            mount(Mode::MultiNodeMultiWriter),
            vec![node1, "worker-2"],
        ),
    ] {
        for node in &nodes {
            let first = c
                .controller_publish_volume(publish_req(&v.volume_id, node, cap.clone(), false))
                .await
                .unwrap()
                .into_inner();
            let again = c
                .controller_publish_volume(publish_req(&v.volume_id, node, cap.clone(), false))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(first, again);
            assert!(
                first
                    .publish_context
                    .keys()
                    .all(|k| k.starts_with("storch.io/")),
                "{first:?}"
            );
        }
        let mut expected: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        expected.sort();
        assert_eq!(published_nodes(&csi, &v.volume_id).await, expected);
        let busy = c
            .delete_volume(storch::csi::proto::DeleteVolumeRequest {
                volume_id: v.volume_id.clone(),
                ..Default::default()
            })
            .await;
        assert_eq!(code(busy), tonic::Code::FailedPrecondition);
        for node in &nodes {
            c.controller_unpublish_volume(unpublish_req(&v.volume_id, node))
                .await
                .unwrap();
        }
        assert!(published_nodes(&csi, &v.volume_id).await.is_empty());
    }
    let second = c
        .controller_publish_volume(publish_req(
            &lun.volume_id,
            "worker-2",
            block(Mode::SingleNodeWriter),
            false,
        ))
        .await;
    assert!(second.is_ok(), "free again after the unpublish: {second:?}");
    c.controller_unpublish_volume(unpublish_req(&lun.volume_id, ""))
        .await
        .unwrap();

    // Clones first, then the snapshot, then the sources: nothing stays on the array.
    for v in [&restored, &clone] {
        csi.delete(&v.volume_id).await;
    }
    let delete = DeleteSnapshotRequest {
        snapshot_id: snap.snapshot_id,
        ..Default::default()
    };
    c.delete_snapshot(delete).await.unwrap();
    for v in [&file, &lun] {
        csi.delete(&v.volume_id).await;
    }
    assert!(
        array_volumes(&sim, "svm0").is_empty(),
        "{:?}",
        array_volumes(&sim, "svm0")
    );
}

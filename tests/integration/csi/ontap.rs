//! The Controller against the ONTAP simulator (ontap-nas and ontap-san over real HTTPS): a
//! whole lifecycle — volumes by capability, snapshot, restore, clone, expansion, paging,
//! publish and unpublish to nodes, deletes — ends with nothing left on the array. Its steps
//! are the other arrays' lifecycle's (`arrays`); both backends share one storch, so placement
//! by capability, clones and paging are checked across them.

use serde_json::json;
use storch::csi::proto::ListVolumesRequest;
use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::volume_content_source::{SnapshotSource, Type, VolumeSource};
use storch::csi::proto::{CreateVolumeRequest, VolumeContentSource};
use storch::sim::ontap::SimOptions;

use super::arrays::{create_volume, delete_snapshot, expand, publish_twice, snapshot};
use super::publish::{publish_req, published_nodes, unpublish_req};
use super::{Csi, block, code, mount};
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

    let file = create_volume(&csi, "nasvol", mount(Mode::MultiNodeMultiWriter), |_| {}).await;
    assert_eq!(file.volume_context["storch.io/attachment"], "nfs");
    assert!(!file.volume_context["storch.io/nfsPath"].is_empty());
    let lun = create_volume(&csi, "lun", block(Mode::SingleNodeWriter), |_| {}).await;
    assert_eq!(lun.volume_context["storch.io/attachment"], "iscsi");
    assert!(!lun.volume_context["storch.io/iscsiTargetIqn"].is_empty());

    let snap = snapshot(&csi, &file.volume_id, "cut").await;
    // A volume from a source, of the source's size.
    let from = |t: Type| {
        move |r: &mut CreateVolumeRequest| {
            r.capacity_range = None;
            r.volume_content_source = Some(VolumeContentSource { r#type: Some(t) });
        }
    };
    let restored = create_volume(
        &csi,
        "restored",
        mount(Mode::MultiNodeMultiWriter),
        from(Type::Snapshot(SnapshotSource {
            snapshot_id: snap.snapshot_id.clone(),
        })),
    )
    .await;
    assert!(restored.content_source.is_some());
    let clone = create_volume(
        &csi,
        "lunclone",
        block(Mode::SingleNodeWriter),
        from(Type::Volume(VolumeSource {
            volume_id: lun.volume_id.clone(),
        })),
    )
    .await;
    assert_eq!(clone.volume_context["storch.io/attachment"], "iscsi");

    for (v, node) in [(&file, false), (&lun, true)] {
        assert_eq!(
            expand(&csi, &v.volume_id).await.node_expansion_required,
            node
        );
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
            publish_twice(&csi, &v.volume_id, node, cap.clone()).await;
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
    delete_snapshot(&csi, snap.snapshot_id).await;
    for v in [&file, &lun] {
        csi.delete(&v.volume_id).await;
    }
    assert!(
        array_volumes(&sim, "svm0").is_empty(),
        "{:?}",
        array_volumes(&sim, "svm0")
    );
}

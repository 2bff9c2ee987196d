//! ControllerPublishVolume / ControllerUnpublishVolume (CT-16, CT-17, CT-19, CT-20 and the
//! spec's publish table) and ControllerGetVolume (volume condition, published nodes), against
//! fake backends: the default one (every host reaches every volume) and one with
//! `perHostAccess`, whose grants are visible in its state file.

use serde_json::{Value, json};
use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::{
    ControllerGetVolumeRequest, ControllerPublishVolumeRequest, ControllerUnpublishVolumeRequest,
    CreateVolumeRequest, DeleteVolumeRequest, ListVolumesRequest, VolumeCapability,
};
use tonic::Code;

use super::{Csi, block, code, create_request, mount, unique};
use crate::support;

const IQN1: &str = "iqn.1993-08.org.debian:01:worker1";

pub fn publish_req(
    volume_id: &str,
    node_id: &str,
    cap: VolumeCapability,
    readonly: bool,
) -> ControllerPublishVolumeRequest {
    ControllerPublishVolumeRequest {
        volume_id: volume_id.into(),
        node_id: node_id.into(),
        volume_capability: Some(cap),
        readonly,
        ..ControllerPublishVolumeRequest::default()
    }
}

pub fn unpublish_req(volume_id: &str, node_id: &str) -> ControllerUnpublishVolumeRequest {
    ControllerUnpublishVolumeRequest {
        volume_id: volume_id.into(),
        node_id: node_id.into(),
        ..ControllerUnpublishVolumeRequest::default()
    }
}

/// The node ids a volume is published to, from ControllerGetVolume and from ListVolumes (they
/// must agree).
pub async fn published_nodes(csi: &Csi, volume_id: &str) -> Vec<String> {
    let mut c = csi.controller.clone();
    let got = c
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: volume_id.into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut from_get = got.status.unwrap().published_node_ids;
    from_get.sort();
    let listed = c
        .list_volumes(ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    let entry = listed
        .entries
        .into_iter()
        .find(|e| e.volume.as_ref().unwrap().volume_id == volume_id)
        .expect("the volume is listed");
    let mut from_list = entry
        .status
        .expect("LIST_VOLUMES_PUBLISHED_NODES")
        .published_node_ids;
    from_list.sort();
    assert_eq!(from_get, from_list);
    from_get
}

/// CT-16 and CT-19: required fields, an unknown volume, a node id no storch node reports.
#[tokio::test]
async fn publish_and_unpublish_refuse_bad_requests() {
    let csi = Csi::start().await;
    let mut c = csi.controller.clone();
    let id = csi.create(create_request(&unique("pub"))).await;
    let cap = mount(Mode::SingleNodeWriter);
    let cases = [
        (publish_req("", "worker-1", cap.clone(), false), "volume_id"),
        (publish_req(&id, "", cap.clone(), false), "node_id"),
        (
            ControllerPublishVolumeRequest {
                volume_capability: None,
                ..publish_req(&id, "worker-1", cap.clone(), false)
            },
            "volume_capability",
        ),
        (
            publish_req(&id, &format!("w{}", "x".repeat(300)), cap.clone(), false),
            "node_id",
        ),
    ];
    for (request, field) in cases {
        let status = c.controller_publish_volume(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{field}: {status:?}");
        assert!(status.message().starts_with(field), "{}", status.message());
    }
    let unknown = c
        .controller_publish_volume(publish_req(
            "no-such-volume",
            "worker-1",
            cap.clone(),
            false,
        ))
        .await;
    assert_eq!(code(unknown), Code::NotFound);
    let stranger = c
        .controller_publish_volume(publish_req(&id, "Some Fake Node!", cap.clone(), false))
        .await
        .unwrap_err();
    assert_eq!(stranger.code(), Code::NotFound, "{stranger:?}");
    assert!(
        stranger.message().contains("node_id"),
        "{}",
        stranger.message()
    );
    assert!(
        published_nodes(&csi, &id).await.is_empty(),
        "nothing was published"
    );

    let e = c
        .controller_unpublish_volume(unpublish_req("", "worker-1"))
        .await;
    assert_eq!(code(e), Code::InvalidArgument);
    // Nothing attached, unknown volume, unknown node: success.
    for (v, n) in [
        (id.as_str(), "worker-1"),
        ("no-such-volume", "worker-1"),
        (&id, "Not A Node"),
    ] {
        c.controller_unpublish_volume(unpublish_req(v, n))
            .await
            .unwrap();
    }
}

/// CT-20: create → publish → unpublish → delete, then the same with publish and unpublish
/// each repeated 10 times, every repeat succeeding with the same context; CT-17: readonly
/// flipped (or another capability) on the same node is ALREADY_EXISTS.
#[tokio::test]
async fn lifecycle_with_repeats_and_conflicting_publishes() {
    let csi = Csi::start().await;
    let mut c = csi.controller.clone();
    for repeats in [1, 10] {
        let id = csi.create(create_request(&unique("life"))).await;
        let cap = mount(Mode::SingleNodeWriter);
        let mut contexts = Vec::new();
        for _ in 0..repeats {
            let r = c
                .controller_publish_volume(publish_req(&id, "worker-1", cap.clone(), false))
                .await
                .unwrap()
                .into_inner();
            contexts.push(r.publish_context);
        }
        assert!(contexts.windows(2).all(|w| w[0] == w[1]), "{contexts:?}");
        assert_eq!(published_nodes(&csi, &id).await, ["worker-1"]);
        let flipped = c
            .controller_publish_volume(publish_req(&id, "worker-1", cap.clone(), true))
            .await;
        assert_eq!(code(flipped), Code::AlreadyExists);
        let other = c
            .controller_publish_volume(publish_req(
                &id,
                "worker-1",
                mount(Mode::SingleNodeReaderOnly),
                false,
            ))
            .await;
        assert_eq!(code(other), Code::AlreadyExists);
        for _ in 0..repeats {
            c.controller_unpublish_volume(unpublish_req(&id, "worker-1"))
                .await
                .unwrap();
        }
        assert!(published_nodes(&csi, &id).await.is_empty());
        csi.delete(&id).await;
        let events = csi
            .get_text(&format!("/trident/v1/events?object=volume/{id}"))
            .await;
        for kind in ["VolumePublished", "VolumeUnpublished"] {
            assert_eq!(events.matches(kind).count(), 1, "recorded once: {events}");
        }
    }
}

/// The spec's table: a single-node volume published elsewhere is FAILED_PRECONDITION; a
/// multi-node one goes to several nodes; a published volume is not deleted
/// (FAILED_PRECONDITION) until unpublished from every node (an empty node id).
#[tokio::test]
async fn single_node_volumes_stay_on_one_node_and_published_ones_are_not_deleted() {
    let csi = Csi::start().await;
    let mut c = csi.controller.clone();
    let one = csi.create(create_request(&unique("one"))).await;
    let cap = mount(Mode::SingleNodeWriter);
    c.controller_publish_volume(publish_req(&one, "worker-1", cap.clone(), false))
        .await
        .unwrap();
    let second = c
        .controller_publish_volume(publish_req(&one, "worker-2", cap.clone(), false))
        .await;
    assert_eq!(code(second), Code::FailedPrecondition);
    let reader = c
        .controller_publish_volume(publish_req(
            &one,
            "worker-2",
            mount(Mode::MultiNodeReaderOnly),
            true,
        ))
        .await;
    assert_eq!(
        code(reader),
        Code::FailedPrecondition,
        "worker-1 holds it alone"
    );

    let shared = csi
        .create(CreateVolumeRequest {
            volume_capabilities: vec![mount(Mode::MultiNodeMultiWriter)],
            ..create_request(&unique("shared"))
        })
        .await;
    let rwx = mount(Mode::MultiNodeMultiWriter);
    for node in ["worker-1", "worker-2", &format!("worker-3,{IQN1}")] {
        c.controller_publish_volume(publish_req(&shared, node, rwx.clone(), false))
            .await
            .unwrap();
    }
    assert_eq!(published_nodes(&csi, &shared).await.len(), 3);
    let single = c
        .controller_publish_volume(publish_req(&shared, "worker-4", cap.clone(), false))
        .await;
    assert_eq!(code(single), Code::FailedPrecondition);

    for id in [&one, &shared] {
        let busy = c
            .delete_volume(DeleteVolumeRequest {
                volume_id: id.to_string(),
                ..DeleteVolumeRequest::default()
            })
            .await
            .unwrap_err();
        assert_eq!(busy.code(), Code::FailedPrecondition, "{busy:?}");
        assert!(busy.message().contains("published"), "{}", busy.message());
        // An empty node id: from every node.
        c.controller_unpublish_volume(unpublish_req(id, ""))
            .await
            .unwrap();
        assert!(published_nodes(&csi, id).await.is_empty());
        csi.delete(id).await;
    }
}

/// ControllerGetVolume: required id, unknown volume, and the volume as CreateVolume
/// answered it with a normal condition; REST shows the published nodes too.
#[tokio::test]
async fn get_volume_shows_the_volume_its_nodes_and_condition() {
    let csi = Csi::start().await;
    let mut c = csi.controller.clone();
    let e = c
        .controller_get_volume(ControllerGetVolumeRequest::default())
        .await;
    assert_eq!(code(e), Code::InvalidArgument);
    let e = c
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: "no-such-volume".into(),
        })
        .await;
    assert_eq!(code(e), Code::NotFound);
    let created = c
        .create_volume(create_request(&unique("get")))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let id = created.volume_id.clone();
    c.controller_publish_volume(publish_req(
        &id,
        "worker-1",
        mount(Mode::SingleNodeWriter),
        false,
    ))
    .await
    .unwrap();
    let got = c
        .controller_get_volume(ControllerGetVolumeRequest {
            volume_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.volume.unwrap(), created);
    let status = got.status.unwrap();
    assert_eq!(status.published_node_ids, ["worker-1"]);
    let condition = status.volume_condition.unwrap();
    assert!(!condition.abnormal, "{condition:?}");
    let rest: Value =
        serde_json::from_str(&csi.get_text(&format!("/trident/v1/volume/{id}")).await).unwrap();
    assert_eq!(rest["volume"]["publishedNodes"], json!(["worker-1"]));
}

/// A backend with `perHostAccess`: publish grants the node's host on the array (a LUN number
/// for a block volume, in `publish_context`), unpublish revokes it; a block volume needs the
/// node's initiator; grants and publications survive a restart. When the backend's array
/// cannot be reached the volume's condition is abnormal and says why.
#[tokio::test]
async fn per_host_grants_reach_the_array_and_survive_a_restart() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path().join("arrays");
    std::fs::create_dir(&state).unwrap();
    let state_file = state.join("san.json");
    let mut san = support::fake_backend("san", "block", &[("pool1", support::ssd())]);
    san["perHostAccess"] = json!(true);
    san["statePath"] = json!(state_file.to_str().unwrap());
    let mut csi = Csi::start_on(&[], &[san]).await;
    let mut c = csi.controller.clone();
    let id = csi
        .create(CreateVolumeRequest {
            volume_capabilities: vec![block(Mode::SingleNodeWriter)],
            ..create_request(&unique("lun"))
        })
        .await;
    let node = format!("worker-1,{IQN1}");
    let cap = block(Mode::SingleNodeWriter);
    let ctx = c
        .controller_publish_volume(publish_req(&id, &node, cap.clone(), false))
        .await
        .unwrap()
        .into_inner()
        .publish_context;
    assert_eq!(ctx["storch.io/iscsiLunNumber"], "0", "{ctx:?}");
    assert_eq!(ctx["storch.io/accessGroup"], "fake-worker-1");
    let grants = |path: &std::path::Path| -> Value {
        let file: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        file["volumes"][format!("trident-{id}")]["hosts"].clone()
    };
    assert_eq!(grants(&state_file)["worker-1"]["initiator"], IQN1);
    let no_initiator = c
        .controller_publish_volume(publish_req(
            &id,
            "worker-2",
            block(Mode::MultiNodeReaderOnly),
            true,
        ))
        .await;
    assert_eq!(
        code(no_initiator),
        Code::FailedPrecondition,
        "worker-1 holds it"
    );

    csi.restart().await;
    let mut c = csi.controller.clone();
    assert_eq!(
        published_nodes(&csi, &id).await,
        std::slice::from_ref(&node)
    );
    let again = c
        .controller_publish_volume(publish_req(&id, &node, cap.clone(), false))
        .await
        .unwrap()
        .into_inner()
        .publish_context;
    assert_eq!(again, ctx, "the same context after a restart");
    c.controller_unpublish_volume(unpublish_req(&id, &node))
        .await
        .unwrap();
    assert!(
        grants(&state_file).is_null(),
        "the grant is gone from the array"
    );
    let bare = c
        .controller_publish_volume(publish_req(&id, "worker-2", cap.clone(), false))
        .await
        .unwrap_err();
    assert_eq!(bare.code(), Code::InvalidArgument, "{bare:?}");
    assert!(
        bare.message().contains("iSCSI initiator"),
        "{}",
        bare.message()
    );

    // The array's state becomes unreadable: the backend fails at the next start.
    csi.server.stop();
    std::fs::remove_file(&state_file).unwrap();
    std::fs::remove_dir(&state).unwrap();
    csi.restart().await;
    let mut c = csi.controller.clone();
    support::eventually("the backend fails", async || {
        let got = c
            .controller_get_volume(ControllerGetVolumeRequest {
                volume_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        let condition = got.status.unwrap().volume_condition.unwrap();
        condition.abnormal && condition.message.contains("failed")
    })
    .await;
}

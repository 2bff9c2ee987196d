//! The Node service's rules on the recording fake host (harness in `node`): formatting only
//! empty LUNs, CHAP, read-only and second publishes, staging conflicts, the publish context's
//! LUN, NFS exports, refused requests (ND-2, ND-4 to ND-7), volume conditions and cleanup after
//! a failed mount.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use storch::csi::node;
use storch::csi::node::host::{Chap, Probe};
use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::*;
use tonic::Code;

use super::node::{
    FakeNode, GIB, IQN, POD1, POD2, PORTAL, STAGING, has, iscsi_ctx, mount_fs, nfs_ctx, no_secrets,
    rwo,
};
use super::{block, code, mount, params};

/// A LUN that holds the requested filesystem is mounted as it is; one with another
/// filesystem or a partition table is refused with FAILED_PRECONDITION and never formatted;
/// an unknown fs_type is INVALID_ARGUMENT.
#[tokio::test]
async fn only_empty_luns_are_formatted() {
    let n = FakeNode::start().await;
    n.host
        .add_target(IQN, &[PORTAL], None, &[(0, GIB), (1, GIB), (2, GIB)]);
    let luns: Vec<PathBuf> = (0..3).map(|l| n.host.lun_device(IQN, l).unwrap()).collect();
    let (l0, l1, l2) = (&luns[0], &luns[1], &luns[2]);
    n.host.set_content(l0, Probe::Filesystem("xfs".into()));
    n.host.set_content(l1, Probe::Filesystem("xfs".into()));
    n.host
        .set_content(l2, Probe::Other("a gpt partition table".into()));
    n.host.add_dir("/var/lib/kubelet/s0");
    // The capability's fs_type decides; the contexts name none here.
    let ctx = |lun| {
        let mut c = iscsi_ctx(lun);
        c.remove("storch.io/fsType");
        c
    };
    n.stage_at(
        "/var/lib/kubelet/s0",
        mount_fs("xfs"),
        ctx(0),
        HashMap::new(),
        no_secrets(),
    )
    .await
    .unwrap();
    let took = n.took();
    assert!(!has(&took, "mkfs"), "{took:?}");
    assert!(has(&took, "mount -t xfs -o nouuid"), "{took:?}");
    let e = n
        .stage_at(
            STAGING,
            mount_fs("ext4"),
            ctx(1),
            HashMap::new(),
            no_secrets(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("xfs"), "{e:?}");
    let e = n
        .stage_at(STAGING, rwo(), ctx(2), HashMap::new(), no_secrets())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("partition table"), "{e:?}");
    assert!(!has(&n.took(), "mkfs"));
    let e = n
        .stage(mount_fs("btrfs"), ctx(1), no_secrets())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("volume_capability.mount.fs_type"),
        "{e:?}"
    );
    n.unstage_at("/var/lib/kubelet/s0").await.unwrap();
    n.assert_clean();
    n.stop().await;
}

/// CHAP: a target that needs it refuses a stage without the secret or with a wrong one
/// (UNAUTHENTICATED), and takes the one from `secrets`; mutual CHAP passes the target's
/// credentials too. The secret never appears in the recorded calls or in an error.
#[tokio::test]
async fn chap_credentials_come_from_the_secrets() {
    let n = FakeNode::start().await;
    let chap = Chap {
        username: "chapuser".into(),
        secret: "initiator-s3cret".into(),
        target: Some(("targetuser".into(), "target-s3cret".into())),
    };
    n.host.add_target(IQN, &[PORTAL], Some(chap), &[(0, GIB)]);
    let mut ctx = iscsi_ctx(0);
    ctx.remove("storch.io/iscsiPortals");
    ctx.insert("storch.io/iscsiUsername".into(), "chapuser".into());
    let e = n.stage(rwo(), ctx.clone(), no_secrets()).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("iscsiChapSecret"), "{e:?}");
    let mut secrets = params(&[
        ("iscsiChapSecret", "wrong-s3cret"),
        ("iscsiChapTargetUsername", "targetuser"),
        ("iscsiChapTargetSecret", "target-s3cret"),
    ]);
    let e = n
        .stage(rwo(), ctx.clone(), secrets.clone())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    secrets.insert("iscsiChapSecret".into(), "initiator-s3cret".into());
    n.stage(rwo(), ctx.clone(), secrets).await.unwrap();
    let calls = n.host.calls().join("\n");
    assert!(
        calls.contains(&format!("login {PORTAL} {IQN} chap=chapuser/targetuser")),
        "{calls}"
    );
    assert!(!calls.contains("s3cret"), "{calls}");
    let e = n
        .stage(rwo(), ctx, params(&[("iscsiChapTargetSecret", "x")]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains("secrets.iscsiChapTargetUsername"),
        "{e:?}"
    );
    n.unstage_at(STAGING).await.unwrap();
    n.assert_clean();
    n.stop().await;
}

/// Read-only publishes are read-only binds; the same target with another read-only setting
/// is ALREADY_EXISTS; a single-node volume at a second target is FAILED_PRECONDITION (spec
/// §6's table) while a multi-node reader volume may have several.
#[tokio::test]
async fn readonly_and_second_publishes() {
    let n = FakeNode::start().await;
    n.host.add_target(IQN, &[PORTAL], None, &[(0, GIB)]);
    n.stage(rwo(), iscsi_ctx(0), no_secrets()).await.unwrap();
    n.publish(POD1, rwo(), iscsi_ctx(0), true).await.unwrap();
    assert!(n.took().contains(&format!("bind-ro {STAGING} {POD1}")));
    let ro = n
        .host
        .mount_table()
        .into_iter()
        .find(|m| m.target == Path::new(POD1));
    assert!(ro.unwrap().readonly);
    n.publish(POD1, rwo(), iscsi_ctx(0), true).await.unwrap();
    let e = n.publish(POD1, rwo(), iscsi_ctx(0), false).await;
    assert_eq!(code(e), Code::AlreadyExists);
    let e = n.publish(POD2, rwo(), iscsi_ctx(0), false).await;
    assert_eq!(code(e), Code::FailedPrecondition);
    n.unpublish(POD1).await.unwrap();
    n.unstage_at(STAGING).await.unwrap();
    let rox = mount(Mode::MultiNodeReaderOnly);
    n.stage(rox.clone(), iscsi_ctx(0), no_secrets())
        .await
        .unwrap();
    n.publish(POD1, rox.clone(), iscsi_ctx(0), false)
        .await
        .unwrap();
    n.publish(POD2, rox.clone(), iscsi_ctx(0), false)
        .await
        .unwrap();
    let readonly: Vec<bool> = n
        .host
        .mount_table()
        .iter()
        .skip(1)
        .map(|m| m.readonly)
        .collect();
    assert_eq!(
        readonly,
        [true, true, true],
        "reader-only volumes are mounted read-only"
    );
    n.unpublish(POD1).await.unwrap();
    n.unpublish(POD2).await.unwrap();
    n.unstage_at(STAGING).await.unwrap();
    n.assert_clean();
    n.stop().await;
}

/// A staging path that holds another LUN, or the same LUN with another access type or
/// filesystem, is ALREADY_EXISTS; a LUN of the target still staged elsewhere keeps the
/// session at unstage.
#[tokio::test]
async fn staging_conflicts_and_shared_targets() {
    let n = FakeNode::start().await;
    n.host
        .add_target(IQN, &[PORTAL], None, &[(0, GIB), (1, GIB)]);
    let single = |lun| {
        let mut c = iscsi_ctx(lun);
        c.remove("storch.io/iscsiPortals");
        c.remove("storch.io/fsType");
        c
    };
    let (ctx0, ctx1) = (single(0), single(1));
    n.stage(rwo(), ctx0.clone(), no_secrets()).await.unwrap();
    let e = n.stage(rwo(), ctx1.clone(), no_secrets()).await;
    assert_eq!(code(e), Code::AlreadyExists);
    let e = n
        .stage(block(Mode::SingleNodeWriter), ctx0.clone(), no_secrets())
        .await;
    assert_eq!(code(e), Code::AlreadyExists);
    let e = n.stage(mount_fs("xfs"), ctx0.clone(), no_secrets()).await;
    assert_eq!(code(e), Code::AlreadyExists);
    let other = "/var/lib/kubelet/plugins/csi.storch.io/staging/pv-2";
    n.stage_at(other, rwo(), ctx1, HashMap::new(), no_secrets())
        .await
        .unwrap();
    n.host.clear_calls();
    n.unstage_at(STAGING).await.unwrap();
    assert!(!has(&n.took(), "logout"), "LUN 1 still uses the target");
    n.unstage_at(other).await.unwrap();
    assert!(has(&n.took(), &format!("logout {PORTAL} {IQN}")));
    n.assert_clean();
    n.stop().await;
}

/// The LUN number of the node's own mapping (publish_context) wins over the volume
/// context's; a LUN that never appears ends the stage with DEADLINE_EXCEEDED at once with
/// the fake (the real host polls up to --device-timeout).
#[tokio::test]
async fn the_publish_context_lun_wins_and_a_missing_lun_times_out() {
    let n = FakeNode::start().await;
    n.host.add_target(IQN, &[PORTAL], None, &[(5, GIB)]);
    let mut ctx = iscsi_ctx(0);
    ctx.remove("storch.io/iscsiPortals");
    n.stage_at(
        STAGING,
        rwo(),
        ctx.clone(),
        params(&[("storch.io/iscsiLunNumber", "5")]),
        no_secrets(),
    )
    .await
    .unwrap();
    n.unstage_at(STAGING).await.unwrap();
    let e = n.stage(rwo(), ctx, no_secrets()).await.unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded, "{e:?}");
    assert!(e.message().contains("LUN 0"), "{e:?}");
    n.stop().await;
}

/// NFS exports need no staging (NodeStage acts on nothing) and are mounted on each target,
/// read-only when asked; raw block of an NFS volume is FAILED_PRECONDITION.
#[tokio::test]
async fn nfs_volumes_are_mounted_at_publish() {
    let n = FakeNode::start().await;
    let rwx = mount(Mode::MultiNodeMultiWriter);
    n.stage(rwx.clone(), nfs_ctx(), no_secrets()).await.unwrap();
    n.unstage_at(STAGING).await.unwrap();
    assert_eq!(n.took(), Vec::<String>::new());
    n.publish(POD1, rwx.clone(), nfs_ctx(), false)
        .await
        .unwrap();
    n.publish(POD1, rwx.clone(), nfs_ctx(), false)
        .await
        .unwrap();
    n.publish(POD2, rwx.clone(), nfs_ctx(), true).await.unwrap();
    assert_eq!(
        n.took(),
        [
            format!("mkdir {POD1}"),
            format!("mount -t nfs 10.0.0.5:/export/pv-1 {POD1}"),
            format!("mkdir {POD2}"),
            format!("mount -t nfs -o ro 10.0.0.5:/export/pv-1 {POD2}"),
        ]
    );
    let stats = n.stats(POD2).await.unwrap();
    assert_eq!(
        stats.usage[0].total,
        node::fake::OTHER_FS.total_bytes as i64
    );
    let e = n
        .publish(POD1, block(Mode::SingleNodeWriter), nfs_ctx(), false)
        .await;
    assert_eq!(code(e), Code::FailedPrecondition);
    n.unpublish(POD1).await.unwrap();
    n.unpublish(POD2).await.unwrap();
    n.assert_clean();
    n.stop().await;
}

/// ND-2, ND-4, ND-5, ND-6, ND-7: a missing required field is INVALID_ARGUMENT; a missing
/// staging path at publish is FAILED_PRECONDITION (STAGE_UNSTAGE is advertised); a context
/// storch did not write is INVALID_ARGUMENT naming the key.
#[tokio::test]
async fn missing_fields_are_refused() {
    let n = FakeNode::start().await;
    let mut c = n.node.clone();
    let cap = Some(rwo());
    let stage = |id: &str, path: &str, cap: Option<VolumeCapability>| NodeStageVolumeRequest {
        volume_id: id.into(),
        staging_target_path: path.into(),
        volume_capability: cap,
        volume_context: iscsi_ctx(0),
        ..Default::default()
    };
    for r in [
        stage("", STAGING, cap.clone()),
        stage("v", "", cap.clone()),
        stage("v", STAGING, None),
    ] {
        assert_eq!(code(c.node_stage_volume(r).await), Code::InvalidArgument);
    }
    for (id, path) in [("", STAGING), ("v", "")] {
        let r = NodeUnstageVolumeRequest {
            volume_id: id.into(),
            staging_target_path: path.into(),
        };
        assert_eq!(code(c.node_unstage_volume(r).await), Code::InvalidArgument);
    }
    let publish =
        |id: &str, target: &str, cap: Option<VolumeCapability>| NodePublishVolumeRequest {
            volume_id: id.into(),
            target_path: target.into(),
            staging_target_path: STAGING.into(),
            volume_capability: cap,
            volume_context: nfs_ctx(),
            ..Default::default()
        };
    for r in [
        publish("", POD1, cap.clone()),
        publish("v", "", cap.clone()),
        publish("v", POD1, None),
    ] {
        assert_eq!(code(c.node_publish_volume(r).await), Code::InvalidArgument);
    }
    let mut unstaged = publish("v", POD1, cap.clone());
    unstaged.staging_target_path.clear();
    assert_eq!(
        code(c.node_publish_volume(unstaged).await),
        Code::FailedPrecondition
    );
    let mut foreign = publish("v", POD1, cap.clone());
    foreign.volume_context = params(&[("foo", "bar")]);
    let e = c.node_publish_volume(foreign).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().contains("storch.io/attachment"), "{e:?}");
    for (id, path) in [("", POD1), ("v", "")] {
        let r = NodeUnpublishVolumeRequest {
            volume_id: id.into(),
            target_path: path.into(),
        };
        assert_eq!(
            code(c.node_unpublish_volume(r).await),
            Code::InvalidArgument
        );
        let r = NodeGetVolumeStatsRequest {
            volume_id: id.into(),
            volume_path: path.into(),
            ..Default::default()
        };
        assert_eq!(
            code(c.node_get_volume_stats(r).await),
            Code::InvalidArgument
        );
        let r = NodeExpandVolumeRequest {
            volume_id: id.into(),
            volume_path: path.into(),
            ..Default::default()
        };
        assert_eq!(code(c.node_expand_volume(r).await), Code::InvalidArgument);
    }
    assert_eq!(
        n.took(),
        Vec::<String>::new(),
        "a refused call acts on nothing"
    );
    n.stop().await;
}

/// ND-6, ND-7: stats and expand of a path where no volume is (relative, missing) are
/// NOT_FOUND, and so are stage and publish of a local volume whose directory is not here; expand of a directory with nothing mounted is NOT_FOUND; stats of such a
/// directory, or of a volume whose device is gone, report an abnormal condition.
#[tokio::test]
async fn unknown_paths_and_volume_conditions() {
    let n = FakeNode::start().await;
    for path in ["some/path", "/path/does/not/exist"] {
        assert_eq!(code(n.stats(path).await), Code::NotFound);
        assert_eq!(code(n.expand(path, 0).await), Code::NotFound);
    }
    let gone = params(&[
        ("storch.io/attachment", "local"),
        ("storch.io/localPath", "/srv/storch/volumes/gone"),
    ]);
    let e = n.stage(rwo(), gone.clone(), no_secrets()).await;
    assert_eq!(
        code(e),
        Code::NotFound,
        "a local directory not on this node"
    );
    let e = n.publish(POD1, rwo(), gone, false).await;
    assert_eq!(code(e), Code::NotFound);
    n.host.add_dir(POD1);
    let stats = n.stats(POD1).await.unwrap();
    assert!(stats.volume_condition.unwrap().abnormal);
    assert_eq!(code(n.expand(POD1, 0).await), Code::NotFound);
    n.host
        .add_target(IQN, &[PORTAL], None, &[(0, GIB), (1, GIB)]);
    let mut ctx = iscsi_ctx(0);
    ctx.remove("storch.io/iscsiPortals");
    n.stage(rwo(), ctx.clone(), no_secrets()).await.unwrap();
    n.publish(POD2, rwo(), ctx, false).await.unwrap();
    n.host.lose_device(&n.host.lun_device(IQN, 0).unwrap());
    let condition = n.stats(POD2).await.unwrap().volume_condition.unwrap();
    assert!(
        condition.abnormal && condition.message.contains("gone"),
        "{condition:?}"
    );
    n.stop().await;
}

/// A publish whose mount fails removes the target it created, so a retry starts afresh; a
/// second call for a volume while one runs would be ABORTED (the claim is per volume).
#[tokio::test]
async fn a_failed_publish_leaves_no_target() {
    let n = FakeNode::start().await;
    n.host.fail_next("mount -t nfs");
    let rwx = mount(Mode::MultiNodeMultiWriter);
    let e = n
        .publish(POD1, rwx.clone(), nfs_ctx(), false)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Internal, "{e:?}");
    assert!(!n.host.exists(Path::new(POD1)));
    n.publish(POD1, rwx, nfs_ctx(), false).await.unwrap();
    n.unpublish(POD1).await.unwrap();
    n.assert_clean();
    n.stop().await;
}

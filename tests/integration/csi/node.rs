//! The CSI Node service (`csi::node`) served in-process on a temporary unix socket, acting on
//! the recording fake host (`csi::node::fake::FakeHost`): a tonic client drives stage, publish,
//! stats, expand, unpublish and unstage for iSCSI mount and block volumes and NFS exports, and
//! each test checks the answers, the host's state afterwards and the host actions taken.
//! Requirement ids (ND-n) are those of ../shared/spec/csi.md §18. This file has the harness,
//! NodeGetInfo and the lifecycles; `node_rules` the refusals, conflicts and NFS.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use storch::csi::node::fake::FakeHost;
use storch::csi::node::{NodeOptions, ZONE_KEY};
use storch::csi::proto::identity_client::IdentityClient;
use storch::csi::proto::node_client::NodeClient;
use storch::csi::proto::node_service_capability::{Type as CapType, rpc};
use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::volume_capability::{AccessType, MountVolume};
use storch::csi::proto::volume_usage::Unit;
use storch::csi::proto::*;
use storch::csi::{CsiServer, node};
use storch::drivers::HostAccess;
use tonic::transport::Channel;

use super::{block, connect, mount, params};

pub(super) const IQN: &str = "iqn.2010-01.io.storch:target-1";
pub(super) const PORTAL: &str = "10.0.0.1:3260";
pub(super) const PORTAL2: &str = "10.0.0.2:3260";
pub(super) const GIB: u64 = 1 << 30;
pub(super) const STAGING: &str = "/var/lib/kubelet/plugins/csi.storch.io/staging/pv-1";
pub(super) const POD1: &str = "/var/lib/kubelet/pods/p1/volumes/pv-1";
pub(super) const POD2: &str = "/var/lib/kubelet/pods/p2/volumes/pv-1";

/// The Node service on the fake host, and clients on its socket.
pub(super) struct FakeNode {
    pub(super) host: Arc<FakeHost>,
    pub(super) node: NodeClient<Channel>,
    identity: IdentityClient<Channel>,
    server: CsiServer,
    _dir: tempfile::TempDir,
}

impl FakeNode {
    pub(super) async fn start() -> FakeNode {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("csi.sock");
        let host = Arc::new(FakeHost::new());
        for d in [STAGING, POD1, POD2] {
            host.add_dir(Path::new(d).parent().unwrap());
        }
        let options = NodeOptions {
            socket: socket.clone(),
            driver_name: "csi.storch.io".into(),
            host: HostAccess {
                node: "worker-1".into(),
                iscsi_initiator: Some("iqn.1993-08.org.debian:01:w1".into()),
            },
            zone: Some("zone-a".into()),
            max_volumes: 24,
            device_timeout: Duration::from_secs(30),
        };
        let server = node::start(options, host.clone()).unwrap();
        let channel = connect(&socket).await;
        FakeNode {
            host,
            node: NodeClient::new(channel.clone()),
            identity: IdentityClient::new(channel),
            server,
            _dir: dir,
        }
    }

    pub(super) async fn stop(self) {
        self.server.shutdown().await;
    }

    pub(super) async fn stage(
        &self,
        cap: VolumeCapability,
        ctx: HashMap<String, String>,
        secrets: HashMap<String, String>,
    ) -> Result<(), tonic::Status> {
        self.stage_at(STAGING, cap, ctx, HashMap::new(), secrets)
            .await
    }

    pub(super) async fn stage_at(
        &self,
        staging: &str,
        cap: VolumeCapability,
        ctx: HashMap<String, String>,
        publish: HashMap<String, String>,
        secrets: HashMap<String, String>,
    ) -> Result<(), tonic::Status> {
        let request = NodeStageVolumeRequest {
            volume_id: "pv-1".into(),
            publish_context: publish,
            staging_target_path: staging.into(),
            volume_capability: Some(cap),
            secrets,
            volume_context: ctx,
        };
        self.node.clone().node_stage_volume(request).await.map(drop)
    }

    pub(super) async fn unstage_at(&self, staging: &str) -> Result<(), tonic::Status> {
        let request = NodeUnstageVolumeRequest {
            volume_id: "pv-1".into(),
            staging_target_path: staging.into(),
        };
        self.node
            .clone()
            .node_unstage_volume(request)
            .await
            .map(drop)
    }

    pub(super) async fn publish(
        &self,
        target: &str,
        cap: VolumeCapability,
        ctx: HashMap<String, String>,
        readonly: bool,
    ) -> Result<(), tonic::Status> {
        let request = NodePublishVolumeRequest {
            volume_id: "pv-1".into(),
            staging_target_path: STAGING.into(),
            target_path: target.into(),
            volume_capability: Some(cap),
            readonly,
            volume_context: ctx,
            ..Default::default()
        };
        self.node
            .clone()
            .node_publish_volume(request)
            .await
            .map(drop)
    }

    pub(super) async fn unpublish(&self, target: &str) -> Result<(), tonic::Status> {
        let request = NodeUnpublishVolumeRequest {
            volume_id: "pv-1".into(),
            target_path: target.into(),
        };
        self.node
            .clone()
            .node_unpublish_volume(request)
            .await
            .map(drop)
    }

    pub(super) async fn stats(
        &self,
        path: &str,
    ) -> Result<NodeGetVolumeStatsResponse, tonic::Status> {
        let request = NodeGetVolumeStatsRequest {
            volume_id: "pv-1".into(),
            volume_path: path.into(),
            staging_target_path: String::new(),
        };
        let r = self.node.clone().node_get_volume_stats(request).await;
        r.map(tonic::Response::into_inner)
    }

    pub(super) async fn expand(&self, path: &str, required: u64) -> Result<i64, tonic::Status> {
        let request = NodeExpandVolumeRequest {
            volume_id: "pv-1".into(),
            volume_path: path.into(),
            capacity_range: super::range(required as i64, 0),
            ..Default::default()
        };
        let r = self.node.clone().node_expand_volume(request).await;
        r.map(|r| r.into_inner().capacity_bytes)
    }

    /// The host actions since the last call, which are then forgotten.
    pub(super) fn took(&self) -> Vec<String> {
        let actions = self.host.actions();
        self.host.clear_calls();
        actions
    }

    /// Only `/` is mounted and no session is left.
    pub(super) fn assert_clean(&self) {
        let targets: Vec<PathBuf> = self
            .host
            .mount_table()
            .into_iter()
            .map(|m| m.target)
            .collect();
        assert_eq!(targets, [PathBuf::from("/")]);
        assert!(
            self.host.sessions().is_empty(),
            "{:?}",
            self.host.sessions()
        );
    }
}

pub(super) fn iscsi_ctx(lun: u32) -> HashMap<String, String> {
    params(&[
        ("storch.io/attachment", "iscsi"),
        ("storch.io/iscsiTargetPortal", "10.0.0.1"),
        ("storch.io/iscsiPortals", PORTAL2),
        ("storch.io/iscsiTargetIqn", IQN),
        ("storch.io/iscsiLunNumber", &lun.to_string()),
        ("storch.io/fsType", "ext4"),
        ("storch.io/backend", "san"),
        ("storage.kubernetes.io/csiProvisionerIdentity", "x"),
    ])
}

pub(super) fn nfs_ctx() -> HashMap<String, String> {
    params(&[
        ("storch.io/attachment", "nfs"),
        ("storch.io/nfsServerIp", "10.0.0.5"),
        ("storch.io/nfsPath", "/export/pv-1"),
    ])
}

pub(super) fn rwo() -> VolumeCapability {
    mount(Mode::SingleNodeWriter)
}

pub(super) fn mount_fs(fs: &str) -> VolumeCapability {
    let mut cap = rwo();
    cap.access_type = Some(AccessType::Mount(MountVolume {
        fs_type: fs.into(),
        ..Default::default()
    }));
    cap
}

pub(super) fn no_secrets() -> HashMap<String, String> {
    HashMap::new()
}

pub(super) fn has(actions: &[String], prefix: &str) -> bool {
    actions.iter().any(|a| a.starts_with(prefix))
}

/// ND-1: the capabilities are known types (and exactly what the node does); NodeGetInfo
/// reports the node id the controller parses, the attach limit and the zone; the node
/// plugin's Identity is ready without a core.
#[tokio::test]
async fn node_info_capabilities_and_identity() {
    let n = FakeNode::start().await;
    let caps = n
        .node
        .clone()
        .node_get_capabilities(NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities;
    let types: Vec<rpc::Type> = caps
        .iter()
        .map(|c| match &c.r#type {
            Some(CapType::Rpc(r)) => r.r#type(),
            None => panic!("a capability without a type"),
        })
        .collect();
    assert_eq!(
        types,
        [
            rpc::Type::StageUnstageVolume,
            rpc::Type::GetVolumeStats,
            rpc::Type::ExpandVolume,
            rpc::Type::VolumeCondition
        ]
    );
    let info = n
        .node
        .clone()
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, "worker-1,iqn.1993-08.org.debian:01:w1");
    let parsed = storch::csi::node_id::parse(&info.node_id).unwrap();
    assert_eq!(parsed.node, "worker-1");
    assert_eq!(info.max_volumes_per_node, 24);
    let topology = info.accessible_topology.unwrap();
    assert_eq!(topology.segments[ZONE_KEY], "zone-a");
    let probe = n.identity.clone().probe(ProbeRequest {}).await.unwrap();
    assert_eq!(probe.into_inner().ready, Some(true));
    let plugin = n
        .identity
        .clone()
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(plugin.name, "csi.storch.io");
    n.stop().await;
}

/// ND-8 for an iSCSI filesystem volume, each step repeated: stage logs in through both
/// portals, formats the empty LUN and mounts it once; publish binds it; stats and expand see
/// the filesystem; unpublish removes the target; unstage unmounts and logs out.
#[tokio::test]
async fn iscsi_mount_lifecycle_is_idempotent_and_leaves_nothing() {
    let n = FakeNode::start().await;
    n.host
        .add_target(IQN, &[PORTAL, PORTAL2], None, &[(0, GIB)]);
    let sda = n.host.lun_device(IQN, 0).unwrap();
    n.stage(rwo(), iscsi_ctx(0), no_secrets()).await.unwrap();
    let took = n.took();
    for step in [
        format!("discover {PORTAL}"),
        format!("login {PORTAL} {IQN}"),
        format!("login {PORTAL2} {IQN}"),
        format!("blkid {}", sda.display()),
        format!("mkfs ext4 {}", sda.display()),
        format!("mount -t ext4 {} {STAGING}", sda.display()),
    ] {
        assert!(took.contains(&step), "{step} missing from {took:?}");
    }
    for _ in 0..3 {
        n.stage(rwo(), iscsi_ctx(0), no_secrets()).await.unwrap();
    }
    assert_eq!(
        n.took(),
        Vec::<String>::new(),
        "a repeated stage acts on nothing"
    );
    for _ in 0..3 {
        n.publish(POD1, rwo(), iscsi_ctx(0), false).await.unwrap();
    }
    assert_eq!(
        n.took(),
        [format!("mkdir {POD1}"), format!("bind {STAGING} {POD1}")]
    );
    let stats = n.stats(POD1).await.unwrap();
    let bytes = stats
        .usage
        .iter()
        .find(|u| u.unit() == Unit::Bytes)
        .unwrap();
    assert_eq!(bytes.total, GIB as i64);
    assert_eq!(bytes.used + bytes.available, bytes.total);
    assert!(stats.usage.iter().any(|u| u.unit() == Unit::Inodes));
    assert!(!stats.volume_condition.unwrap().abnormal);
    n.host.grow_lun(&sda, 2 * GIB);
    n.host.clear_calls();
    assert_eq!(n.expand(POD1, 2 * GIB).await.unwrap(), (2 * GIB) as i64);
    let took = n.took();
    assert!(has(&took, &format!("rescan {PORTAL} {IQN}")), "{took:?}");
    assert!(
        has(&took, &format!("grow ext4 {} {POD1}", sda.display())),
        "{took:?}"
    );
    assert_eq!(n.host.content(&sda).unwrap().1, 2 * GIB);
    assert_eq!(n.expand(POD1, 2 * GIB).await.unwrap(), (2 * GIB) as i64);
    for _ in 0..3 {
        n.unpublish(POD1).await.unwrap();
    }
    assert!(!n.host.exists(Path::new(POD1)), "ND-4: the target is gone");
    for _ in 0..3 {
        n.unstage_at(STAGING).await.unwrap();
    }
    let took = n.took();
    assert!(has(&took, &format!("umount {STAGING}")), "{took:?}");
    assert!(has(&took, &format!("logout {PORTAL} {IQN}")), "{took:?}");
    assert!(has(&took, &format!("logout {PORTAL2} {IQN}")), "{took:?}");
    n.assert_clean();
    n.stop().await;
}

/// ND-8 for a raw block volume: no filesystem is made; the device node is bound onto
/// `STAGING/block` and from there onto the target file; stats give the device's size; expand
/// rescans and grows nothing.
#[tokio::test]
async fn iscsi_block_lifecycle_binds_the_device_node() {
    let n = FakeNode::start().await;
    n.host.add_target(IQN, &[PORTAL], None, &[(3, 4 * GIB)]);
    let dev = n.host.lun_device(IQN, 3).unwrap();
    let cap = block(Mode::SingleNodeWriter);
    let mut ctx = iscsi_ctx(3);
    ctx.remove("storch.io/iscsiPortals");
    for _ in 0..2 {
        n.stage(cap.clone(), ctx.clone(), no_secrets())
            .await
            .unwrap();
    }
    let took = n.took();
    assert!(!has(&took, "blkid") && !has(&took, "mkfs"), "{took:?}");
    let staged = format!("{STAGING}/block");
    assert!(
        took.contains(&format!("bind {} {staged}", dev.display())),
        "{took:?}"
    );
    for _ in 0..2 {
        n.publish(POD1, cap.clone(), ctx.clone(), false)
            .await
            .unwrap();
    }
    assert_eq!(
        n.took(),
        [format!("touch {POD1}"), format!("bind {staged} {POD1}")]
    );
    let stats = n.stats(POD1).await.unwrap();
    assert_eq!(stats.usage.len(), 1);
    assert_eq!(stats.usage[0].total, (4 * GIB) as i64);
    assert_eq!(stats.usage[0].unit(), Unit::Bytes);
    n.host.grow_lun(&dev, 5 * GIB);
    n.host.clear_calls();
    assert_eq!(n.expand(POD1, 5 * GIB).await.unwrap(), (5 * GIB) as i64);
    let took = n.took();
    assert!(has(&took, "rescan") && !has(&took, "grow"), "{took:?}");
    n.unpublish(POD1).await.unwrap();
    n.unpublish(POD1).await.unwrap();
    assert!(!n.host.exists(Path::new(POD1)));
    n.unstage_at(STAGING).await.unwrap();
    n.unstage_at(STAGING).await.unwrap();
    assert!(
        !n.host.exists(Path::new(&staged)),
        "the block file is removed"
    );
    n.assert_clean();
    n.stop().await;
}

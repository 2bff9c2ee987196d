//! The real `storch csi node` binary on a unix socket in a temporary directory, and the real
//! host seam (`csi::node::real::RealHost`): local volumes bound for real onto targets, and a
//! loop device formatted, mounted, grown and bound read-only. Real mounts need root, so those
//! tests (named `…_as_root`) print why they skip when not root; every mount they make is under
//! their temporary directory and is taken off by a guard even when they fail, and each checks
//! with `findmnt` that nothing is left.

use std::collections::HashMap;
use std::io::BufRead;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use storch::csi::node::host::{HostOps, PathKind, Probe};
use storch::csi::node::real::RealHost;
use storch::csi::proto::identity_client::IdentityClient;
use storch::csi::proto::node_client::NodeClient;
use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::volume_usage::Unit;
use storch::csi::proto::*;
use tonic::Code;
use tonic::transport::Channel;

use super::{code, connect, mount, params};

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// capabilities(7): needed for an online ext4 resize.
const CAP_SYS_RESOURCE: u32 = 24;

/// Whether this process has the capability in its effective set.
fn has_capability(cap: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|eff| eff & (1 << cap) != 0)
}

/// The mount points under `dir`, from findmnt (deepest last).
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let out = Command::new("findmnt")
        .args(["-rn", "-o", "TARGET"])
        .output()
        .expect("findmnt runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(PathBuf::from)
        .filter(|t| t.starts_with(dir))
        .collect()
}

/// Takes every mount under its directory off when dropped, deepest first.
struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        let mut left = mounts_under(&self.0);
        left.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        for target in left {
            let _ = Command::new("umount").arg("-l").arg(&target).status();
        }
    }
}

/// `storch csi node` as a child process, killed when dropped.
struct NodeProcess {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl NodeProcess {
    fn start(dir: &Path) -> NodeProcess {
        let socket = dir.join("csi.sock");
        let log = dir.join("node.log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_storch"))
            .args(["csi", "node", "--endpoint"])
            .arg(format!("unix://{}", socket.display()))
            .args(["--node-id", "node-1", "--zone", "z1", "--max-volumes", "8"])
            .arg("--iscsi-initiator-file")
            .arg(dir.join("no-initiatorname.iscsi"))
            .env_remove("CSI_ENDPOINT")
            .env_remove("RUST_LOG")
            .env_remove("STORCH_ISCSI_INITIATOR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("storch csi node starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let expected = format!("storch csi node listening on unix://{}", socket.display());
        if line.trim() != expected {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "unexpected first line {line:?}; log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        NodeProcess { child, socket, log }
    }

    /// SIGTERM; the process exits 0 and removes its socket.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let status = self.child.wait().unwrap();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(status.success(), "exit {status}; log:\n{log}");
        assert!(!self.socket.exists(), "the socket is removed at exit");
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The binary answers Identity (ready, the driver name) and NodeGetInfo (the node name with
/// no initiator when the host has no initiatorname file, the zone, the attach limit).
#[tokio::test]
async fn the_node_binary_answers_identity_and_node_info() {
    let dir = tempfile::tempdir().unwrap();
    let process = NodeProcess::start(dir.path());
    let channel = connect(&process.socket).await;
    let mut identity = IdentityClient::new(channel.clone());
    let probe = identity.probe(ProbeRequest {}).await.unwrap().into_inner();
    assert_eq!(probe.ready, Some(true));
    let plugin = identity
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap();
    assert_eq!(plugin.into_inner().name, "csi.storch.io");
    let info = NodeClient::new(channel)
        .node_get_info(NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, "node-1");
    assert_eq!(info.max_volumes_per_node, 8);
    let zone = &info.accessible_topology.unwrap().segments;
    assert_eq!(zone[storch::csi::node::ZONE_KEY], "z1");
    process.stop();
}

struct Local {
    node: NodeClient<Channel>,
    ctx: HashMap<String, String>,
    staging: String,
}

impl Local {
    async fn publish(
        &self,
        target: &Path,
        mode: Mode,
        readonly: bool,
    ) -> Result<(), tonic::Status> {
        let request = NodePublishVolumeRequest {
            volume_id: "local-1".into(),
            staging_target_path: self.staging.clone(),
            target_path: target.display().to_string(),
            volume_capability: Some(mount(mode)),
            readonly,
            volume_context: self.ctx.clone(),
            ..Default::default()
        };
        self.node
            .clone()
            .node_publish_volume(request)
            .await
            .map(drop)
    }

    async fn unpublish(&self, target: &Path) {
        let request = NodeUnpublishVolumeRequest {
            volume_id: "local-1".into(),
            target_path: target.display().to_string(),
        };
        self.node
            .clone()
            .node_unpublish_volume(request)
            .await
            .unwrap();
    }

    async fn stats(&self, path: &Path) -> NodeGetVolumeStatsResponse {
        let request = NodeGetVolumeStatsRequest {
            volume_id: "local-1".into(),
            volume_path: path.display().to_string(),
            staging_target_path: String::new(),
        };
        let r = self.node.clone().node_get_volume_stats(request).await;
        r.unwrap().into_inner()
    }
}

/// A `local` volume through the real binary and real bind mounts: stage needs nothing;
/// publish binds the volume's directory onto the target (writes go through), idempotently;
/// another read-only setting there is ALREADY_EXISTS and a second target FAILED_PRECONDITION;
/// a read-only publish refuses writes (EROFS); stats and expand read statvfs; unpublish
/// removes the target; nothing stays mounted.
#[tokio::test]
async fn local_volumes_are_bind_mounted_for_real_as_root() {
    if !is_root() {
        eprintln!("skipped: real bind mounts need root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let _mounts = MountGuard(dir.path().to_path_buf());
    let process = NodeProcess::start(dir.path());
    let volume = dir.path().join("volumes/local-1");
    std::fs::create_dir_all(&volume).unwrap();
    std::fs::write(volume.join("hello"), "hi").unwrap();
    let staging = dir.path().join("staging/local-1");
    let (p1, p2) = (dir.path().join("pods/p1"), dir.path().join("pods/p2"));
    for d in [&staging, &p1, &p2] {
        std::fs::create_dir_all(d).unwrap();
    }
    let local = Local {
        node: NodeClient::new(connect(&process.socket).await),
        ctx: params(&[
            ("storch.io/attachment", "local"),
            ("storch.io/localPath", volume.to_str().unwrap()),
        ]),
        staging: staging.display().to_string(),
    };
    let stage = NodeStageVolumeRequest {
        volume_id: "local-1".into(),
        staging_target_path: local.staging.clone(),
        volume_capability: Some(mount(Mode::SingleNodeWriter)),
        volume_context: local.ctx.clone(),
        ..Default::default()
    };
    local.node.clone().node_stage_volume(stage).await.unwrap();
    assert!(
        mounts_under(dir.path()).is_empty(),
        "a local volume stages nothing"
    );

    let t1 = p1.join("mount");
    for _ in 0..2 {
        local
            .publish(&t1, Mode::SingleNodeWriter, false)
            .await
            .unwrap();
    }
    assert_eq!(std::fs::read_to_string(t1.join("hello")).unwrap(), "hi");
    std::fs::write(t1.join("written"), "through the bind").unwrap();
    assert!(volume.join("written").exists());
    let e = local.publish(&t1, Mode::SingleNodeWriter, true).await;
    assert_eq!(code(e), Code::AlreadyExists);
    let t2 = p2.join("mount");
    let e = local.publish(&t2, Mode::SingleNodeWriter, false).await;
    assert_eq!(code(e), Code::FailedPrecondition);
    assert!(!t2.exists(), "a refused publish creates no target");
    local.unpublish(&t1).await;
    assert!(!t1.exists(), "ND-4: the target is gone");

    local
        .publish(&t2, Mode::SingleNodeWriter, true)
        .await
        .unwrap();
    let denied = std::fs::write(t2.join("x"), "no").unwrap_err();
    assert_eq!(denied.raw_os_error(), Some(30), "EROFS: {denied}");
    let stats = local.stats(&t2).await;
    let bytes = stats
        .usage
        .iter()
        .find(|u| u.unit() == Unit::Bytes)
        .unwrap();
    assert!(
        bytes.total > 0 && bytes.used > 0 && bytes.available >= 0,
        "{bytes:?}"
    );
    assert!(
        stats
            .usage
            .iter()
            .any(|u| u.unit() == Unit::Inodes && u.total > 0)
    );
    assert!(!stats.volume_condition.unwrap().abnormal);
    let expand = NodeExpandVolumeRequest {
        volume_id: "local-1".into(),
        volume_path: t2.display().to_string(),
        ..Default::default()
    };
    let grown = local.node.clone().node_expand_volume(expand).await.unwrap();
    assert_eq!(grown.into_inner().capacity_bytes, bytes.total);
    local.unpublish(&t2).await;
    local.unpublish(&t2).await;
    assert!(!t2.exists());
    let unstage = NodeUnstageVolumeRequest {
        volume_id: "local-1".into(),
        staging_target_path: local.staging.clone(),
    };
    local
        .node
        .clone()
        .node_unstage_volume(unstage)
        .await
        .unwrap();
    assert_eq!(mounts_under(dir.path()), Vec::<PathBuf>::new());
    assert_eq!(std::fs::read_to_string(volume.join("hello")).unwrap(), "hi");
    process.stop();
}

/// Detaches a loop device when dropped.
struct LoopDevice(String);

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// The real seam on a loop device: blkid sees it empty, mkfs.ext4 formats it, it mounts,
/// statvfs and the device size read it, resize2fs grows it after the backing file grows, and
/// a read-only bind refuses writes.
#[tokio::test]
async fn the_real_host_formats_mounts_and_grows_a_loop_device_as_root() {
    if !is_root() {
        eprintln!("skipped: loop devices and mounts need root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("disk.img");
    let file = std::fs::File::create(&image).unwrap();
    file.set_len(64 << 20).unwrap();
    let attached = Command::new("losetup")
        .args(["--find", "--show"])
        .arg(&image)
        .output()
        .unwrap();
    if !attached.status.success() {
        eprintln!(
            "skipped: no loop device: {}",
            String::from_utf8_lossy(&attached.stderr)
        );
        return;
    }
    let device = LoopDevice(String::from_utf8_lossy(&attached.stdout).trim().to_string());
    let _mounts = MountGuard(dir.path().to_path_buf());
    let dev = Path::new(&device.0);
    let host = RealHost;
    assert_eq!(host.blkid(dev).await.unwrap(), Probe::Empty);
    assert!(matches!(
        host.path_kind(dev).await.unwrap(),
        Some(PathKind::Block { .. })
    ));
    host.mkfs(dev, "ext4").await.unwrap();
    assert_eq!(
        host.blkid(dev).await.unwrap(),
        Probe::Filesystem("ext4".into())
    );
    let mnt = dir.path().join("mnt");
    host.make_dir(&mnt).await.unwrap();
    host.mount(&device.0, &mnt, "ext4", &[]).await.unwrap();
    let mounted = host.mounts().await.unwrap();
    let m = mounted.iter().find(|m| m.target == mnt).expect("mounted");
    assert_eq!(m.fstype, "ext4");
    let before = host.statvfs(&mnt).await.unwrap();
    assert!(
        before.total_bytes > 0 && before.total_bytes < 64 << 20,
        "{before:?}"
    );
    assert_eq!(host.device_size(dev).await.unwrap(), 64 << 20);
    file.set_len(128 << 20).unwrap();
    let ok = Command::new("losetup")
        .args(["-c", &device.0])
        .status()
        .unwrap();
    assert!(ok.success());
    assert_eq!(host.device_size(dev).await.unwrap(), 128 << 20);
    let grown = host.grow_fs(dev, "ext4", &mnt).await;
    if has_capability(CAP_SYS_RESOURCE) {
        grown.unwrap();
        let after = host.statvfs(&mnt).await.unwrap();
        assert!(
            after.total_bytes > before.total_bytes,
            "{before:?} → {after:?}"
        );
    } else {
        // The kernel refuses an online ext4 resize without CAP_SYS_RESOURCE (a privileged
        // node plugin has it; some sandboxes drop it): the error names the tool.
        eprintln!("skipped the online resize2fs: this process lacks CAP_SYS_RESOURCE");
        let e = grown.unwrap_err();
        assert!(e.message.contains("resize2fs failed"), "{e}");
    }
    let ro = dir.path().join("ro");
    host.make_dir(&ro).await.unwrap();
    host.bind_mount(&mnt, &ro, true).await.unwrap();
    let denied = std::fs::write(ro.join("x"), "no").unwrap_err();
    assert_eq!(denied.raw_os_error(), Some(30), "EROFS: {denied}");
    std::fs::write(mnt.join("x"), "yes").unwrap();
    host.unmount(&ro).await.unwrap();
    host.unmount(&mnt).await.unwrap();
    host.remove(&ro).await.unwrap();
    host.remove(&mnt).await.unwrap();
    assert_eq!(mounts_under(dir.path()), Vec::<PathBuf>::new());
}

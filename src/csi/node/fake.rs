//! A recording fake host for tests: a model of directories, files, device nodes, mounts, iSCSI
//! targets, sessions and LUNs that answers at once (no waiting), refuses what a host would
//! (mounting on a missing directory, unmounting what is not mounted, a login with the wrong
//! CHAP secret, formatting a device that holds something), and records every call.
//!
//! Calls are recorded as short lines (`mount -t ext4 /dev/sda /stage`, `login PORTAL IQN
//! chap=USER`); reads of the host's state start with `? ` and [`FakeHost::actions`] leaves them
//! out. A CHAP secret is never recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::host::{
    Chap, FsStats, HostError, HostErrorKind, HostOps, HostResult, IscsiDevice, MountPoint,
    PathKind, Probe, Session, by_path, dev_string, holder, mount_at, origin_of,
};

/// The root filesystem's device number in the model.
const ROOT_DEV: &str = "254:0";
/// The device number of `/dev` (devtmpfs) in the model.
const DEVTMPFS_DEV: &str = "0:5";
/// What statvfs reports for a filesystem that is not on a fake LUN (the root, NFS).
pub const OTHER_FS: FsStats = FsStats {
    total_bytes: 100 << 30,
    available_bytes: 60 << 30,
    used_bytes: 40 << 30,
    total_inodes: 1 << 20,
    available_inodes: (1 << 20) - 1000,
    used_inodes: 1000,
};

#[derive(Debug)]
struct Device {
    rdev: u64,
    /// What the host sees (after the last rescan).
    size: u64,
    /// What the array has (a rescan makes it visible).
    array_size: u64,
    content: Probe,
    fs_size: u64,
    gone: bool,
}

#[derive(Debug)]
struct Target {
    portals: Vec<String>,
    chap: Option<Chap>,
    luns: BTreeMap<u32, PathBuf>,
}

#[derive(Debug, Default)]
struct Model {
    paths: BTreeMap<PathBuf, PathKind>,
    mounts: Vec<MountPoint>,
    devices: BTreeMap<PathBuf, Device>,
    targets: BTreeMap<String, Target>,
    sessions: BTreeSet<Session>,
    nfs_devs: BTreeMap<String, String>,
    calls: Vec<String>,
    fail: Vec<String>,
}

/// The recording fake host.
#[derive(Debug)]
pub struct FakeHost {
    model: Mutex<Model>,
}

impl Default for FakeHost {
    fn default() -> FakeHost {
        FakeHost::new()
    }
}

fn err(message: impl Into<String>) -> HostError {
    HostError::failed(message)
}

impl FakeHost {
    /// A host with `/` mounted, and `/dev`, `/tmp` and `/var/lib/kubelet` as directories.
    pub fn new() -> FakeHost {
        let mut m = Model::default();
        m.mounts.push(MountPoint {
            target: "/".into(),
            source: "/dev/vda".into(),
            fstype: "ext4".into(),
            readonly: false,
            dev: ROOT_DEV.into(),
            root: "/".into(),
        });
        for dir in ["/", "/dev", "/tmp", "/var", "/var/lib", "/var/lib/kubelet"] {
            m.paths.insert(dir.into(), PathKind::Dir);
        }
        FakeHost {
            model: Mutex::new(m),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Model> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a directory and its parents.
    pub fn add_dir(&self, path: impl AsRef<Path>) {
        let mut m = self.lock();
        for p in path.as_ref().ancestors() {
            m.paths.insert(p.to_path_buf(), PathKind::Dir);
        }
    }

    /// An iSCSI target on `portals` with LUNs of the given sizes (empty devices), requiring
    /// `chap` when given. The LUNs appear as devices once the host logs in.
    pub fn add_target(&self, iqn: &str, portals: &[&str], chap: Option<Chap>, luns: &[(u32, u64)]) {
        let mut m = self.lock();
        let mut target = Target {
            portals: portals.iter().map(|p| p.to_string()).collect(),
            chap,
            luns: BTreeMap::new(),
        };
        for &(lun, size) in luns {
            let n = m.devices.len();
            let name = format!("/dev/sd{}", char::from(b'a' + (n % 26) as u8));
            let rdev = rustix::fs::makedev(8, 16 * n as u32);
            m.devices.insert(
                name.clone().into(),
                Device {
                    rdev,
                    size,
                    array_size: size,
                    content: Probe::Empty,
                    fs_size: 0,
                    gone: false,
                },
            );
            target.luns.insert(lun, name.into());
        }
        m.targets.insert(iqn.to_string(), target);
    }

    /// The LUN grows on the array; the host sees it after a rescan.
    pub fn grow_lun(&self, device: &Path, size: u64) {
        if let Some(d) = self.lock().devices.get_mut(device) {
            d.array_size = size;
        }
    }

    /// The device disappears (a path failure, the LUN unmapped).
    pub fn lose_device(&self, device: &Path) {
        if let Some(d) = self.lock().devices.get_mut(device) {
            d.gone = true;
        }
    }

    /// Puts something on a device (a filesystem, a partition table).
    pub fn set_content(&self, device: &Path, content: Probe) {
        if let Some(d) = self.lock().devices.get_mut(device) {
            d.fs_size = d.size;
            d.content = content;
        }
    }

    /// The device of `iqn`'s `lun`.
    pub fn lun_device(&self, iqn: &str, lun: u32) -> Option<PathBuf> {
        self.lock().targets.get(iqn)?.luns.get(&lun).cloned()
    }

    /// What is on a device and the size of its filesystem.
    pub fn content(&self, device: &Path) -> Option<(Probe, u64)> {
        let m = self.lock();
        m.devices
            .get(device)
            .map(|d| (d.content.clone(), d.fs_size))
    }

    /// The next call whose record starts with `prefix` fails.
    pub fn fail_next(&self, prefix: &str) {
        self.lock().fail.push(prefix.to_string());
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// The calls that act or run a tool (reads of the host's state left out).
    pub fn actions(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|c| !c.starts_with("? "))
            .collect()
    }

    /// Forgets the calls so far.
    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }

    pub fn sessions(&self) -> Vec<Session> {
        self.lock().sessions.iter().cloned().collect()
    }

    pub fn mount_table(&self) -> Vec<MountPoint> {
        self.lock().mounts.clone()
    }

    /// Whether something is at `path` (a file, a directory, a device or a mount).
    pub fn exists(&self, path: &Path) -> bool {
        self.lock().kind(path).is_some()
    }
}

impl Model {
    /// Records a call; fails it when a failure was planted for it.
    fn record(&mut self, call: String) -> HostResult<()> {
        let planted = self.fail.iter().position(|p| call.starts_with(p.as_str()));
        self.calls.push(call.clone());
        match planted {
            Some(i) => {
                self.fail.remove(i);
                Err(err(format!("{call}: failed (planted)")))
            }
            None => Ok(()),
        }
    }

    fn visible(&self, device: &Path) -> Option<&Device> {
        let d = self.devices.get(device).filter(|d| !d.gone)?;
        let logged_in = self.targets.iter().any(|(iqn, t)| {
            t.luns.values().any(|l| l == device) && self.sessions.iter().any(|s| s.iqn == *iqn)
        });
        logged_in.then_some(d)
    }

    /// The device a by-path link points at, when its session exists.
    fn link(&self, path: &Path) -> Option<PathBuf> {
        self.iscsi_devices()
            .into_iter()
            .find(|d| by_path(&d.portal, &d.iqn, d.lun) == path)
            .map(|d| d.device)
    }

    fn iscsi_devices(&self) -> Vec<IscsiDevice> {
        let mut out = Vec::new();
        for s in &self.sessions {
            let Some(t) = self.targets.get(&s.iqn) else {
                continue;
            };
            for (lun, device) in &t.luns {
                if self.visible(device).is_some() {
                    out.push(IscsiDevice {
                        portal: s.portal.clone(),
                        iqn: s.iqn.clone(),
                        lun: *lun,
                        device: device.clone(),
                    });
                }
            }
        }
        out
    }

    /// The device node a path leads to: a device, a by-path link, a bind of a device node.
    fn device_at(&self, path: &Path) -> Option<PathBuf> {
        if let Some(m) = mount_at(&self.mounts, path) {
            return (m.fstype == "devtmpfs").then(|| Path::new("/dev").join(&m.root[1..]));
        }
        if self.devices.contains_key(path) {
            return Some(path.to_path_buf());
        }
        self.link(path)
    }

    fn kind(&self, path: &Path) -> Option<PathKind> {
        if let Some(m) = mount_at(&self.mounts, path) {
            if m.fstype == "devtmpfs" {
                let dev = Path::new("/dev").join(&m.root[1..]);
                return self
                    .devices
                    .get(&dev)
                    .map(|d| PathKind::Block { rdev: d.rdev });
            }
            return Some(PathKind::Dir);
        }
        if let Some(device) = self.device_at(path) {
            return self
                .visible(&device)
                .map(|d| PathKind::Block { rdev: d.rdev });
        }
        self.paths.get(path).copied()
    }

    fn parent_is_dir(&self, path: &Path) -> HostResult<()> {
        match path.parent().map(|p| self.kind(p)) {
            Some(Some(PathKind::Dir)) => Ok(()),
            _ => Err(HostError::not_found(format!(
                "{}: the parent directory does not exist",
                path.display()
            ))),
        }
    }

    fn add_mount(
        &mut self,
        target: &Path,
        source: String,
        fstype: &str,
        ro: bool,
        dev: String,
        root: String,
    ) {
        self.mounts.push(MountPoint {
            target: target.to_path_buf(),
            source,
            fstype: fstype.to_string(),
            readonly: ro,
            dev,
            root,
        });
    }
}

#[async_trait]
impl HostOps for FakeHost {
    async fn path_kind(&self, path: &Path) -> HostResult<Option<PathKind>> {
        let mut m = self.lock();
        m.record(format!("? stat {}", path.display()))?;
        Ok(m.kind(path))
    }

    async fn make_dir(&self, path: &Path) -> HostResult<()> {
        let mut m = self.lock();
        m.record(format!("mkdir {}", path.display()))?;
        match m.kind(path) {
            Some(PathKind::Dir) => return Ok(()),
            Some(_) => return Err(err(format!("{}: not a directory", path.display()))),
            None => {}
        }
        m.parent_is_dir(path)?;
        m.paths.insert(path.to_path_buf(), PathKind::Dir);
        Ok(())
    }

    async fn make_file(&self, path: &Path) -> HostResult<()> {
        let mut m = self.lock();
        m.record(format!("touch {}", path.display()))?;
        match m.kind(path) {
            Some(PathKind::Dir) => Err(err(format!("{}: is a directory", path.display()))),
            Some(_) => Ok(()),
            None => {
                m.parent_is_dir(path)?;
                m.paths.insert(path.to_path_buf(), PathKind::File);
                Ok(())
            }
        }
    }

    async fn remove(&self, path: &Path) -> HostResult<()> {
        let mut m = self.lock();
        m.record(format!("rm {}", path.display()))?;
        if mount_at(&m.mounts, path).is_some() {
            return Err(err(format!("{}: device or resource busy", path.display())));
        }
        let has_children = m.paths.keys().any(|p| p != path && p.starts_with(path));
        if has_children {
            return Err(err(format!("{}: directory not empty", path.display())));
        }
        m.paths.remove(path);
        Ok(())
    }

    async fn mounts(&self) -> HostResult<Vec<MountPoint>> {
        let mut m = self.lock();
        m.record("? mounts".into())?;
        Ok(m.mounts.clone())
    }

    async fn mount(
        &self,
        source: &str,
        target: &Path,
        fstype: &str,
        options: &[String],
    ) -> HostResult<()> {
        let mut m = self.lock();
        let opts = if options.is_empty() {
            String::new()
        } else {
            format!(" -o {}", options.join(","))
        };
        m.record(format!(
            "mount -t {fstype}{opts} {source} {}",
            target.display()
        ))?;
        if m.kind(target) != Some(PathKind::Dir) {
            return Err(HostError::not_found(format!(
                "{}: no such directory",
                target.display()
            )));
        }
        let ro = options.iter().any(|o| o == "ro");
        if fstype.starts_with("nfs") {
            let next = format!("0:{}", 100 + m.nfs_devs.len());
            let dev = m.nfs_devs.entry(source.to_string()).or_insert(next).clone();
            m.add_mount(target, source.to_string(), fstype, ro, dev, "/".into());
            return Ok(());
        }
        let device = m
            .device_at(Path::new(source))
            .ok_or_else(|| HostError::not_found(format!("{source}: no such device")))?;
        let d = m
            .visible(&device)
            .ok_or_else(|| HostError::not_found(format!("{source}: no such device")))?;
        if d.content != Probe::Filesystem(fstype.to_string()) {
            return Err(err(format!("mount: wrong fs type on {source}")));
        }
        let dev = dev_string(d.rdev);
        m.add_mount(
            target,
            device.display().to_string(),
            fstype,
            ro,
            dev,
            "/".into(),
        );
        Ok(())
    }

    async fn bind_mount(&self, source: &Path, target: &Path, readonly: bool) -> HostResult<()> {
        let mut m = self.lock();
        let ro = if readonly { "-ro" } else { "" };
        m.record(format!(
            "bind{ro} {} {}",
            source.display(),
            target.display()
        ))?;
        let (Some(from), Some(to)) = (m.kind(source), m.kind(target)) else {
            return Err(HostError::not_found(format!(
                "bind {} {}: no such file or directory",
                source.display(),
                target.display()
            )));
        };
        if (from == PathKind::Dir) != (to == PathKind::Dir) {
            return Err(err(
                "bind: a directory goes onto a directory, a file onto a file",
            ));
        }
        let (fstype, dev, root, src) = match from {
            PathKind::Block { .. } => {
                let device = m.device_at(source).unwrap_or_default();
                let name = device.strip_prefix("/dev").unwrap_or(&device);
                let root = Path::new("/").join(name).display().to_string();
                (
                    "devtmpfs".to_string(),
                    DEVTMPFS_DEV.to_string(),
                    root,
                    "udev".to_string(),
                )
            }
            _ => {
                let no_fs = || err("bind: no filesystem holds the source");
                let held = holder(&m.mounts, source).cloned().ok_or_else(no_fs)?;
                let origin = origin_of(&m.mounts, source).ok_or_else(no_fs)?;
                (held.fstype, origin.dev, origin.root, held.source)
            }
        };
        m.add_mount(target, src, &fstype, readonly, dev, root);
        Ok(())
    }

    async fn unmount(&self, target: &Path) -> HostResult<()> {
        let mut m = self.lock();
        m.record(format!("umount {}", target.display()))?;
        let i = m
            .mounts
            .iter()
            .rposition(|x| x.target == target)
            .ok_or_else(|| err(format!("umount {}: not mounted", target.display())))?;
        let below = m
            .mounts
            .iter()
            .skip(i + 1)
            .any(|x| x.target != target && x.target.starts_with(target));
        if below {
            return Err(err(format!("umount {}: target is busy", target.display())));
        }
        m.mounts.remove(i);
        Ok(())
    }

    async fn iscsi_discover(&self, portal: &str) -> HostResult<()> {
        let mut m = self.lock();
        m.record(format!("discover {portal}"))?;
        if m.targets
            .values()
            .any(|t| t.portals.iter().any(|p| p == portal))
        {
            Ok(())
        } else {
            Err(err(format!("discovery on {portal}: no route to host")))
        }
    }

    async fn iscsi_login(&self, portal: &str, iqn: &str, chap: Option<&Chap>) -> HostResult<()> {
        let mut m = self.lock();
        let user = match chap {
            Some(c) => match &c.target {
                Some((t, _)) => format!(" chap={}/{t}", c.username),
                None => format!(" chap={}", c.username),
            },
            None => String::new(),
        };
        m.record(format!("login {portal} {iqn}{user}"))?;
        let session = Session {
            portal: portal.to_string(),
            iqn: iqn.to_string(),
        };
        if m.sessions.contains(&session) {
            return Ok(());
        }
        let target = m
            .targets
            .get(iqn)
            .filter(|t| t.portals.iter().any(|p| p == portal))
            .ok_or_else(|| err(format!("login to {iqn} on {portal}: no such target")))?;
        if let Some(wanted) = &target.chap
            && chap != Some(wanted)
        {
            return Err(HostError {
                kind: HostErrorKind::AuthFailed,
                message: format!("login to {iqn}: the target refused the CHAP credentials"),
            });
        }
        m.sessions.insert(session);
        Ok(())
    }

    async fn iscsi_logout(&self, portal: &str, iqn: &str) -> HostResult<()> {
        let mut m = self.lock();
        m.record(format!("logout {portal} {iqn}"))?;
        m.sessions.remove(&Session {
            portal: portal.to_string(),
            iqn: iqn.to_string(),
        });
        Ok(())
    }

    async fn iscsi_sessions(&self) -> HostResult<Vec<Session>> {
        let mut m = self.lock();
        m.record("? sessions".into())?;
        Ok(m.sessions.iter().cloned().collect())
    }

    async fn iscsi_rescan(&self, portal: &str, iqn: &str) -> HostResult<()> {
        let mut m = self.lock();
        m.record(format!("rescan {portal} {iqn}"))?;
        let luns: Vec<PathBuf> = m
            .targets
            .get(iqn)
            .map(|t| t.luns.values().cloned().collect())
            .unwrap_or_default();
        for lun in luns {
            if let Some(d) = m.devices.get_mut(&lun) {
                d.size = d.array_size;
            }
        }
        Ok(())
    }

    async fn iscsi_devices(&self) -> HostResult<Vec<IscsiDevice>> {
        let mut m = self.lock();
        m.record("? devices".into())?;
        Ok(m.iscsi_devices())
    }

    async fn wait_for_device(
        &self,
        links: &[PathBuf],
        _timeout: Duration,
    ) -> HostResult<Option<PathBuf>> {
        let mut m = self.lock();
        let shown: Vec<String> = links.iter().map(|l| l.display().to_string()).collect();
        m.record(format!("wait {}", shown.join(" ")))?;
        Ok(links.iter().find_map(|l| m.link(l)))
    }

    async fn blkid(&self, device: &Path) -> HostResult<Probe> {
        let mut m = self.lock();
        m.record(format!("blkid {}", device.display()))?;
        m.visible(device)
            .map(|d| d.content.clone())
            .ok_or_else(|| HostError::not_found(format!("{}: no such device", device.display())))
    }

    async fn mkfs(&self, device: &Path, fstype: &str) -> HostResult<()> {
        let mut m = self.lock();
        m.record(format!("mkfs {fstype} {}", device.display()))?;
        let d = m
            .devices
            .get_mut(device)
            .filter(|d| !d.gone)
            .ok_or_else(|| HostError::not_found(format!("{}: no such device", device.display())))?;
        if d.content != Probe::Empty {
            return Err(err(format!(
                "mkfs on {}: the device is not empty",
                device.display()
            )));
        }
        d.content = Probe::Filesystem(fstype.to_string());
        d.fs_size = d.size;
        Ok(())
    }

    async fn grow_fs(&self, device: &Path, fstype: &str, mounted_at: &Path) -> HostResult<()> {
        let mut m = self.lock();
        m.record(format!(
            "grow {fstype} {} {}",
            device.display(),
            mounted_at.display()
        ))?;
        let d = m
            .devices
            .get_mut(device)
            .filter(|d| !d.gone && d.content == Probe::Filesystem(fstype.to_string()))
            .ok_or_else(|| {
                err(format!(
                    "grow {fstype} on {}: no such filesystem",
                    device.display()
                ))
            })?;
        d.fs_size = d.size;
        Ok(())
    }

    async fn statvfs(&self, path: &Path) -> HostResult<FsStats> {
        let mut m = self.lock();
        m.record(format!("statvfs {}", path.display()))?;
        let holder = holder(&m.mounts, path)
            .cloned()
            .ok_or_else(|| err("statvfs: no filesystem"))?;
        let Some(d) = m.devices.get(Path::new(&holder.source)) else {
            return Ok(OTHER_FS);
        };
        if d.gone {
            return Err(err(format!(
                "statvfs {}: input/output error",
                path.display()
            )));
        }
        let used = d.fs_size / 16;
        let inodes = d.fs_size / 16384;
        Ok(FsStats {
            total_bytes: d.fs_size,
            available_bytes: d.fs_size - used,
            used_bytes: used,
            total_inodes: inodes,
            available_inodes: inodes.saturating_sub(11),
            used_inodes: 11.min(inodes),
        })
    }

    async fn device_size(&self, device: &Path) -> HostResult<u64> {
        let mut m = self.lock();
        m.record(format!("size {}", device.display()))?;
        let node = m.device_at(device);
        node.and_then(|n| m.devices.get(&n))
            .filter(|d| !d.gone)
            .map(|d| d.size)
            .ok_or_else(|| err(format!("{}: no such device or address", device.display())))
    }
}

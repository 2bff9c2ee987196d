//! Tests of the local driver, on real directories (`tempfile`).

use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use serde_json::json;

use super::media::{Mount, detect_in, parse_mountinfo};
use super::*;
use crate::drivers::testing::{clone_req, free, merged, req};
use crate::model::{Offer, Protocol, Request};

pub(super) const MIB: u64 = 1 << 20;
pub(super) const GIB: u64 = 1 << 30;

/// A test area: the pools live in `<tmp>/pools/…`, `<tmp>/outside` is what must never be
/// touched through a planted symbolic link.
pub(super) struct Area {
    tmp: tempfile::TempDir,
}

impl Area {
    pub(super) fn new() -> Area {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("outside")).unwrap();
        Area { tmp }
    }

    pub(super) fn pool(&self, name: &str) -> PathBuf {
        self.tmp.path().join("pools").join(name)
    }

    fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }

    /// A config with pool `p1` (capacity 1 GiB) and `extra` merged over the top level.
    pub(super) fn cfg(&self, extra: Value) -> Value {
        let doc = json!({
            "version": 1,
            "storageDriverName": "local",
            "backendName": "local1",
            "storagePrefix": "",
            "pools": {"p1": {"path": self.pool("p1"), "capacity": "1Gi"}},
        });
        merged(doc, extra)
    }

    pub(super) fn driver(&self, extra: Value) -> LocalDriver {
        LocalDriver::new(&self.cfg(extra)).unwrap()
    }

    fn vol(&self, name: &str) -> PathBuf {
        self.pool("p1").join(VOLUMES_DIR).join(name)
    }

    fn snap(&self, volume: &str, snap: &str) -> PathBuf {
        self.pool("p1").join(SNAPSHOTS_DIR).join(volume).join(snap)
    }

    /// Everything under `outside/`, recursively, with file contents.
    fn outside_listing(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        fn walk(dir: &Path, out: &mut Vec<(PathBuf, Option<Vec<u8>>)>) {
            let mut entries: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            for p in entries {
                let m = std::fs::symlink_metadata(&p).unwrap();
                if m.is_dir() {
                    out.push((p.clone(), None));
                    walk(&p, out);
                } else {
                    out.push((p.clone(), std::fs::read(&p).ok()));
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.outside(), &mut out);
        out
    }

    /// Fills `outside/` with a directory `victim/` holding `precious.txt`, and a file
    /// `victim.img`, so that a planted link has something to point at.
    fn plant_victims(&self) {
        let o = self.outside();
        std::fs::create_dir_all(o.join("victim")).unwrap();
        std::fs::write(o.join("victim/precious.txt"), b"do not touch").unwrap();
        std::fs::write(o.join("victim.img"), b"an image that is not ours").unwrap();
    }
}

fn block_req(name: &str, size: u64) -> CreateRequest {
    let mut r = req(name, "p1", size);
    r.config.protocol = Protocol::Block;
    r
}

fn thick_block_req(name: &str, size: u64) -> CreateRequest {
    let mut r = block_req(name, size);
    r.requests.insert(
        "provisioningType".to_string(),
        Request::String("thick".to_string()),
    );
    r
}

fn invalid(doc: Value) -> String {
    match LocalDriver::new(&doc) {
        Err(DriverError::Invalid(msg)) => msg,
        other => panic!("expected Invalid for {doc}, got {other:?}"),
    }
}

fn is_invalid<T: std::fmt::Debug>(r: DriverResult<T>, ctx: &str) {
    match r {
        Err(DriverError::Invalid(_)) => {}
        other => panic!("{ctx}: expected Invalid, got {other:?}"),
    }
}

fn is_err<T: std::fmt::Debug>(r: DriverResult<T>, ctx: &str) -> String {
    match r {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{ctx}: expected an error, got Ok({v:?})"),
    }
}

/// Allocated bytes of a file (`st_blocks` are 512-byte units).
fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

// ---- config ----

#[test]
fn config_errors_name_the_field() {
    let a = Area::new();
    let with_pools = |pools: Value| a.cfg(json!({"pools": pools}));
    let cases: Vec<(Value, &str)> = vec![
        (a.cfg(json!({"pools": null})), "pools"),
        (with_pools(json!({})), "pools"),
        (with_pools(json!([])), "pools"),
        (with_pools(json!({"p": 5})), "pools.p"),
        (with_pools(json!({"p": {}})), "pools.p.path"),
        (with_pools(json!({"p": {"path": ""}})), "pools.p.path"),
        (with_pools(json!({"p": {"path": 7}})), "pools.p.path"),
        (
            with_pools(json!({"p": {"path": "rel/dir"}})),
            "pools.p.path",
        ),
        (
            with_pools(json!({"p": {"path": "/a\u{0}b"}})),
            "pools.p.path",
        ),
        (with_pools(json!({"p": {"path": "/"}})), "pools.p.path"),
        (
            with_pools(json!({"p": {"path": "/x", "media": "nvme"}})),
            "pools.p.media",
        ),
        (
            with_pools(json!({"p": {"path": "/x", "media": 1}})),
            "pools.p.media",
        ),
        (
            with_pools(json!({"p": {"path": "/x", "capacity": "lots"}})),
            "pools.p.capacity",
        ),
        (
            with_pools(json!({"p": {"path": "/x", "capacity": 0}})),
            "pools.p.capacity",
        ),
        (
            with_pools(json!({"p": {"path": "/x", "capacity": -1}})),
            "pools.p.capacity",
        ),
        (
            with_pools(json!({"p": {"path": "/x", "capactiy": "1G"}})),
            "capactiy",
        ),
        (with_pools(json!({"a/b": {"path": "/x"}})), "pools"),
        (a.cfg(json!({"protocol": "nfs"})), "protocol"),
        (
            a.cfg(json!({"defaults": {"spaceReserve": "all"}})),
            "defaults.spaceReserve",
        ),
        (
            a.cfg(json!({"defaults": {"unixPermissions": "rwx"}})),
            "defaults.unixPermissions",
        ),
        (
            a.cfg(json!({"defaults": {"unixPermissions": "17777"}})),
            "defaults.unixPermissions",
        ),
        (a.cfg(json!({"storagePrefix": "a/"})), "storagePrefix"),
        (a.cfg(json!({"storagePrefix": "a\n"})), "storagePrefix"),
        (
            a.cfg(json!({"storagePrefix": "x".repeat(65)})),
            "storagePrefix",
        ),
        (
            a.cfg(json!({"defaults": {"size": "1.5G"}})),
            "defaults.size",
        ),
    ];
    for (doc, field) in cases {
        let msg = invalid(doc.clone());
        assert!(msg.contains(field), "{doc}: {msg:?} does not name {field}");
    }
}

#[test]
fn config_values() {
    let a = Area::new();
    let d = a.driver(json!({
        "protocol": "block",
        "pools": {
            "b": {"path": a.pool("b"), "media": "hybrid", "capacity": 1_000_000},
            "a": {"Path": a.pool("a"), "capacity": "2Gi"},
        },
        "defaults": {"spaceReserve": "volume", "unixPermissions": "0750", "size": "2M"},
    }));
    let cfg = &d.inner.cfg;
    assert_eq!(cfg.protocol, Protocol::Block);
    assert!(cfg.default_thick);
    assert_eq!(cfg.default_unix_permissions, 0o750);
    assert_eq!(cfg.default_size_bytes, 2 * MIB);
    let pools: Vec<_> = cfg
        .pools
        .iter()
        .map(|p| (p.name.as_str(), p.media, p.capacity))
        .collect();
    assert_eq!(
        pools,
        [
            ("a", None, Some(2 * GIB)),
            ("b", Some(Media::Hybrid), Some(1_000_000))
        ]
    );
    // Building touches no file.
    assert!(!a.pool("a").exists());
}

#[test]
fn backend_name_defaults_to_the_host_name() {
    let a = Area::new();
    let mut doc = a.cfg(json!({}));
    doc.as_object_mut().unwrap().remove("backendName");
    let d = LocalDriver::new(&doc).unwrap();
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    assert_eq!(d.backend_name(), config::default_backend_name(&host));
    assert!(d.backend_name().starts_with("local"));
    assert!(crate::model::validate_name("backendName", d.backend_name()).is_ok());
    assert!(d.inner.cfg.backend_name_derived);

    assert_eq!(
        config::default_backend_name("node-1.lan"),
        "local_node-1.lan"
    );
    assert_eq!(config::default_backend_name("my host/é"), "local_my_host__");
    assert_eq!(config::default_backend_name(""), "local");
    assert_eq!(
        config::default_backend_name(&"h".repeat(400)).len(),
        crate::model::MAX_NAME_LEN
    );
    // An explicit name wins.
    assert_eq!(a.driver(json!({})).backend_name(), "local1");
}

#[test]
fn internal_names_follow_the_prefix() {
    let a = Area::new();
    let mut doc = a.cfg(json!({}));
    doc.as_object_mut().unwrap().remove("storagePrefix");
    assert_eq!(
        LocalDriver::new(&doc).unwrap().internal_name("v"),
        "storch-v"
    );
    let with = |p: Value| a.driver(json!({"storagePrefix": p})).internal_name("v");
    assert_eq!(with(json!(null)), "storch-v");
    assert_eq!(with(json!({})), "storch-v");
    assert_eq!(with(json!("")), "v");
    assert_eq!(with(json!("team_")), "team_v");
}

#[tokio::test]
async fn pool_directories() {
    let a = Area::new();
    // Missing: created with its parents, with volumes/ and snapshots/.
    let deep = a.tmp.path().join("x/y/z");
    let d = a.driver(json!({"pools": {"p": {"path": deep}}}));
    d.discover().await.unwrap();
    assert!(deep.join(VOLUMES_DIR).is_dir() && deep.join(SNAPSHOTS_DIR).is_dir());

    // A file is refused, naming the field.
    let file = a.tmp.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let d = a.driver(json!({"pools": {"p": {"path": file}}}));
    match d.discover().await {
        Err(DriverError::Invalid(msg)) => {
            assert!(
                msg.contains("pools.p.path") && msg.contains("not a directory"),
                "{msg}"
            )
        }
        other => panic!("{other:?}"),
    }
    // Still refused on the next call (nothing cached), and every call says so.
    assert!(d.list_volumes().await.is_err());

    // Overlapping pools.
    let d = a.driver(json!({"pools": {
        "a": {"path": a.pool("a")},
        "b": {"path": a.pool("a").join("inner")},
    }}));
    match d.discover().await {
        Err(DriverError::Invalid(msg)) => assert!(msg.contains("pools.b.path"), "{msg}"),
        other => panic!("{other:?}"),
    }
    // The same directory through a symbolic link overlaps too.
    std::fs::create_dir_all(a.pool("c")).unwrap();
    symlink(a.pool("c"), a.tmp.path().join("c-link")).unwrap();
    let d = a.driver(json!({"pools": {
        "a": {"path": a.pool("c")},
        "b": {"path": a.tmp.path().join("c-link")},
    }}));
    assert!(matches!(d.discover().await, Err(DriverError::Invalid(_))));
}

#[tokio::test]
async fn discovery_offers() {
    let a = Area::new();
    let d = a.driver(json!({"pools": {
        "p1": {"path": a.pool("p1"), "capacity": "1Gi", "media": "hdd"},
        "p2": {"path": a.pool("p2")},
    }}));
    let disc = d.discover().await.unwrap();
    assert_eq!(disc.backend_name, "local1");
    assert_eq!(disc.protocol, Protocol::Any);
    let p1 = &disc.pools[0];
    assert_eq!(p1.name, "p1");
    assert_eq!(p1.total_bytes, Some(GIB));
    let offer = |k: &str| p1.offers[k].clone();
    assert_eq!(offer("backendType"), Offer::strings(["local"]));
    assert_eq!(offer("media"), Offer::strings(["hdd"]));
    assert_eq!(offer("provisioningType"), Offer::strings(["thin", "thick"]));
    assert_eq!(offer("snapshots"), Offer::Bool(true));
    assert_eq!(offer("clones"), Offer::Bool(true));
    assert_eq!(offer("encryption"), Offer::Bool(false));
    crate::model::attributes::check_offers(&p1.offers).unwrap();
    assert_eq!(disc.free_bytes["p1"], GIB);
    assert!(disc.free_bytes["p2"] > 0);

    let ext = d.external_config();
    assert_eq!(ext["storageDriverName"], "local");
    assert_eq!(ext["pools"]["p1"]["media"], "hdd");
    assert_eq!(ext["pools"]["p1"]["mediaSource"], "configured");
    assert_eq!(ext["pools"]["p1"]["capacity"], GIB);
    let detected = ext["pools"]["p2"]["mediaSource"].as_str().unwrap();
    assert!(
        !detected.is_empty() && detected != "configured",
        "{detected}"
    );
}

// ---- media ----

#[tokio::test]
async fn media_config_overrides_detection() {
    let a = Area::new();
    for (configured, want) in [("ssd", "ssd"), ("hdd", "hdd"), ("hybrid", "hybrid")] {
        let d =
            a.driver(json!({"pools": {"p1": {"path": a.pool(configured), "media": configured}}}));
        let disc = d.discover().await.unwrap();
        assert_eq!(disc.pools[0].offers["media"], Offer::strings([want]));
    }
    // Detected: one of ssd or hdd, whatever this host's disk is.
    let d = a.driver(json!({"pools": {"p1": {"path": a.pool("detected")}}}));
    let disc = d.discover().await.unwrap();
    let Offer::Strings(media) = &disc.pools[0].offers["media"] else {
        panic!()
    };
    assert!(media.len() == 1 && (media.contains("ssd") || media.contains("hdd")));
}

/// A fake sysfs: `dev/block/<MAJ:MIN>` links into `devices/…`, as the kernel lays it out.
fn fake_sysfs(root: &Path, devices: &[(&str, &str, Option<&str>)]) {
    std::fs::create_dir_all(root.join("dev/block")).unwrap();
    for (majmin, dev_dir, rotational) in devices {
        let dir = root.join("devices").join(dev_dir);
        std::fs::create_dir_all(&dir).unwrap();
        if let Some(r) = rotational {
            std::fs::create_dir_all(dir.join("queue")).unwrap();
            std::fs::write(dir.join("queue/rotational"), format!("{r}\n")).unwrap();
        }
        symlink(
            Path::new("../../devices").join(dev_dir),
            root.join("dev/block").join(majmin),
        )
        .unwrap();
    }
}

#[test]
fn media_detection_from_sysfs() {
    let tmp = tempfile::tempdir().unwrap();
    let sys = tmp.path();
    fake_sysfs(
        sys,
        &[
            ("8:0", "pci0/host0/block/sda", Some("1")),
            ("8:1", "pci0/host0/block/sda/sda1", None),
            ("259:0", "pci0/nvme/nvme0n1", Some("0")),
            ("259:1", "pci0/nvme/nvme0n1/nvme0n1p1", None),
            ("253:0", "virtual/block/dm-0", Some("0")),
            ("7:0", "virtual/block/loop0", Some("garbage")),
        ],
    );
    std::fs::write(sys.join("devices/pci0/host0/block/sda/sda1/partition"), "1").unwrap();
    std::fs::write(
        sys.join("devices/pci0/nvme/nvme0n1/nvme0n1p1/partition"),
        "1",
    )
    .unwrap();
    let no_rdev = |_: &Path| None;
    let detect = |dev| detect_in(sys, None, dev, Path::new("/srv/pool"), no_rdev);

    // A partition of a spinning disk: the whole disk's flag.
    let d = detect((8, 1));
    assert_eq!(d.media, Media::Hdd);
    assert!(
        d.how.contains("block/sda/queue/rotational = 1"),
        "{}",
        d.how
    );
    assert_eq!(detect((8, 0)).media, Media::Hdd);
    // NVMe partition and device-mapper: flash.
    let d = detect((259, 1));
    assert_eq!(d.media, Media::Ssd);
    assert!(d.how.contains("nvme0n1/queue/rotational = 0"), "{}", d.how);
    assert_eq!(detect((253, 0)).media, Media::Ssd);
    // Unreadable flag, unknown device: the fallback, saying why.
    let d = detect((7, 0));
    assert_eq!(d.media, Media::Ssd);
    assert!(d.how.contains("assuming ssd"), "{}", d.how);
    let d = detect((65, 3));
    assert!(
        d.how.contains("assuming ssd") && d.how.contains("65:3"),
        "{}",
        d.how
    );
}

#[test]
fn media_detection_through_mountinfo() {
    let tmp = tempfile::tempdir().unwrap();
    let sys = tmp.path();
    fake_sysfs(sys, &[("8:16", "pci0/block/sdb", Some("1"))]);
    let mountinfo = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 8:2 / / rw,relatime - ext4 /dev/sda2 rw
40 27 0:45 / /srv/btr rw,relatime shared:1 - btrfs /dev/sdb rw,space_cache
41 27 0:46 / /run/shm rw - tmpfs tmpfs rw
42 27 0:47 / /var/lib/docker/over\\040lay rw - overlay overlay rw
";
    let rdev = |p: &Path| (p == Path::new("/dev/sdb")).then_some((8, 16));
    // btrfs: an anonymous device number; the mount's source device is the disk.
    let d = detect_in(
        sys,
        Some(mountinfo),
        (0, 45),
        Path::new("/srv/btr/pool"),
        rdev,
    );
    assert_eq!(d.media, Media::Hdd, "{}", d.how);
    // A subvolume with another anonymous number: the longest containing mount.
    let d = detect_in(
        sys,
        Some(mountinfo),
        (0, 99),
        Path::new("/srv/btr/sub/pool"),
        rdev,
    );
    assert_eq!(d.media, Media::Hdd, "{}", d.how);
    // tmpfs and overlay: no block device, ssd.
    let d = detect_in(
        sys,
        Some(mountinfo),
        (0, 46),
        Path::new("/run/shm/pool"),
        rdev,
    );
    assert_eq!(d.media, Media::Ssd);
    assert!(
        d.how.contains("tmpfs") && d.how.contains("assuming ssd"),
        "{}",
        d.how
    );
    let d = detect_in(
        sys,
        Some(mountinfo),
        (0, 47),
        Path::new("/var/lib/docker/over lay/x"),
        rdev,
    );
    assert!(d.how.contains("overlay"), "{}", d.how);
    // No mountinfo at all.
    let d = detect_in(sys, None, (0, 46), Path::new("/x"), rdev);
    assert_eq!(d.media, Media::Ssd);

    let mounts = parse_mountinfo(mountinfo);
    assert_eq!(mounts.len(), 5);
    assert_eq!(
        mounts[4],
        Mount {
            dev: (0, 47),
            mount_point: PathBuf::from("/var/lib/docker/over lay"),
            fstype: "overlay".into(),
            source: "overlay".into(),
        }
    );
    assert_eq!(parse_mountinfo("garbage\n1 2 x - y").len(), 0);
}

#[tokio::test]
async fn media_detection_on_tmpfs_falls_back_to_ssd() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let root = fs::open_root(dir.path()).unwrap();
    let d = media::detect(root.as_fd(), dir.path());
    assert_eq!(d.media, Media::Ssd, "{}", d.how);
    assert!(d.how.contains("assuming ssd"), "{}", d.how);
}

// ---- capacity ----

#[tokio::test]
async fn capacity_cap_refuses_what_does_not_fit() {
    let a = Area::new();
    let d = a.driver(json!({"pools": {"p1": {"path": a.pool("p1"), "capacity": "10Mi"}}}));
    assert_eq!(free(&d, "p1").await, 10 * MIB);
    d.create(&req("a", "p1", 6 * MIB)).await.unwrap();
    assert_eq!(free(&d, "p1").await, 4 * MIB);
    match d.create(&req("b", "p1", 5 * MIB)).await {
        Err(DriverError::Conflict(msg)) => assert!(msg.contains("too large"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(!a.vol("b").exists(), "a refused create left a directory");
    // A thin image counts its full size.
    d.create(&block_req("img", 3 * MIB)).await.unwrap();
    assert!(allocated(&a.vol("img.img")) < MIB);
    assert_eq!(free(&d, "p1").await, MIB);
    // Snapshots count too; so do clones and growing.
    assert!(matches!(
        d.create_snapshot("a", "s").await,
        Err(DriverError::Conflict(_))
    ));
    assert!(!a.snap("a", "s").exists());
    assert!(matches!(
        d.clone_volume(&clone_req("c", "img", None)).await,
        Err(DriverError::Conflict(_))
    ));
    assert!(matches!(
        d.resize("a", 8 * MIB).await,
        Err(DriverError::Conflict(_))
    ));
    d.resize("a", 7 * MIB).await.unwrap();
    assert_eq!(free(&d, "p1").await, 0);
    d.destroy("a").await.unwrap();
    d.create_snapshot("img", "s").await.unwrap();
    assert_eq!(free(&d, "p1").await, 10 * MIB - 6 * MIB);
    d.destroy("img").await.unwrap();
    assert_eq!(free(&d, "p1").await, 10 * MIB);
}

// ---- images ----

#[tokio::test]
async fn thin_images_are_sparse_and_thick_ones_allocated() {
    let a = Area::new();
    let d = a.driver(json!({}));
    let size = 64 * MIB + 4096 + 7; // exactly the size asked for, even an odd one

    let thin = d.create(&block_req("thin", size)).await.unwrap();
    let path = a.vol("thin.img");
    assert_eq!(
        thin.access.local_path,
        path.canonicalize().unwrap().to_str().unwrap()
    );
    assert!(thin.access.nfs_path.is_empty());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    assert!(
        allocated(&path) < MIB,
        "thin image has {} bytes allocated",
        allocated(&path)
    );

    d.create(&thick_block_req("thick", size)).await.unwrap();
    let path = a.vol("thick.img");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    assert!(
        allocated(&path) >= size,
        "thick image has {} bytes allocated",
        allocated(&path)
    );

    // spaceReserve=volume on the volume, and the backend default.
    let mut r = block_req("reserved", 4 * MIB);
    r.config.space_reserve = "volume".into();
    d.create(&r).await.unwrap();
    assert!(allocated(&a.vol("reserved.img")) >= 4 * MIB);
    let dd = a.driver(
        json!({"pools": {"p1": {"path": a.pool("p2")}}, "defaults": {"spaceReserve": "volume"}}),
    );
    dd.create(&block_req("default-thick", 4 * MIB))
        .await
        .unwrap();
    assert!(allocated(&a.pool("p2").join("volumes/default-thick.img")) >= 4 * MIB);
    // …unless the class asks for thin.
    let mut r = block_req("class-thin", 4 * MIB);
    r.requests
        .insert("provisioningType".into(), Request::String("thin".into()));
    dd.create(&r).await.unwrap();
    assert!(allocated(&a.pool("p2").join("volumes/class-thin.img")) < MIB);
    let mut r = block_req("bad", 4 * MIB);
    r.requests
        .insert("provisioningType".into(), Request::String("fat".into()));
    is_invalid(dd.create(&r).await, "provisioningType fat");

    // Size 0 is the default size.
    let d3 = a.driver(json!({"pools": {"p1": {"path": a.pool("p3")}}, "defaults": {"size": "3M"}}));
    let dflt = d3.create(&block_req("dflt", 0)).await.unwrap();
    assert_eq!(dflt.size_bytes, 3 * MIB);
    assert_eq!(
        std::fs::metadata(a.pool("p3").join("volumes/dflt.img"))
            .unwrap()
            .len(),
        3 * MIB
    );
}

#[test]
fn zero_filling_allocates() {
    // The fallback for filesystems without fallocate.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("z");
    let f = std::fs::File::create(&path).unwrap();
    fs::write_zeros(&f, 0, 3 * MIB + 5).unwrap();
    f.sync_all().unwrap();
    assert_eq!(f.metadata().unwrap().len(), 3 * MIB + 5);
    assert!(allocated(&path) >= 3 * MIB + 5);
}

#[tokio::test]
async fn resize_grows_images_and_recorded_sizes() {
    let a = Area::new();
    let d = a.driver(json!({}));
    d.create(&block_req("thin", 4 * MIB)).await.unwrap();
    d.resize("thin", 16 * MIB).await.unwrap();
    assert_eq!(
        std::fs::metadata(a.vol("thin.img")).unwrap().len(),
        16 * MIB
    );
    assert!(allocated(&a.vol("thin.img")) < MIB);
    assert_eq!(d.get("thin").await.unwrap().unwrap().size_bytes, 16 * MIB);

    d.create(&thick_block_req("thick", 4 * MIB)).await.unwrap();
    d.resize("thick", 12 * MIB).await.unwrap();
    assert_eq!(
        std::fs::metadata(a.vol("thick.img")).unwrap().len(),
        12 * MIB
    );
    assert!(allocated(&a.vol("thick.img")) >= 12 * MIB);

    d.create(&req("dir", "p1", 4 * MIB)).await.unwrap();
    d.resize("dir", 40 * MIB).await.unwrap();
    assert_eq!(d.get("dir").await.unwrap().unwrap().size_bytes, 40 * MIB);
    match d.resize("dir", 4 * MIB).await {
        Err(DriverError::Invalid(msg)) => assert!(msg.contains("shrink"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        d.resize("thin", MIB).await,
        Err(DriverError::Invalid(_))
    ));
    assert_eq!(
        std::fs::metadata(a.vol("thin.img")).unwrap().len(),
        16 * MIB
    );
    assert_eq!(free(&d, "p1").await, GIB - 16 * MIB - 12 * MIB - 40 * MIB);
}

// ---- content of clones and snapshots ----

fn fill_volume(dir: &Path, outside: &Path) {
    std::fs::write(dir.join("hello.txt"), b"hello, volume").unwrap();
    std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    std::fs::write(dir.join("sub/deeper/data.bin"), vec![7u8; 100_000]).unwrap();
    std::fs::set_permissions(
        dir.join("sub/deeper/data.bin"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    symlink("hello.txt", dir.join("rel-link")).unwrap();
    symlink(outside, dir.join("escape")).unwrap();
    // A big sparse file stays sparse through a copy.
    let f = std::fs::File::create(dir.join("sparse")).unwrap();
    f.set_len(64 * MIB).unwrap();
    f.write_all_at(b"tail", 64 * MIB - 4).unwrap();
}

fn check_volume_copy(dir: &Path, outside: &Path) {
    assert_eq!(
        std::fs::read(dir.join("hello.txt")).unwrap(),
        b"hello, volume"
    );
    assert_eq!(
        std::fs::read(dir.join("sub/deeper/data.bin")).unwrap(),
        vec![7u8; 100_000]
    );
    let mode = std::fs::metadata(dir.join("sub/deeper/data.bin"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
    // Links are copied as links, never followed.
    assert_eq!(
        std::fs::read_link(dir.join("rel-link")).unwrap(),
        Path::new("hello.txt")
    );
    assert!(
        std::fs::symlink_metadata(dir.join("escape"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_link(dir.join("escape")).unwrap(), outside);
    let sparse = dir.join("sparse");
    assert_eq!(std::fs::metadata(&sparse).unwrap().len(), 64 * MIB);
    assert!(
        allocated(&sparse) < MIB,
        "copy of a sparse file is {} bytes",
        allocated(&sparse)
    );
    let mut tail = [0u8; 4];
    std::fs::File::open(&sparse)
        .unwrap()
        .read_exact_at(&mut tail, 64 * MIB - 4)
        .unwrap();
    assert_eq!(&tail, b"tail");
}

#[tokio::test]
async fn clones_and_snapshots_copy_file_volumes() {
    let a = Area::new();
    a.plant_victims();
    let before = a.outside_listing();
    let d = a.driver(json!({}));
    let mut r = req("src", "p1", 100 * MIB);
    r.config.unix_permissions = "0750".into();
    let src = d.create(&r).await.unwrap();
    assert_eq!(src.access.local_path, src.access.nfs_path);
    let dir = PathBuf::from(&src.access.local_path);
    assert_eq!(dir, a.vol("src").canonicalize().unwrap());
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777,
        0o750
    );
    let victim = a.outside().join("victim");
    fill_volume(&dir, &victim);

    let c = d.clone_volume(&clone_req("c", "src", None)).await.unwrap();
    assert_eq!(c.size_bytes, 100 * MIB);
    check_volume_copy(&a.vol("c"), &victim);
    assert_eq!(
        std::fs::metadata(a.vol("c")).unwrap().permissions().mode() & 0o7777,
        0o750
    );

    d.create_snapshot("src", "s1").await.unwrap();
    check_volume_copy(&a.snap("src", "s1"), &victim);
    // The snapshot keeps the old content after the volume changes.
    std::fs::write(dir.join("hello.txt"), b"changed").unwrap();
    std::fs::remove_dir_all(dir.join("sub")).unwrap();
    d.clone_volume(&clone_req("from-snap", "src", Some("s1")))
        .await
        .unwrap();
    check_volume_copy(&a.vol("from-snap"), &victim);
    assert_eq!(
        std::fs::read(a.vol("c/hello.txt")).unwrap(),
        b"hello, volume"
    );

    // Destroying everything removes the links, never what they point to.
    for v in ["c", "from-snap", "src"] {
        d.destroy(v).await.unwrap();
    }
    assert!(!a.snap("src", "s1").exists());
    assert!(!a.pool("p1").join(SNAPSHOTS_DIR).join("src").exists());
    assert_eq!(a.outside_listing(), before);
}

#[tokio::test]
async fn clones_and_snapshots_copy_block_volumes() {
    let a = Area::new();
    let d = a.driver(json!({}));
    d.create(&block_req("img", 32 * MIB)).await.unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(a.vol("img.img"))
        .unwrap();
    f.write_all_at(b"superblock", 1024).unwrap();
    f.write_all_at(b"end", 32 * MIB - 3).unwrap();
    drop(f);
    let read = |p: &Path| {
        let f = std::fs::File::open(p).unwrap();
        let mut a = [0u8; 10];
        let mut b = [0u8; 3];
        f.read_exact_at(&mut a, 1024).unwrap();
        f.read_exact_at(&mut b, 32 * MIB - 3).unwrap();
        (a, b, f.metadata().unwrap().len())
    };
    let want = (*b"superblock", *b"end", 32 * MIB);

    let c = d.clone_volume(&clone_req("c", "img", None)).await.unwrap();
    assert!(c.access.local_path.ends_with("/volumes/c.img"));
    assert_eq!(read(&a.vol("c.img")), want);
    assert!(
        allocated(&a.vol("c.img")) < MIB,
        "a thin clone stays sparse"
    );

    d.create_snapshot("img", "s").await.unwrap();
    assert_eq!(read(&a.snap("img", "s")), want);
    std::fs::write(a.vol("img.img"), b"overwritten").unwrap();
    d.clone_volume(&clone_req("cs", "img", Some("s")))
        .await
        .unwrap();
    assert_eq!(read(&a.vol("cs.img")), want);

    // A thick source makes thick clones and snapshots.
    d.create(&thick_block_req("thick", 8 * MIB)).await.unwrap();
    d.clone_volume(&clone_req("thick-clone", "thick", None))
        .await
        .unwrap();
    assert!(allocated(&a.vol("thick-clone.img")) >= 8 * MIB);
    d.create_snapshot("thick", "s").await.unwrap();
    assert!(allocated(&a.snap("thick", "s")) >= 8 * MIB);

    // Snapshot bookkeeping.
    let snaps = d.list_snapshots("img").await.unwrap();
    assert_eq!(snaps.len(), 1);
    assert_eq!(
        (snaps[0].name.as_str(), snaps[0].size_bytes),
        ("s", 32 * MIB)
    );
    d.delete_snapshot("img", "s").await.unwrap();
    assert!(!a.snap("img", "s").exists());
    d.delete_snapshot("img", "s").await.unwrap();
    d.delete_snapshot("nope", "s").await.unwrap();
}

// ---- persistence ----

#[tokio::test]
async fn metadata_survives_a_rebuild() {
    let a = Area::new();
    let doc = a.cfg(json!({}));
    {
        let d = LocalDriver::new(&doc).unwrap();
        d.create(&req("dir", "p1", 10 * MIB)).await.unwrap();
        d.create(&thick_block_req("thick", 4 * MIB)).await.unwrap();
        d.create(&block_req("thin", 2 * MIB)).await.unwrap();
        d.create_snapshot("dir", "s1").await.unwrap();
        d.clone_volume(&clone_req("c", "dir", Some("s1")))
            .await
            .unwrap();
        d.resize("thin", 6 * MIB).await.unwrap();
        d.create(&req("gone", "p1", MIB)).await.unwrap();
        d.destroy("gone").await.unwrap();
        assert!(a.pool("p1").join(METADATA_FILE).is_file());
        assert!(!a.pool("p1").join(METADATA_TMP).exists());
    }
    let d = LocalDriver::new(&doc).unwrap();
    let names: Vec<(String, u64)> = d
        .list_volumes()
        .await
        .unwrap()
        .into_iter()
        .map(|v| (v.internal_name, v.size_bytes))
        .collect();
    assert_eq!(
        names,
        [
            ("c".to_string(), 10 * MIB),
            ("dir".to_string(), 10 * MIB),
            ("thick".to_string(), 4 * MIB),
            ("thin".to_string(), 6 * MIB),
        ]
    );
    assert_eq!(d.list_snapshots("dir").await.unwrap()[0].name, "s1");
    assert_eq!(
        free(&d, "p1").await,
        GIB - 10 * MIB - 10 * MIB - 10 * MIB - 4 * MIB - 6 * MIB
    );
    assert!(d.access_info("thick").await.unwrap().nfs_path.is_empty());
    assert!(!d.access_info("dir").await.unwrap().nfs_path.is_empty());
    assert!(matches!(
        d.create(&req("dir", "p1", MIB)).await,
        Err(DriverError::AlreadyExists(_))
    ));
    // Thick is remembered: growing allocates.
    d.resize("thick", 8 * MIB).await.unwrap();
    assert!(allocated(&a.vol("thick.img")) >= 8 * MIB);
    d.destroy("dir").await.unwrap();
    drop(d);
    let d = LocalDriver::new(&doc).unwrap();
    assert_eq!(d.get("dir").await.unwrap(), None);
    assert!(d.get("c").await.unwrap().is_some());

    // The same volumes under another pool name (same directory) are still found.
    let renamed = a.cfg(json!({"pools": {"renamed": {"path": a.pool("p1")}}}));
    let d = LocalDriver::new(&renamed).unwrap();
    assert_eq!(d.get("c").await.unwrap().unwrap().pool, "renamed");
}

/// Rewrites the state of `volume` (and optionally one snapshot) in the metadata file.
fn set_state(a: &Area, volume: &str, snap: Option<&str>, state: &str) {
    let path = a.pool("p1").join(METADATA_FILE);
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let v = &mut doc["volumes"][volume];
    match snap {
        None => v["state"] = json!(state),
        Some(s) => v["snapshots"][s]["state"] = json!(state),
    }
    std::fs::write(&path, serde_json::to_vec(&doc).unwrap()).unwrap();
}

#[tokio::test]
async fn interrupted_operations_are_cleaned_up_on_start() {
    let a = Area::new();
    let doc = a.cfg(json!({}));
    {
        let d = LocalDriver::new(&doc).unwrap();
        d.create(&req("half-made", "p1", MIB)).await.unwrap();
        d.create(&block_req("half-gone", MIB)).await.unwrap();
        d.create(&req("kept", "p1", MIB)).await.unwrap();
        d.create_snapshot("kept", "half-snap").await.unwrap();
        d.create_snapshot("kept", "ok").await.unwrap();
    }
    std::fs::write(a.vol("half-made/partial"), b"x").unwrap();
    set_state(&a, "half-made", None, "creating");
    set_state(&a, "half-gone", None, "deleting");
    set_state(&a, "kept", Some("half-snap"), "creating");

    let d = LocalDriver::new(&doc).unwrap();
    let names: Vec<String> = d
        .list_volumes()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.internal_name)
        .collect();
    assert_eq!(names, ["kept"]);
    assert!(!a.vol("half-made").exists());
    assert!(!a.vol("half-gone.img").exists());
    assert!(!a.snap("kept", "half-snap").exists());
    assert!(a.snap("kept", "ok").exists());
    let snaps: Vec<String> = d
        .list_snapshots("kept")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(snaps, ["ok"]);
    assert_eq!(free(&d, "p1").await, GIB - 2 * MIB);
    // The cleanup was recorded.
    let text = std::fs::read_to_string(a.pool("p1").join(METADATA_FILE)).unwrap();
    assert!(
        !text.contains("half-") && !text.contains("creating"),
        "{text}"
    );
}

#[tokio::test]
async fn bad_metadata_is_refused() {
    let a = Area::new();
    std::fs::create_dir_all(a.pool("p1")).unwrap();
    let meta = a.pool("p1").join(METADATA_FILE);
    for (content, what) in [
        ("not json", "not a local driver metadata file"),
        (r#"{"format": 2, "driver": "local"}"#, "format 2"),
        (r#"{"format": 1, "driver": "fake"}"#, "fake"),
        (
            r#"{"format": 1, "driver": "local", "volumes": {"../etc": {"protocol": "file",
                "sizeBytes": 1, "provisioning": "thin", "createdMs": 1, "state": "ready"}}}"#,
            "refusing a recorded volume name",
        ),
        (
            r#"{"format": 1, "driver": "local", "volumes": {"v": {"protocol": "file",
                "sizeBytes": 1, "provisioning": "thin", "createdMs": 1, "state": "ready",
                "snapshots": {"a/b": {"createdMs": 1, "sizeBytes": 1, "state": "ready"}}}}}"#,
            "refusing a recorded snapshot name",
        ),
    ] {
        std::fs::write(&meta, content).unwrap();
        let msg = is_err(a.driver(json!({})).discover().await, what);
        assert!(msg.contains(what) && msg.contains(METADATA_FILE), "{msg}");
    }
}

// ---- requests ----

#[tokio::test]
async fn bad_requests() {
    let a = Area::new();
    let d = a.driver(json!({}));
    is_invalid(d.create(&req("v", "nope", MIB)).await, "unknown pool");
    is_invalid(d.create(&req("v", "", MIB)).await, "no pool");
    is_invalid(d.create(&req("v", "p1", MIB - 1)).await, "too small");
    let mut r = req("v", "p1", MIB);
    r.config.encryption = "true".into();
    assert!(matches!(
        d.create(&r).await,
        Err(DriverError::Unsupported(_))
    ));
    let mut r = req("v", "p1", MIB);
    r.config.unix_permissions = "rwxrwxrwx".into();
    is_invalid(d.create(&r).await, "unixPermissions");
    let mut r = req("v", "p1", MIB);
    r.config.space_reserve = "lots".into();
    is_invalid(d.create(&r).await, "spaceReserve");
    assert!(d.list_volumes().await.unwrap().is_empty());
    assert_eq!(
        std::fs::read_dir(a.pool("p1").join(VOLUMES_DIR))
            .unwrap()
            .count(),
        0
    );
    // A file volume gets defaults.unixPermissions.
    let d = a.driver(json!({"defaults": {"unixPermissions": "0700"}}));
    d.create(&req("private", "p1", MIB)).await.unwrap();
    assert_eq!(
        std::fs::metadata(a.vol("private"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o700
    );
}

#[tokio::test]
async fn unrecorded_entries_are_left_alone() {
    let a = Area::new();
    let d = a.driver(json!({}));
    d.discover().await.unwrap();
    std::fs::create_dir(a.vol("stray")).unwrap();
    std::fs::write(a.vol("stray/keep"), b"mine").unwrap();
    match d.create(&req("stray", "p1", MIB)).await {
        Err(DriverError::Conflict(msg)) => assert!(msg.contains("not recorded"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(a.vol("stray/keep")).unwrap(), b"mine");
    assert_eq!(d.get("stray").await.unwrap(), None);
    d.destroy("stray").await.unwrap();
    assert!(
        a.vol("stray/keep").exists(),
        "destroy of an unrecorded name touched it"
    );
    assert_eq!(free(&d, "p1").await, GIB);
    // A file volume named like a block image collides on disk, and is refused the same way.
    d.create(&block_req("x", MIB)).await.unwrap();
    assert!(matches!(
        d.create(&req("x.img", "p1", MIB)).await,
        Err(DriverError::Conflict(_))
    ));
    assert!(a.vol("x.img").is_file());
}

// ---- nothing leaves the pool ----

#[tokio::test]
async fn unsafe_names_are_refused() {
    let a = Area::new();
    a.plant_victims();
    let before = a.outside_listing();
    let d = a.driver(json!({}));
    d.create(&req("ok", "p1", MIB)).await.unwrap();
    d.create_snapshot("ok", "snap").await.unwrap();
    let long = "x".repeat(MAX_INTERNAL_NAME_LEN + 1);
    let bad = [
        "",
        ".",
        "..",
        "../outside",
        "../../outside/victim",
        "a/b",
        "/abs",
        "a\\b",
        "a\0b",
        "a\nb",
        "tab\there",
        long.as_str(),
    ];
    for name in bad {
        let ctx = format!("{name:?}");
        is_invalid(d.create(&req(name, "p1", MIB)).await, &ctx);
        is_invalid(d.create(&block_req(name, MIB)).await, &ctx);
        is_invalid(d.clone_volume(&clone_req(name, "ok", None)).await, &ctx);
        is_invalid(d.clone_volume(&clone_req("new", name, None)).await, &ctx);
        is_invalid(d.get(name).await, &ctx);
        is_invalid(d.destroy(name).await, &ctx);
        is_invalid(d.resize(name, 2 * MIB).await, &ctx);
        is_invalid(d.access_info(name).await, &ctx);
        is_invalid(d.list_snapshots(name).await, &ctx);
        is_invalid(d.create_snapshot(name, "s").await, &ctx);
        is_invalid(d.delete_snapshot(name, "s").await, &ctx);
        // 252 bytes is a valid snapshot name (the limit there is 253).
        if name != long {
            is_invalid(
                d.clone_volume(&clone_req("new", "ok", Some(name))).await,
                &ctx,
            );
            is_invalid(d.create_snapshot("ok", name).await, &ctx);
            is_invalid(d.delete_snapshot("ok", name).await, &ctx);
        }
    }
    // Snapshot names longer than a path segment.
    is_invalid(
        d.create_snapshot("ok", &"s".repeat(256)).await,
        "long snapshot",
    );
    // The longest name that fits works, as a directory and as an image.
    let longest = "y".repeat(MAX_INTERNAL_NAME_LEN);
    d.create(&block_req(&longest, MIB)).await.unwrap();
    d.destroy(&longest).await.unwrap();
    d.create(&req(&longest, "p1", MIB)).await.unwrap();
    d.create_snapshot(&longest, &"z".repeat(253)).await.unwrap();
    d.destroy(&longest).await.unwrap();

    let listed: Vec<String> = d
        .list_volumes()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.internal_name)
        .collect();
    assert_eq!(listed, ["ok"]);
    assert_eq!(a.outside_listing(), before);
    let mut top: Vec<_> = std::fs::read_dir(a.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    top.sort();
    assert_eq!(top, ["outside", "pools"]);
}

#[tokio::test]
async fn planted_volumes_dir_symlink_is_refused() {
    // Planted before the pool is first opened.
    let a = Area::new();
    a.plant_victims();
    let before = a.outside_listing();
    std::fs::create_dir_all(a.pool("p1")).unwrap();
    symlink(a.outside(), a.pool("p1").join(VOLUMES_DIR)).unwrap();
    let d = a.driver(json!({}));
    let msg = is_err(d.discover().await, "discover with volumes/ planted");
    assert!(msg.contains("symbolic link"), "{msg}");
    assert!(d.create(&req("victim", "p1", MIB)).await.is_err());
    assert_eq!(a.outside_listing(), before);

    // Swapped in after volumes exist.
    let a = Area::new();
    a.plant_victims();
    let d = a.driver(json!({}));
    d.create(&req("victim", "p1", MIB)).await.unwrap();
    d.create(&block_req("img", MIB)).await.unwrap();
    let vols = a.pool("p1").join(VOLUMES_DIR);
    std::fs::rename(&vols, a.pool("p1").join("moved")).unwrap();
    symlink(a.outside(), &vols).unwrap();
    let before = a.outside_listing();
    let msg = is_err(d.create(&req("new", "p1", MIB)).await, "create");
    assert!(msg.contains("symbolic link"), "{msg}");
    is_err(d.create(&block_req("victim2", MIB)).await, "create block");
    is_err(d.destroy("victim").await, "destroy through the link");
    is_err(
        d.clone_volume(&clone_req("c", "victim", None)).await,
        "clone",
    );
    is_err(d.create_snapshot("victim", "s").await, "snapshot");
    is_err(d.resize("img", 2 * MIB).await, "resize");
    assert_eq!(a.outside_listing(), before);
    // Once the directory is back, the volume that failed to go can be destroyed.
    std::fs::remove_file(&vols).unwrap();
    std::fs::rename(a.pool("p1").join("moved"), &vols).unwrap();
    d.destroy("victim").await.unwrap();
    assert!(!a.vol("victim").exists());
}

#[tokio::test]
async fn planted_volume_dir_symlink_is_refused_or_neutralised() {
    let a = Area::new();
    a.plant_victims();
    let d = a.driver(json!({}));
    d.create(&req("v", "p1", MIB)).await.unwrap();
    std::fs::remove_dir(a.vol("v")).unwrap();
    symlink(a.outside().join("victim"), a.vol("v")).unwrap();
    let before = a.outside_listing();

    let msg = is_err(d.clone_volume(&clone_req("c", "v", None)).await, "clone");
    assert!(msg.contains("symbolic link"), "{msg}");
    assert!(
        !a.vol("c").exists(),
        "a refused clone left something behind"
    );
    let msg = is_err(d.create_snapshot("v", "s").await, "snapshot");
    assert!(msg.contains("symbolic link"), "{msg}");
    assert!(!a.snap("v", "s").exists());
    // Destroy removes the link, not what it points to.
    d.destroy("v").await.unwrap();
    assert!(std::fs::symlink_metadata(a.vol("v")).is_err());
    assert_eq!(a.outside_listing(), before);

    // A link planted where a new volume goes: the create is refused, the link stays.
    symlink(a.outside().join("victim"), a.vol("w")).unwrap();
    assert!(matches!(
        d.create(&req("w", "p1", MIB)).await,
        Err(DriverError::Conflict(_))
    ));
    symlink(a.outside().join("victim.img"), a.vol("w.img")).unwrap();
    assert!(matches!(
        d.create(&block_req("w", MIB)).await,
        Err(DriverError::Conflict(_))
    ));
    assert!(std::fs::symlink_metadata(a.vol("w")).unwrap().is_symlink());
    assert_eq!(a.outside_listing(), before);
}

#[tokio::test]
async fn planted_image_symlink_is_refused_or_neutralised() {
    let a = Area::new();
    a.plant_victims();
    let d = a.driver(json!({}));
    d.create(&block_req("img", MIB)).await.unwrap();
    std::fs::remove_file(a.vol("img.img")).unwrap();
    symlink(a.outside().join("victim.img"), a.vol("img.img")).unwrap();
    let before = a.outside_listing();

    let msg = is_err(d.resize("img", 4 * MIB).await, "resize");
    assert!(msg.contains("symbolic link"), "{msg}");
    assert_eq!(d.get("img").await.unwrap().unwrap().size_bytes, MIB);
    is_err(d.clone_volume(&clone_req("c", "img", None)).await, "clone");
    assert!(!a.vol("c.img").exists());
    is_err(d.create_snapshot("img", "s").await, "snapshot");
    d.destroy("img").await.unwrap();
    assert!(std::fs::symlink_metadata(a.vol("img.img")).is_err());
    assert_eq!(a.outside_listing(), before);
    assert_eq!(free(&d, "p1").await, GIB);
}

#[tokio::test]
async fn planted_snapshots_dir_symlink_is_refused() {
    let a = Area::new();
    a.plant_victims();
    let d = a.driver(json!({}));
    d.create(&req("victim", "p1", MIB)).await.unwrap();
    let snaps = a.pool("p1").join(SNAPSHOTS_DIR);
    std::fs::remove_dir(&snaps).unwrap();
    symlink(a.outside(), &snaps).unwrap();
    let before = a.outside_listing();

    let msg = is_err(d.create_snapshot("victim", "s").await, "snapshot");
    assert!(msg.contains("symbolic link"), "{msg}");
    assert!(d.list_snapshots("victim").await.unwrap().is_empty());
    // Destroy would clear outside/victim through the link: refused.
    is_err(d.destroy("victim").await, "destroy");
    is_err(d.create(&req("new", "p1", MIB)).await, "create");
    assert_eq!(a.outside_listing(), before);
    // And on a fresh start.
    drop(d);
    let msg = is_err(a.driver(json!({})).discover().await, "discover");
    assert!(msg.contains("symbolic link"), "{msg}");
    assert_eq!(a.outside_listing(), before);
}

#[tokio::test]
async fn planted_per_volume_snapshot_dir_symlink() {
    let a = Area::new();
    a.plant_victims();
    let d = a.driver(json!({}));
    d.create(&req("victim", "p1", MIB)).await.unwrap();
    let dir = a.pool("p1").join(SNAPSHOTS_DIR).join("victim");
    symlink(a.outside().join("victim"), &dir).unwrap();
    let before = a.outside_listing();

    let msg = is_err(d.create_snapshot("victim", "s").await, "snapshot");
    assert!(msg.contains("symbolic link"), "{msg}");
    d.delete_snapshot("victim", "precious.txt").await.unwrap();
    // Destroy removes the link only.
    d.destroy("victim").await.unwrap();
    assert!(std::fs::symlink_metadata(&dir).is_err());
    assert_eq!(a.outside_listing(), before);
}

#[tokio::test]
async fn planted_snapshot_symlink() {
    let a = Area::new();
    a.plant_victims();
    let d = a.driver(json!({}));
    d.create(&req("v", "p1", MIB)).await.unwrap();
    d.create_snapshot("v", "s").await.unwrap();
    std::fs::remove_dir(a.snap("v", "s")).unwrap();
    symlink(a.outside().join("victim"), a.snap("v", "s")).unwrap();
    let before = a.outside_listing();

    let msg = is_err(
        d.clone_volume(&clone_req("c", "v", Some("s"))).await,
        "clone from snapshot",
    );
    assert!(msg.contains("symbolic link"), "{msg}");
    assert!(!a.vol("c").exists());
    d.delete_snapshot("v", "s").await.unwrap();
    assert!(std::fs::symlink_metadata(a.snap("v", "s")).is_err());
    assert_eq!(a.outside_listing(), before);
}

#[tokio::test]
async fn planted_metadata_symlink() {
    let a = Area::new();
    a.plant_victims();
    std::fs::create_dir_all(a.pool("p1")).unwrap();
    std::fs::write(
        a.outside().join("meta.json"),
        br#"{"format":1,"driver":"local"}"#,
    )
    .unwrap();
    symlink(
        a.outside().join("meta.json"),
        a.pool("p1").join(METADATA_FILE),
    )
    .unwrap();
    symlink(
        a.outside().join("victim.img"),
        a.pool("p1").join(METADATA_TMP),
    )
    .unwrap();
    let before = a.outside_listing();
    let msg = is_err(a.driver(json!({})).discover().await, "discover");
    assert!(msg.contains("symbolic link"), "{msg}");
    assert_eq!(a.outside_listing(), before);

    // Once running, a planted link is replaced by the next write, never written through.
    std::fs::remove_file(a.pool("p1").join(METADATA_FILE)).unwrap();
    let d = a.driver(json!({}));
    d.discover().await.unwrap();
    symlink(
        a.outside().join("meta.json"),
        a.pool("p1").join(METADATA_FILE),
    )
    .unwrap();
    d.create(&req("v", "p1", MIB)).await.unwrap();
    assert!(
        !std::fs::symlink_metadata(a.pool("p1").join(METADATA_FILE))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(a.outside_listing(), before);
}

#[tokio::test]
async fn symlinks_inside_a_volume_are_never_followed() {
    let a = Area::new();
    a.plant_victims();
    let before = a.outside_listing();
    let d = a.driver(json!({}));
    d.create(&req("v", "p1", MIB)).await.unwrap();
    symlink(a.outside().join("victim"), a.vol("v/dir-link")).unwrap();
    symlink(a.outside().join("victim.img"), a.vol("v/file-link")).unwrap();
    std::fs::create_dir(a.vol("v/sub")).unwrap();
    symlink("../../../../outside", a.vol("v/sub/up")).unwrap();
    d.clone_volume(&clone_req("c", "v", None)).await.unwrap();
    d.create_snapshot("v", "s").await.unwrap();
    for dir in [a.vol("c"), a.snap("v", "s")] {
        for link in ["dir-link", "file-link", "sub/up"] {
            let m = std::fs::symlink_metadata(dir.join(link)).unwrap();
            assert!(m.is_symlink(), "{}", dir.join(link).display());
        }
    }
    for v in ["c", "v"] {
        d.destroy(v).await.unwrap();
    }
    assert_eq!(a.outside_listing(), before);
}

#[test]
fn deep_trees() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let mut p = root.join("src");
    for _ in 0..fs::MAX_DEPTH + 2 {
        p.push("d");
    }
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("leaf"), b"x").unwrap();
    let fd = fs::open_root(root).unwrap();
    // Too deep to copy: refused, and nothing is left of the copy.
    let e = fs::copy(fd.as_fd(), "src", fd.as_fd(), "dst").unwrap_err();
    assert!(e.to_string().contains("deeper"), "{e}");
    assert!(
        !root.join("dst").exists(),
        "a failed copy left its destination"
    );
    // Removed whatever the depth (a volume's user must not be able to block its destroy).
    let mut deeper = p.clone();
    for _ in 0..2 * fs::MAX_DEPTH {
        deeper.push("e");
    }
    let rel = deeper.strip_prefix(root).unwrap().to_path_buf();
    let mut at = root.to_path_buf();
    // Paths this long are past PATH_MAX: build it a piece at a time.
    for chunk in rel.components().collect::<Vec<_>>().chunks(200) {
        for c in chunk {
            at.push(c);
        }
        let _ = std::fs::create_dir_all(&at);
    }
    assert!(fs::remove_tree(fd.as_fd(), "src").unwrap());
    assert!(!root.join("src").exists());
    assert!(!fs::remove_tree(fd.as_fd(), "src").unwrap());
}

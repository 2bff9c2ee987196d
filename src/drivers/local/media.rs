//! Which `media` a pool directory is on: the `rotational` flag of the block device under it.
//!
//! 1. The directory's `st_dev` (major:minor) names the device: `/sys/dev/block/MAJ:MIN` links
//!    to its sysfs directory. A partition (one with a `partition` file) is replaced by its
//!    whole disk, the parent directory. Device-mapper and md devices have their own `queue`.
//! 2. Filesystems with anonymous device numbers (major 0: btrfs, and the virtual ones) are
//!    looked up in `/proc/self/mountinfo`: when the mount's source is a `/dev/…` block device,
//!    that device's number is used as in 1.
//! 3. `queue/rotational` `0` is `ssd`, `1` is `hdd`.
//! 4. Anything else (tmpfs, overlay, NFS, no sysfs, an unreadable flag) falls back to `ssd`:
//!    memory-backed and network filesystems are closer to flash than to a spinning disk, and a
//!    wrong guess is corrected with the pool's `media` in the config.

use std::path::{Path, PathBuf};

use super::config::Media;

/// The media of a pool and how it was found (shown by `external_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    pub media: Media,
    /// e.g. `/sys/block/sda/queue/rotational = 1`, or why the fallback was used.
    pub how: String,
}

/// Detects the media under the directory `fd` (at `path`) on this host.
pub fn detect(fd: std::os::fd::BorrowedFd<'_>, path: &Path) -> Detected {
    let dev = match super::fs::device_of(fd) {
        Ok(d) => d,
        Err(e) => return fallback(format!("cannot stat {}: {e}", path.display())),
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok();
    detect_in(
        Path::new("/sys"),
        mountinfo.as_deref(),
        dev,
        path,
        |dev_path| super::fs::rdev_of(dev_path).ok().flatten(),
    )
}

fn fallback(why: String) -> Detected {
    Detected {
        media: Media::Ssd,
        how: format!("{why}; assuming ssd"),
    }
}

/// The detection with its inputs explicit: the sysfs root, the mountinfo text, the device of
/// the directory, the directory's path and a way to read a device node's number.
pub fn detect_in(
    sys: &Path,
    mountinfo: Option<&str>,
    dev: (u32, u32),
    path: &Path,
    rdev: impl Fn(&Path) -> Option<(u32, u32)>,
) -> Detected {
    let mut dev = dev;
    if dev.0 == 0 {
        let Some(mount) = mountinfo.and_then(|m| find_mount(m, dev, path)) else {
            return fallback(format!(
                "no block device under {} (device {}:{}, no mount found)",
                path.display(),
                dev.0,
                dev.1
            ));
        };
        let source = Path::new(&mount.source);
        match (mount.source.starts_with("/dev/"), rdev(source)) {
            (true, Some(d)) => dev = d,
            _ => {
                return fallback(format!(
                    "no block device under {} ({} filesystem from {:?})",
                    path.display(),
                    mount.fstype,
                    mount.source
                ));
            }
        }
    }
    match rotational(sys, dev) {
        Ok((flag_path, rot)) => Detected {
            media: if rot { Media::Hdd } else { Media::Ssd },
            how: format!("{} = {}", flag_path.display(), u8::from(rot)),
        },
        Err(why) => fallback(why),
    }
}

/// Reads the rotational flag of device `major:minor`: the flag file and its value.
pub fn rotational(sys: &Path, (major, minor): (u32, u32)) -> Result<(PathBuf, bool), String> {
    let link = sys.join(format!("dev/block/{major}:{minor}"));
    let mut dir = std::fs::canonicalize(&link)
        .map_err(|e| format!("no block device {major}:{minor} in sysfs ({e})"))?;
    if dir.join("partition").exists() {
        dir = dir
            .parent()
            .map(Path::to_path_buf)
            .ok_or_else(|| format!("partition {major}:{minor} has no parent disk in sysfs"))?;
    }
    let flag = dir.join("queue/rotational");
    let value = std::fs::read_to_string(&flag)
        .map_err(|e| format!("cannot read {} ({e})", flag.display()))?;
    // Show the short, well-known form: /sys/block/<disk>/queue/rotational.
    let shown = match dir.file_name() {
        Some(disk) => sys.join("block").join(disk).join("queue/rotational"),
        None => flag.clone(),
    };
    match value.trim() {
        "0" => Ok((shown, false)),
        "1" => Ok((shown, true)),
        other => Err(format!("{} holds {other:?}", flag.display())),
    }
}

/// One line of `/proc/self/mountinfo`, the parts used here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub dev: (u32, u32),
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
}

/// Parses mountinfo lines: `id parent MAJ:MIN root mount-point options [optional…] - fstype
/// source super-options`. Malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            let (maj, min) = left.get(2)?.split_once(':')?;
            Some(Mount {
                dev: (maj.parse().ok()?, min.parse().ok()?),
                mount_point: PathBuf::from(unescape(left.get(4)?)),
                fstype: right.next()?.to_string(),
                source: unescape(right.next()?),
            })
        })
        .collect()
}

/// The mount `path` is on: one with the same device number, else the one with the longest
/// mount point containing `path`.
fn find_mount(text: &str, dev: (u32, u32), path: &Path) -> Option<Mount> {
    let mounts = parse_mountinfo(text);
    let containing = |m: &&Mount| path.starts_with(&m.mount_point);
    if let Some(m) = mounts
        .iter()
        .filter(|m| m.dev == dev)
        .filter(containing)
        .max_by_key(|m| m.mount_point.as_os_str().len())
    {
        return Some(m.clone());
    }
    mounts
        .iter()
        .filter(containing)
        .max_by_key(|m| m.mount_point.as_os_str().len())
        .cloned()
}

/// Undoes mountinfo's octal escapes (`\040` for a space, …).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = (b[i] == b'\\' && i + 4 <= b.len())
            .then(|| &b[i + 1..i + 4])
            .filter(|d| d.iter().all(|d| (b'0'..=b'7').contains(d)))
            .and_then(|d| {
                let v = d.iter().fold(0u16, |acc, d| acc * 8 + u16::from(d - b'0'));
                u8::try_from(v).ok()
            });
        if let Some(v) = octal {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

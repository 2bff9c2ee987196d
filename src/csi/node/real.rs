//! The host as it is: the tools run as child processes (`mount`, `umount`, `iscsiadm`, `blkid`,
//! `mkfs.ext4`, `mkfs.xfs`, `resize2fs`, `xfs_growfs`), the mount table from
//! `/proc/self/mountinfo`, LUNs from `/dev/disk/by-path`, sizes from `statvfs` and the device
//! itself. Error messages name the tool and carry its stderr, never its arguments (a CHAP
//! secret is one).

use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use tokio::process::Command;

use super::host::{
    Chap, FsStats, HostError, HostErrorKind, HostOps, HostResult, IscsiDevice, MountPoint,
    PathKind, Probe, Session, parse_by_path,
};

/// How often `wait_for_device` looks for the device.
const DEVICE_POLL: Duration = Duration::from_millis(100);
const BY_PATH: &str = "/dev/disk/by-path";

/// iscsiadm's exit codes (open-iscsi `iscsi_err.h`) that mean "already so".
const ISCSI_ERR_SESS_EXISTS: i32 = 15;
const ISCSI_ERR_NO_OBJS_FOUND: i32 = 21;
const ISCSI_ERR_LOGIN_AUTH_FAILED: i32 = 24;

/// The real host.
#[derive(Debug, Default, Clone)]
pub struct RealHost;

/// How a tool ended: its exit code and stderr.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `program ARGS`; `what` names the action in errors (never the arguments).
async fn run(what: &str, program: &str, args: &[&str]) -> HostResult<Ran> {
    let out = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| HostError::failed(format!("{what}: cannot run {program}: {e}")))?;
    Ok(Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// Runs and requires success (or one of the `ok` exit codes).
async fn run_ok(what: &str, program: &str, args: &[&str], ok: &[i32]) -> HostResult<Ran> {
    let ran = run(what, program, args).await?;
    match ran.code {
        Some(0) => Ok(ran),
        Some(c) if ok.contains(&c) => Ok(ran),
        code => Err(tool_failed(what, program, code, &ran.stderr)),
    }
}

fn tool_failed(what: &str, program: &str, code: Option<i32>, stderr: &str) -> HostError {
    let code = code.map_or("a signal".to_string(), |c| format!("exit code {c}"));
    HostError::failed(format!("{what}: {program} failed with {code}: {stderr}"))
}

fn path_arg(p: &Path) -> HostResult<&str> {
    p.to_str()
        .ok_or_else(|| HostError::failed(format!("{} is not UTF-8", p.display())))
}

/// One line of `/proc/self/mountinfo` (proc(5)): id, parent, major:minor, root, mount point,
/// options, optional fields, `-`, fstype, source, super options.
pub fn parse_mountinfo_line(line: &str) -> Option<MountPoint> {
    let (left, right) = line.split_once(" - ")?;
    let left: Vec<&str> = left.split(' ').collect();
    let right: Vec<&str> = right.split(' ').collect();
    if left.len() < 6 || right.len() < 2 {
        return None;
    }
    let readonly = left[5].split(',').any(|o| o == "ro");
    Some(MountPoint {
        dev: left[2].to_string(),
        root: unescape(left[3]),
        target: PathBuf::from(unescape(left[4])),
        readonly,
        fstype: right[0].to_string(),
        source: unescape(right[1]),
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        if bytes[i] == b'\\'
            && let Some(digits) = octal
        {
            let v = digits
                .iter()
                .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
            out.push(v as u8);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `KEY=value` lines of `blkid -o export`.
fn parse_blkid(out: &str) -> Probe {
    let get = |key: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
    };
    match (get("TYPE"), get("PTTYPE")) {
        (Some(fs), _) => Probe::Filesystem(fs),
        (None, Some(pt)) => Probe::Other(format!("a {pt} partition table")),
        (None, None) if out.trim().is_empty() => Probe::Empty,
        (None, None) => Probe::Other(out.trim().replace('\n', " ")),
    }
}

/// `tcp: [1] 10.0.0.1:3260,1 iqn.… (non-flash)` lines of `iscsiadm -m session`.
fn parse_sessions(out: &str) -> Vec<Session> {
    out.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace().skip(2);
            let portal = words.next()?.split(',').next()?.to_string();
            let iqn = words.next()?.to_string();
            Some(Session { portal, iqn })
        })
        .collect()
}

#[async_trait]
impl HostOps for RealHost {
    async fn path_kind(&self, path: &Path) -> HostResult<Option<PathKind>> {
        match tokio::fs::metadata(path).await {
            Ok(m) => Ok(Some(if m.is_dir() {
                PathKind::Dir
            } else if m.file_type().is_block_device() {
                PathKind::Block { rdev: m.rdev() }
            } else if m.is_file() {
                PathKind::File
            } else {
                PathKind::Other
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(HostError::io("stat", path, &e)),
        }
    }

    async fn make_dir(&self, path: &Path) -> HostResult<()> {
        match tokio::fs::create_dir(path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(HostError::io("mkdir", path, &e)),
        }
    }

    async fn make_file(&self, path: &Path) -> HostResult<()> {
        let created = tokio::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .await;
        created
            .map(drop)
            .map_err(|e| HostError::io("create", path, &e))
    }

    async fn remove(&self, path: &Path) -> HostResult<()> {
        let result = match tokio::fs::symlink_metadata(path).await {
            Ok(m) if m.is_dir() => tokio::fs::remove_dir(path).await,
            Ok(_) => tokio::fs::remove_file(path).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(HostError::io("remove", path, &e)),
        }
    }

    async fn mounts(&self) -> HostResult<Vec<MountPoint>> {
        let path = Path::new("/proc/self/mountinfo");
        let text = tokio::fs::read_to_string(path)
            .await
            .map_err(|e| HostError::io("read", path, &e))?;
        Ok(text.lines().filter_map(parse_mountinfo_line).collect())
    }

    async fn mount(
        &self,
        source: &str,
        target: &Path,
        fstype: &str,
        options: &[String],
    ) -> HostResult<()> {
        let opts = options.join(",");
        let mut args = vec!["-t", fstype];
        if !opts.is_empty() {
            args.extend(["-o", opts.as_str()]);
        }
        args.extend(["--", source, path_arg(target)?]);
        run_ok(&format!("mount {fstype}"), "mount", &args, &[])
            .await
            .map(drop)
    }

    async fn bind_mount(&self, source: &Path, target: &Path, readonly: bool) -> HostResult<()> {
        let (source, target) = (path_arg(source)?, path_arg(target)?);
        run_ok(
            "bind mount",
            "mount",
            &["--bind", "--", source, target],
            &[],
        )
        .await?;
        if readonly {
            let remount = ["-o", "remount,bind,ro", "--", target];
            if let Err(e) = run_ok("read-only remount", "mount", &remount, &[]).await {
                // Never leave a writable bind where a read-only one was asked for.
                let _ = run("unmount", "umount", &[target]).await;
                return Err(e);
            }
        }
        Ok(())
    }

    async fn unmount(&self, target: &Path) -> HostResult<()> {
        run_ok("unmount", "umount", &["--", path_arg(target)?], &[])
            .await
            .map(drop)
    }

    async fn iscsi_discover(&self, portal: &str) -> HostResult<()> {
        let args = ["-m", "discovery", "-t", "sendtargets", "-p", portal];
        run_ok(
            &format!("iSCSI discovery on {portal}"),
            "iscsiadm",
            &args,
            &[],
        )
        .await
        .map(drop)
    }

    async fn iscsi_login(&self, portal: &str, iqn: &str, chap: Option<&Chap>) -> HostResult<()> {
        let node = ["-m", "node", "-T", iqn, "-p", portal];
        if let Some(chap) = chap {
            let mut settings = vec![
                ("node.session.auth.authmethod", "CHAP"),
                ("node.session.auth.username", chap.username.as_str()),
                ("node.session.auth.password", chap.secret.as_str()),
            ];
            if let Some((user, secret)) = &chap.target {
                settings.push(("node.session.auth.username_in", user.as_str()));
                settings.push(("node.session.auth.password_in", secret.as_str()));
            }
            for (name, value) in settings {
                let mut args = node.to_vec();
                args.extend(["-o", "update", "-n", name, "-v", value]);
                run_ok(&format!("setting {name} of {iqn}"), "iscsiadm", &args, &[]).await?;
            }
        }
        let mut args = node.to_vec();
        args.push("--login");
        let what = format!("iSCSI login to {iqn} on {portal}");
        let ran = run(&what, "iscsiadm", &args).await?;
        match ran.code {
            Some(0) | Some(ISCSI_ERR_SESS_EXISTS) => Ok(()),
            Some(ISCSI_ERR_LOGIN_AUTH_FAILED) => Err(HostError {
                kind: HostErrorKind::AuthFailed,
                message: format!("{what}: the target refused the CHAP credentials"),
            }),
            code => Err(tool_failed(&what, "iscsiadm", code, &ran.stderr)),
        }
    }

    async fn iscsi_logout(&self, portal: &str, iqn: &str) -> HostResult<()> {
        let node = ["-m", "node", "-T", iqn, "-p", portal];
        let what = format!("iSCSI logout of {iqn} on {portal}");
        let mut args = node.to_vec();
        args.push("--logout");
        run_ok(&what, "iscsiadm", &args, &[ISCSI_ERR_NO_OBJS_FOUND]).await?;
        let mut args = node.to_vec();
        args.extend(["-o", "delete"]);
        run_ok(&what, "iscsiadm", &args, &[ISCSI_ERR_NO_OBJS_FOUND])
            .await
            .map(drop)
    }

    async fn iscsi_sessions(&self) -> HostResult<Vec<Session>> {
        let ran = run_ok(
            "listing iSCSI sessions",
            "iscsiadm",
            &["-m", "session"],
            &[ISCSI_ERR_NO_OBJS_FOUND],
        )
        .await?;
        Ok(parse_sessions(&ran.stdout))
    }

    async fn iscsi_rescan(&self, portal: &str, iqn: &str) -> HostResult<()> {
        let args = ["-m", "node", "-T", iqn, "-p", portal, "--rescan"];
        run_ok(&format!("iSCSI rescan of {iqn}"), "iscsiadm", &args, &[])
            .await
            .map(drop)
    }

    async fn iscsi_devices(&self) -> HostResult<Vec<IscsiDevice>> {
        let mut entries = match tokio::fs::read_dir(BY_PATH).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(HostError::io("read", Path::new(BY_PATH), &e)),
        };
        let mut out = Vec::new();
        while let Some(entry) = entries
            .next_entry()
            .await
            .map_err(|e| HostError::io("read", Path::new(BY_PATH), &e))?
        {
            let name = entry.file_name();
            let Some((portal, iqn, lun)) = name.to_str().and_then(parse_by_path) else {
                continue;
            };
            if let Ok(device) = tokio::fs::canonicalize(entry.path()).await {
                out.push(IscsiDevice {
                    portal,
                    iqn,
                    lun,
                    device,
                });
            }
        }
        Ok(out)
    }

    async fn wait_for_device(
        &self,
        links: &[PathBuf],
        timeout: Duration,
    ) -> HostResult<Option<PathBuf>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            for link in links {
                if let Ok(device) = tokio::fs::canonicalize(link).await {
                    return Ok(Some(device));
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(DEVICE_POLL).await;
        }
    }

    async fn blkid(&self, device: &Path) -> HostResult<Probe> {
        // -p probes the device itself (no cache); exit code 2: nothing found.
        let args = ["-p", "-o", "export", "--", path_arg(device)?];
        let ran = run_ok("probing the device", "blkid", &args, &[2]).await?;
        if ran.code == Some(2) {
            return Ok(Probe::Empty);
        }
        Ok(parse_blkid(&ran.stdout))
    }

    async fn mkfs(&self, device: &Path, fstype: &str) -> HostResult<()> {
        let dev = path_arg(device)?;
        let (program, args): (&str, Vec<&str>) = match fstype {
            // -F: a whole device is formatted without asking.
            "ext4" => ("mkfs.ext4", vec!["-F", "-q", dev]),
            "xfs" => ("mkfs.xfs", vec!["-q", dev]),
            other => return Err(HostError::failed(format!("no mkfs for {other}"))),
        };
        run_ok(&format!("making {fstype}"), program, &args, &[])
            .await
            .map(drop)
    }

    async fn grow_fs(&self, device: &Path, fstype: &str, mounted_at: &Path) -> HostResult<()> {
        let (program, arg) = match fstype {
            "ext4" | "ext3" => ("resize2fs", path_arg(device)?),
            "xfs" => ("xfs_growfs", path_arg(mounted_at)?),
            other => return Err(HostError::failed(format!("cannot grow {other}"))),
        };
        run_ok(&format!("growing {fstype}"), program, &[arg], &[])
            .await
            .map(drop)
    }

    async fn statvfs(&self, path: &Path) -> HostResult<FsStats> {
        let owned = path.to_path_buf();
        let st = tokio::task::spawn_blocking(move || rustix::fs::statvfs(&owned))
            .await
            .map_err(|e| HostError::failed(format!("statvfs: {e}")))?
            .map_err(|e| HostError::io("statvfs", path, &e.into()))?;
        let unit = st.f_frsize.max(1);
        let total = st.f_blocks.saturating_mul(unit);
        let free = st.f_bfree.saturating_mul(unit);
        Ok(FsStats {
            total_bytes: total,
            available_bytes: st.f_bavail.saturating_mul(unit),
            used_bytes: total.saturating_sub(free),
            total_inodes: st.f_files,
            available_inodes: st.f_favail,
            used_inodes: st.f_files.saturating_sub(st.f_ffree),
        })
    }

    async fn device_size(&self, device: &Path) -> HostResult<u64> {
        let owned = device.to_path_buf();
        tokio::task::spawn_blocking(move || {
            let mut f = std::fs::File::open(&owned)?;
            f.seek(SeekFrom::End(0))
        })
        .await
        .map_err(|e| HostError::failed(format!("device size: {e}")))?
        .map_err(|e| HostError::io("reading the size of", device, &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines() {
        let m = parse_mountinfo_line(
            "42 27 254:0 /tmp/a\\040b /mnt/x rw,relatime shared:1 - ext4 /dev/vda rw,discard",
        )
        .unwrap();
        assert_eq!(m.root, "/tmp/a b");
        assert_eq!(m.target, PathBuf::from("/mnt/x"));
        assert_eq!(m.dev, "254:0");
        assert_eq!(m.fstype, "ext4");
        assert_eq!(m.source, "/dev/vda");
        assert!(!m.readonly);
        let ro = parse_mountinfo_line("1 2 0:5 /sdb /t ro - devtmpfs udev rw").unwrap();
        assert!(ro.readonly);
        assert_eq!(parse_mountinfo_line("garbage"), None);
    }

    #[test]
    fn blkid_and_session_output() {
        assert_eq!(
            parse_blkid("DEVNAME=/dev/sdb\nUUID=x\nTYPE=xfs\n"),
            Probe::Filesystem("xfs".into())
        );
        assert!(matches!(parse_blkid("PTTYPE=gpt\n"), Probe::Other(_)));
        assert_eq!(parse_blkid(""), Probe::Empty);
        assert_eq!(
            parse_sessions("tcp: [1] 10.0.0.1:3260,1 iqn.2010-01.com.x:t1 (non-flash)\n"),
            [Session {
                portal: "10.0.0.1:3260".into(),
                iqn: "iqn.2010-01.com.x:t1".into()
            }]
        );
    }
}

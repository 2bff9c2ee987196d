//! Array simulators: protocol-faithful, stateful servers that drivers are tested against.
//!
//! - `http`: the shared HTTP(S) server (hyper 1, hyper-util, tokio-rustls) and the simulator's
//!   self-signed certificate.
//! - `ontap`: a ZAPI server (docs/wire-notes.md#the-zapi-simulator): SVM tunnelling, paging,
//!   real errno values, capacity accounting, snapshots, clones, qtrees and quotas, LUNs, igroups
//!   and maps, fault injection, latency and an fsynced state file.
//! - `solidfire`: an Element JSON-RPC server (wire-protocols §2): accounts with CHAP secrets,
//!   volumes (deleted then purged, paged lists), QoS checked against the cluster, snapshots,
//!   async clones, volume access groups, fault injection, latency and an fsynced state file.
//!
//! Simulators run in-process from tests (`OntapSim::start` on `127.0.0.1:0`) or as the
//! `storch-sim` binary.

pub mod cli;
pub mod http;
pub mod ontap;
pub mod solidfire;

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically and durably: `<path>.tmp`, fsync, rename, fsync of the
/// directory. A crash leaves either the old or the new file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

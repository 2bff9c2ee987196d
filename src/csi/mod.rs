//! The Container Storage Interface frontend (CSI v1.12.0; ../shared/spec/csi.md): the
//! Identity and Controller services over gRPC on a unix socket, beside the REST API in
//! `storch serve --csi-endpoint unix:///PATH/csi.sock`.
//!
//! - `proto`: the generated messages, servers and clients (`proto/csi.proto`, `build.rs`).
//! - `identity`: plugin info, capabilities (Controller service, VOLUME_ACCESSIBILITY_CONSTRAINTS,
//!   online expansion), Probe (not ready while replaying or a standby).
//! - `controller`: the Controller service; each RPC is validated here and becomes the same
//!   core request as REST and Kubernetes (`VolumeRequest`, `SnapshotRequest`,
//!   `ResizeRequest`) through `actors::Core`. Its capability list, and the rule for
//!   PUBLISH_UNPUBLISH_VOLUME (always: every backend records publications, arrays that need a
//!   grant per host get one), is `controller::CAPABILITIES`.
//! - `publish`: ControllerPublish/Unpublish (`Core::publish_volume`: the array grants the
//!   node's host access where it needs it; the log records the publication, which keeps a
//!   single-node volume on one node and a published volume from deletion) and
//!   ControllerGetVolume / ListVolumes status (published nodes, volume condition from the
//!   volume's and its backend's state).
//! - `node_id`: the node id `storch csi node` reports and the controller reads (`NAME` or
//!   `NAME,IQN`); an id it cannot be is an unknown node.
//! - `topology`: `accessibility_requirements` and GetCapacity's segment in, a volume's
//!   segments out; placement (`actors::placement`) applies them against the backends'
//!   `supportedTopologies`.
//! - `convert`: pure translations (ids, capacity ranges, capabilities, parameters, contexts,
//!   paging tokens); `status`: `CoreError` → gRPC status, the per-name in-flight guard and the
//!   call metrics.
//! - `node`: the Node service of `storch csi node` (a DaemonSet process on every node, with no
//!   core): staging, publishing, stats and expansion through one seam for host actions
//!   (`node::host::HostOps`), served with Identity by the same `CsiServer`.

pub mod controller;
pub mod convert;
pub mod identity;
pub mod node;
pub mod node_id;
pub mod proto;
mod publish;
mod snapshots;
pub mod status;
pub mod topology;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;

use crate::actors::Core;

/// The default driver name (`GetPluginInfo.name`, the `CSIDriver` object's name).
pub const DEFAULT_DRIVER_NAME: &str = "csi.storch.io";

/// How long a stop waits for calls in progress before it drops the connections.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// How `serve` runs the CSI frontend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsiOptions {
    /// The socket's path (from `unix:///PATH`).
    pub socket: PathBuf,
    pub driver_name: String,
}

impl CsiOptions {
    /// `endpoint` must be `unix://` followed by an absolute path ending in `.sock`; the driver
    /// name must be a domain-style name of at most 63 characters with letters at both ends
    /// (what csi-sanity checks). Errors name the flag.
    pub fn parse(endpoint: &str, driver_name: &str) -> Result<CsiOptions, String> {
        let socket = socket_path("--csi-endpoint", endpoint)?;
        convert::check_driver_name(driver_name)
            .map_err(|e| format!("--csi-driver-name {driver_name:?}: {e}"))?;
        Ok(CsiOptions {
            socket,
            driver_name: driver_name.to_string(),
        })
    }
}

/// The socket of a CSI endpoint: `unix://` followed by an absolute path ending in `.sock`.
/// Errors name `flag`.
pub fn socket_path(flag: &str, endpoint: &str) -> Result<PathBuf, String> {
    let path = endpoint
        .strip_prefix("unix://")
        .ok_or_else(|| format!("{flag} {endpoint:?}: must be unix:///PATH/NAME.sock"))?;
    if !path.starts_with('/') || !path.ends_with(".sock") || path.len() <= ".sock".len() + 1 {
        return Err(format!(
            "{flag} {endpoint:?}: the socket must be an absolute path ending in .sock"
        ));
    }
    Ok(PathBuf::from(path))
}

/// The running CSI server; `shutdown` stops it and removes the socket.
#[derive(Debug)]
pub struct CsiServer {
    socket: PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
}

/// Why the CSI server could not start.
#[derive(Debug, thiserror::Error)]
pub enum CsiError {
    #[error("cannot listen on the CSI socket {}", path.display())]
    Bind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CsiServer {
    /// Serves Identity and Controller on the socket of `options` until `shutdown`.
    pub async fn start(core: Core, options: CsiOptions) -> Result<CsiServer, CsiError> {
        let plugin = Arc::new(identity::Plugin::new(core.clone(), options.driver_name));
        let identity = proto::identity_server::IdentityServer::new(identity::IdentityService {
            plugin: plugin.clone(),
        });
        let controller = proto::controller_server::ControllerServer::new(
            controller::ControllerService::new(core),
        );
        let router = tonic::transport::Server::builder()
            .add_service(identity)
            .add_service(controller);
        CsiServer::serve(options.socket, router, "Identity and Controller")
    }

    /// Binds `socket` (a stale socket file left by a previous run is removed first) and serves
    /// the router's services on it until `shutdown`; `services` names them in the log.
    pub fn serve(
        socket: PathBuf,
        router: tonic::transport::server::Router,
        services: &str,
    ) -> Result<CsiServer, CsiError> {
        let bind_error = |source| CsiError::Bind {
            path: socket.clone(),
            source,
        };
        remove_stale(&socket).map_err(bind_error)?;
        let listener = UnixListener::bind(&socket).map_err(bind_error)?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(router.serve_with_incoming_shutdown(
            UnixListenerStream::new(listener),
            async {
                let _ = stopped.await;
            },
        ));
        tracing::info!(socket = %socket.display(), "CSI {services} listening");
        Ok(CsiServer { socket, stop, task })
    }

    /// Stops serving and removes the socket file. Calls in progress get `SHUTDOWN_GRACE` to
    /// finish; connections a client keeps open past it are dropped.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(());
        match tokio::time::timeout(SHUTDOWN_GRACE, &mut self.task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => tracing::error!(error = %e, "the CSI server failed"),
            Ok(Err(e)) => tracing::error!(error = %e, "the CSI server task failed"),
            Err(_) => {
                tracing::info!("CSI clients still connected; closing their connections");
                self.task.abort();
            }
        }
        if let Err(e) = std::fs::remove_file(&self.socket)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(socket = %self.socket.display(), error = %e, "cannot remove the CSI socket");
        }
    }
}

/// Removes a socket file left behind; refuses to remove anything that is not a socket.
fn remove_stale(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path),
        Ok(_) => Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "a file that is not a socket is in the way",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_and_driver_name() {
        let o = CsiOptions::parse("unix:///run/csi/csi.sock", DEFAULT_DRIVER_NAME).unwrap();
        assert_eq!(o.socket, PathBuf::from("/run/csi/csi.sock"));
        for bad in [
            "/run/csi.sock",
            "unix://run/csi.sock",
            "unix:///run/csi",
            "tcp://x.sock",
        ] {
            let e = CsiOptions::parse(bad, DEFAULT_DRIVER_NAME).unwrap_err();
            assert!(e.starts_with("--csi-endpoint"), "{e}");
        }
        for bad in ["", "1csi.io", "csi.io-", &"a".repeat(64)] {
            let e = CsiOptions::parse("unix:///x.sock", bad).unwrap_err();
            assert!(e.starts_with("--csi-driver-name"), "{e}");
        }
    }
}

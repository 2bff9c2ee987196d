//! `storch csi node`: the CSI Identity and Node services on a unix socket, for a DaemonSet on
//! every node (no state, no connection to the storch server). Runs until SIGINT or SIGTERM,
//! then removes its socket.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::cli::error::{CliError, CliResult};
use crate::cli::logging::{self, LogFormat};
use crate::csi::node::{self, NodeOptions};
use crate::csi::{DEFAULT_DRIVER_NAME, node_id};
use crate::drivers::HostAccess;

/// Where open-iscsi keeps the host's initiator name.
pub const INITIATOR_FILE: &str = "/etc/iscsi/initiatorname.iscsi";

#[derive(Debug, Clone, Subcommand)]
pub enum CsiKind {
    /// Serve the CSI Identity and Node services on this node (kubelet's plugin socket).
    Node(Box<NodeArgs>),
}

#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// The unix socket to serve on (unix:///PATH/NAME.sock; a stale socket file is replaced).
    #[arg(long, env = "CSI_ENDPOINT", value_name = "unix:///PATH")]
    pub endpoint: String,

    /// This node's name (the Kubernetes node name, e.g. from the downward API's spec.nodeName).
    #[arg(long, env = "STORCH_NODE_ID", value_name = "NAME")]
    pub node_id: String,

    /// The node's zone: NodeGetInfo reports it as topology.kubernetes.io/zone.
    #[arg(long, env = "STORCH_ZONE", value_name = "ZONE")]
    pub zone: Option<String>,

    /// The CSI driver name (GetPluginInfo; the controller's --csi-driver-name).
    #[arg(long, env = "STORCH_CSI_DRIVER_NAME", value_name = "NAME", default_value = DEFAULT_DRIVER_NAME)]
    pub driver_name: String,

    /// The most volumes this node takes (NodeGetInfo's max_volumes_per_node; 0: no limit).
    #[arg(
        long,
        env = "STORCH_MAX_VOLUMES",
        value_name = "N",
        default_value_t = 0
    )]
    pub max_volumes: u32,

    /// The node's iSCSI initiator name [default: InitiatorName= of --iscsi-initiator-file;
    /// none when that file is missing].
    #[arg(long, env = "STORCH_ISCSI_INITIATOR", value_name = "IQN")]
    pub iscsi_initiator: Option<String>,

    /// Where the host's initiator name is read from when --iscsi-initiator is not given.
    #[arg(long, env = "STORCH_ISCSI_INITIATOR_FILE", value_name = "FILE", default_value = INITIATOR_FILE)]
    pub iscsi_initiator_file: PathBuf,

    /// How long a NodeStageVolume waits for an iSCSI LUN to appear after the login (1s to
    /// 10m).
    #[arg(long, env = "STORCH_DEVICE_TIMEOUT", value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub device_timeout: Duration,

    /// Log format on stderr; the level filter comes from RUST_LOG (default `info`).
    #[arg(
        long,
        env = "STORCH_LOG_FORMAT",
        value_enum,
        value_name = "FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

impl NodeArgs {
    /// Checks every flag; errors name the flag.
    pub fn into_options(self) -> Result<NodeOptions, String> {
        let socket = crate::csi::socket_path("--endpoint", &self.endpoint)?;
        crate::csi::convert::check_driver_name(&self.driver_name)
            .map_err(|e| format!("--driver-name {:?}: {e}", self.driver_name))?;
        node_id::check_node_name(&self.node_id).map_err(|e| format!("--node-id: {e}"))?;
        if let Some(zone) = &self.zone {
            check_label_value(zone).map_err(|e| format!("--zone {zone:?}: {e}"))?;
        }
        let initiator = match self.iscsi_initiator {
            Some(iqn) => Some(iqn),
            None => read_initiator(&self.iscsi_initiator_file)?,
        };
        if let Some(iqn) = &initiator {
            node_id::check_initiator(iqn).map_err(|e| format!("--iscsi-initiator: {e}"))?;
        }
        if !(Duration::from_secs(1)..=node::MAX_DEVICE_TIMEOUT).contains(&self.device_timeout) {
            return Err(format!(
                "--device-timeout {}: must be between 1s and 10m",
                humantime::format_duration(self.device_timeout)
            ));
        }
        let host = HostAccess {
            node: self.node_id,
            iscsi_initiator: initiator,
        };
        let id = node_id::format(&host);
        if id.len() > node_id::MAX_NODE_ID_BYTES {
            return Err(format!(
                "--node-id and --iscsi-initiator make a node id of {} bytes; at most {}",
                id.len(),
                node_id::MAX_NODE_ID_BYTES
            ));
        }
        Ok(NodeOptions {
            socket,
            driver_name: self.driver_name,
            host,
            zone: self.zone,
            max_volumes: i64::from(self.max_volumes),
            device_timeout: self.device_timeout,
        })
    }
}

/// A Kubernetes label value: at most 63 characters, alphanumerics at both ends, `-`, `_`, `.`
/// between.
fn check_label_value(v: &str) -> Result<(), String> {
    let inner = v
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let ends = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    if v.is_empty() || v.len() > 63 || !inner || !ends(v.bytes().next()) || !ends(v.bytes().last())
    {
        return Err(
            "must be 1-63 letters, digits, '-', '_' or '.', alphanumeric at both ends".into(),
        );
    }
    Ok(())
}

/// `InitiatorName=` of open-iscsi's file; `None` when the file is missing (a node without
/// iSCSI serves NFS and local volumes).
fn read_initiator(file: &Path) -> Result<Option<String>, String> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("--iscsi-initiator-file {}: {e}", file.display())),
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix("InitiatorName="))
        .map(|iqn| Some(iqn.trim().to_string()))
        .ok_or_else(|| {
            format!(
                "--iscsi-initiator-file {}: no InitiatorName= line",
                file.display()
            )
        })
}

/// Runs a `storch csi` command.
pub fn run(kind: CsiKind) -> CliResult<()> {
    let CsiKind::Node(args) = kind;
    let format = args.log_format;
    let options = args.into_options().map_err(CliError::Usage)?;
    logging::init(format).map_err(|e| CliError::Failed(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("storch-csi-node")
        .build()
        .map_err(|e| CliError::Failed(format!("could not start the async runtime: {e}")))?;
    runtime.block_on(serve(options))
}

async fn serve(options: NodeOptions) -> CliResult<()> {
    let mut signals = super::serve::Signals::install()
        .map_err(|e| CliError::Failed(format!("could not install signal handlers: {e}")))?;
    let socket = options.socket.clone();
    tracing::info!(
        node_id = %node_id::format(&options.host),
        zone = options.zone.as_deref().unwrap_or(""),
        "starting the CSI node plugin"
    );
    let server = node::start(options, Arc::new(node::real::RealHost)).map_err(|e| {
        let cause = std::error::Error::source(&e).map(ToString::to_string);
        CliError::Failed(format!("{e}: {}", cause.unwrap_or_default()))
    })?;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(
        stdout,
        "storch csi node listening on unix://{}",
        socket.display()
    )
    .and_then(|()| stdout.flush());
    drop(stdout);
    let signal = signals.recv().await;
    tracing::info!(signal, "stopping the CSI node plugin");
    server.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(argv: &[&str]) -> Result<NodeOptions, String> {
        let mut full = vec!["storch", "csi", "node"];
        full.extend_from_slice(argv);
        let cli = Cli::try_parse_from(full).map_err(|e| e.to_string())?;
        let Command::Csi(CsiKind::Node(args)) = cli.command else {
            panic!("not csi node")
        };
        args.into_options()
    }

    #[test]
    fn node_flags_become_options() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("initiatorname.iscsi");
        std::fs::write(
            &file,
            "## comment\nInitiatorName=iqn.1993-08.org.debian:01:abc\n",
        )
        .unwrap();
        let o = parse(&[
            "--endpoint",
            "unix:///run/csi/csi.sock",
            "--node-id",
            "worker-1",
            "--zone",
            "zone-a",
            "--max-volumes",
            "16",
            "--iscsi-initiator-file",
            file.to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(o.socket, PathBuf::from("/run/csi/csi.sock"));
        assert_eq!(
            node_id::format(&o.host),
            "worker-1,iqn.1993-08.org.debian:01:abc"
        );
        assert_eq!(o.zone.as_deref(), Some("zone-a"));
        assert_eq!(o.max_volumes, 16);
        assert_eq!(o.device_timeout, Duration::from_secs(30));
        let missing = dir.path().join("none");
        let o = parse(&[
            "--endpoint",
            "unix:///x.sock",
            "--node-id",
            "n",
            "--iscsi-initiator-file",
            missing.to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(o.host.iscsi_initiator, None);
    }

    #[test]
    fn bad_node_flags_name_the_flag() {
        let with = |flag: &str, value: &str| {
            let mut v = vec![
                "--endpoint",
                "unix:///x.sock",
                "--node-id",
                "n",
                "--iscsi-initiator-file",
                "/nonexistent",
            ];
            match v.iter().position(|a| *a == flag) {
                Some(i) => v[i + 1] = value,
                None => v.extend_from_slice(&[flag, value]),
            }
            parse(&v).unwrap_err()
        };
        assert!(with("--endpoint", "/x.sock").starts_with("--endpoint"));
        assert!(with("--node-id", "Worker").starts_with("--node-id"));
        assert!(with("--zone", "a-").starts_with("--zone"));
        assert!(with("--iscsi-initiator", "nope").starts_with("--iscsi-initiator"));
        assert!(with("--device-timeout", "0s").starts_with("--device-timeout"));
        assert!(with("--device-timeout", "1h").starts_with("--device-timeout"));
        assert!(with("--driver-name", "1x").starts_with("--driver-name"));
        assert!(with("--max-volumes", "x").contains("max-volumes"));
    }
}

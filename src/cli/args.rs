//! Raw command-line arguments (clap derive). Every serve flag also reads a `STORCH_*`
//! environment variable; a flag on the command line wins.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::client_args::{
    ClientArgs, CompletionArgs, CreateKind, DeleteKind, EventsArgs, ExplainKind, GetKind,
    ReplayArgs, ResizeKind, UpdateKind, VersionArgs,
};
use super::logging::LogFormat;

/// storch: a storage orchestrator speaking the Trident 18.07 REST API.
#[derive(Debug, Parser)]
#[command(name = "storch", version, propagate_version = true)]
pub struct Cli {
    /// How client verbs reach the server and print (ignored by `serve` and offline commands).
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server: the core (event log, actors) and the REST API.
    Serve(Box<ServeArgs>),
    /// Add a backend, storage class, volume (or clone) or snapshot.
    #[command(subcommand)]
    Create(CreateKind),
    /// Replace a backend's config.
    #[command(subcommand)]
    Update(UpdateKind),
    /// Show backends, storage classes, volumes or snapshots.
    #[command(subcommand)]
    Get(GetKind),
    /// Delete backends, storage classes, volumes or snapshots.
    #[command(subcommand)]
    Delete(DeleteKind),
    /// Grow a volume.
    #[command(subcommand)]
    Resize(ResizeKind),
    /// Adopt a volume that is on an array but not in storch (see `get orphans`).
    #[command(subcommand)]
    Import(super::client_args::ImportKind),
    /// Compare a backend's volumes with its array now.
    #[command(subcommand)]
    Reconcile(super::client_args::ReconcileKind),
    /// Explain where a volume of a storage class could be placed, pool by pool.
    #[command(subcommand)]
    Explain(ExplainKind),
    /// Show the event history (from a server), or audit a stopped server's log offline.
    Events(EventsArgs),
    /// Print the backends, storage classes and volumes as they stood at a point of the log
    /// (offline, on a stopped server's data dir).
    Replay(ReplayArgs),
    /// Print the server's and this client's versions.
    Version(VersionArgs),
    /// Print a shell completion script.
    Completion(CompletionArgs),
    /// Offline benchmarks of provisioning throughput and replay.
    #[command(subcommand)]
    Bench(super::commands::bench::BenchKind),
    /// CSI plugin processes: `csi node` serves the Node service on a node.
    #[command(subcommand)]
    Csi(super::commands::csi::CsiKind),
    /// Install storch on a Kubernetes cluster, after checking everything the install needs
    /// (--dry-run: only check).
    Install(Box<super::commands::install::InstallArgs>),
    /// Remove what `storch install` made (its data PVC too with --all).
    Uninstall(super::commands::install::UninstallArgs),
    /// Print storch's pod logs, or gather them for a support case (--archive).
    Logs(super::commands::install::LogsArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// A YAML file with server settings and the backends and storage classes to have
    /// (applied at start and on SIGHUP). Flags given on the command line win over it.
    #[arg(long, env = "STORCH_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Where the event log and the secrets key live (created if missing) [default:
    /// ./storch-data].
    #[arg(long, env = "STORCH_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// The IP address the REST API listens on [default: 127.0.0.1]. A non-loopback address
    /// needs --tls-cert, --tls-key and --auth-token-file (or --insecure-listen).
    #[arg(long, env = "STORCH_ADDRESS", value_name = "ADDR")]
    pub address: Option<String>,

    /// The TCP port of the REST API [default: 8000]; 0 picks a free one (the bound port is
    /// printed).
    #[arg(long, env = "STORCH_PORT", value_name = "PORT")]
    pub port: Option<u16>,

    /// Log format on stderr [default: text]; the level filter comes from RUST_LOG (default
    /// `info`).
    #[arg(long, env = "STORCH_LOG_FORMAT", value_enum, value_name = "FORMAT")]
    pub log_format: Option<LogFormat>,

    /// Serve HTTPS with this PEM certificate chain (needs --tls-key).
    #[arg(long, env = "STORCH_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, env = "STORCH_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,

    /// Require `Authorization: Bearer TOKEN` on every route but /livez and /readyz, with TOKEN
    /// read from this file (surrounding whitespace ignored; at least 16 characters).
    #[arg(long, env = "STORCH_AUTH_TOKEN_FILE", value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,

    /// Allow a non-loopback --address without TLS and a token: anyone who can reach the port
    /// controls storch (a warning is logged at start).
    #[arg(long, env = "STORCH_INSECURE_LISTEN")]
    pub insecure_listen: bool,

    /// The 32-byte key that seals array passwords and CHAP secrets in the event log
    /// [default: DATA_DIR/secret.key, created if missing]. Instances that replicate one log
    /// through etcd must share it (e.g. `head -c 32 /dev/urandom > FILE`, mounted in each).
    #[arg(long, env = "STORCH_SECRETS_KEY_FILE", value_name = "FILE")]
    pub secrets_key_file: Option<PathBuf>,

    /// Compare every backend's volumes with its array this often (volumes missing from it,
    /// resized or moved behind storch's back, orphans), besides at each backend's start
    /// [default: 10m]; 0 turns the periodic comparison off.
    #[arg(long, env = "STORCH_RECONCILE_INTERVAL", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub reconcile_interval: Option<std::time::Duration>,

    /// Start even though the event log lacks acknowledged records (its store ends before the
    /// watermark kept beside it) or holds a corrupt record: the log is cut back to the last
    /// good record before them, and a `LogTailCutBack` event records what was given up. Run
    /// `storch events verify` first to see what that is.
    #[arg(long, env = "STORCH_TRUNCATE_CORRUPT_TAIL")]
    pub truncate_corrupt_tail: bool,

    /// Free space to keep on the event log's disk, as a size such as 64Mi or 1Gi [default:
    /// 64Mi]; 0 keeps none. Below it writes are refused (503, /readyz fails) before the log
    /// is touched, and resume by themselves once space is freed.
    #[arg(long, env = "STORCH_LOG_MIN_FREE", value_name = "SIZE", value_parser = crate::model::parse_size_strict)]
    pub log_min_free: Option<u64>,

    /// A directory below which local backends added or updated over the API may put their
    /// pools (repeatable; comma separated in the variable) [default: the data dir]. Backends
    /// in the --config file are not bound to it.
    #[arg(
        long = "local-root",
        env = "STORCH_LOCAL_ROOTS",
        value_name = "DIR",
        value_delimiter = ','
    )]
    pub local_roots: Vec<PathBuf>,

    #[command(flatten)]
    pub kube: KubeArgs,

    #[command(flatten)]
    pub etcd: EtcdArgs,

    #[command(flatten)]
    pub csi: CsiArgs,
}

/// The CSI frontend (Identity and Controller): on with --csi-endpoint.
#[derive(Debug, Clone, Default, Args)]
#[group(skip)]
pub struct CsiArgs {
    /// Serve the CSI Identity and Controller services on this unix socket
    /// (unix:///PATH/NAME.sock; a stale socket file is replaced). Only the leader takes
    /// commands; a standby answers Probe with ready=false.
    #[arg(long, env = "CSI_ENDPOINT", value_name = "unix:///PATH")]
    pub csi_endpoint: Option<String>,

    /// The CSI driver name (GetPluginInfo, the CSIDriver object, the StorageClass
    /// provisioner) [default: csi.storch.io].
    #[arg(long, env = "STORCH_CSI_DRIVER_NAME", value_name = "NAME")]
    pub csi_driver_name: Option<String>,
}

/// Replication of the event log through etcd: on with --etcd-endpoints.
#[derive(Debug, Clone, Default, Args)]
#[group(skip)]
pub struct EtcdArgs {
    /// Replicate the event log through these etcd members (http://HOST:PORT, comma separated):
    /// instances with the same --etcd-prefix elect one leader; the others are standbys that
    /// serve reads and take over when the leader's lease expires.
    #[arg(
        long,
        env = "STORCH_ETCD_ENDPOINTS",
        value_name = "URLS",
        value_delimiter = ','
    )]
    pub etcd_endpoints: Vec<String>,

    /// The etcd key prefix of this storch cluster [default: /storch].
    #[arg(long, env = "STORCH_ETCD_PREFIX", value_name = "PREFIX")]
    pub etcd_prefix: Option<String>,

    /// How long a leader that stops renewing its etcd lease blocks a takeover [default: 10s].
    #[arg(long, env = "STORCH_ETCD_LEASE_TTL", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub etcd_lease_ttl: Option<std::time::Duration>,

    /// This instance's name in the leader key [default: STORCH_POD_NAME, else the host name
    /// and the process id].
    #[arg(long, env = "STORCH_ETCD_IDENTITY", value_name = "ID")]
    pub etcd_identity: Option<String>,

    /// The leader stores a checkpoint in etcd every this many records, deletes the records
    /// the previous checkpoint covered and compacts etcd [default: 10000].
    #[arg(long, env = "STORCH_ETCD_CHECKPOINT_EVERY", value_name = "N")]
    pub etcd_checkpoint_every: Option<u64>,
}

/// The Kubernetes frontend: on with one of --kubeconfig, --k8s-api-server, --in-cluster.
#[derive(Debug, Clone, Default, Args)]
#[group(skip)]
#[command(group(clap::ArgGroup::new("kube_source").multiple(false)))]
pub struct KubeArgs {
    /// Run the Kubernetes frontend on the cluster of this kubeconfig (its current context).
    #[arg(
        long,
        env = "STORCH_KUBECONFIG",
        value_name = "PATH",
        group = "kube_source"
    )]
    pub kubeconfig: Option<PathBuf>,

    /// Run the Kubernetes frontend on this API server, without credentials (e.g. `kubectl
    /// proxy`'s http://127.0.0.1:8001).
    #[arg(
        long,
        env = "STORCH_K8S_API_SERVER",
        value_name = "URL",
        group = "kube_source"
    )]
    pub k8s_api_server: Option<String>,

    /// Run the Kubernetes frontend with the pod's service account.
    #[arg(long, env = "STORCH_IN_CLUSTER", group = "kube_source")]
    pub in_cluster: bool,

    /// A StorageClass provisioner name storch answers (repeatable) [default:
    /// netapp.io/trident, storch.io/storch].
    #[arg(
        long = "k8s-provisioner",
        env = "STORCH_K8S_PROVISIONERS",
        value_name = "NAME",
        value_delimiter = ','
    )]
    pub k8s_provisioners: Vec<String>,

    /// storch's own namespace, for its Lease and CHAP Secrets [default: the pod's, else the
    /// kubeconfig context's].
    #[arg(long, env = "STORCH_K8S_NAMESPACE", value_name = "NS")]
    pub k8s_namespace: Option<String>,

    /// The node storch runs on: `local` volumes get a node affinity to it.
    #[arg(long, env = "STORCH_NODE_NAME", value_name = "NODE")]
    pub k8s_node_name: Option<String>,

    /// This replica's Lease holder identity [default: the host name and a random suffix].
    #[arg(long, env = "STORCH_POD_NAME", value_name = "ID")]
    pub k8s_identity: Option<String>,

    /// The pod storch runs in, which it labels with its etcd role (`storch.io/role`): only
    /// ever the pod's own name from the downward API, so hidden.
    #[arg(long, env = "STORCH_POD_NAME", value_name = "POD", hide = true)]
    pub k8s_pod_name: Option<String>,

    /// The Lease only whose holder provisions [default: storch-leader].
    #[arg(long, env = "STORCH_K8S_LEASE_NAME", value_name = "NAME")]
    pub k8s_lease_name: Option<String>,

    /// How long a Lease holder that stops renewing keeps it [default: 15s].
    #[arg(long, env = "STORCH_K8S_LEASE_DURATION", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub k8s_lease_duration: Option<std::time::Duration>,

    /// How long a volume storch made for a claim must stay without the claim and without a
    /// PV before its class's reclaim policy is applied to it [default: 5m].
    #[arg(long, env = "STORCH_K8S_ORPHAN_GRACE", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub k8s_orphan_grace: Option<std::time::Duration>,
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use clap::CommandFactory;

    use super::*;

    /// Parsing reads `STORCH_*` variables, so tests that parse or set them take turns.
    static ENV_LOCK: Mutex<()> = Mutex::new(());

    const VARS: [&str; 10] = [
        "STORCH_DATA_DIR",
        "STORCH_LOG_MIN_FREE",
        "STORCH_CONFIG",
        "STORCH_ADDRESS",
        "STORCH_PORT",
        "STORCH_LOG_FORMAT",
        "STORCH_INSECURE_LISTEN",
        "STORCH_TLS_CERT",
        "STORCH_TLS_KEY",
        "STORCH_AUTH_TOKEN_FILE",
    ];

    fn serve_args(argv: &[&str]) -> Result<ServeArgs, clap::Error> {
        let cli = Cli::try_parse_from(argv)?;
        match cli.command {
            Command::Serve(args) => Ok(*args),
            other => panic!("not serve: {other:?}"),
        }
    }

    fn clear_env() {
        for var in VARS {
            // SAFETY: only tests holding ENV_LOCK touch these variables.
            unsafe { std::env::remove_var(var) };
        }
    }

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_defaults() {
        let _env = ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        clear_env();
        let args = serve_args(&["storch", "serve"]).unwrap();
        assert!(!args.insecure_listen);
        assert_eq!(args.tls_cert, None);
        assert_eq!(args.tls_key, None);
        assert_eq!(args.auth_token_file, None);
        assert_eq!(args.config, None);
        let s = args.into_settings().unwrap();
        assert_eq!(s.data_dir, PathBuf::from("./storch-data"));
        assert_eq!(s.listen, "127.0.0.1:8000".parse().unwrap());
        assert_eq!(s.log_format, LogFormat::Text);
    }

    #[test]
    fn serve_flags() {
        let _env = ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        clear_env();
        let args = serve_args(&[
            "storch",
            "serve",
            "--data-dir",
            "/var/lib/storch",
            "--address",
            "::1",
            "--port",
            "0",
            "--log-format",
            "json",
            "--insecure-listen",
            "--tls-cert",
            "/etc/storch/cert.pem",
            "--tls-key",
            "/etc/storch/key.pem",
            "--auth-token-file",
            "/etc/storch/token",
        ])
        .unwrap();
        assert_eq!(args.tls_cert, Some(PathBuf::from("/etc/storch/cert.pem")));
        assert_eq!(args.tls_key, Some(PathBuf::from("/etc/storch/key.pem")));
        assert_eq!(
            args.auth_token_file,
            Some(PathBuf::from("/etc/storch/token"))
        );
        assert_eq!(args.data_dir, Some(PathBuf::from("/var/lib/storch")));
        assert_eq!(args.address.as_deref(), Some("::1"));
        assert_eq!(args.port, Some(0));
        assert_eq!(args.log_format, Some(LogFormat::Json));
        assert!(args.insecure_listen);
    }

    #[test]
    fn serve_reads_the_environment_and_flags_win() {
        let _env = ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        clear_env();
        // SAFETY: only tests holding ENV_LOCK touch these variables.
        unsafe {
            std::env::set_var("STORCH_DATA_DIR", "/srv/storch");
            std::env::set_var("STORCH_PORT", "9000");
            std::env::set_var("STORCH_LOG_FORMAT", "json");
            std::env::set_var("STORCH_INSECURE_LISTEN", "true");
            std::env::set_var("STORCH_AUTH_TOKEN_FILE", "/run/token");
        }
        let args = serve_args(&["storch", "serve"]).unwrap();
        assert_eq!(args.data_dir, Some(PathBuf::from("/srv/storch")));
        assert_eq!(args.port, Some(9000));
        assert_eq!(args.log_format, Some(LogFormat::Json));
        assert!(args.insecure_listen);
        assert_eq!(args.auth_token_file, Some(PathBuf::from("/run/token")));
        let args = serve_args(&["storch", "serve", "--port", "7000"]).unwrap();
        assert_eq!(args.port, Some(7000));
        clear_env();
    }

    #[test]
    fn log_min_free_is_a_size_that_reaches_the_core() {
        let _env = ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        clear_env();
        let defaults = serve_args(&["storch", "serve"]).unwrap();
        assert_eq!(defaults.log_min_free, None);
        let opts = defaults.into_settings().unwrap().core_options();
        assert_eq!(opts.log_min_free, crate::log::DEFAULT_MIN_FREE);

        for (given, bytes) in [("128Mi", 128 << 20), ("1GB", 1_000_000_000), ("0", 0)] {
            let args = serve_args(&["storch", "serve", "--log-min-free", given]).unwrap();
            let opts = args.into_settings().unwrap().core_options();
            assert_eq!(opts.log_min_free, bytes, "{given}");
        }
        for (given, why) in [
            ("1gi", "the unit is spelled \"Gi\""),
            ("1.5Gi", "only whole numbers are allowed"),
            ("lots", "unknown unit \"lots\""),
        ] {
            let err = serve_args(&["storch", "serve", "--log-min-free", given])
                .unwrap_err()
                .to_string();
            assert!(err.contains("--log-min-free"), "{err}");
            assert!(err.contains(why), "{given}: {err}");
        }
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        let _env = ENV_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        clear_env();
        for argv in [
            &["storch", "serve", "--port", "70000"][..],
            &["storch", "serve", "--port", "-1"],
            &["storch", "serve", "--log-format", "xml"],
            &["storch", "serve", "--bogus"],
            &["storch", "serve", "extra"],
            &["storch"],
            &["storch", "frobnicate"],
        ] {
            assert!(serve_args(argv).is_err(), "{argv:?}");
        }
    }
}

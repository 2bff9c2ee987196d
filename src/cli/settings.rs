//! Validated settings, built from [`ServeArgs`] before any work starts.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use crate::actors::CoreOptions;

use super::args::ServeArgs;
use super::logging::LogFormat;

/// The certificate chain and key of HTTPS (PEM files, read when the server starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// What `storch serve` runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeSettings {
    pub data_dir: PathBuf,
    /// Where the REST API listens (port 0: any free port).
    pub listen: SocketAddr,
    pub log_format: LogFormat,
    /// Serve HTTPS with these files.
    pub tls: Option<TlsFiles>,
    /// Require the bearer token in this file.
    pub auth_token_file: Option<PathBuf>,
    /// The address is not loopback, TLS or the token is missing, and the operator accepted
    /// that with `--insecure-listen` (logged loudly at start).
    pub insecure_listen: bool,
    /// The declarative config file, read and validated.
    pub config: Option<crate::config::FileConfig>,
    /// The Kubernetes frontend, when a cluster is given.
    pub kube: Option<crate::k8s::KubeOptions>,
    /// Replication through etcd, when endpoints are given.
    pub replication: Option<crate::replication::ReplicationOptions>,
    /// The secrets key file, when not the data dir's own.
    pub secrets_key_file: Option<PathBuf>,
    /// The CSI frontend, when an endpoint is given.
    pub csi: Option<crate::csi::CsiOptions>,
    /// `--reconcile-interval`, when given (zero: off).
    pub reconcile_interval: Option<std::time::Duration>,
    /// `--truncate-corrupt-tail`: start on a log that lacks acknowledged records or holds a
    /// corrupt one, cutting it back.
    pub truncate_corrupt_tail: bool,
    /// `--local-root`s (empty: the data dir).
    pub local_roots: Vec<PathBuf>,
    /// `--log-min-free`, when given.
    pub log_min_free: Option<u64>,
}

/// Why the arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("--data-dir must not be empty")]
    EmptyDataDir,
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("invalid log format {0:?} in the config file")]
    LogFormat(String),
    #[error("invalid --address {0:?}: expected an IP address such as 127.0.0.1 or ::1")]
    BadAddress(String),
    #[error(
        "{0} configures the Kubernetes frontend, which needs --kubeconfig, --k8s-api-server or \
         --in-cluster"
    )]
    KubeWithoutCluster(&'static str),
    #[error("--csi-driver-name needs --csi-endpoint")]
    CsiWithoutEndpoint,
    #[error("{0}")]
    Csi(String),
    #[error("--k8s-provisioner must not be empty")]
    EmptyProvisioner,
    #[error("--k8s-lease-duration must be at least 1s")]
    ShortLease,
    #[error("--k8s-orphan-grace must be at least 1s")]
    ShortOrphanGrace,
    #[error("{0}")]
    Etcd(String),
    #[error("{0} configures etcd replication, which needs --etcd-endpoints")]
    EtcdWithoutEndpoints(&'static str),
    #[error(
        "--etcd-endpoints needs --secrets-key-file: every instance that replicates one log must \
         unseal the same secrets, so they share one 32-byte key file (e.g. `head -c 32 \
         /dev/urandom > FILE`, mounted in each)"
    )]
    EtcdWithoutSharedKey,
    #[error("--tls-cert and --tls-key go together; {0} is missing")]
    TlsPair(&'static str),
    #[error(
        "refusing to listen on {ip}: it is not a loopback address, and listening elsewhere \
         requires TLS (--tls-cert and --tls-key) and a bearer token (--auth-token-file), or \
         anyone who can reach the port controls storch; missing: {missing}. Use a loopback \
         address, give them, or pass --insecure-listen to accept the risk"
    )]
    NotLoopback { ip: IpAddr, missing: String },
}

impl ServeArgs {
    /// Checks the arguments: a non-empty data dir, an IP address (or `localhost`), TLS files
    /// in pairs, and on a non-loopback address TLS plus a token unless `--insecure-listen` is
    /// given. (The files themselves are read when the server starts.)
    pub fn into_settings(self) -> Result<ServeSettings, SettingsError> {
        let config = match &self.config {
            Some(path) => Some(crate::config::FileConfig::from_file(path)?),
            None => None,
        };
        let file = config
            .as_ref()
            .map(|c| c.server.clone())
            .unwrap_or_default();
        let data_dir = self
            .data_dir
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from("./storch-data"));
        let address = self
            .address
            .or(file.address)
            .unwrap_or_else(|| "127.0.0.1".to_string());
        let port = self.port.or(file.port).unwrap_or(8000);
        let log_format = match (self.log_format, file.log_format.as_deref()) {
            (Some(f), _) => f,
            (None, Some("json")) => LogFormat::Json,
            (None, Some("text") | None) => LogFormat::Text,
            (None, Some(other)) => return Err(SettingsError::LogFormat(other.to_string())),
        };
        if data_dir.as_os_str().is_empty() {
            return Err(SettingsError::EmptyDataDir);
        }
        let tls = match (self.tls_cert, self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
            (None, None) => None,
            (Some(_), None) => return Err(SettingsError::TlsPair("--tls-key")),
            (None, Some(_)) => return Err(SettingsError::TlsPair("--tls-cert")),
        };
        let replication = etcd_options(self.etcd, self.kube.k8s_identity.as_deref())?;
        if replication.is_some() && self.secrets_key_file.is_none() {
            return Err(SettingsError::EtcdWithoutSharedKey);
        }
        let mut kube = kube_options(self.kube)?;
        if let Some(k) = kube.as_mut() {
            // Replicated in a pod: the pod carries its role, for a Service of the leader.
            k.role_labels = replication.is_some();
        }
        let csi = match (self.csi.csi_endpoint, self.csi.csi_driver_name) {
            (None, None) => None,
            (None, Some(_)) => return Err(SettingsError::CsiWithoutEndpoint),
            (Some(endpoint), name) => Some(
                crate::csi::CsiOptions::parse(
                    &endpoint,
                    name.as_deref().unwrap_or(crate::csi::DEFAULT_DRIVER_NAME),
                )
                .map_err(SettingsError::Csi)?,
            ),
        };
        let ip = parse_address(&address)?;
        let loopback = ip.to_canonical().is_loopback();
        let mut missing = Vec::new();
        if tls.is_none() {
            missing.extend(["--tls-cert", "--tls-key"]);
        }
        if self.auth_token_file.is_none() {
            missing.push("--auth-token-file");
        }
        let exposed = !loopback && !missing.is_empty();
        if exposed && !self.insecure_listen {
            return Err(SettingsError::NotLoopback {
                ip,
                missing: missing.join(", "),
            });
        }
        Ok(ServeSettings {
            data_dir,
            listen: SocketAddr::new(ip, port),
            log_format,
            tls,
            auth_token_file: self.auth_token_file,
            insecure_listen: exposed,
            config,
            kube,
            replication,
            secrets_key_file: self.secrets_key_file,
            csi,
            reconcile_interval: self.reconcile_interval,
            truncate_corrupt_tail: self.truncate_corrupt_tail,
            local_roots: self.local_roots,
            log_min_free: self.log_min_free,
        })
    }
}

/// Replication's options, or `None` without endpoints (then no other etcd flag may be given).
fn etcd_options(
    a: super::args::EtcdArgs,
    pod_name: Option<&str>,
) -> Result<Option<crate::replication::ReplicationOptions>, SettingsError> {
    if a.etcd_endpoints.is_empty() {
        let given = [
            (a.etcd_prefix.is_some(), "--etcd-prefix"),
            (a.etcd_lease_ttl.is_some(), "--etcd-lease-ttl"),
            (a.etcd_identity.is_some(), "--etcd-identity"),
            (a.etcd_checkpoint_every.is_some(), "--etcd-checkpoint-every"),
        ];
        return match given.iter().find(|(set, _)| *set) {
            Some((_, flag)) => Err(SettingsError::EtcdWithoutEndpoints(flag)),
            None => Ok(None),
        };
    }
    let identity = a
        .etcd_identity
        .or_else(|| pod_name.map(str::to_string))
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "storch".into());
            format!("{host}-{}", std::process::id())
        });
    let opts = crate::replication::ReplicationOptions {
        endpoints: a.etcd_endpoints,
        prefix: a.etcd_prefix.unwrap_or_else(|| "/storch".into()),
        lease_ttl: a
            .etcd_lease_ttl
            .unwrap_or(std::time::Duration::from_secs(10)),
        identity,
        checkpoint_every: a
            .etcd_checkpoint_every
            .unwrap_or(crate::replication::DEFAULT_CHECKPOINT_EVERY),
    };
    opts.validate().map_err(SettingsError::Etcd)?;
    Ok(Some(opts))
}

/// The frontend's options, or `None` without a cluster (then no k8s flag may be given).
fn kube_options(
    a: super::args::KubeArgs,
) -> Result<Option<crate::k8s::KubeOptions>, SettingsError> {
    use crate::k8s::{KubeOptions, KubeSource};
    let source = match (a.kubeconfig, a.k8s_api_server, a.in_cluster) {
        (Some(path), _, _) => KubeSource::Kubeconfig(path),
        (None, Some(url), _) => KubeSource::ApiServer(url),
        (None, None, true) => KubeSource::InCluster,
        (None, None, false) => {
            let given = [
                (!a.k8s_provisioners.is_empty(), "--k8s-provisioner"),
                (a.k8s_namespace.is_some(), "--k8s-namespace"),
                (a.k8s_lease_name.is_some(), "--k8s-lease-name"),
                (a.k8s_lease_duration.is_some(), "--k8s-lease-duration"),
                (a.k8s_orphan_grace.is_some(), "--k8s-orphan-grace"),
            ];
            // --k8s-identity and --k8s-node-name are left out: in a pod they come from the
            // environment (STORCH_POD_NAME, STORCH_NODE_NAME) and are harmless without a cluster.
            return match given.iter().find(|(set, _)| *set) {
                Some((_, flag)) => Err(SettingsError::KubeWithoutCluster(flag)),
                None => Ok(None),
            };
        }
    };
    let mut opts = KubeOptions::new(source);
    if !a.k8s_provisioners.is_empty() {
        if a.k8s_provisioners.iter().any(|p| p.trim().is_empty()) {
            return Err(SettingsError::EmptyProvisioner);
        }
        opts.provisioners = a.k8s_provisioners;
    }
    opts.namespace = a.k8s_namespace;
    opts.node_name = a.k8s_node_name;
    opts.identity = a.k8s_identity;
    opts.pod_name = a.k8s_pod_name.filter(|n| !n.trim().is_empty());
    if let Some(name) = a.k8s_lease_name {
        opts.lease_name = name;
    }
    if let Some(d) = a.k8s_lease_duration {
        if d < std::time::Duration::from_secs(1) {
            return Err(SettingsError::ShortLease);
        }
        opts.lease_duration = d;
    }
    if let Some(d) = a.k8s_orphan_grace {
        if d < std::time::Duration::from_secs(1) {
            return Err(SettingsError::ShortOrphanGrace);
        }
        opts.orphan_grace = d;
    }
    Ok(Some(opts))
}

/// An IP address, optionally in brackets (`[::1]`), or `localhost` (= 127.0.0.1).
fn parse_address(raw: &str) -> Result<IpAddr, SettingsError> {
    let s = raw.trim();
    if s.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let s = s
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .unwrap_or(s);
    s.parse()
        .map_err(|_| SettingsError::BadAddress(raw.to_string()))
}

impl ServeSettings {
    /// The core's options for these settings (everything else at its default).
    pub fn core_options(&self) -> CoreOptions {
        CoreOptions {
            data_dir: self.data_dir.clone(),
            secrets_key: self.secrets_key_file.clone(),
            reconcile_interval: self
                .reconcile_interval
                .unwrap_or(CoreOptions::default().reconcile_interval),
            truncate_corrupt_tail: self.truncate_corrupt_tail,
            local_roots: self.local_roots.clone(),
            log_min_free: self
                .log_min_free
                .unwrap_or(CoreOptions::default().log_min_free),
            ..CoreOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(address: &str, insecure: bool) -> ServeArgs {
        ServeArgs {
            config: None,
            data_dir: Some(PathBuf::from("./storch-data")),
            address: Some(address.to_string()),
            port: Some(8000),
            log_format: Some(LogFormat::Text),
            tls_cert: None,
            tls_key: None,
            auth_token_file: None,
            insecure_listen: insecure,
            kube: Default::default(),
            etcd: Default::default(),
            csi: Default::default(),
            secrets_key_file: None,
            reconcile_interval: None,
            truncate_corrupt_tail: false,
            local_roots: Vec::new(),
            log_min_free: None,
        }
    }

    #[test]
    fn orphan_grace_needs_a_cluster_and_at_least_a_second() {
        let mut a = args("127.0.0.1", false);
        a.kube.k8s_orphan_grace = Some(std::time::Duration::from_secs(30));
        let msg = a.clone().into_settings().unwrap_err().to_string();
        assert!(msg.contains("--k8s-orphan-grace"), "{msg}");
        a.kube.k8s_api_server = Some("http://127.0.0.1:8001".into());
        let k = a.clone().into_settings().unwrap().kube.unwrap();
        assert_eq!(k.orphan_grace, std::time::Duration::from_secs(30));
        a.kube.k8s_orphan_grace = None;
        let k = a.clone().into_settings().unwrap().kube.unwrap();
        assert_eq!(k.orphan_grace, crate::k8s::DEFAULT_ORPHAN_GRACE);
        a.kube.k8s_orphan_grace = Some(std::time::Duration::from_millis(500));
        let msg = a.into_settings().unwrap_err().to_string();
        assert_eq!(msg, "--k8s-orphan-grace must be at least 1s");
    }

    #[test]
    fn csi_endpoint_and_driver_name() {
        let mut a = args("127.0.0.1", false);
        assert!(a.clone().into_settings().unwrap().csi.is_none());
        a.csi.csi_driver_name = Some("csi.example.com".into());
        assert_eq!(
            a.clone().into_settings().unwrap_err(),
            SettingsError::CsiWithoutEndpoint
        );
        a.csi.csi_endpoint = Some("unix:///run/storch/csi.sock".into());
        let csi = a.clone().into_settings().unwrap().csi.unwrap();
        assert_eq!(csi.driver_name, "csi.example.com");
        a.csi.csi_endpoint = Some("/run/storch/csi.sock".into());
        let e = a.into_settings().unwrap_err().to_string();
        assert!(e.starts_with("--csi-endpoint"), "{e}");
    }

    fn secured(mut a: ServeArgs) -> ServeArgs {
        a.tls_cert = Some(PathBuf::from("/c.pem"));
        a.tls_key = Some(PathBuf::from("/k.pem"));
        a.auth_token_file = Some(PathBuf::from("/token"));
        a
    }

    #[test]
    fn loopback_addresses_are_accepted() {
        for (address, want) in [
            ("127.0.0.1", "127.0.0.1:8000"),
            ("127.1.2.3", "127.1.2.3:8000"),
            ("localhost", "127.0.0.1:8000"),
            ("LOCALHOST", "127.0.0.1:8000"),
            ("::1", "[::1]:8000"),
            ("[::1]", "[::1]:8000"),
            ("::ffff:127.0.0.1", "[::ffff:127.0.0.1]:8000"),
        ] {
            let s = args(address, false).into_settings().unwrap();
            assert_eq!(s.listen.to_string(), want, "{address}");
            assert!(!s.insecure_listen);
        }
    }

    #[test]
    fn other_addresses_need_the_override() {
        for address in ["0.0.0.0", "::", "10.1.2.3", "192.168.0.10", "fe80::1"] {
            let err = args(address, false).into_settings().unwrap_err();
            assert!(
                matches!(err, SettingsError::NotLoopback { .. }),
                "{address}"
            );
            let msg = err.to_string();
            assert!(msg.contains("--insecure-listen"), "{msg}");
            assert!(msg.contains("TLS"), "{msg}");
            assert!(
                msg.contains("missing: --tls-cert, --tls-key, --auth-token-file"),
                "{msg}"
            );
            let s = args(address, true).into_settings().unwrap();
            assert!(s.insecure_listen, "{address}");
        }
        // The override on a loopback address changes nothing.
        let s = args("127.0.0.1", true).into_settings().unwrap();
        assert!(!s.insecure_listen);
    }

    #[test]
    fn other_addresses_with_tls_and_a_token_need_no_override() {
        let s = secured(args("0.0.0.0", false)).into_settings().unwrap();
        assert!(!s.insecure_listen);
        assert_eq!(
            s.tls,
            Some(TlsFiles {
                cert: PathBuf::from("/c.pem"),
                key: PathBuf::from("/k.pem")
            })
        );
        assert_eq!(s.auth_token_file, Some(PathBuf::from("/token")));

        // TLS without a token (or a token without TLS) is not enough.
        let mut a = secured(args("10.1.2.3", false));
        a.auth_token_file = None;
        let msg = a.into_settings().unwrap_err().to_string();
        assert!(msg.contains("missing: --auth-token-file"), "{msg}");
        let mut a = secured(args("10.1.2.3", false));
        a.tls_cert = None;
        a.tls_key = None;
        let msg = a.into_settings().unwrap_err().to_string();
        assert!(msg.contains("missing: --tls-cert, --tls-key."), "{msg}");
        let mut a = secured(args("10.1.2.3", true));
        a.auth_token_file = None;
        assert!(a.into_settings().unwrap().insecure_listen);

        // Both are fine on loopback too.
        let s = secured(args("127.0.0.1", false)).into_settings().unwrap();
        assert!(s.tls.is_some() && s.auth_token_file.is_some() && !s.insecure_listen);
    }

    #[test]
    fn tls_files_go_in_pairs() {
        let mut a = args("127.0.0.1", false);
        a.tls_cert = Some(PathBuf::from("/c.pem"));
        assert_eq!(
            a.into_settings().unwrap_err(),
            SettingsError::TlsPair("--tls-key")
        );
        let mut a = args("127.0.0.1", false);
        a.tls_key = Some(PathBuf::from("/k.pem"));
        let err = a.into_settings().unwrap_err();
        assert_eq!(err, SettingsError::TlsPair("--tls-cert"));
        assert_eq!(
            err.to_string(),
            "--tls-cert and --tls-key go together; --tls-cert is missing"
        );
    }

    #[test]
    fn bad_addresses_and_data_dirs() {
        for address in ["", "example.com", "127.0.0.1:80", "1.2.3", "[::1"] {
            assert_eq!(
                args(address, true).into_settings().unwrap_err(),
                SettingsError::BadAddress(address.to_string())
            );
        }
        let mut a = args("127.0.0.1", false);
        a.data_dir = Some(PathBuf::new());
        assert_eq!(a.into_settings().unwrap_err(), SettingsError::EmptyDataDir);
    }

    #[test]
    fn settings_to_core_options() {
        let mut a = args("127.0.0.1", false);
        a.data_dir = Some(PathBuf::from("/tmp/x"));
        a.port = Some(0);
        let s = a.into_settings().unwrap();
        assert_eq!(s.listen.port(), 0);
        let opts = s.core_options();
        assert_eq!(opts.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(opts.volume_idle, CoreOptions::default().volume_idle);
    }

    #[test]
    fn etcd_flags_are_checked() {
        // Off by default.
        assert_eq!(
            args("127.0.0.1", false)
                .into_settings()
                .unwrap()
                .replication,
            None
        );
        // Another etcd flag without endpoints is named.
        let mut a = args("127.0.0.1", false);
        a.etcd.etcd_prefix = Some("/x".into());
        let msg = a.into_settings().unwrap_err().to_string();
        assert!(
            msg.contains("--etcd-prefix") && msg.contains("--etcd-endpoints"),
            "{msg}"
        );
        // Defaults, and the pod name as the identity.
        let mut a = args("127.0.0.1", false);
        a.etcd.etcd_endpoints = vec!["127.0.0.1:2379".into()];
        a.kube.k8s_identity = Some("storch-0".into());
        let msg = a.clone().into_settings().unwrap_err().to_string();
        assert!(msg.contains("--secrets-key-file"), "{msg}");
        a.secrets_key_file = Some(PathBuf::from("/run/storch/key"));
        let s = a.into_settings().unwrap();
        assert_eq!(
            s.core_options().secrets_key,
            Some(PathBuf::from("/run/storch/key"))
        );
        let r = s.replication.unwrap();
        assert_eq!(r.prefix, "/storch");
        assert_eq!(r.lease_ttl, std::time::Duration::from_secs(10));
        assert_eq!(r.identity, "storch-0");
        // With a cluster too, the pod (STORCH_POD_NAME) is labelled with its role.
        let mut a = args("127.0.0.1", false);
        a.etcd.etcd_endpoints = vec!["127.0.0.1:2379".into()];
        a.secrets_key_file = Some(PathBuf::from("/k"));
        a.kube.k8s_api_server = Some("http://127.0.0.1:8001".into());
        a.kube.k8s_pod_name = Some("storch-1".into());
        let k = a.clone().into_settings().unwrap().kube.unwrap();
        assert!(k.role_labels);
        assert_eq!(k.pod_name.as_deref(), Some("storch-1"));
        // Not replicated: no role labels.
        a.etcd = Default::default();
        a.secrets_key_file = None;
        assert!(!a.into_settings().unwrap().kube.unwrap().role_labels);
        // Bad values name their flag and the value.
        for (field, value, flag) in [
            ("endpoint", "ftp://x", "--etcd-endpoints"),
            ("prefix", "storch", "--etcd-prefix"),
            ("prefix", "/", "--etcd-prefix"),
            ("ttl", "1s", "--etcd-lease-ttl"),
            ("identity", " ", "--etcd-identity"),
        ] {
            let mut a = args("127.0.0.1", false);
            a.etcd.etcd_endpoints = vec!["127.0.0.1:2379".into()];
            a.secrets_key_file = Some(PathBuf::from("/k"));
            match field {
                "endpoint" => a.etcd.etcd_endpoints = vec![value.into()],
                "prefix" => a.etcd.etcd_prefix = Some(value.into()),
                "ttl" => a.etcd.etcd_lease_ttl = Some(humantime::parse_duration(value).unwrap()),
                _ => a.etcd.etcd_identity = Some(value.into()),
            }
            let msg = a.into_settings().unwrap_err().to_string();
            assert!(msg.contains(flag), "{field}: {msg}");
            if field != "identity" {
                assert!(msg.contains(value.trim()), "{field}: {msg}");
            }
        }
    }
}

//! `storch-sim`: command-line arguments and the run loop of the simulator binary.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use super::eseries as es;
use super::nexentastor as nx;
use super::ontap::{
    AggregateSpec, ApiMode, FailRule, OntapSim, SimOptions, Tuning, UserScope, ontapi_of,
    parse_release,
};
use super::solidfire as sf;
use super::{SimError, Simulator};

#[derive(Debug, Parser)]
#[command(
    name = "storch-sim",
    about = "Storage array simulators for testing storch's drivers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// A stateful ONTAP server, ZAPI and REST over one array (ontap-nas, -economy, -flexgroup,
    /// -san).
    Ontap(OntapArgs),
    /// A stateful SolidFire Element JSON-RPC server (solidfire-san).
    Solidfire(SolidFireArgs),
    /// A stateful SANtricity Web Services Proxy with one E-Series array (eseries-iscsi).
    Eseries(EseriesArgs),
    /// A stateful NexentaStor 5 REST (NEF) appliance; two sharing --state are an HA pair
    /// (nexentastor-iscsi).
    Nexentastor(NexentaArgs),
}

/// How every simulator serves: address, TLS and added latency.
#[derive(Debug, clap::Args)]
pub struct Serving {
    /// Address to listen on (port 0 picks one; the chosen one is printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Serve HTTPS with a self-signed certificate (its path is printed on stderr).
    #[arg(long)]
    pub tls: bool,
    /// Where to write the certificate (default: next to --state, else the temp dir).
    #[arg(long, value_name = "FILE")]
    pub cert_out: Option<PathBuf>,
    /// Delay added to every request.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
}

impl Serving {
    fn latency(&self) -> Duration {
        Duration::from_millis(self.latency_ms)
    }
}

#[derive(Debug, clap::Args)]
pub struct OntapArgs {
    #[command(flatten)]
    pub serving: Serving,
    /// The data SVM of a new array.
    #[arg(long, default_value = "svm1")]
    pub svm: String,
    /// Aggregates of a new array: NAME:MEDIA:SIZE[:no-nve],… (media hdd, ssd, hybrid, vmdisk;
    /// `no-nve`: the aggregate reports is-nve-capable false).
    #[arg(long, default_value = super::ontap::DEFAULT_AGGREGATES)]
    pub aggregates: String,
    /// Inject failures: CALL[@AGGR]:RATE[:ERRNO] for a ZAPI call (errno default 13001), or
    /// METHOD@PATH:RATE[:STATUS/CODE|:job/CODE][:TIMES] for REST (METHOD GET, POST, PATCH,
    /// DELETE or ANY; PATH below /api/, `*` ends a prefix; default 500/13001; `job/CODE` fails
    /// the request's job instead; TIMES: only the next TIMES matches). Repeatable.
    #[arg(long, value_name = "CALL:RATE")]
    pub fail: Vec<String>,
    /// Persist the array in this file (fsynced after every change; loaded when it exists).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    #[arg(long, default_value = super::ontap::DEFAULT_USERNAME)]
    pub username: String,
    #[arg(long, default_value = super::ontap::DEFAULT_PASSWORD, env = "STORCH_SIM_PASSWORD")]
    pub password: String,
    /// Most records per iterator page (ZAPI) and per collection page (REST).
    #[arg(long, default_value_t = 100)]
    pub page_size: usize,
    /// Polls an async job stays running (ZAPI job-get-iter, REST /api/cluster/jobs/{uuid}).
    #[arg(long, default_value_t = 1)]
    pub async_polls: u32,
    /// Simulate an SVM-scoped user (vsadmin) of this SVM instead of a cluster admin.
    #[arg(long, value_name = "SVM")]
    pub svm_user: Option<String>,
    /// REST collection GETs that do not list a volume or qtree yet after its create (ONTAP's
    /// eventual visibility after a job).
    #[arg(long, default_value_t = 0)]
    pub visible_after: u32,
    /// Which APIs to serve: rest (/api only), zapi (the servlet only) or both.
    #[arg(long, default_value = "both")]
    pub api: String,
    /// The ONTAP release reported (GET /api/cluster), e.g. 9.15.1. Default: 9.15.1 with
    /// `--api rest`, else the release matching --ontapi (1.180 → 9.8.0).
    #[arg(long, value_name = "VERSION")]
    pub ontap_version: Option<String>,
    /// The ONTAPI version reported, MAJOR.MINOR. Default: the one matching --ontap-version,
    /// else 1.180.
    #[arg(long)]
    pub ontapi: Option<String>,
}

impl OntapArgs {
    pub fn options(&self) -> Result<SimOptions, String> {
        let aggregates = AggregateSpec::parse_list(&self.aggregates)?;
        if aggregates.is_empty() {
            return Err("--aggregates: at least one aggregate is needed".into());
        }
        let fail = self
            .fail
            .iter()
            .map(|f| FailRule::parse(f))
            .collect::<Result<Vec<_>, _>>()?;
        let api = ApiMode::parse(&self.api)?;
        let mut ontap_version = self
            .ontap_version
            .as_deref()
            .map(parse_release)
            .transpose()?;
        if ontap_version.is_none() && self.ontapi.is_none() && api == ApiMode::Rest {
            ontap_version = Some([9, 15, 1]);
        }
        let ontapi = match &self.ontapi {
            Some(v) => v
                .split_once('.')
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                .ok_or("--ontapi: expected MAJOR.MINOR such as 1.180")?,
            None => ontap_version.map(ontapi_of).unwrap_or((1, 180)),
        };
        Ok(SimOptions {
            listen: self.serving.listen,
            tls: self.serving.tls,
            cert_out: self.serving.cert_out.clone(),
            svm: self.svm.clone(),
            aggregates,
            latency: self.serving.latency(),
            fail,
            state: self.state.clone(),
            username: self.username.clone(),
            password: self.password.clone(),
            ontapi,
            ontap_version,
            api,
            visible_after: self.visible_after,
            scope: match &self.svm_user {
                Some(s) => UserScope::Svm(s.clone()),
                None => UserScope::Cluster,
            },
            tuning: Tuning {
                page_cap: self.page_size.max(1),
                async_polls: self.async_polls,
            },
        })
    }
}

#[derive(Debug, clap::Args)]
pub struct SolidFireArgs {
    #[command(flatten)]
    pub serving: Serving,
    /// The management virtual IP the cluster reports (GetClusterInfo).
    #[arg(long, default_value = "127.0.0.1")]
    pub mvip: String,
    /// The storage virtual IP and iSCSI port the cluster reports.
    #[arg(long, value_name = "IP:PORT", default_value = "127.0.0.1:3260")]
    pub svip: String,
    /// An account that exists on a new cluster (drivers create theirs when missing).
    #[arg(long, value_name = "NAME")]
    pub tenant: Option<String>,
    /// Bytes the volumes of a new cluster may provision (e.g. 10TiB).
    #[arg(long, value_name = "SIZE")]
    pub capacity: String,
    /// The cluster's IOPS ceiling for maxIOPS and burstIOPS.
    #[arg(long, default_value_t = super::solidfire::DEFAULT_MAX_IOPS)]
    pub max_iops: u64,
    /// Persist the cluster in this file (fsynced after every change; loaded when it exists).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Inject failures: METHOD:RATE[:ERRNAME] (repeatable; METHOD * for all; default name
    /// xDBConnectionLoss).
    #[arg(long, value_name = "METHOD:RATE")]
    pub fail: Vec<String>,
    #[arg(long, default_value = super::solidfire::DEFAULT_USERNAME)]
    pub username: String,
    #[arg(long, default_value = super::solidfire::DEFAULT_PASSWORD, env = "STORCH_SIM_PASSWORD")]
    pub password: String,
    /// Most volumes or access groups per list page.
    #[arg(long, default_value_t = 10_000)]
    pub page_size: usize,
    /// Polls (list calls or GetAsyncResult) a clone stays invisible and its job running.
    #[arg(long, default_value_t = 1)]
    pub clone_polls: u32,
    /// Polls a created volume stays out of the lists.
    #[arg(long, default_value_t = 0)]
    pub create_polls: u32,
}

impl SolidFireArgs {
    pub fn options(&self) -> Result<sf::SimOptions, String> {
        let capacity =
            crate::model::parse_size(&self.capacity).map_err(|e| format!("--capacity: {e}"))?;
        if self
            .svip
            .rsplit_once(':')
            .is_none_or(|(ip, port)| ip.is_empty() || port.parse::<u16>().is_err())
        {
            return Err(format!("--svip {:?}: expected IP:PORT", self.svip));
        }
        if self.max_iops < 100 {
            return Err("--max-iops: at least 100".into());
        }
        let fail = self
            .fail
            .iter()
            .map(|f| sf::FailRule::parse(f))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(sf::SimOptions {
            listen: self.serving.listen,
            tls: self.serving.tls,
            cert_out: self.serving.cert_out.clone(),
            cluster: sf::ClusterSpec {
                mvip: self.mvip.clone(),
                svip: self.svip.clone(),
                capacity,
                max_iops: self.max_iops,
                tenant: self.tenant.clone(),
            },
            latency: self.serving.latency(),
            fail,
            state: self.state.clone(),
            username: self.username.clone(),
            password: self.password.clone(),
            tuning: sf::Tuning {
                page_cap: self.page_size.max(1),
                clone_polls: self.clone_polls,
                create_polls: self.create_polls,
            },
        })
    }
}

#[derive(Debug, clap::Args)]
pub struct EseriesArgs {
    #[command(flatten)]
    pub serving: Serving,
    /// Pools of a new array: NAME:MEDIA:SIZE[:RAID][:offline][:no-da],… (media hdd or ssd;
    /// RAID raid0, raid1, raid3, raid5, raid6 (default) or raidDiskPool).
    #[arg(long, default_value = es::DEFAULT_POOLS)]
    pub pools: String,
    /// Management addresses of the array's controllers, A,B (registrations must name these).
    #[arg(long, value_name = "A,B", default_value = es::DEFAULT_CONTROLLERS)]
    pub controllers: String,
    /// IPv4 addresses of the iSCSI portals, spread over the controllers.
    #[arg(long, value_name = "IP,…", default_value = es::DEFAULT_PORTALS)]
    pub portals: String,
    /// The array's password (applied at every start; the proxy keeps its own copy).
    #[arg(long, default_value = "", env = "STORCH_SIM_ARRAY_PASSWORD")]
    pub array_password: String,
    /// The array is offline: array-scoped requests answer 424 (applied at every start).
    #[arg(long)]
    pub offline: bool,
    /// What the array supports beyond Trident 18.07: expand, copy (comma-separated), or none
    /// (applied at every start).
    #[arg(long, default_value = "expand,copy")]
    pub features: String,
    /// Host groups a new array has, NAME,… (default none, as on a fresh array).
    #[arg(long, value_name = "NAME,…", default_value = "")]
    pub host_groups: String,
    /// Proxy user.
    #[arg(long, default_value = es::DEFAULT_USERNAME)]
    pub username: String,
    #[arg(long, default_value = es::DEFAULT_PASSWORD, env = "STORCH_SIM_PASSWORD")]
    pub password: String,
    /// Persist the proxy and array in this file (fsynced after every change; loaded when it
    /// exists).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Inject failures: [METHOD@]PATH:RATE[:STATUS[/after|/untagged]] (repeatable; PATH below
    /// /devmgr/v2/storage-systems/{id}/ unless it starts with storage-systems; * one segment,
    /// a final ** any; default status 424).
    #[arg(long, value_name = "PATH:RATE")]
    pub fail: Vec<String>,
    /// Progress reads before a volume expansion completes.
    #[arg(long, default_value_t = 2)]
    pub expand_polls: u32,
    /// Reads of a volume copy job before it completes.
    #[arg(long, default_value_t = 2)]
    pub copy_polls: u32,
}

impl EseriesArgs {
    pub fn options(&self) -> Result<es::SimOptions, String> {
        let pools = es::PoolSpec::parse_list(&self.pools)?;
        let controllers: Vec<String> = self
            .controllers
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        if controllers.is_empty()
            || controllers.len() > 2
            || controllers.iter().any(String::is_empty)
            || controllers.first() == controllers.get(1)
        {
            return Err(format!(
                "--controllers {:?}: one or two different addresses, A,B",
                self.controllers
            ));
        }
        let portals: Vec<String> = self
            .portals
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        if let Some(bad) = portals
            .iter()
            .find(|p| p.parse::<std::net::Ipv4Addr>().is_err())
        {
            return Err(format!("--portals: {bad:?} is not an IPv4 address"));
        }
        let host_groups: Vec<String> = self
            .host_groups
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_string)
            .collect();
        for (i, g) in host_groups.iter().enumerate() {
            if g.chars().count() > 30 || host_groups[..i].contains(g) {
                return Err(format!(
                    "--host-groups: {g:?} is longer than 30 characters or named twice"
                ));
            }
        }
        let fail = self
            .fail
            .iter()
            .map(|f| es::FailRule::parse(f))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(es::SimOptions {
            listen: self.serving.listen,
            tls: self.serving.tls,
            cert_out: self.serving.cert_out.clone(),
            array: es::ArraySpec {
                pools,
                controllers,
                portals,
                password: self.array_password.clone(),
                offline: self.offline,
                features: es::Features::parse(&self.features)?,
                host_groups,
            },
            latency: self.serving.latency(),
            fail,
            state: self.state.clone(),
            username: self.username.clone(),
            password: self.password.clone(),
            tuning: es::Tuning {
                expand_polls: self.expand_polls,
                copy_polls: self.copy_polls,
            },
        })
    }
}

#[derive(Debug, clap::Args)]
pub struct NexentaArgs {
    #[command(flatten)]
    pub serving: Serving,
    /// Address of the plain-HTTP control listener (/__sim/down, /__sim/up,
    /// /__sim/expire-tokens, /__sim/status; printed as the second line).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub control: SocketAddr,
    /// Volume groups of a new appliance, POOL/VG:SIZE,… (SIZE is the pool's; volume groups of
    /// one pool name the same size).
    #[arg(long, value_name = "POOL/VG:SIZE,…", default_value = nx::DEFAULT_VOLUME_GROUPS)]
    pub volume_groups: String,
    /// Persist the appliance in this file (fsynced after every change; loaded when it exists).
    /// Two instances given the same file are the two nodes of an HA pair.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Inject failures: [METHOD@]PATH:RATE[:STATUS[/CODE]] (repeatable; PATH such as
    /// storage/volumes or storage/volumes/*, a final ** any rest; default 500 EBUSY).
    #[arg(long, value_name = "PATH:RATE")]
    pub fail: Vec<String>,
    /// Start down: every connection is closed at once until POST /__sim/up.
    #[arg(long)]
    pub down: bool,
    #[arg(long, default_value = nx::DEFAULT_USERNAME)]
    pub username: String,
    #[arg(long, default_value = nx::DEFAULT_PASSWORD, env = "STORCH_SIM_PASSWORD")]
    pub password: String,
    /// Seconds a login token is valid.
    #[arg(long, default_value_t = nx::DEFAULT_TOKEN_TTL.as_secs())]
    pub token_ttl_secs: u64,
    /// Most items per collection page (also the default limit).
    #[arg(long, default_value_t = 100)]
    pub page_size: usize,
    /// Polls of /jobStatus/<id> answered 202 before a job runs (0: no jobs, answer at once).
    #[arg(long, default_value_t = 1)]
    pub job_polls: u32,
}

impl NexentaArgs {
    pub fn options(&self) -> Result<nx::SimOptions, String> {
        let volume_groups = nx::VolumeGroupSpec::parse_list(&self.volume_groups)?;
        if self.token_ttl_secs == 0 {
            return Err("--token-ttl-secs: at least 1".into());
        }
        if self.page_size == 0 {
            return Err("--page-size: at least 1".into());
        }
        if self.username.is_empty() || self.password.is_empty() {
            return Err("--username and --password must not be empty".into());
        }
        let fail = self
            .fail
            .iter()
            .map(|f| nx::FailRule::parse(f))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(nx::SimOptions {
            listen: self.serving.listen,
            control: self.control,
            tls: self.serving.tls,
            cert_out: self.serving.cert_out.clone(),
            volume_groups,
            latency: self.serving.latency(),
            fail,
            state: self.state.clone(),
            username: self.username.clone(),
            password: self.password.clone(),
            token_ttl: Duration::from_secs(self.token_ttl_secs),
            down: self.down,
            tuning: nx::Tuning {
                page_cap: self.page_size,
                job_polls: self.job_polls,
            },
        })
    }
}

/// Runs the simulator until SIGINT or SIGTERM.
pub async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Ontap(args) => serve(OntapSim::start(args.options()?).await).await,
        Command::Solidfire(args) => serve(sf::SolidFireSim::start(args.options()?).await).await,
        Command::Eseries(args) => serve(es::EseriesSim::start(args.options()?).await).await,
        Command::Nexentastor(args) => serve(nx::NexentaSim::start(args.options()?).await).await,
    }
}

/// Announces a started simulator, waits for SIGINT or SIGTERM, then stops it.
async fn serve<S: Simulator>(started: Result<S, SimError>) -> Result<(), String> {
    let sim = started.map_err(|e| e.to_string())?;
    let (stderr, stdout) = announcement(&sim);
    for line in stderr {
        eprintln!("{line}");
    }
    for line in stdout {
        println!("{line}");
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    wait_for_signal().await;
    sim.shut_down().await;
    Ok(())
}

/// What the binary prints once a simulator listens: on stderr where its certificate is (with
/// `--tls`); on stdout first where it listens (tests and docs parse that line), then its
/// [`Simulator::more_lines`].
fn announcement<S: Simulator>(sim: &S) -> (Vec<String>, Vec<String>) {
    let name = S::NAME;
    let stderr = sim
        .listening()
        .cert_path()
        .map(|p| format!("storch-sim {name} certificate written to {}", p.display()))
        .into_iter()
        .collect();
    let mut stdout = vec![format!(
        "storch-sim {name} listening on {}",
        sim.listening().url()
    )];
    stdout.extend(sim.more_lines());
    (stderr, stdout)
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_announcement_names_the_simulator_its_url_and_certificate() {
        crate::net::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("nx.pem");
        let sim = nx::NexentaSim::start(nx::SimOptions {
            tls: true,
            cert_out: Some(cert.clone()),
            ..nx::SimOptions::default()
        })
        .await
        .unwrap();
        let (stderr, stdout) = announcement(&sim);
        assert_eq!(
            stderr,
            [format!(
                "storch-sim nexentastor certificate written to {}",
                cert.display()
            )]
        );
        assert_eq!(
            stdout,
            [
                format!("storch-sim nexentastor listening on https://{}", sim.addr()),
                format!("storch-sim nexentastor control on {}", sim.control_url()),
            ]
        );
        sim.shut_down().await;

        // Without --tls: no certificate line, and one stdout line.
        let sim = OntapSim::start(SimOptions::default()).await.unwrap();
        let (stderr, stdout) = announcement(&sim);
        assert!(stderr.is_empty(), "{stderr:?}");
        assert_eq!(
            stdout,
            [format!(
                "storch-sim ontap listening on http://{}",
                sim.addr()
            )]
        );
        sim.shut_down().await;
    }
}

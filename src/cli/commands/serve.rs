//! `storch serve`: start the core, serve the REST API (HTTP or HTTPS, optionally behind a
//! bearer token) until SIGINT or SIGTERM, then stop the server and shut the core down cleanly.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio::net::TcpListener;

use crate::actors::{CoreError, CoreRuntime};
use crate::api::{AuthToken, RouterOptions, ServeOptions};
use crate::cli::settings::ServeSettings;

/// Exit status used when a second signal aborts a graceful shutdown.
const FORCED_EXIT_CODE: i32 = 130;

/// Why `storch serve` stopped with an error. Messages leave the cause to `source()`, so
/// `{:#}` chains (as the binary prints them) show each cause once.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("could not install signal handlers")]
    Signals(#[source] std::io::Error),
    #[error("could not start the core")]
    Core(#[source] CoreError),
    #[error("could not start the Kubernetes frontend")]
    Kube(#[source] crate::k8s::KubeError),
    #[error("could not start the CSI frontend")]
    Csi(#[source] crate::csi::CsiError),
    #[error("could not listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the REST server failed")]
    Server(#[source] std::io::Error),
    #[error("cannot use etcd: {0}")]
    Etcd(String),
    #[error(
        "stopped writing because this instance lost its etcd leadership ({0}); start it again \
         to rejoin as a standby"
    )]
    LostLeadership(String),
    #[error("could not set up TLS")]
    Tls(#[source] crate::api::tls::TlsError),
    #[error("cannot read --auth-token-file {}", path.display())]
    TokenFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("unusable token in --auth-token-file {}", path.display())]
    Token {
        path: PathBuf,
        #[source]
        source: crate::api::auth::TokenError,
    },
}

/// Runs the server on a new multi-thread tokio runtime until a signal stops it.
pub fn run(settings: ServeSettings) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("storch-worker")
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(serve(settings))
}

async fn serve(settings: ServeSettings) -> Result<(), ServeError> {
    // First, so that a signal arriving during start-up still leads to a clean stop.
    let signals = Signals::install().map_err(ServeError::Signals)?;
    let options = serve_options(&settings)?;
    warn_if_insecure(&settings, &options);

    tracing::info!(data_dir = %settings.data_dir.display(), "starting the core");
    let mut core_options = settings.core_options();
    let node = replication_node(&settings)?;
    core_options.replication = node.clone();
    let lost = node.as_ref().map(|n| n.lost());
    let core_runtime = CoreRuntime::start(core_options)
        .await
        .map_err(ServeError::Core)?;

    // The frontend connects before the API listens, so that a wrong cluster setting stops the
    // start before anything is announced.
    let kube = match settings.kube.clone() {
        None => None,
        Some(opts) => match crate::k8s::Frontend::start(core_runtime.core(), opts).await {
            Ok(frontend) => Some(frontend),
            Err(e) => {
                core_runtime.shutdown().await;
                return Err(ServeError::Kube(e));
            }
        },
    };
    let csi = match settings.csi.clone() {
        None => Ok(None),
        Some(opts) => crate::csi::CsiServer::start(core_runtime.core(), opts)
            .await
            .map(Some)
            .map_err(ServeError::Csi),
    };
    let bound = match (csi, bind(settings.listen).await) {
        (Ok(csi), Ok(listener)) => match listener.local_addr() {
            Ok(local) => Ok((listener, local, csi)),
            Err(source) => {
                stop_csi(csi).await;
                Err(ServeError::Bind {
                    addr: settings.listen,
                    source,
                })
            }
        },
        (Ok(csi), Err(e)) => {
            stop_csi(csi).await;
            Err(e)
        }
        (Err(e), _) => Err(e),
    };
    let (listener, local, csi) = match bound {
        Ok(bound) => bound,
        Err(e) => {
            if let Some(frontend) = kube {
                frontend.shutdown().await;
            }
            core_runtime.shutdown().await;
            return Err(e);
        }
    };
    announce(local, options.tls.is_some());
    tracing::info!(address = %local, "REST API listening");

    let lost_reason = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let lost_slot = lost_reason.clone();
    let shutdown = until_stopped(signals, lost, lost_slot);
    let declarative = settings.config.clone().map(|config| {
        let core = core_runtime.core();
        core.expect_config();
        tokio::spawn(apply_config_forever(core, config))
    });
    let served = crate::api::serve_with(listener, core_runtime.core(), options, shutdown).await;
    if let Some(task) = declarative {
        task.abort();
    }
    if let Some(frontend) = kube {
        tracing::info!("stopping the Kubernetes frontend");
        frontend.shutdown().await;
    }
    stop_csi(csi).await;

    tracing::info!("REST server stopped; shutting down the core");
    core_runtime.shutdown().await;
    tracing::info!("storch stopped");
    served.map_err(ServeError::Server)?;
    let lost = lost_reason.lock().unwrap_or_else(|e| e.into_inner()).take();
    match lost {
        Some(reason) => Err(ServeError::LostLeadership(reason)),
        None => Ok(()),
    }
}

/// Stops the CSI server, if one runs, and removes its socket.
async fn stop_csi(csi: Option<crate::csi::CsiServer>) {
    if let Some(server) = csi {
        tracing::info!("stopping the CSI frontend");
        server.shutdown().await;
    }
}

/// Warns that `--insecure-listen` exposes storch without TLS, a token, or both.
fn warn_if_insecure(settings: &ServeSettings, options: &ServeOptions) {
    if settings.insecure_listen {
        let missing = match (options.tls.is_some(), options.router.auth.is_some()) {
            (false, false) => "without TLS and without a bearer token",
            (false, true) => "without TLS (the token travels in clear text)",
            (true, false) => "without a bearer token",
            (true, true) => "",
        };
        tracing::warn!(
            address = %settings.listen.ip(),
            "INSECURE: listening on a non-loopback address {missing} (--insecure-listen): \
             anyone who can reach this port controls storch"
        );
    }
}

/// The etcd replication node, when replication is configured.
fn replication_node(
    settings: &ServeSettings,
) -> Result<Option<std::sync::Arc<crate::replication::Node>>, ServeError> {
    Ok(match &settings.replication {
        Some(opts) => {
            let node = crate::replication::Node::new(opts.clone()).map_err(ServeError::Etcd)?;
            tracing::info!(
                endpoints = ?node.endpoints(),
                prefix = %opts.prefix,
                identity = %node.identity(),
                "replicating the event log through etcd"
            );
            Some(node)
        }
        None => None,
    })
}

/// Resolves at the first signal, or when this instance loses its etcd leadership (the reason
/// goes to `lost_slot`). A second signal then exits at once.
async fn until_stopped(
    mut signals: Signals,
    mut lost: Option<tokio::sync::watch::Receiver<Option<String>>>,
    lost_slot: std::sync::Arc<std::sync::Mutex<Option<String>>>,
) {
    let leadership_lost = async {
        match lost.as_mut() {
            Some(rx) => {
                let seen = rx.wait_for(Option::is_some).await.map(|r| r.clone());
                match seen {
                    Ok(reason) => reason.unwrap_or_default(),
                    Err(_) => std::future::pending().await,
                }
            }
            None => std::future::pending().await,
        }
    };
    let signal = tokio::select! {
        signal = signals.recv() => signal,
        reason = leadership_lost => {
            tracing::error!(%reason, "lost the etcd leadership; shutting down");
            *lost_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
            "leadership lost"
        }
    };
    tracing::info!(signal, "shutting down (send it again to exit at once)");
    tokio::spawn(async move {
        let signal = signals.recv().await;
        tracing::warn!(signal, "second signal: exiting without a clean shutdown");
        std::process::exit(FORCED_EXIT_CODE);
    });
}

/// Applies the config file once the core is ready, then again on every SIGHUP (re-reading the
/// file; a file that no longer parses is reported and changes nothing).
async fn apply_config_forever(core: crate::actors::Core, mut config: crate::config::FileConfig) {
    if core.wait_ready().await.is_err() {
        return;
    }
    #[cfg(unix)]
    let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP; config reloads are off");
            None
        }
    };
    loop {
        apply_config(&core, &config).await;
        #[cfg(unix)]
        {
            let Some(h) = hangup.as_mut() else { return };
            if h.recv().await.is_none() {
                return;
            }
        }
        #[cfg(not(unix))]
        return;
        tracing::info!(file = %config.path.display(), "SIGHUP: reloading the config file");
        match crate::config::FileConfig::from_file(&config.path) {
            Ok(new) => {
                if new.server != config.server {
                    tracing::warn!(
                        "server settings changed in the config file; they take effect at the next start"
                    );
                }
                config = new;
            }
            Err(e) => {
                tracing::error!(error = %e, "config reload refused; nothing changed");
                continue;
            }
        }
    }
}

async fn apply_config(core: &crate::actors::Core, config: &crate::config::FileConfig) {
    apply_config_once(core, config).await;
    core.config_applied();
}

async fn apply_config_once(core: &crate::actors::Core, config: &crate::config::FileConfig) {
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    let ctx = crate::actors::RequestCtx::new(format!("config:{}", config.path.display()));
    match core.apply_declared(&ctx, config.declared()).await {
        Ok(report) => {
            tracing::info!(
                file = %config.path.display(),
                backends_added = ?report.backends_added,
                backends_updated = ?report.backends_updated,
                backends_removed = ?report.backends_removed,
                classes_added = ?report.classes_added,
                classes_updated = ?report.classes_updated,
                classes_removed = ?report.classes_removed,
                unchanged = report.backends_unchanged.len() + report.classes_unchanged.len(),
                "config file applied"
            );
            for e in &report.errors {
                tracing::error!(file = %config.path.display(), error = %e, "config entry not applied; retried at the next reload");
            }
        }
        Err(e) => {
            tracing::error!(file = %config.path.display(), error = %e, "config file not applied")
        }
    }
}

/// TLS and the token, read from their files before anything else starts.
fn serve_options(settings: &ServeSettings) -> Result<ServeOptions, ServeError> {
    let tls = match &settings.tls {
        Some(files) => {
            Some(crate::api::tls::acceptor(&files.cert, &files.key).map_err(ServeError::Tls)?)
        }
        None => None,
    };
    let auth = match &settings.auth_token_file {
        Some(path) => Some(read_token(path)?),
        None => None,
    };
    Ok(ServeOptions {
        router: RouterOptions { auth },
        tls,
        ..ServeOptions::default()
    })
}

fn read_token(path: &Path) -> Result<AuthToken, ServeError> {
    let text = std::fs::read_to_string(path).map_err(|source| ServeError::TokenFile {
        path: path.to_path_buf(),
        source,
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            // Group bits are left alone: a Kubernetes Secret mounted for a non-root pod is
            // group-readable (fsGroup) by design.
            && meta.permissions().mode() & 0o007 != 0
        {
            tracing::warn!(
                file = %path.display(),
                "the auth token file is readable by every user; chmod o-rwx it"
            );
        }
    }
    AuthToken::new(&text).map_err(|source| ServeError::Token {
        path: path.to_path_buf(),
        source,
    })
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// The one line on stdout, for people and for tests that start with `--port 0`.
fn announce(local: SocketAddr, tls: bool) {
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{}", listening_line(local, tls)).and_then(|()| stdout.flush());
    if let Err(e) = written {
        tracing::warn!(error = %e, "could not write the listening line to stdout");
    }
}

/// `storch listening on http://ADDR:PORT`, or `https://` with TLS (IPv6 addresses in
/// brackets).
pub fn listening_line(local: SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    format!("storch listening on {scheme}://{local}")
}

/// SIGINT and SIGTERM (Ctrl-C elsewhere), registered once at start (also by `csi node`).
pub(crate) struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    pub(crate) fn install() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {})
        }
    }

    /// Waits for the next signal and names it.
    pub(crate) async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "SIGINT",
                _ = self.terminate.recv() => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_line() {
        assert_eq!(
            listening_line("127.0.0.1:8000".parse().unwrap(), false),
            "storch listening on http://127.0.0.1:8000"
        );
        assert_eq!(
            listening_line("[::1]:41234".parse().unwrap(), false),
            "storch listening on http://[::1]:41234"
        );
        assert_eq!(
            listening_line("0.0.0.0:8443".parse().unwrap(), true),
            "storch listening on https://0.0.0.0:8443"
        );
    }
}

//! Raw command-line arguments (clap derive). Every serve flag also reads a `STORCH_*`
//! environment variable; a flag on the command line wins.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::logging::LogFormat;

/// storch: a storage orchestrator speaking the Trident 18.07 REST API.
#[derive(Debug, Parser)]
#[command(name = "storch", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server: the core (event log, actors) and the REST API.
    Serve(ServeArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Where the event log and the secrets key live (created if missing).
    #[arg(
        long,
        env = "STORCH_DATA_DIR",
        value_name = "DIR",
        default_value = "./storch-data"
    )]
    pub data_dir: PathBuf,

    /// The IP address the REST API listens on. A non-loopback address needs --tls-cert,
    /// --tls-key and --auth-token-file (or --insecure-listen).
    #[arg(
        long,
        env = "STORCH_ADDRESS",
        value_name = "ADDR",
        default_value = "127.0.0.1"
    )]
    pub address: String,

    /// The TCP port of the REST API; 0 picks a free one (the bound port is printed).
    #[arg(long, env = "STORCH_PORT", value_name = "PORT", default_value_t = 8000)]
    pub port: u16,

    /// Log format on stderr; the level filter comes from RUST_LOG (default `info`).
    #[arg(
        long,
        env = "STORCH_LOG_FORMAT",
        value_enum,
        value_name = "FORMAT",
        default_value_t = LogFormat::Text
    )]
    pub log_format: LogFormat,

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
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use clap::CommandFactory;

    use super::*;

    /// Parsing reads `STORCH_*` variables, so tests that parse or set them take turns.
    static ENV_LOCK: Mutex<()> = Mutex::new(());

    const VARS: [&str; 8] = [
        "STORCH_DATA_DIR",
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
            Command::Serve(args) => Ok(args),
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
        assert_eq!(args.data_dir, PathBuf::from("./storch-data"));
        assert_eq!(args.address, "127.0.0.1");
        assert_eq!(args.port, 8000);
        assert_eq!(args.log_format, LogFormat::Text);
        assert!(!args.insecure_listen);
        assert_eq!(args.tls_cert, None);
        assert_eq!(args.tls_key, None);
        assert_eq!(args.auth_token_file, None);
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
        assert_eq!(args.data_dir, PathBuf::from("/var/lib/storch"));
        assert_eq!(args.address, "::1");
        assert_eq!(args.port, 0);
        assert_eq!(args.log_format, LogFormat::Json);
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
        assert_eq!(args.data_dir, PathBuf::from("/srv/storch"));
        assert_eq!(args.port, 9000);
        assert_eq!(args.log_format, LogFormat::Json);
        assert!(args.insecure_listen);
        assert_eq!(args.auth_token_file, Some(PathBuf::from("/run/token")));
        let args = serve_args(&["storch", "serve", "--port", "7000"]).unwrap();
        assert_eq!(args.port, 7000);
        clear_env();
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

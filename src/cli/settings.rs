//! Validated settings, built from [`ServeArgs`] before any work starts.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use crate::actors::CoreOptions;

use super::args::ServeArgs;
use super::logging::LogFormat;

/// What `storch serve` runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeSettings {
    pub data_dir: PathBuf,
    /// Where the REST API listens (port 0: any free port).
    pub listen: SocketAddr,
    pub log_format: LogFormat,
    /// The address is not loopback and the operator accepted that (logged loudly at start).
    pub insecure_listen: bool,
}

/// Why the arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("--data-dir must not be empty")]
    EmptyDataDir,
    #[error("invalid --address {0:?}: expected an IP address such as 127.0.0.1 or ::1")]
    BadAddress(String),
    #[error(
        "refusing to listen on {0}: it is not a loopback address, and the REST API has no TLS \
         and no authentication yet (anyone who can reach it controls storch); use a loopback \
         address, or pass --insecure-listen to accept the risk"
    )]
    NotLoopback(IpAddr),
}

impl ServeArgs {
    /// Checks the arguments: a non-empty data dir, an IP address (or `localhost`), and a
    /// loopback address unless `--insecure-listen` is given.
    pub fn into_settings(self) -> Result<ServeSettings, SettingsError> {
        if self.data_dir.as_os_str().is_empty() {
            return Err(SettingsError::EmptyDataDir);
        }
        let ip = parse_address(&self.address)?;
        let loopback = ip.to_canonical().is_loopback();
        if !loopback && !self.insecure_listen {
            return Err(SettingsError::NotLoopback(ip));
        }
        Ok(ServeSettings {
            data_dir: self.data_dir,
            listen: SocketAddr::new(ip, self.port),
            log_format: self.log_format,
            insecure_listen: !loopback,
        })
    }
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
            ..CoreOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(address: &str, insecure: bool) -> ServeArgs {
        ServeArgs {
            data_dir: PathBuf::from("./storch-data"),
            address: address.to_string(),
            port: 8000,
            log_format: LogFormat::Text,
            insecure_listen: insecure,
        }
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
            assert!(matches!(err, SettingsError::NotLoopback(_)), "{address}");
            let msg = err.to_string();
            assert!(msg.contains("--insecure-listen"), "{msg}");
            assert!(msg.contains("TLS"), "{msg}");
            let s = args(address, true).into_settings().unwrap();
            assert!(s.insecure_listen, "{address}");
        }
        // The override on a loopback address changes nothing.
        let s = args("127.0.0.1", true).into_settings().unwrap();
        assert!(!s.insecure_listen);
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
        a.data_dir = PathBuf::new();
        assert_eq!(a.into_settings().unwrap_err(), SettingsError::EmptyDataDir);
    }

    #[test]
    fn settings_to_core_options() {
        let mut a = args("127.0.0.1", false);
        a.data_dir = PathBuf::from("/tmp/x");
        a.port = 0;
        let s = a.into_settings().unwrap();
        assert_eq!(s.listen.port(), 0);
        let opts = s.core_options();
        assert_eq!(opts.data_dir, PathBuf::from("/tmp/x"));
        assert_eq!(opts.volume_idle, CoreOptions::default().volume_idle);
    }
}

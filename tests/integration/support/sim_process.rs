//! `storch-sim` as a child process, started the way a user starts it (the lab,
//! docs/lab.md): on 127.0.0.1:0, over TLS, with its certificate and its `--state` file in a
//! directory of the test. The state file is the simulator's whole array, written before each
//! answer, so a test reads what the array holds from it. Killed when dropped.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running `storch-sim FAMILY …`.
pub struct SimProcess {
    child: Child,
    /// `127.0.0.1:PORT`, as the simulator printed it.
    pub addr: String,
    /// The certificate written by `--cert-out`.
    pub cert: PathBuf,
    /// The `--state` file.
    pub state: PathBuf,
}

impl SimProcess {
    /// `storch-sim FAMILY --listen 127.0.0.1:0 --tls --cert-out DIR/FAMILY.pem --state
    /// DIR/FAMILY.json ARGS…`; waits for its listening line.
    pub fn spawn(dir: &Path, family: &str, args: &[&str]) -> SimProcess {
        let cert = dir.join(format!("{family}.pem"));
        let state = dir.join(format!("{family}.json"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_storch-sim"))
            .args([family, "--listen", "127.0.0.1:0", "--tls", "--cert-out"])
            .arg(&cert)
            .arg("--state")
            .arg(&state)
            .args(args)
            .env_remove("STORCH_SIM_PASSWORD")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("storch-sim starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let prefix = format!("storch-sim {family} listening on https://");
        let Some(addr) = line.trim().strip_prefix(&prefix).map(str::to_string) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("storch-sim {family}: unexpected first line {line:?}");
        };
        SimProcess {
            child,
            addr,
            cert,
            state,
        }
    }

    /// The simulator's self-signed certificate, to trust (`trustedCACertificate`).
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(&self.cert).expect("the simulator wrote its certificate")
    }

    /// The array as the state file holds it now (`storch::sim::ontap::Array`,
    /// `storch::sim::solidfire::Cluster`).
    pub fn array<T: serde::de::DeserializeOwned>(&self) -> T {
        let text = std::fs::read_to_string(&self.state).expect("the simulator's state file");
        serde_json::from_str(&text).expect("a state file the simulator wrote")
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

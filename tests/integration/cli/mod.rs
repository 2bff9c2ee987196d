//! End-to-end tests of the `storch` client verbs and offline audits: the real binary against
//! a real `storch serve` child.

mod disk;
mod drift;
mod edges;
mod events;
mod https;
mod offline;
mod verbs;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support;

/// What a `storch` run printed and how it ended.
#[derive(Debug)]
pub(crate) struct Out {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Out {
    #[track_caller]
    pub(crate) fn ok(self) -> Out {
        assert_eq!(self.code, 0, "expected success: {self:#?}");
        assert!(self.stderr.is_empty(), "stderr: {}", self.stderr);
        self
    }

    /// Exit 1 and an `Error: …` line containing `want`.
    #[track_caller]
    pub(crate) fn fails_with(self, want: &str) -> Out {
        assert_eq!(self.code, 1, "expected exit 1: {self:#?}");
        assert!(
            self.stderr.starts_with("Error: ") && self.stderr.contains(want),
            "expected an error with {want:?}: {self:#?}"
        );
        self
    }

    #[track_caller]
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }

    /// The data rows of a bordered table, each a list of trimmed cells, after checking the
    /// header row.
    #[track_caller]
    pub(crate) fn table(&self, headers: &[&str]) -> Vec<Vec<String>> {
        let rows: Vec<Vec<String>> = self
            .stdout
            .lines()
            .filter(|l| l.starts_with('|'))
            .map(|l| {
                l.trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .collect();
        assert!(!rows.is_empty(), "no table: {}", self.stdout);
        assert_eq!(rows[0], headers, "{}", self.stdout);
        rows[1..].to_vec()
    }

    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

/// Runs the binary with a clean environment for server discovery (the lab's tests use it too).
pub(crate) fn storch(args: &[&str], envs: &[(&str, &str)], stdin: Option<&str>) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_storch"));
    cmd.args(args)
        .env_remove("STORCH_SERVER")
        .env_remove("TRIDENT_SERVER")
        .env_remove("STORCH_TOKEN")
        .env_remove("STORCH_CA_CERT")
        .env_remove("STORCH_DATA_DIR")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("storch runs");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    Out {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// A `storch serve` child ([`support::Server`]) and the flags every client call against it
/// needs.
struct Server {
    serve: support::Server,
    /// `http://127.0.0.1:PORT` (or https).
    url: String,
    data_dir: PathBuf,
    /// Flags every client call against this server needs (`--server`, TLS, token).
    client_flags: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    /// A fresh data dir in a temporary directory.
    fn start() -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let mut server = Server::start_on(&tmp.path().join("data"), &[]);
        server._tmp = Some(tmp);
        server
    }

    fn start_on(data_dir: &Path, extra: &[&str]) -> Server {
        let serve = support::Server::start_with(data_dir, extra, &[]);
        Server {
            url: serve.url.clone(),
            client_flags: vec!["--server".into(), serve.url.clone()],
            serve,
            data_dir: data_dir.to_path_buf(),
            _tmp: None,
        }
    }

    /// `storch --server URL ARGS…`
    fn run(&self, args: &[&str]) -> Out {
        self.run_with(args, None)
    }

    fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Out {
        let mut all: Vec<&str> = self.client_flags.iter().map(String::as_str).collect();
        all.extend(args);
        storch(&all, &[], stdin)
    }

    /// Waits (at most 30 s) until the API answers through the client (replay done).
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.run(&["get", "backend"]);
            if out.code == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server not ready: {out:#?}\nlog:\n{}",
                self.serve.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM and wait for a clean exit (the log is closed then).
    fn stop(&mut self) {
        self.serve.stop();
    }
}

const BACKEND_YAML: &str = "\
version: 1
storageDriverName: fake
backendName: lab
instanceName: lab
protocol: file
pools:
  fast:
    attributes:
      media: {offer: [ssd]}
      snapshots: {offer: true}
    sizeBytes: 107374182400
  slow:
    attributes:
      media: {offer: [hdd]}
    sizeBytes: 107374182400
";

/// A server with backend `lab` (pools fast: ssd, slow: hdd) and class `gold` (ssd).
fn server_with_lab() -> Server {
    let server = Server::start();
    server.wait_ready();
    let dir = server.data_dir.parent().unwrap().to_path_buf();
    let file = dir.join("backend.yaml");
    std::fs::write(&file, BACKEND_YAML).unwrap();
    server
        .run(&["create", "backend", "-f", file.to_str().unwrap()])
        .ok();
    server
        .run_with(
            &["create", "storageclass", "-f", "-"],
            Some(r#"{"name": "gold", "attributes": {"media": "ssd"}}"#),
        )
        .ok();
    server
}

fn create_volume(server: &Server, name: &str, size: &str) -> Out {
    server
        .run_with(
            &["create", "volume", "-f", "-"],
            Some(&format!("name: {name}\nsize: {size}\nstorageClass: gold\n")),
        )
        .ok()
}

/// The events of a stopped server's data dir, through `storch events export`.
fn export(data_dir: &Path) -> Vec<Value> {
    let out = storch(
        &["events", "export", "--data-dir", data_dir.to_str().unwrap()],
        &[],
        None,
    )
    .ok();
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

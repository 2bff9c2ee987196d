//! The real `storch serve` binary as a child process on 127.0.0.1:0: the one way tests start
//! a server process.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Variables of the test's own environment that would change how `serve` listens or logs;
/// removed so that only a test's arguments and `envs` decide.
const INHERITED: &[&str] = &[
    "RUST_LOG",
    "STORCH_ADDRESS",
    "STORCH_INSECURE_LISTEN",
    "STORCH_TLS_CERT",
    "STORCH_TLS_KEY",
    "STORCH_AUTH_TOKEN_FILE",
    "CSI_ENDPOINT",
    "STORCH_CSI_DRIVER_NAME",
];

/// `storch serve --port 0 --data-dir DATA_DIR EXTRA…` with `envs`: stdin closed, stdout piped
/// (its first line is the listening line), stderr to `DATA_DIR/../storch-<pid>-<n>.log`,
/// whose path is returned. For tests of a start-up that fails; [`Server::start_with`] for the
/// rest.
pub fn spawn(data_dir: &Path, extra: &[&str], envs: &[(&str, &str)]) -> (Child, PathBuf) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log_path = data_dir
        .parent()
        .unwrap()
        .join(format!("storch-{}-{n}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_storch"));
    cmd.args(["serve", "--port", "0", "--data-dir"])
        .arg(data_dir)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    for var in INHERITED {
        cmd.env_remove(var);
    }
    for (k, v) in envs {
        cmd.env(k, v);
    }
    (cmd.spawn().expect("storch starts"), log_path)
}

/// Waits (at most 30 s) for `child` to end by itself.
pub fn exit_status(child: &mut Child) -> std::process::ExitStatus {
    for _ in 0..3000 {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("storch did not exit");
}

/// A real `storch serve` child on 127.0.0.1:0, killed when dropped.
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    pub log_path: PathBuf,
}

impl Server {
    /// Starts the binary on `data_dir`; its log (stderr) goes to `data_dir/../storch-<n>.log`.
    pub fn start(data_dir: &Path, envs: &[(&str, &str)]) -> Server {
        Server::start_with(data_dir, &[], envs)
    }

    /// Like [`Server::start`], with extra `serve` arguments (e.g. `--config FILE`).
    pub fn start_with(data_dir: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Server {
        let (mut child, log_path) = spawn(data_dir, extra, envs);
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        let url = match line.trim().strip_prefix("storch listening on ") {
            Some(url) => url.to_string(),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "unexpected first line {line:?}; log:\n{}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                );
            }
        };
        Server {
            child,
            url,
            log_path,
        }
    }

    /// Polls until the API answers something other than 503 (replay done), at most 30 s.
    pub async fn wait_ready(&self, client: &reqwest::Client) {
        for _ in 0..3000 {
            if let Ok(r) = client
                .get(format!("{}/trident/v1/backend", self.url))
                .send()
                .await
                && r.status() != reqwest::StatusCode::SERVICE_UNAVAILABLE
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("server not ready; log:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Sends a signal by name (`HUP`, `TERM`, …).
    pub fn signal(&self, name: &str) {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{name} {pid} failed");
    }

    /// SIGKILL, no chance to clean up.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait (at most 30 s) for a clean exit.
    pub fn stop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..3000 {
            if let Ok(Some(status)) = self.child.try_wait() {
                assert!(
                    status.success(),
                    "storch exited with {status}; log:\n{}",
                    self.log()
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        panic!("storch did not stop on SIGTERM; log:\n{}", self.log());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}

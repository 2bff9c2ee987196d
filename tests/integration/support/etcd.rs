//! A real etcd (Debian's `etcd-server`, installed by `.ci/run`) on free loopback ports: it
//! can be killed and started again on the same ports and data, and is stopped and its data
//! removed when dropped.

use std::time::Duration;

pub struct Etcd {
    child: Option<std::process::Child>,
    pub endpoint: String,
    peer_url: String,
    data: tempfile::TempDir,
    /// More etcd flags (e.g. `--quota-backend-bytes`).
    extra: Vec<String>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Etcd {
    /// Starts a one-member etcd and waits until it answers. The free ports are picked before
    /// etcd binds them, so another test may take one in between: etcd then exits at once, and
    /// it is started again on other ports.
    pub async fn start() -> Etcd {
        Etcd::start_with(&[]).await
    }

    /// [`Etcd::start`] with more etcd flags.
    pub async fn start_with(extra: &[&str]) -> Etcd {
        let mut last = String::new();
        for _ in 0..5 {
            let mut etcd = Etcd {
                child: None,
                endpoint: format!("http://127.0.0.1:{}", free_port()),
                peer_url: format!("http://127.0.0.1:{}", free_port()),
                data: tempfile::tempdir().unwrap(),
                extra: extra.iter().map(|s| s.to_string()).collect(),
            };
            etcd.spawn();
            match etcd.answers().await {
                Ok(()) => return etcd,
                Err(exited) => last = exited,
            }
        }
        panic!("etcd did not start on free ports five times: {last}");
    }

    fn spawn(&mut self) {
        let child = std::process::Command::new("etcd")
            .args(["--name", "storch-test", "--data-dir"])
            .arg(self.data.path().join("etcd"))
            .args([
                "--listen-client-urls",
                &self.endpoint,
                "--advertise-client-urls",
                &self.endpoint,
            ])
            .args([
                "--listen-peer-urls",
                &self.peer_url,
                "--initial-advertise-peer-urls",
                &self.peer_url,
            ])
            .args([
                "--initial-cluster",
                &format!("storch-test={}", self.peer_url),
                "--initial-cluster-state",
                "new",
            ])
            .args(&self.extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("etcd runs (apt-get install etcd-server; .ci/run does)");
        self.child = Some(child);
    }

    /// Polls `/health` until etcd answers (up to ~20 s).
    pub async fn wait_up(&mut self) {
        if let Err(exited) = self.answers().await {
            panic!("{exited}");
        }
    }

    /// Polls `/health` until etcd answers; an etcd that exited (a port taken) is an error
    /// at once, a hang past ~20 s a panic.
    async fn answers(&mut self) -> Result<(), String> {
        let client = storch::net::client();
        for _ in 0..400 {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                return Err(format!("etcd at {} exited: {status}", self.endpoint));
            }
            if client
                .get(format!("{}/health", self.endpoint))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("etcd did not come up at {}", self.endpoint);
    }

    /// SIGKILL.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same ports and data, and waits until it answers.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn();
        self.wait_up().await;
    }

    /// A JSON gateway call, for tests that look at or change etcd directly.
    pub async fn call(&self, path: &str, body: serde_json::Value) -> serde_json::Value {
        storch::net::client()
            .post(format!("{}{path}", self.endpoint))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

//! The `storch-sim nexentastor` binary as a test handle: started on 127.0.0.1:0 over TLS with
//! its certificate in the test's directory, killed when dropped; a raw JSON client for the NEF
//! API (logging in for a bearer token), job polling, and its control listener.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::{Value, json};
use storch::sim::nexentastor::{DEFAULT_PASSWORD, DEFAULT_USERNAME};

/// A running `storch-sim nexentastor`; killed when dropped.
pub struct NexentaSim {
    child: std::process::Child,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// `http://127.0.0.1:PORT` of the control listener.
    pub control_url: String,
    cert: PathBuf,
    client: reqwest::Client,
    token: Mutex<Option<String>>,
}

impl Drop for NexentaSim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A dataset path escaped into one path segment (`tank%2Fcsi%2Fv1`, `…%40snap`).
pub fn esc(path: &str) -> String {
    path.replace('%', "%25")
        .replace('/', "%2F")
        .replace('@', "%40")
}

fn read_line(child: &mut std::process::Child, out: &mut impl BufRead, prefix: &str) -> String {
    let mut line = String::new();
    let read = out.read_line(&mut line);
    match line.trim().strip_prefix(prefix) {
        Some(rest) if read.is_ok() => rest.to_string(),
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("storch-sim nexentastor: unexpected line {line:?}");
        }
    }
}

impl NexentaSim {
    /// Starts the binary with `args` after `nexentastor --listen 127.0.0.1:0 --tls`, its
    /// certificate written into `dir`.
    pub fn start(dir: &Path, args: &[&str]) -> NexentaSim {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cert = dir.join(format!("nexentastor-{n}.pem"));
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_storch-sim"))
            .args([
                "nexentastor",
                "--listen",
                "127.0.0.1:0",
                "--tls",
                "--cert-out",
            ])
            .arg(&cert)
            .args(args)
            .env_remove("STORCH_SIM_PASSWORD")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("storch-sim starts");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let url = read_line(&mut child, &mut out, "storch-sim nexentastor listening on ");
        let control_url = read_line(&mut child, &mut out, "storch-sim nexentastor control on ");
        let pem = std::fs::read(&cert).expect("certificate written");
        let client = storch::net::client_builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("a PEM"))
            .build()
            .expect("client");
        NexentaSim {
            child,
            url,
            control_url,
            cert,
            client,
            token: Mutex::new(None),
        }
    }

    /// The two nodes of an HA pair: two instances started with `args` and one `--state` file
    /// in `dir` (each with its own certificate).
    pub fn pair(dir: &Path, args: &[&str]) -> [NexentaSim; 2] {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let state = dir.join(format!("nexentastor-pair-{n}.json"));
        let mut all = args.to_vec();
        all.extend(["--state", state.to_str().expect("a UTF-8 path")]);
        [NexentaSim::start(dir, &all), NexentaSim::start(dir, &all)]
    }

    /// The certificate (PEM), for `trustedCACertificate`.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(&self.cert).expect("certificate written")
    }

    /// One request to `path` (from `/`) with `token` as bearer (None: no Authorization
    /// header): status and JSON body (`Value::Null` when empty), or the transport error.
    pub async fn try_raw(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), reqwest::Error> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut r = self.client.request(method, format!("{}{path}", self.url));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(b) = body {
            r = r
                .header("Content-Type", "application/json")
                .body(b.to_string());
        }
        let resp = r.send().await?;
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
    }

    /// [`NexentaSim::try_raw`] that must reach the simulator.
    pub async fn raw(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        self.try_raw(token, method, path, body)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: the simulator does not answer: {e}"))
    }

    /// A POST of `text` as the body (which need not be JSON) with `token`.
    pub async fn post_text(&self, token: &str, path: &str, text: &str) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.url))
            .bearer_auth(token)
            .header("Content-Type", "application/json")
            .body(text.to_string())
            .send()
            .await
            .expect("the simulator answers");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Logs in with the default credentials; returns the token (also kept for `request`).
    pub async fn login(&self) -> String {
        let body = json!({"username": DEFAULT_USERNAME, "password": DEFAULT_PASSWORD});
        let (s, v) = self.raw(None, "POST", "/auth/login", Some(&body)).await;
        assert_eq!(s, 200, "login: {v}");
        let token = v["token"].as_str().expect("a token").to_string();
        *self.token.lock().unwrap() = Some(token.clone());
        token
    }

    /// A request with this handle's token (logging in first when it has none).
    pub async fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let token = self.token.lock().unwrap().clone();
        let token = match token {
            Some(t) => t,
            None => self.login().await,
        };
        self.raw(Some(&token), method, path, body).await
    }

    /// A request that may answer 202: the job is polled through its monitor links (each
    /// running answer must carry one) until it ends; its final status and body.
    pub async fn run(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (mut s, mut v) = self.request(method, path, body).await;
        let mut polls = 0;
        while s == 202 {
            let href = v["links"]
                .as_array()
                .and_then(|l| l.iter().find(|l| l["rel"] == "monitor"))
                .and_then(|l| l["href"].as_str())
                .unwrap_or_else(|| panic!("a 202 without a monitor link: {v}"))
                .to_string();
            polls += 1;
            assert!(polls < 100, "{method} {path}: the job never ends");
            (s, v) = self.request("GET", &href, None).await;
        }
        (s, v)
    }

    /// A control request (`POST /__sim/down`, …): its JSON answer.
    pub async fn control(&self, method: &str, path: &str) -> Value {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let resp = self
            .client
            .request(method, format!("{}{path}", self.control_url))
            .send()
            .await
            .expect("the control listener answers");
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        resp.json().await.expect("JSON")
    }
}

impl NexentaSim {
    /// Every zvol under the volume group `vg` (paged at 50), by name within it: the crash
    /// test's view of the array.
    pub async fn zvols(&self, vg: &str) -> std::collections::BTreeSet<String> {
        self.collect(&format!("/storage/volumes?parent={}&fields=path", esc(vg)))
            .await
            .iter()
            .filter_map(|z| z["path"].as_str())
            .filter_map(|p| p.strip_prefix(&format!("{vg}/")).map(str::to_string))
            .collect()
    }

    /// Every item of a collection, paged at 50 with `limit`/`offset`.
    pub async fn collect(&self, path: &str) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            let page = format!("{path}&limit=50&offset={}", out.len());
            let (s, v) = self.request("GET", &page, None).await;
            assert_eq!(s, 200, "{page}: {v}");
            let items = v["data"].as_array().cloned().unwrap_or_default();
            let n = items.len();
            out.extend(items);
            if n < 50 {
                return out;
            }
        }
    }
}

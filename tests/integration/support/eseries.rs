//! The `storch-sim eseries` binary as a test handle: started on 127.0.0.1:0 (over TLS with its
//! certificate in the test's directory, or plain HTTP), killed when dropped, and a raw JSON
//! client for the proxy's REST API.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use storch::sim::eseries::{DEFAULT_PASSWORD, DEFAULT_USERNAME};

/// Controller addresses the simulator is started with (what a registration must name).
pub const CONTROLLERS: [&str; 2] = ["10.0.0.10", "10.0.0.11"];

/// A running `storch-sim eseries`; killed when dropped.
pub struct EseriesSim {
    child: std::process::Child,
    /// `http(s)://127.0.0.1:PORT`.
    pub url: String,
    /// The certificate of a TLS simulator.
    pub cert: Option<PathBuf>,
    client: reqwest::Client,
}

impl Drop for EseriesSim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl EseriesSim {
    /// Starts the binary with `args` after `eseries --listen 127.0.0.1:0`; with `tls`, over
    /// HTTPS with its certificate written into `dir`.
    pub fn start(dir: &Path, tls: bool, args: &[&str]) -> EseriesSim {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cert = tls.then(|| dir.join(format!("eseries-{n}.pem")));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_storch-sim"));
        cmd.args(["eseries", "--listen", "127.0.0.1:0"]).args(args);
        if let Some(c) = &cert {
            cmd.arg("--tls").arg("--cert-out").arg(c);
        }
        let mut child = cmd
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("storch-sim starts");
        let mut line = String::new();
        let read =
            std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
        let url = line
            .trim()
            .strip_prefix("storch-sim eseries listening on ")
            .map(str::to_string);
        let Some(url) = url.filter(|_| read.is_ok()) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("storch-sim eseries {args:?}: unexpected first line {line:?}");
        };
        let mut builder = storch::net::client_builder();
        if let Some(c) = &cert {
            let pem = std::fs::read(c).expect("certificate written");
            builder = builder.add_root_certificate(
                reqwest::Certificate::from_pem(&pem).expect("a PEM certificate"),
            );
        }
        EseriesSim {
            child,
            url,
            cert,
            client: builder.build().expect("client"),
        }
    }

    /// `http(s)://127.0.0.1:PORT/devmgr/v2`.
    pub fn base(&self) -> String {
        format!("{}/devmgr/v2", self.url)
    }

    /// Host and port, as a backend's `webProxyHostname` and `webProxyPort` name them.
    pub fn host_port(&self) -> (String, u16) {
        let addr = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, a)| a);
        let (host, port) = addr.rsplit_once(':').expect("HOST:PORT");
        (host.to_string(), port.parse().expect("a port"))
    }

    /// The certificate (PEM) of a TLS simulator, for `trustedCACertificate`.
    pub fn ca_pem(&self) -> Option<String> {
        self.cert
            .as_ref()
            .map(|c| std::fs::read_to_string(c).expect("certificate written"))
    }

    /// One request with the given credentials (None: no Authorization header) to `path`
    /// below `/devmgr/v2` (or a full path starting with `/devmgr`): status and JSON body
    /// (`Value::Null` when there is none).
    pub async fn request_as(
        &self,
        creds: Option<(&str, &str)>,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let url = if path.starts_with("/devmgr") {
            format!("{}{path}", self.url)
        } else {
            format!("{}{path}", self.base())
        };
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut r = self.client.request(method, url);
        if let Some((u, p)) = creds {
            r = r.basic_auth(u, Some(p));
        }
        if let Some(b) = body {
            r = r
                .header("Content-Type", "application/json")
                .body(b.to_string());
        }
        let resp = r.send().await.expect("the simulator answers");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// [`EseriesSim::request_as`] with the simulator's default proxy credentials.
    pub async fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.request_as(
            Some((DEFAULT_USERNAME, DEFAULT_PASSWORD)),
            method,
            path,
            body,
        )
        .await
    }

    /// Registers the array by [`CONTROLLERS`] with `password` and returns its system id.
    pub async fn register(&self, password: &str) -> String {
        let body = serde_json::json!({"controllerAddresses": CONTROLLERS, "password": password});
        let (status, v) = self.request("POST", "/storage-systems", Some(&body)).await;
        assert!(status == 200 || status == 201, "register: {status} {v}");
        v["id"].as_str().expect("an id").to_string()
    }
}

/// A backend on the simulator: its address, credentials and controllers, the first portal,
/// pools matching `^pool_`; over TLS with its certificate trusted, else over plain HTTP.
pub fn es_backend(sim: &EseriesSim, extra: Value) -> Value {
    let (host, port) = sim.host_port();
    let mut doc = json!({
        "version": 1, "storageDriverName": "eseries-iscsi",
        "webProxyHostname": host, "webProxyPort": port,
        "username": "admin", "password": "eseries123",
        "controllerA": CONTROLLERS[0], "controllerB": CONTROLLERS[1],
        "hostDataIP": "10.0.1.10", "poolNameSearchPattern": "^pool_",
    });
    match sim.ca_pem() {
        Some(pem) => doc["trustedCACertificate"] = json!(pem),
        None => doc["webProxyUseHTTP"] = json!(true),
    }
    for (k, v) in extra.as_object().unwrap() {
        doc[k] = v.clone();
    }
    doc
}

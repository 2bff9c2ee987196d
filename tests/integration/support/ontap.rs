//! Shared helpers for the ONTAP tests: an in-process simulator over TLS, backend configs
//! pointed at it, the one-test-per-API macro, and raw REST and ZAPI requests to a simulator.

use serde_json::{Value, json};
use storch::drivers::ontap::OntapDriver;
use storch::drivers::{CommonConfig, StorageDriver};
use storch::sim::ontap::{OntapSim, SimOptions};

pub const GIB: u64 = 1 << 30;
pub const MIB: u64 = 1 << 20;

/// Starts a TLS simulator on 127.0.0.1:0 with its certificate in `dir`.
pub async fn sim_in(dir: &std::path::Path, mut opts: SimOptions) -> OntapSim {
    opts.tls = true;
    if opts.cert_out.is_none() {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        opts.cert_out = Some(dir.join(format!("sim-{n}.pem")));
    }
    OntapSim::start(opts).await.expect("simulator starts")
}

/// A backend config for `driver` pointed at `sim`, trusting its certificate; `extra` keys are
/// merged in (a `null` removes a key).
pub fn backend(sim: &OntapSim, driver: &str, extra: Value) -> Value {
    let mut doc = json!({
        "version": 1,
        "storageDriverName": driver,
        "managementLIF": sim.management_lif(),
        "username": "admin",
        "password": "netapp123",
        "trustedCACertificate": sim.ca_pem().expect("a TLS simulator"),
    });
    for (k, v) in extra.as_object().expect("an object") {
        if v.is_null() {
            doc.as_object_mut().unwrap().remove(k);
        } else {
            doc[k] = v.clone();
        }
    }
    doc
}

/// Builds a driver with fast retries and small pages (so paging is exercised).
pub fn driver(doc: &Value) -> OntapDriver {
    let common = CommonConfig::parse(doc).expect("common config");
    OntapDriver::from_config(doc, &common)
        .expect("ONTAP config")
        .tune_client(
            storch::net::RetryPolicy {
                max_attempts: 4,
                base_delay: std::time::Duration::from_millis(5),
                max_delay: std::time::Duration::from_millis(20),
            },
            7,
        )
}

/// Every volume name in the simulator's SVM (root volume excluded).
pub fn array_volumes(sim: &OntapSim, svm: &str) -> Vec<String> {
    sim.array().svms[svm]
        .volumes
        .iter()
        .filter(|(_, v)| !v.is_root)
        .map(|(n, _)| n.clone())
        .collect()
}

pub async fn discover(d: &dyn StorageDriver) -> storch::drivers::Discovery {
    d.discover().await.expect("discover")
}

/// The API a test drives the drivers over: the same test runs once per API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// The default simulator (ONTAP 9.8, both APIs): `useREST` unset picks ZAPI.
    Zapi,
    /// A simulator of ONTAP 9.15.1 serving only REST: `useREST` unset picks REST.
    Rest,
}

impl Api {
    /// `opts` for a simulator this API is chosen on.
    pub fn sim_options(self, mut opts: SimOptions) -> SimOptions {
        if self == Api::Rest {
            opts.api = storch::sim::ontap::ApiMode::Rest;
            opts.ontap_version = Some([9, 15, 1]);
        }
        opts
    }
}

/// Generates one `#[tokio::test]` per API for each `async fn name(api: Api)` listed.
#[macro_export]
macro_rules! over_both_apis {
    ($($name:ident),* $(,)?) => {
        mod zapi_api {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::ontap::Api::Zapi).await
                }
            )*
        }
        mod rest_api {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::ontap::Api::Rest).await
                }
            )*
        }
    };
}

/// Raw HTTPS to one simulator, Basic auth as admin.
pub struct Rest {
    pub client: reqwest::Client,
    pub base: String,
    pub password: String,
}

impl Rest {
    pub fn new(addr: &str, ca_pem: &str) -> Rest {
        let client = storch::net::client_builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
            .build()
            .unwrap();
        Rest {
            client,
            base: format!("https://{addr}"),
            password: "netapp123".into(),
        }
    }

    pub fn of(sim: &OntapSim) -> Rest {
        Rest::new(&sim.management_lif(), sim.ca_pem().unwrap())
    }

    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = if path.starts_with("/api") || path.starts_with("/servlets") {
            format!("{}{path}", self.base)
        } else {
            format!("{}/api{path}", self.base)
        };
        let mut rb = self
            .client
            .request(method.parse().unwrap(), url)
            .basic_auth("admin", Some(&self.password))
            .header("Accept", "application/hal+json")
            .header("X-Dot-Client-App", "storch-test");
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let resp = rb.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str) -> Value {
        let (s, v) = self.call("GET", path, None).await;
        assert_eq!(s, 200, "GET {path}: {v}");
        v
    }

    /// Expects `status` and ONTAP error `code`; returns the error object.
    pub async fn refused(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        status: u16,
        code: &str,
    ) -> Value {
        let (s, v) = self.call(method, path, body).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {v}"
        );
        v["error"].clone()
    }

    /// Sends a request that must answer 202 with a job, polls the job to its end and
    /// returns the final job record.
    pub async fn job(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (s, v) = self.call(method, path, body).await;
        assert_eq!(s, 202, "{method} {path}: {v}");
        let href = v["job"]["_links"]["self"]["href"]
            .as_str()
            .unwrap()
            .to_string();
        loop {
            let j = self.get(&format!("{href}?fields=state")).await;
            match j["state"].as_str().unwrap() {
                "running" | "queued" => continue,
                _ => return self.get(&format!("{href}?fields=**")).await,
            }
        }
    }

    pub async fn job_ok(&self, method: &str, path: &str, body: Option<Value>) {
        let j = self.job(method, path, body).await;
        assert_eq!(j["state"], "success", "{method} {path}: {j}");
    }

    /// Every record of a collection, following `_links.next`; also the page sizes seen.
    pub async fn all(&self, path: &str) -> (Vec<Value>, Vec<usize>) {
        let mut out = Vec::new();
        let mut pages = Vec::new();
        let mut next = path.to_string();
        loop {
            let v = self.get(&next).await;
            let recs = v["records"].as_array().unwrap().clone();
            assert_eq!(v["num_records"], recs.len());
            pages.push(recs.len());
            out.extend(recs);
            match v["_links"]["next"]["href"].as_str() {
                Some(h) => next = h.to_string(),
                None => return (out, pages),
            }
        }
    }

    pub async fn svm_uuid(&self) -> String {
        let v = self.get("/svm/svms?name=svm1&fields=").await;
        v["records"][0]["uuid"].as_str().unwrap().to_string()
    }

    /// The uuid of a volume by name (a filtered collection GET, never a 404 probe).
    pub async fn volume_uuid(&self, name: &str) -> String {
        let v = self
            .get(&format!("/storage/volumes?name={name}&fields="))
            .await;
        assert_eq!(v["num_records"], 1, "{name}: {v}");
        v["records"][0]["uuid"].as_str().unwrap().to_string()
    }

    pub async fn make_volume(&self, name: &str, size: u64) -> String {
        let body = json!({"name": name, "svm": {"name": "svm1"}, "aggregates": [{"name": "aggr1"}],
                          "size": size, "guarantee": {"type": "none"}});
        self.job_ok("POST", "/storage/volumes", Some(body)).await;
        self.volume_uuid(name).await
    }
}

pub async fn rest_sim(dir: &std::path::Path, opts: SimOptions) -> (OntapSim, Rest) {
    let sim = sim_in(dir, opts).await;
    let rest = Rest::of(&sim);
    (sim, rest)
}

/// Raw ZAPI call in svm1; returns the response text.
pub async fn zapi(rest: &Rest, api: &str) -> String {
    let body = format!(
        "<?xml version='1.0' encoding='utf-8'?><netapp version='1.21' \
         xmlns='http://www.netapp.com/filer/admin' vfiler='svm1'>{api}</netapp>"
    );
    let resp = rest
        .client
        .post(format!("{}{}", rest.base, storch::sim::ontap::SERVLET))
        .basic_auth("admin", Some(&rest.password))
        .header("Content-Type", "text/xml")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    resp.text().await.unwrap()
}

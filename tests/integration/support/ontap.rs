//! Shared helpers for the ONTAP tests: an in-process simulator over TLS and backend configs
//! pointed at it.

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

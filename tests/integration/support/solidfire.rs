//! Shared helpers for the SolidFire tests: an in-process Element simulator over TLS, backend
//! configs pointed at it, and drivers with fast retries.

use serde_json::{Value, json};
use storch::drivers::CommonConfig;
use storch::drivers::solidfire::SolidFireDriver;
use storch::sim::solidfire::{
    ClusterSpec, DEFAULT_PASSWORD, DEFAULT_USERNAME, SimOptions, SolidFireSim, Tuning,
};

pub const GIB: u64 = 1 << 30;

/// The simulator's SVIP (the iSCSI portal volumes show).
pub const SVIP: &str = "10.0.0.2:3260";

/// Starts a TLS simulator on 127.0.0.1:0 with its certificate in `dir`: `capacity` bytes,
/// 100 000 IOPS, `tenant` as an existing account, and `tuning`.
pub async fn sf_sim_in(
    dir: &std::path::Path,
    capacity: u64,
    tenant: Option<&str>,
    tuning: Tuning,
) -> SolidFireSim {
    sf_sim_with(
        dir,
        SimOptions {
            cluster: ClusterSpec {
                mvip: "127.0.0.1".into(),
                svip: SVIP.into(),
                capacity,
                max_iops: 100_000,
                tenant: tenant.map(str::to_string),
            },
            tuning,
            ..SimOptions::default()
        },
    )
    .await
}

/// Starts a TLS simulator with `opts` on 127.0.0.1:0, its certificate in `dir`.
pub async fn sf_sim_with(dir: &std::path::Path, mut opts: SimOptions) -> SolidFireSim {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    opts.tls = true;
    opts.cert_out = Some(dir.join(format!("sf-{n}.pem")));
    SolidFireSim::start(opts).await.expect("simulator starts")
}

/// A solidfire-san backend config pointed at `sim` with `password`, trusting its certificate;
/// `extra` keys are merged in (a `null` removes a key).
pub fn sf_backend(sim: &SolidFireSim, password: &str, extra: Value) -> Value {
    let mut doc = json!({
        "version": 1, "storageDriverName": "solidfire-san",
        "Endpoint": format!("https://{DEFAULT_USERNAME}:{password}@{}/json-rpc/8.0", sim.addr()),
        "SVIP": SVIP, "TenantName": "trident",
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

/// [`sf_backend`] with the simulator's own credentials, as `SolidFireSim::backend_endpoint`
/// writes them.
pub fn sf_backend_ok(sim: &SolidFireSim, extra: Value) -> Value {
    let mut doc = sf_backend(sim, DEFAULT_PASSWORD, extra);
    doc["Endpoint"] = json!(sim.backend_endpoint("8.0"));
    doc
}

/// Builds a driver with fast retries (3 attempts) and `page` volumes per list page.
pub fn sf_driver(doc: &Value, page: u32) -> SolidFireDriver {
    let common = CommonConfig::parse(doc).expect("common config");
    SolidFireDriver::from_config(doc, &common)
        .expect("SolidFire config")
        .tune_client(
            storch::net::RetryPolicy {
                max_attempts: 3,
                base_delay: std::time::Duration::from_millis(2),
                max_delay: std::time::Duration::from_millis(10),
            },
            page,
        )
}

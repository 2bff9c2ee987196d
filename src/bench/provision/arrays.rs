//! `--target FAMILY=ADDR[,ADDR…]`: the benchmark on running arrays (or their simulators)
//! instead of fake backends: the target's parsing, one backend document per `--backends` (the
//! arrays taken in turn), and the removal of what a run made once it is measured.

use serde::Serialize;
use serde_json::{Value, json};

/// A running array to benchmark against: `ontap=ADDR` (e.g. `storch-sim ontap --tls`),
/// `solidfire=ADDR` (the MVIP, e.g. `storch-sim solidfire --tls`) or `eseries=ADDR` (the Web
/// Services Proxy, e.g. `storch-sim eseries --tls`), or `FAMILY=ADDR,ADDR,…` for several
/// arrays (the backends are spread over them in turn).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArrayTarget {
    pub family: String,
    pub address: String,
    #[serde(skip)]
    pub username: String,
    #[serde(skip)]
    pub password: String,
    /// ONTAP only: the API the backends are pinned to (`useREST`), `rest` or `zapi`, from
    /// `STORCH_BENCH_ONTAP_API`; `None` (unset or `auto`): each backend chooses by the array's
    /// version, as Trident does (REST from ONTAP 9.15.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ontap_api: Option<String>,
}

/// `STORCH_BENCH_ONTAP_API`: `rest`, `zapi` or `auto` (the default).
fn ontap_api(value: Option<&str>) -> Result<Option<String>, String> {
    match value.map(str::trim) {
        None | Some("" | "auto") => Ok(None),
        Some(v @ ("rest" | "zapi")) => Ok(Some(v.to_string())),
        Some(other) => Err(format!(
            "STORCH_BENCH_ONTAP_API={other:?}: expected rest, zapi or auto"
        )),
    }
}

/// The array families `--target` takes, with the credentials their simulators default to.
const TARGET_FAMILIES: [(&str, &str, &str); 3] = [
    ("ontap", "admin", "netapp123"),
    ("solidfire", "admin", "solidfire123"),
    ("eseries", "admin", "eseries123"),
];

impl std::str::FromStr for ArrayTarget {
    type Err = String;

    /// `ontap=HOST:PORT`, `solidfire=HOST:PORT` or `eseries=HOST:PORT`; credentials default
    /// to the simulator's (`admin` with `netapp123`, `solidfire123`, `eseries123`) and come
    /// from `STORCH_BENCH_USERNAME` / `STORCH_BENCH_PASSWORD` when set; ONTAP's API from
    /// `STORCH_BENCH_ONTAP_API`.
    fn from_str(s: &str) -> Result<ArrayTarget, String> {
        let (family, address) = s.split_once('=').ok_or_else(|| {
            format!("--target {s:?} is not FAMILY=ADDR, e.g. ontap=127.0.0.1:8443")
        })?;
        let Some((_, username, password)) = TARGET_FAMILIES.iter().find(|f| f.0 == family) else {
            return Err(format!(
                "--target family {family:?} is not supported (ontap, solidfire or eseries)"
            ));
        };
        if address.split(',').any(|a| a.trim().is_empty()) {
            return Err(format!(
                "--target {family}= needs an address (or several, comma-separated)"
            ));
        }
        let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
        let api = ontap_api(std::env::var("STORCH_BENCH_ONTAP_API").ok().as_deref())?;
        Ok(ArrayTarget {
            family: family.into(),
            address: address.into(),
            username: env("STORCH_BENCH_USERNAME", username),
            password: env("STORCH_BENCH_PASSWORD", password),
            ontap_api: api.filter(|_| family == "ontap"),
        })
    }
}

impl ArrayTarget {
    /// The array backend `i` of the run talks to.
    pub fn address_of(&self, i: usize) -> &str {
        let all: Vec<&str> = self.address.split(',').map(str::trim).collect();
        all[i % all.len()]
    }
}

/// Backend `i` of a run on the array target `t` (`run` names the run: see
/// `provision::backend_doc`).
pub(super) fn backend_doc(i: usize, t: &ArrayTarget, limit: usize, run: &str) -> Value {
    match t.family.as_str() {
        "solidfire" => solidfire_doc(i, t, limit, run),
        "eseries" => eseries_doc(i, t, limit),
        _ => ontap_doc(i, t, limit, run),
    }
}

/// One ontap-nas backend per --backends, each with its own prefix; `useREST` as the target
/// pins it.
fn ontap_doc(i: usize, t: &ArrayTarget, limit: usize, run: &str) -> Value {
    let mut doc = json!({
        "version": 1, "storageDriverName": "ontap-nas", "backendName": format!("bench{i}"),
        "managementLIF": t.address_of(i), "username": t.username, "password": t.password,
        "tlsVerify": false, "storagePrefix": format!("bench{i}_{run}_"),
        "concurrencyLimit": limit,
    });
    if let Some(api) = &t.ontap_api {
        doc["useREST"] = json!(api == "rest");
    }
    doc
}

/// One solidfire-san backend per --backends, the arrays taken in turn. Element names are not
/// unique, so each backend has a tenant account of its own for this run (created by the
/// driver): a volume an earlier run left can never be taken for this run's. Its QoS types are
/// the hands-on lab's three, so the bench class spreads over three pools per backend.
fn solidfire_doc(i: usize, t: &ArrayTarget, limit: usize, run: &str) -> Value {
    let address = t.address_of(i);
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    let endpoint =
        crate::drivers::solidfire::config::endpoint_url(&t.username, &t.password, address, "8.0");
    json!({
        "version": 1, "storageDriverName": "solidfire-san", "backendName": format!("bench{i}"),
        "Endpoint": endpoint,
        "SVIP": format!("{host}:3260"), "TenantName": format!("bench{i}-{run}"),
        "UseCHAP": true, "tlsVerify": false,
        "Types": [
            {"Type": "Bronze", "Qos": {"minIOPS": 1000, "maxIOPS": 2000, "burstIOPS": 4000}},
            {"Type": "Silver", "Qos": {"minIOPS": 4000, "maxIOPS": 6000, "burstIOPS": 8000}},
            {"Type": "Gold", "Qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000}},
        ],
        "concurrencyLimit": limit,
    })
}

/// One eseries-iscsi backend per --backends, the proxies taken in turn, each with its own
/// `storagePrefix` (at most 8 characters, so that names fit the array's 30). The array behind
/// the proxy is the simulator's unless `STORCH_BENCH_ESERIES_CONTROLLERS` (`A,B`) and
/// `STORCH_BENCH_ESERIES_DATA_IP` name it; its password is `STORCH_BENCH_ESERIES_ARRAY_PASSWORD`
/// (default none, as the simulator's).
fn eseries_doc(i: usize, t: &ArrayTarget, limit: usize) -> Value {
    let address = t.address_of(i);
    let (host, port) = address.rsplit_once(':').unwrap_or((address, "8443"));
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let controllers = env("STORCH_BENCH_ESERIES_CONTROLLERS", "10.0.0.10,10.0.0.11");
    let (a, b) = controllers.split_once(',').unwrap_or((&controllers, ""));
    json!({
        "version": 1, "storageDriverName": "eseries-iscsi", "backendName": format!("bench{i}"),
        "webProxyHostname": host, "webProxyPort": port, "webProxyVerifyTLS": false,
        "username": t.username, "password": t.password,
        "controllerA": a, "controllerB": b,
        "passwordArray": env("STORCH_BENCH_ESERIES_ARRAY_PASSWORD", ""),
        "hostDataIP": env("STORCH_BENCH_ESERIES_DATA_IP", "10.0.1.10"),
        "storagePrefix": format!("b{i}_"),
        "concurrencyLimit": limit,
    })
}

/// Removes from the arrays every volume the run's backends made (`docs`), straight through
/// their drivers once the run is measured and storch has stopped, so that neither the
/// figures nor the log count it and the arrays are left as they were. Returns how many
/// volumes were removed.
pub(super) async fn clean_up(docs: &[Value], concurrency: usize) -> Result<u64, String> {
    use futures::StreamExt;
    let mut removed = 0;
    for doc in docs {
        let built = crate::drivers::build_driver(doc).map_err(|e| format!("clean-up: {e}"))?;
        let driver = built.driver;
        let name = doc["backendName"].as_str().unwrap_or_default();
        let volumes = driver
            .list_volumes()
            .await
            .map_err(|e| format!("clean-up of backend {name}: {e}"))?;
        let results: Vec<_> = futures::stream::iter(&volumes)
            .map(|v| driver.destroy(&v.internal_name))
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
        for (v, r) in volumes.iter().zip(&results) {
            if let Err(e) = r {
                return Err(format!(
                    "clean-up of backend {name}: volume {} was not removed: {e}",
                    v.internal_name
                ));
            }
        }
        removed += volumes.len() as u64;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ontap_api_is_pinned_when_asked() {
        assert_eq!(ontap_api(None), Ok(None));
        assert_eq!(ontap_api(Some("auto")), Ok(None));
        assert_eq!(ontap_api(Some("rest")), Ok(Some("rest".into())));
        assert_eq!(ontap_api(Some("zapi")), Ok(Some("zapi".into())));
        assert!(
            ontap_api(Some("REST2"))
                .unwrap_err()
                .contains("STORCH_BENCH_ONTAP_API")
        );
        let mut t: ArrayTarget = "ontap=127.0.0.1:1".parse().unwrap();
        t.ontap_api = None;
        assert!(backend_doc(0, &t, 4, "r").get("useREST").is_none());
        t.ontap_api = Some("rest".into());
        assert_eq!(backend_doc(0, &t, 4, "r")["useREST"], true);
        t.ontap_api = Some("zapi".into());
        assert_eq!(backend_doc(0, &t, 4, "r")["useREST"], false);
    }
}

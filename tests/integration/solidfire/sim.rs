//! End to end: the `storch-sim solidfire` binary over HTTPS, spoken to with a raw JSON-RPC
//! client that trusts the certificate written by `--cert-out`: Basic auth, the tenant account,
//! a volume in it, an injected fault, and the volume still there after a restart on the same
//! `--state` file.

use std::io::BufRead;
use std::path::Path;

use serde_json::{Value, json};

const GIB: u64 = 1 << 30;

/// `storch-sim solidfire` as a child; killed when dropped.
struct Sim {
    child: std::process::Child,
    url: String,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(state: &Path, cert: &Path) -> Sim {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_storch-sim"))
        .args(["solidfire", "--listen", "127.0.0.1:0", "--tls"])
        .args([
            "--tenant",
            "trident",
            "--capacity",
            "100GiB",
            "--max-iops",
            "50000",
        ])
        .args(["--svip", "10.0.0.2:3260", "--password", "s3cret"])
        .args(["--fail", "CloneVolume:1:xSliceNotRegistered"])
        .arg("--state")
        .arg(state)
        .arg("--cert-out")
        .arg(cert)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("storch-sim solidfire listening on https://")
        .map(str::to_string);
    let mut sim = Sim {
        child,
        url: String::new(),
    };
    let addr = addr.unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    sim.url = format!("https://{addr}/json-rpc/8.0");
    sim
}

fn client(cert: &Path) -> reqwest::Client {
    let pem = std::fs::read(cert).unwrap();
    storch::net::client_builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap()
}

/// One JSON-RPC call with Trident's quirks (`Content-Type: json-rpc`, a small id): HTTP
/// status and body.
async fn call(
    c: &reqwest::Client,
    sim: &Sim,
    pass: &str,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let r = c
        .post(&sim.url)
        .basic_auth("admin", Some(pass))
        .header("Content-Type", "json-rpc")
        .body(json!({"method": method, "params": params, "id": 42}).to_string())
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn ok(c: &reqwest::Client, sim: &Sim, method: &str, params: Value) -> Value {
    let (status, body) = call(c, sim, "s3cret", method, params).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id"], 42, "{body}");
    assert!(body.get("error").is_none(), "{method}: {body}");
    body["result"].clone()
}

#[tokio::test]
async fn storch_sim_solidfire_speaks_json_rpc_over_https_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("sf.json");
    let cert = dir.path().join("sf.pem");
    let sim = spawn(&state, &cert);
    let c = client(&cert);

    let (status, _) = call(
        &c,
        &sim,
        "wrong",
        "GetAccountByName",
        json!({"username": "trident"}),
    )
    .await;
    assert_eq!(status, 401);
    let acct = ok(&c, &sim, "GetAccountByName", json!({"username": "trident"})).await;
    let account_id = acct["account"]["accountID"].as_u64().unwrap();
    let info = ok(&c, &sim, "GetClusterInfo", json!({})).await;
    assert_eq!(info["clusterInfo"]["svip"], "10.0.0.2");
    let cap = ok(&c, &sim, "GetClusterCapacity", json!({})).await;
    assert_eq!(cap["clusterCapacity"]["maxProvisionedSpace"], 100 * GIB);
    assert_eq!(cap["clusterCapacity"]["maxIOPS"], 50000);

    let created = ok(
        &c,
        &sim,
        "CreateVolume",
        json!({"name": "pvc-1", "accountID": account_id, "totalSize": GIB, "enable512e": true,
               "qos": {"minIOPS": 1000, "maxIOPS": 40000, "burstIOPS": 50000},
               "attributes": {"docker-name": "pvc-1"}}),
    )
    .await;
    let vid = created["volumeID"].as_u64().unwrap();
    let (_, refused) = call(
        &c,
        &sim,
        "s3cret",
        "CreateVolume",
        json!({"name": "pvc-2", "accountID": account_id, "totalSize": GIB, "enable512e": true,
               "qos": {"maxIOPS": 60000, "burstIOPS": 60000}, "attributes": {}}),
    )
    .await;
    assert_eq!(
        refused["error"]["name"], "xInvalidParameter",
        "above the cluster's IOPS"
    );
    let (_, injected) = call(
        &c,
        &sim,
        "s3cret",
        "CloneVolume",
        json!({"volumeID": vid, "name": "pvc-3", "snapshotID": 0, "attributes": {}}),
    )
    .await;
    assert_eq!(injected["error"]["name"], "xSliceNotRegistered");
    assert_eq!(injected["error"]["code"], 500);
    let (_, unknown) = call(
        &c,
        &sim,
        "s3cret",
        "ListVolumeStatsByVirtualVolume",
        json!({}),
    )
    .await;
    assert_eq!(unknown["error"]["name"], "xUnknownAPIMethod");
    drop(sim);

    let on_disk: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(on_disk["volumes"][vid.to_string()]["name"], "pvc-1");
    let sim = spawn(&state, &cert);
    let c = client(&cert);
    let listed = ok(
        &c,
        &sim,
        "ListVolumesForAccount",
        json!({"accountID": account_id}),
    )
    .await;
    let vols = listed["volumes"].as_array().unwrap();
    assert_eq!(vols.len(), 1, "{listed}");
    assert_eq!(vols[0]["volumeID"], vid);
    assert_eq!(vols[0]["qos"]["burstIOPS"], 50000);
    assert_eq!(vols[0]["attributes"]["docker-name"], "pvc-1");
}

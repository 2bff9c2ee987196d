//! Unit tests of the SolidFire simulator: every method through `rpc` (the JSON-RPC layer under
//! the HTTP server), and the HTTP layer itself on 127.0.0.1.
//!
//! - this file: the helpers, the envelope, faults, persistence, HTTP and the command line;
//! - `volumes.rs`: create, refusals, paged lists, modify, delete and purge;
//! - `objects.rs`: accounts, snapshots, clones, access groups, cluster reads.

mod objects;
mod volumes;

use serde_json::{Value, json};

use super::*;

pub(super) const GB: u64 = 1 << 30;

pub(super) fn opts() -> SimOptions {
    SimOptions {
        cluster: ClusterSpec {
            capacity: 10 * GB,
            max_iops: 20_000,
            ..SimOptions::default().cluster
        },
        tuning: Tuning {
            page_cap: 2,
            clone_polls: 2,
            create_polls: 0,
        },
        ..SimOptions::default()
    }
}

pub(super) fn sim() -> Shared {
    shared(&opts()).unwrap()
}

pub(super) fn send(sh: &Shared, version: &str, method: &str, params: Value) -> Value {
    let body = json!({"method": method, "params": params, "id": 7});
    rpc(
        sh,
        &format!("/json-rpc/{version}"),
        body.to_string().as_bytes(),
    )
}

/// The result of a call that must succeed.
pub(super) fn ok(sh: &Shared, method: &str, params: Value) -> Value {
    let r = send(sh, "8.0", method, params);
    assert_eq!(r["id"], 7, "{r}");
    assert!(r.get("error").is_none(), "{method}: {r}");
    r["result"].clone()
}

/// The error name (and message) of a call that must fail, checking the envelope.
pub(super) fn err(sh: &Shared, method: &str, params: Value) -> (String, String) {
    let r = send(sh, "8.0", method, params);
    assert!(r.get("result").is_none(), "{method} should fail: {r}");
    assert_eq!(r["error"]["code"], 500, "{r}");
    (
        r["error"]["name"].as_str().unwrap().to_string(),
        r["error"]["message"].as_str().unwrap().to_string(),
    )
}

pub(super) fn err_name(sh: &Shared, method: &str, params: Value) -> String {
    err(sh, method, params).0
}

pub(super) fn account(sh: &Shared, name: &str) -> u64 {
    ok(sh, "AddAccount", json!({"username": name}))["accountID"]
        .as_u64()
        .unwrap()
}

/// A volume the way Trident 18.07 asks for one (empty qos, attributes always present).
pub(super) fn volume(sh: &Shared, acct: u64, name: &str, size: u64) -> u64 {
    ok(
        sh,
        "CreateVolume",
        json!({"name": name, "accountID": acct, "totalSize": size, "enable512e": true,
               "qos": {}, "attributes": {"docker-name": name, "fstype": "ext4"}}),
    )["volumeID"]
        .as_u64()
        .unwrap()
}

pub(super) fn ids(result: &Value, key: &str, id: &str) -> Vec<u64> {
    result[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v[id].as_u64().unwrap())
        .collect()
}

pub(super) fn vol_ids(result: &Value) -> Vec<u64> {
    ids(result, "volumes", "volumeID")
}

#[test]
fn envelope_ids_versions_and_unknown_methods() {
    let sh = sim();
    let r = rpc(
        &sh,
        "/json-rpc/8.0",
        br#"{"method":"GetDefaultQoS","params":{}}"#,
    );
    assert_eq!(r["id"], Value::Null);
    assert_eq!(r["result"]["minIOPS"], 50);
    let r = rpc(
        &sh,
        "/json-rpc/7.0/",
        br#"{"method":"GetDefaultQoS","id":"a"}"#,
    );
    assert_eq!(
        r["id"], "a",
        "a trailing slash (Cinder) and a missing params: {r}"
    );
    let r = send(&sh, "4.0", "GetDefaultQoS", json!({}));
    assert_eq!(r["error"]["name"], "xUnknownAPIVersion");
    assert_eq!(r["id"], 7);
    let r = send(&sh, "7.0", "ListVolumes", json!({}));
    assert_eq!(
        r["error"]["name"], "xUnknownAPIMethod",
        "ListVolumes is v8+"
    );
    assert_eq!(
        err_name(&sh, "FrobnicateVolume", json!({})),
        "xUnknownAPIMethod"
    );
    let r = rpc(&sh, "/json-rpc/8.0", b"not json");
    assert_eq!(r["error"]["name"], "xInvalidRequest");
    assert_eq!(r["error"]["code"], 500);
    let (name, msg) = err(&sh, "GetDefaultQoS", json!({"verbose": true}));
    assert_eq!(name, "xInvalidParameter");
    assert!(msg.contains("verbose"), "{msg}");
    let r = send(&sh, "8.0", "GetDefaultQoS", json!([1]));
    assert_eq!(r["error"]["name"], "xInvalidParameter");
}

#[test]
fn fault_injection_by_method() {
    let r = FailRule::parse("CloneVolume:1:xSliceNotRegistered").unwrap();
    assert_eq!(
        (r.method.as_str(), r.rate, r.name.as_str()),
        ("CloneVolume", 1.0, "xSliceNotRegistered")
    );
    assert_eq!(FailRule::parse("*:0.5").unwrap().name, "xDBConnectionLoss");
    for bad in ["x", "x:2", ":1", "x:0.5:oops", "x:1:xA:3", "x:y"] {
        assert!(FailRule::parse(bad).is_err(), "{bad}");
    }
    let sh = sim();
    let a = account(&sh, "a");
    sh.store.set_fail_rules(vec![
        FailRule::parse("CreateVolume:1:xNotReadyForIO").unwrap(),
    ]);
    let r = send(
        &sh,
        "8.0",
        "CreateVolume",
        json!({"name": "v", "accountID": a, "totalSize": GB,
        "enable512e": true, "qos": {}, "attributes": {}}),
    );
    assert_eq!(r["error"]["name"], "xNotReadyForIO");
    assert_eq!(r["error"]["code"], 500);
    assert!(r["error"]["message"].as_str().unwrap().contains("injected"));
    assert!(sh.store.lock().volumes.is_empty());
    ok(&sh, "ListActiveVolumes", json!({}));
    sh.store
        .set_fail_rules(vec![FailRule::parse("CreateVolume:0").unwrap()]);
    volume(&sh, a, "v", GB);
    assert_eq!(sh.store.calls("CreateVolume"), 2);
}

#[test]
fn state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sf.json");
    let o = SimOptions {
        state: Some(path.clone()),
        ..opts()
    };
    let (a, v, uid) = {
        let sh = shared(&o).unwrap();
        let a = account(&sh, "a");
        let v = volume(&sh, a, "keep", GB);
        ok(&sh, "CreateSnapshot", json!({"volumeID": v, "name": "s"}));
        ok(&sh, "CloneVolume", json!({"volumeID": v, "name": "c"}));
        let uid = sh.store.lock().unique_id.clone();
        (a, v, uid)
    };
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(on_disk["format"], 1);
    let sh = shared(&o).unwrap();
    let c = sh.store.lock().clone();
    assert_eq!(c.unique_id, uid);
    assert_eq!(c.volumes[&v].name, "keep");
    assert_eq!(c.volumes.len(), 2);
    assert_eq!(c.snapshots.len(), 1);
    assert_eq!(c.asyncs.len(), 1);
    assert_eq!(
        c.volumes[&(v + 1)].hidden_polls,
        2,
        "the clone is still pending"
    );
    let secret = c.accounts[&a].initiator_secret.clone();
    drop(c);
    let acct = ok(&sh, "GetAccountByID", json!({"accountID": a}))["account"].clone();
    assert_eq!(acct["initiatorSecret"], secret);
    assert_eq!(volume(&sh, a, "next", GB), v + 2, "ids continue");
    std::fs::write(&path, b"{}").unwrap();
    assert!(matches!(shared(&o), Err(SimError::State { .. })));
}

#[tokio::test]
async fn http_auth_paths_and_content_types() {
    let sim = SolidFireSim::start(SimOptions {
        cluster: ClusterSpec {
            tenant: Some("trident".into()),
            ..opts().cluster
        },
        ..opts()
    })
    .await
    .unwrap();
    assert_eq!(
        sim.backend_endpoint("8.0"),
        format!("http://admin:solidfire123@{}/json-rpc/8.0", sim.addr())
    );
    let client = crate::net::client();
    let body = r#"{"method":"GetAccountByName","params":{"username":"trident"},"id":321}"#;
    let r = client
        .post(sim.endpoint("8.0"))
        .basic_auth("admin", Some("wrong"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = client
        .post(sim.endpoint("8.0"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "no credentials");
    let r = client
        .post(format!("{}/api/v1", sim.url()))
        .basic_auth(DEFAULT_USERNAME, Some(DEFAULT_PASSWORD))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let r = client
        .post(sim.endpoint("8.0"))
        .basic_auth(DEFAULT_USERNAME, Some(DEFAULT_PASSWORD))
        .header("Content-Type", "json-rpc")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["id"], 321);
    assert_eq!(v["result"]["account"]["username"], "trident");
    let r = client
        .post(sim.endpoint("8.0"))
        .basic_auth(DEFAULT_USERNAME, Some(DEFAULT_PASSWORD))
        .body(r#"{"method":"GetAccountByName","params":{"username":"nobody"},"id":1}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "API errors are HTTP 200");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["name"], "xUnknownAccount");
    assert_eq!(sim.calls("GetAccountByName"), 2);
    sim.stop().await;
}

#[test]
fn command_line_options() {
    use crate::sim::cli::{Cli, Command};
    use clap::Parser;
    let parse = |args: &[&str]| {
        let cli = Cli::try_parse_from([&["storch-sim", "solidfire"], args].concat())
            .map_err(|e| e.to_string())?;
        match cli.command {
            Command::Solidfire(a) => a.options(),
            _ => unreachable!(),
        }
    };
    let o = parse(&[
        "--capacity",
        "2TiB",
        "--tenant",
        "trident",
        "--svip",
        "10.0.0.2:3260",
        "--fail",
        "CloneVolume:0.5:xNotReadyForIO",
        "--page-size",
        "3",
        "--clone-polls",
        "4",
    ])
    .unwrap();
    assert_eq!(o.cluster.capacity, 2 << 40);
    assert_eq!(o.cluster.tenant.as_deref(), Some("trident"));
    assert_eq!(o.cluster.max_iops, DEFAULT_MAX_IOPS);
    assert_eq!(o.fail[0].name, "xNotReadyForIO");
    assert_eq!((o.tuning.page_cap, o.tuning.clone_polls), (3, 4));
    assert_eq!(o.username, DEFAULT_USERNAME);
    assert!(parse(&[]).unwrap_err().contains("--capacity"), "required");
    assert!(parse(&["--capacity", "lots"]).is_err());
    assert!(parse(&["--capacity", "1TiB", "--svip", "10.0.0.2"]).is_err());
    assert!(parse(&["--capacity", "1TiB", "--max-iops", "10"]).is_err());
    assert!(parse(&["--capacity", "1TiB", "--fail", "CloneVolume"]).is_err());
}

//! The `storch-sim eseries` binary spoken to over real HTTP(S) with raw requests: the helpers
//! the other files share, Basic auth, registration and array passwords, the storage system
//! object, an offline array, injected faults (including "422 but created"), the state
//! surviving a restart, and the command line.

use serde_json::{Value, json};

use crate::support::eseries::{CONTROLLERS, EseriesSim};

pub(super) const GIB: u64 = 1 << 30;
pub(super) const NULL_REF: &str = "0000000000000000000000000000000000000000";
pub(super) const POOLS: &str =
    "vg_ssd:ssd:10GiB:raid6,ddp_hdd:hdd:20GiB:raidDiskPool:no-da,vg_off:hdd:5GiB:offline";

/// Checks an error answer: its status and the proxy's error body with `retcode`.
pub(super) fn assert_error(got: &(u16, Value), status: u16, retcode: &str) {
    let (s, body) = got;
    assert_eq!(*s, status, "{body}");
    assert_eq!(body["retcode"], retcode, "{body}");
    for k in ["errorMessage", "localizedMessage", "codeType"] {
        assert!(body[k].is_string(), "{k} in {body}");
    }
}

pub(super) fn is_ref(v: &Value, prefix: &str) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 40 && s.starts_with(prefix) && s.chars().all(|c| c.is_ascii_hexdigit())
    })
}

/// `path` below the registered system.
pub(super) fn sys(id: &str, path: &str) -> String {
    format!("/storage-systems/{id}{path}")
}

/// A started simulator with the test pools, registered: the handle and the system id.
pub(super) async fn registered(
    dir: &std::path::Path,
    tls: bool,
    extra: &[&str],
) -> (EseriesSim, String) {
    let mut args = vec!["--pools", POOLS, "--array-password", "arraypw"];
    args.extend_from_slice(extra);
    let sim = EseriesSim::start(dir, tls, &args);
    let id = sim.register("arraypw").await;
    (sim, id)
}

pub(super) async fn pool_ref(sim: &EseriesSim, id: &str, label: &str) -> String {
    let (_, pools) = sim.request("GET", &sys(id, "/storage-pools"), None).await;
    pools
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"] == label)
        .unwrap_or_else(|| panic!("pool {label} in {pools}"))["volumeGroupRef"]
        .as_str()
        .unwrap()
        .to_string()
}

pub(super) fn create_body(pool: &str, name: &str, gib: u64) -> Value {
    json!({"poolId": pool, "name": name, "sizeUnit": "kb", "size": gib * 1024 * 1024,
           "segSize": 128, "metaTags": [{"key": "storch", "value": name}]})
}

pub(super) async fn create(sim: &EseriesSim, id: &str, pool: &str, name: &str, gib: u64) -> Value {
    let (s, v) = sim
        .request(
            "POST",
            &sys(id, "/volumes"),
            Some(&create_body(pool, name, gib)),
        )
        .await;
    assert_eq!(s, 200, "create {name}: {v}");
    v
}

pub(super) async fn volume_names(sim: &EseriesSim, id: &str) -> Vec<String> {
    let (s, vols) = sim.request("GET", &sys(id, "/volumes"), None).await;
    assert_eq!(s, 200, "{vols}");
    vols.as_array()
        .unwrap()
        .iter()
        .map(|v| v["label"].as_str().unwrap().to_string())
        .collect()
}
#[tokio::test]
async fn registration_auth_and_the_storage_system() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(
        dir.path(),
        true,
        &["--pools", POOLS, "--array-password", "arraypw"],
    );
    let reg = json!({"controllerAddresses": CONTROLLERS, "password": "arraypw"});
    let (s, _) = sim
        .request_as(
            Some(("admin", "wrong")),
            "POST",
            "/storage-systems",
            Some(&reg),
        )
        .await;
    assert_eq!(s, 401);
    let (s, _) = sim.request_as(None, "GET", "/storage-systems", None).await;
    assert_eq!(s, 401, "no credentials");
    let (host, port) = sim.host_port();
    assert_eq!(host, "127.0.0.1");
    assert_ne!(port, 0);
    assert!(sim.url.starts_with("https://"));
    assert!(
        sim.ca_pem()
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    let (s, about) = sim
        .request_as(None, "GET", "/devmgr/utils/about", None)
        .await;
    assert_eq!(s, 200, "about needs no credentials");
    assert_eq!(about["runningAsProxy"], true);

    let bad = json!({"controllerAddresses": CONTROLLERS, "password": "nope"});
    let got = sim.request("POST", "/storage-systems", Some(&bad)).await;
    assert_error(&got, 422, "authFailPassword");
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list, json!([]), "a refused registration registers nothing");

    let (s, first) = sim.request("POST", "/storage-systems", Some(&reg)).await;
    assert_eq!(s, 201, "{first}");
    assert_eq!(first["alreadyExists"], false);
    let id = first["id"].as_str().unwrap().to_string();
    let (s, again) = sim.request("POST", "/storage-systems/", Some(&reg)).await;
    assert_eq!(s, 200, "a trailing slash, already registered: {again}");
    assert_eq!(again["id"], id.as_str());
    assert_eq!(again["alreadyExists"], true);
    let swapped =
        json!({"controllerAddresses": [CONTROLLERS[1], CONTROLLERS[0]], "password": "arraypw"});
    let (s, v) = sim
        .request("POST", "/storage-systems", Some(&swapped))
        .await;
    assert_eq!((s, v["id"].as_str()), (200, Some(id.as_str())));
    for missing in [
        json!({"password": "arraypw"}),
        json!({"controllerAddresses": []}),
    ] {
        let got = sim
            .request("POST", "/storage-systems", Some(&missing))
            .await;
        assert_error(&got, 422, "invalidInput");
    }

    let (s, system) = sim
        .request("GET", &format!("/storage-systems/{id}/"), None)
        .await;
    assert_eq!(s, 200, "{system}");
    assert_eq!(system["id"], id.as_str());
    assert_eq!(system["status"], "optimal");
    assert_eq!(system["passwordStatus"], "valid");
    assert!(
        system["chassisSerialNumber"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(
        system["freePoolSpace"],
        json!(30 * GIB),
        "online pools only: {system}"
    );
    assert_eq!(system["freePoolSpaceAsString"], (30 * GIB).to_string());
    assert_eq!(system["usedPoolSpaceAsString"], "0");
    assert_eq!(system["wwn"].as_str().unwrap().len(), 32);

    let got = sim.request("GET", "/storage-systems/nosuch", None).await;
    assert_error(&got, 404, "notFound");
    let got = sim
        .request("GET", "/storage-systems/nosuch/volumes", None)
        .await;
    assert_error(&got, 404, "notFound");
    let got = sim.request("GET", &sys(&id, "/frobnicators"), None).await;
    assert_error(&got, 404, "notFound");
    let (s, _) = sim
        .request("PUT", &sys(&id, "/volumes"), Some(&json!({})))
        .await;
    assert_eq!(s, 405);

    // Addresses that are not the array's register but never reach it.
    let other = json!({"controllerAddresses": ["192.0.2.1", "192.0.2.2"], "password": "x"});
    let (s, v) = sim.request("POST", "/storage-systems", Some(&other)).await;
    assert_eq!(s, 201, "{v}");
    let other_id = v["id"].as_str().unwrap();
    let (_, o) = sim
        .request("GET", &format!("/storage-systems/{other_id}"), None)
        .await;
    assert_eq!(o["status"], "neverContacted");
    let got = sim
        .request("GET", &sys(other_id, "/storage-pools"), None)
        .await;
    assert_error(&got, 424, "storageSystemOffline");
    let (s, _) = sim
        .request("DELETE", &format!("/storage-systems/{other_id}"), None)
        .await;
    assert_eq!(s, 204);
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_offline_array_answers_424() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(dir.path(), false, &["--offline", "--array-password", "pw"]);
    let reg = json!({"controllerAddresses": CONTROLLERS, "password": "unchecked"});
    let (s, v) = sim.request("POST", "/storage-systems", Some(&reg)).await;
    assert_eq!(s, 201, "registered without reaching the array: {v}");
    let id = v["id"].as_str().unwrap();
    let (_, system) = sim
        .request("GET", &format!("/storage-systems/{id}"), None)
        .await;
    assert_eq!(system["status"], "offline");
    assert_eq!(system["passwordStatus"], "unknown");
    for path in [
        "/storage-pools",
        "/volumes",
        "/hosts",
        "/iscsi/target-settings",
    ] {
        assert_error(
            &sim.request("GET", &sys(id, path), None).await,
            424,
            "storageSystemOffline",
        );
    }
    let got = sim
        .request("POST", &sys(id, "/volumes"), Some(&json!({})))
        .await;
    assert_error(&got, 424, "storageSystemOffline");
}

#[tokio::test]
async fn injected_faults_before_and_after_the_request() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, id) = registered(
        dir.path(),
        false,
        &[
            "--fail",
            "POST@volumes:1:422/after",
            "--fail",
            "POST@volume-mappings:1:422/after",
            "--fail",
            "GET@host-types:1",
            "--fail",
            "DELETE@volumes/*:1:500",
        ],
    )
    .await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "spurious", 1)),
        )
        .await;
    assert_error(&got, 422, "injectedFault");
    let (_, vols) = sim.request("GET", &sys(&id, "/volumes"), None).await;
    let v = vols
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["label"] == "spurious")
        .expect("created anyway");
    assert_eq!(
        v["metadata"],
        json!([{"key": "storch", "value": "spurious"}]),
        "with its tags"
    );
    let vref = v["volumeRef"].as_str().unwrap().to_string();
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "spurious", 1)),
        )
        .await;
    assert_error(&got, 422, "duplicateLabel");

    let (_, g) = sim
        .request(
            "POST",
            &sys(&id, "/host-groups"),
            Some(&json!({"name": "trident"})),
        )
        .await;
    let group = g["clusterRef"].as_str().unwrap();
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&json!({"mappableObjectId": vref, "targetId": group})),
        )
        .await;
    assert_error(&got, 422, "injectedFault");
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{vref}")), None)
        .await;
    assert_eq!(v["listOfMappings"][0]["lun"], 1, "mapped anyway: {v}");

    assert_error(
        &sim.request("GET", &sys(&id, "/host-types"), None).await,
        424,
        "injectedFault",
    );
    assert_error(
        &sim.request("DELETE", &sys(&id, &format!("/volumes/{vref}")), None)
            .await,
        500,
        "injectedFault",
    );
    assert_eq!(
        volume_names(&sim, &id).await,
        ["spurious"],
        "a fault before the request changes nothing"
    );
    drop(sim);

    // "422 but created" without the tags.
    let (sim, id) = registered(
        dir.path(),
        false,
        &["--fail", "POST@volumes:1:422/untagged"],
    )
    .await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "bare", 1)),
        )
        .await;
    assert_error(&got, 422, "injectedFault");
    let (_, vols) = sim.request("GET", &sys(&id, "/volumes"), None).await;
    assert_eq!(vols[0]["label"], "bare");
    assert_eq!(vols[0]["metadata"], json!([]), "created without its tags");
    // A request the array refuses is refused as such, not answered with the fault.
    let got = sim
        .request(
            "POST",
            &sys(&id, "/volumes"),
            Some(&create_body(&ssd, "bare", 1)),
        )
        .await;
    assert_error(&got, 422, "duplicateLabel");
    drop(sim);

    // Faults on registration and everywhere, and an offline array by fault.
    let sim = EseriesSim::start(
        dir.path(),
        false,
        &["--fail", "POST@storage-systems:1:424", "--fail", "**:0"],
    );
    let body = json!({"controllerAddresses": CONTROLLERS, "password": ""});
    assert_error(
        &sim.request("POST", "/storage-systems", Some(&body)).await,
        424,
        "injectedFault",
    );
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn state_survives_a_restart_and_a_changed_array_password_is_updated() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("es.json");
    let state_arg = state.to_str().unwrap();
    let args = |pw: &'static str| {
        vec![
            "--pools",
            POOLS,
            "--state",
            state_arg,
            "--array-password",
            pw,
        ]
    };
    let sim = EseriesSim::start(dir.path(), true, &args("first"));
    let id = sim.register("first").await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let vref = create(&sim, &id, &ssd, "kept", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, g) = sim
        .request(
            "POST",
            &sys(&id, "/host-groups"),
            Some(&json!({"name": "trident"})),
        )
        .await;
    let group = g["clusterRef"].as_str().unwrap().to_string();
    let (s, m) = sim
        .request(
            "POST",
            &sys(&id, "/volume-mappings"),
            Some(&json!({"mappableObjectId": vref, "targetId": group})),
        )
        .await;
    assert_eq!(s, 200, "{m}");
    let (_, before) = sim.request("GET", &sys(&id, ""), None).await;
    drop(sim);
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(on_disk["format"], 1);
    assert_eq!(on_disk["array"]["volumes"][&vref]["label"], "kept");

    // Same password: everything is there, refs and serial unchanged.
    let sim = EseriesSim::start(dir.path(), true, &args("first"));
    let (_, after) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(after["chassisSerialNumber"], before["chassisSerialNumber"]);
    assert_eq!(after["wwn"], before["wwn"]);
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{vref}")), None)
        .await;
    assert_eq!(v["label"], "kept");
    assert_eq!(v["listOfMappings"][0]["mapRef"], group.as_str());
    assert_eq!(sim.register("first").await, id, "already registered");
    drop(sim);

    // The array's password changed: the proxy's copy is invalid until re-registered.
    let sim = EseriesSim::start(dir.path(), true, &args("second"));
    let (_, system) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(system["passwordStatus"], "invalid");
    assert_error(
        &sim.request("GET", &sys(&id, "/volumes"), None).await,
        422,
        "authFailPassword",
    );
    let stale = json!({"controllerAddresses": CONTROLLERS, "password": "first"});
    assert_error(
        &sim.request("POST", "/storage-systems", Some(&stale)).await,
        422,
        "authFailPassword",
    );
    let fresh = json!({"controllerAddresses": CONTROLLERS, "password": "second"});
    let (s, v) = sim.request("POST", "/storage-systems/", Some(&fresh)).await;
    assert_eq!((s, v["id"].as_str()), (200, Some(id.as_str())), "{v}");
    let (_, system) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(system["passwordStatus"], "valid");
    assert_eq!(volume_names(&sim, &id).await, ["kept"]);
    drop(sim);
    let sim = EseriesSim::start(dir.path(), true, &args("second"));
    assert_eq!(
        volume_names(&sim, &id).await,
        ["kept"],
        "the new password was persisted"
    );

    // POST /storage-systems/{id} {storedPassword} checks and updates it too.
    let got = sim
        .request(
            "POST",
            &format!("/storage-systems/{id}"),
            Some(&json!({"storedPassword": "wrong"})),
        )
        .await;
    assert_error(&got, 422, "authFailPassword");
    let (s, _) = sim
        .request(
            "POST",
            &format!("/storage-systems/{id}"),
            Some(&json!({"storedPassword": "second"})),
        )
        .await;
    assert_eq!(s, 200);
    drop(sim);
    std::fs::write(&state, b"{}").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch-sim"))
        .args(["eseries", "--listen", "127.0.0.1:0", "--state", state_arg])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("state file"),
        "{out:?}"
    );
}

#[test]
fn bad_command_lines_are_refused() {
    for args in [
        vec!["--pools", "p:tape:1GiB"],
        vec!["--pools", ""],
        vec!["--controllers", "a,b,c"],
        vec!["--controllers", "a,a"],
        vec!["--portals", "not-an-ip"],
        vec!["--features", "snapshots"],
        vec!["--fail", "volumes"],
        vec!["--fail", "volumes:2"],
        vec!["--fail", "volumes:1:200"],
        vec!["--fail", "volumes:1:422/later"],
        vec!["--fail", "FETCH@volumes:1"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch-sim"))
            .args(["eseries", "--listen", "127.0.0.1:0"])
            .args(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(args[0]), "{args:?}: {err}");
    }
}

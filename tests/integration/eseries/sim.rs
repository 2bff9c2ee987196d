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

/// A registered system of a running simulator: requests below `/storage-systems/{id}`.
pub(super) struct Sys {
    pub sim: EseriesSim,
    pub id: String,
    /// Keeps the certificate and state until the simulator is gone.
    _dir: tempfile::TempDir,
}

impl Sys {
    /// A simulator with the test pools and `extra` arguments, registered.
    pub async fn start(extra: &[&str]) -> Sys {
        let dir = tempfile::tempdir().unwrap();
        let (sim, id) = registered(dir.path(), false, extra).await;
        Sys { sim, id, _dir: dir }
    }

    pub async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.sim.request(method, &sys(&self.id, path), body).await
    }

    /// A GET that must answer 200.
    pub async fn get(&self, path: &str) -> Value {
        let (s, v) = self.call("GET", path, None).await;
        assert_eq!(s, 200, "GET {path}: {v}");
        v
    }

    /// A request that must answer `status` (a success).
    pub async fn ok(&self, method: &str, path: &str, body: Value, status: u16) -> Value {
        let (s, v) = self.call(method, path, Some(&body)).await;
        assert_eq!(s, status, "{method} {path}: {v}");
        v
    }

    /// A request that must be refused with `status` and `retcode`.
    pub async fn refused(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        status: u16,
        retcode: &str,
    ) -> Value {
        let got = self.call(method, path, body.as_ref()).await;
        assert_error(&got, status, retcode);
        got.1
    }

    pub async fn pool(&self, label: &str) -> String {
        pool_ref(&self.sim, &self.id, label).await
    }

    /// Creates a volume of `gib` GiB and returns its ref.
    pub async fn volume(&self, pool: &str, name: &str, gib: u64) -> String {
        let v = create(&self.sim, &self.id, pool, name, gib).await;
        v["volumeRef"].as_str().unwrap().to_string()
    }

    pub async fn names(&self) -> Vec<String> {
        volume_names(&self.sim, &self.id).await
    }
}

fn registration(password: &str) -> Value {
    json!({"controllerAddresses": CONTROLLERS, "password": password})
}

#[tokio::test]
async fn basic_auth_and_about() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(dir.path(), true, &["--username", "rw", "--password", "pw"]);
    let (host, port) = sim.host_port();
    assert_eq!(host, "127.0.0.1");
    assert_ne!(port, 0);
    assert!(sim.url.starts_with("https://"));
    assert!(
        sim.ca_pem()
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    let body = registration("");
    for creds in [None, Some(("rw", "wrong")), Some(("admin", "pw"))] {
        let (s, _) = sim
            .request_as(creds, "POST", "/storage-systems", Some(&body))
            .await;
        assert_eq!(s, 401, "{creds:?}");
    }
    let (s, v) = sim
        .request_as(Some(("rw", "pw")), "POST", "/storage-systems", Some(&body))
        .await;
    assert_eq!(s, 201, "{v}");
    let (s, about) = sim
        .request_as(None, "GET", "/devmgr/utils/about", None)
        .await;
    assert_eq!(s, 200, "about needs no credentials");
    assert_eq!(about["runningAsProxy"], true);
    assert!(about["version"].is_string());
}

#[tokio::test]
async fn registration_answers_201_then_200_and_checks_the_array_password() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(dir.path(), false, &["--array-password", "arraypw"]);
    let got = sim
        .request("POST", "/storage-systems", Some(&registration("nope")))
        .await;
    assert_error(&got, 422, "authFailPassword");
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list, json!([]), "a refused registration registers nothing");

    let (s, first) = sim
        .request("POST", "/storage-systems", Some(&registration("arraypw")))
        .await;
    assert_eq!(s, 201, "{first}");
    assert_eq!(first["alreadyExists"], false);
    let id = first["id"].as_str().unwrap();
    let (s, again) = sim
        .request("POST", "/storage-systems/", Some(&registration("arraypw")))
        .await;
    assert_eq!(s, 200, "a trailing slash, already registered: {again}");
    assert_eq!(
        (again["id"].as_str(), again["alreadyExists"].as_bool()),
        (Some(id), Some(true))
    );
    let swapped = json!({"controllerAddresses": [CONTROLLERS[1], CONTROLLERS[0]],
                         "password": "arraypw"});
    let (s, v) = sim
        .request("POST", "/storage-systems", Some(&swapped))
        .await;
    assert_eq!((s, v["id"].as_str()), (200, Some(id)), "the same array");
    let got = sim
        .request("POST", "/storage-systems", Some(&registration("nope")))
        .await;
    assert_error(&got, 422, "authFailPassword");
    for bad in [
        json!({"password": "arraypw"}),
        json!({"controllerAddresses": []}),
        json!({"controllerAddresses": "10.0.0.10"}),
        json!({"controllerAddresses": CONTROLLERS, "password": "arraypw", "color": 1}),
    ] {
        let got = sim.request("POST", "/storage-systems", Some(&bad)).await;
        assert_error(&got, 422, "invalidInput");
    }
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["passwordStatus"], "valid");
}

#[tokio::test]
async fn the_storage_system_object() {
    let a = Sys::start(&[]).await;
    let (s, system) = a
        .sim
        .request("GET", &format!("/storage-systems/{}/", a.id), None)
        .await;
    assert_eq!(s, 200, "{system}");
    assert_eq!(system["id"], a.id.as_str());
    assert_eq!(system["status"], "optimal");
    assert_eq!(system["passwordStatus"], "valid");
    assert!(
        system["chassisSerialNumber"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert_eq!(system["wwn"].as_str().unwrap().len(), 32);
    assert_eq!(
        system["freePoolSpace"],
        json!(30 * GIB),
        "online pools only: {system}"
    );
    assert_eq!(system["freePoolSpaceAsString"], (30 * GIB).to_string());
    assert_eq!(system["usedPoolSpace"], 0);
    assert_eq!(system["usedPoolSpaceAsString"], "0");
    assert_eq!(system["ip1"], CONTROLLERS[0]);
    assert_eq!(system["ip2"], CONTROLLERS[1]);
}

#[tokio::test]
async fn unknown_systems_paths_and_methods() {
    let a = Sys::start(&[]).await;
    let sim = &a.sim;
    for path in ["/storage-systems/nosuch", "/storage-systems/nosuch/volumes"] {
        assert_error(&sim.request("GET", path, None).await, 404, "notFound");
    }
    a.refused("GET", "/frobnicators", None, 404, "notFound")
        .await;
    let (s, _) = a.call("PUT", "/volumes", Some(&json!({}))).await;
    assert_eq!(s, 405);
    let (s, _) = sim.request("GET", "/devmgr/v1/storage-systems", None).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn a_registration_the_proxy_cannot_reach() {
    let a = Sys::start(&[]).await;
    let sim = &a.sim;
    let other = json!({"controllerAddresses": ["192.0.2.1", "192.0.2.2"], "password": "x"});
    let (s, v) = sim.request("POST", "/storage-systems", Some(&other)).await;
    assert_eq!(s, 201, "{v}");
    let id = v["id"].as_str().unwrap();
    let (s, v) = sim.request("POST", "/storage-systems", Some(&other)).await;
    assert_eq!((s, v["id"].as_str()), (200, Some(id)));
    let (_, o) = sim
        .request("GET", &format!("/storage-systems/{id}"), None)
        .await;
    assert_eq!(o["status"], "neverContacted");
    let got = sim.request("GET", &sys(id, "/storage-pools"), None).await;
    assert_error(&got, 424, "storageSystemOffline");
    let (s, _) = sim
        .request("DELETE", &format!("/storage-systems/{id}"), None)
        .await;
    assert_eq!(s, 204);
    let got = sim
        .request("GET", &format!("/storage-systems/{id}"), None)
        .await;
    assert_error(&got, 404, "notFound");
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list.as_array().unwrap().len(), 1, "the array's own stays");
}

#[tokio::test]
async fn an_offline_array_answers_424() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(dir.path(), false, &["--offline", "--array-password", "pw"]);
    let (s, v) = sim
        .request("POST", "/storage-systems", Some(&registration("unchecked")))
        .await;
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
        let got = sim.request("GET", &sys(id, path), None).await;
        assert_error(&got, 424, "storageSystemOffline");
    }
    let got = sim
        .request("POST", &sys(id, "/volumes"), Some(&json!({})))
        .await;
    assert_error(&got, 424, "storageSystemOffline");
}

#[tokio::test]
async fn a_create_or_a_map_answered_422_but_done() {
    let a = Sys::start(&[
        "--fail",
        "POST@volumes:1:422/after",
        "--fail",
        "POST@volume-mappings:1:422/after",
    ])
    .await;
    let ssd = a.pool("vg_ssd").await;
    let body = create_body(&ssd, "spurious", 1);
    a.refused("POST", "/volumes", Some(body.clone()), 422, "injectedFault")
        .await;
    let vols = a.get("/volumes").await;
    let v = &vols[0];
    assert_eq!(v["label"], "spurious", "created anyway");
    assert_eq!(
        v["metadata"],
        json!([{"key": "storch", "value": "spurious"}]),
        "with its tags"
    );
    let vref = v["volumeRef"].as_str().unwrap();
    // A request the array refuses is refused as such, not answered with the fault.
    a.refused("POST", "/volumes", Some(body), 422, "duplicateLabel")
        .await;
    let g = a
        .ok("POST", "/host-groups", json!({"name": "trident"}), 201)
        .await;
    let map = json!({"mappableObjectId": vref, "targetId": g["clusterRef"]});
    a.refused(
        "POST",
        "/volume-mappings",
        Some(map.clone()),
        422,
        "injectedFault",
    )
    .await;
    let v = a.get(&format!("/volumes/{vref}")).await;
    assert_eq!(v["listOfMappings"][0]["lun"], 1, "mapped anyway: {v}");
    a.refused(
        "POST",
        "/volume-mappings",
        Some(map),
        422,
        "volumeAlreadyMapped",
    )
    .await;
}

#[tokio::test]
async fn a_create_answered_422_without_its_tags() {
    let a = Sys::start(&["--fail", "POST@volumes:1:422/untagged"]).await;
    let ssd = a.pool("vg_ssd").await;
    a.refused(
        "POST",
        "/volumes",
        Some(create_body(&ssd, "bare", 1)),
        422,
        "injectedFault",
    )
    .await;
    let vols = a.get("/volumes").await;
    assert_eq!(vols[0]["label"], "bare");
    assert_eq!(vols[0]["metadata"], json!([]), "created without its tags");
}

#[tokio::test]
async fn faults_before_the_request_change_nothing() {
    let a = Sys::start(&[
        "--fail",
        "GET@host-types:1",
        "--fail",
        "DELETE@volumes/*:1:500",
        "--fail",
        "volume-copy-jobs/**:1:503",
        "--fail",
        "**:0",
    ])
    .await;
    let ssd = a.pool("vg_ssd").await;
    let v = a.volume(&ssd, "v", 1).await;
    a.refused("GET", "/host-types", None, 424, "injectedFault")
        .await;
    a.refused(
        "DELETE",
        &format!("/volumes/{v}"),
        None,
        500,
        "injectedFault",
    )
    .await;
    a.refused("GET", "/volume-copy-jobs", None, 503, "injectedFault")
        .await;
    assert_eq!(a.names().await, ["v"]);

    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(dir.path(), false, &["--fail", "POST@storage-systems:1:424"]);
    let got = sim
        .request("POST", "/storage-systems", Some(&registration("")))
        .await;
    assert_error(&got, 424, "injectedFault");
    let (_, list) = sim.request("GET", "/storage-systems", None).await;
    assert_eq!(list, json!([]));
}

fn state_args<'a>(state: &'a str, password: &'a str) -> Vec<&'a str> {
    vec![
        "--pools",
        POOLS,
        "--state",
        state,
        "--array-password",
        password,
    ]
}

#[tokio::test]
async fn state_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("es.json");
    let state_arg = state.to_str().unwrap();
    let sim = EseriesSim::start(dir.path(), true, &state_args(state_arg, "pw"));
    let id = sim.register("pw").await;
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
    let map = json!({"mappableObjectId": vref, "targetId": g["clusterRef"]});
    let (s, m) = sim
        .request("POST", &sys(&id, "/volume-mappings"), Some(&map))
        .await;
    assert_eq!(s, 200, "{m}");
    let (_, before) = sim.request("GET", &sys(&id, ""), None).await;
    drop(sim);
    let on_disk: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(on_disk["format"], 1);
    assert_eq!(on_disk["array"]["volumes"][&vref]["label"], "kept");

    let sim = EseriesSim::start(dir.path(), true, &state_args(state_arg, "pw"));
    let (_, after) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(after["chassisSerialNumber"], before["chassisSerialNumber"]);
    assert_eq!(after["wwn"], before["wwn"]);
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{vref}")), None)
        .await;
    assert_eq!(v["label"], "kept");
    assert_eq!(v["listOfMappings"][0], m);
    assert_eq!(sim.register("pw").await, id, "still registered");
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

#[tokio::test]
async fn a_changed_array_password_is_updated_by_registering_again() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("es.json");
    let state_arg = state.to_str().unwrap();
    let sim = EseriesSim::start(dir.path(), false, &state_args(state_arg, "first"));
    let id = sim.register("first").await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    create(&sim, &id, &ssd, "kept", 1).await;
    drop(sim);

    // The array's password changed: the proxy's copy is invalid until re-registered.
    let sim = EseriesSim::start(dir.path(), false, &state_args(state_arg, "second"));
    let (_, system) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(system["passwordStatus"], "invalid");
    let got = sim.request("GET", &sys(&id, "/volumes"), None).await;
    assert_error(&got, 422, "authFailPassword");
    let got = sim
        .request("POST", "/storage-systems", Some(&registration("first")))
        .await;
    assert_error(&got, 422, "authFailPassword");
    let (s, v) = sim
        .request("POST", "/storage-systems/", Some(&registration("second")))
        .await;
    assert_eq!((s, v["id"].as_str()), (200, Some(id.as_str())), "{v}");
    let (_, system) = sim.request("GET", &sys(&id, ""), None).await;
    assert_eq!(system["passwordStatus"], "valid");
    assert_eq!(volume_names(&sim, &id).await, ["kept"]);
    drop(sim);
    let sim = EseriesSim::start(dir.path(), false, &state_args(state_arg, "second"));
    assert_eq!(
        volume_names(&sim, &id).await,
        ["kept"],
        "the new password was persisted"
    );

    // POST /storage-systems/{id} {storedPassword} checks and updates it too.
    let path = format!("/storage-systems/{id}");
    let got = sim
        .request("POST", &path, Some(&json!({"storedPassword": "wrong"})))
        .await;
    assert_error(&got, 422, "authFailPassword");
    let (s, v) = sim
        .request("POST", &path, Some(&json!({"storedPassword": "second"})))
        .await;
    assert_eq!(
        (s, v["passwordStatus"].as_str()),
        (200, Some("valid")),
        "{v}"
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
        vec!["--host-groups", "g,g"],
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

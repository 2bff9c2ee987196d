//! The `storch-sim nexentastor` binary spoken to over real HTTPS with raw requests: the
//! helpers the other files share, login and bearer tokens, token expiry, request refusals,
//! injected faults, the state surviving a restart, an HA pair failing over, and the command
//! line.

use serde_json::{Value, json};

use crate::support::nexentastor::{NexentaSim, esc};

pub(super) const GIB: u64 = 1 << 30;
/// Volume groups of the test appliances: two in a 10 GiB pool, one in a 4 GiB pool.
pub(super) const VGS: &str = "tank/csi:10GiB,tank/other:10GiB,fast/vg:4GiB";

/// Checks an error answer: its status and the NEF error body with `code`.
pub(super) fn assert_error(got: &(u16, Value), status: u16, code: &str) {
    let (s, body) = got;
    assert_eq!(*s, status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    for k in ["name", "message"] {
        assert!(body[k].is_string(), "{k} in {body}");
    }
}

/// A running simulator with the test volume groups and its directory.
pub(super) struct Nx {
    pub sim: NexentaSim,
    /// Keeps the certificate until the simulator is gone.
    _dir: tempfile::TempDir,
}

impl Nx {
    pub fn start(extra: &[&str]) -> Nx {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--volume-groups", VGS];
        args.extend_from_slice(extra);
        let sim = NexentaSim::start(dir.path(), &args);
        Nx { sim, _dir: dir }
    }

    /// A request (polled to its end when it answers 202) that must answer `status`.
    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>, status: u16) -> Value {
        let (s, v) = self.sim.run(method, path, body.as_ref()).await;
        assert_eq!(s, status, "{method} {path}: {v}");
        v
    }

    /// A request (polled to its end) that must be refused with `status` and `code`.
    pub async fn refused(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        status: u16,
        code: &str,
    ) {
        let got = self.sim.run(method, path, body.as_ref()).await;
        assert_error(&got, status, code);
    }

    pub async fn get(&self, path: &str) -> Value {
        self.ok("GET", path, None, 200).await
    }

    /// Creates a zvol (`sparse` or thick) of `size` bytes.
    pub async fn zvol(&self, path: &str, size: u64, sparse: bool) {
        let body = json!({"path": path, "volumeSize": size, "sparseVolume": sparse});
        self.ok("POST", "/storage/volumes", Some(body), 201).await;
    }

    /// The `path`s of a collection's `data`.
    pub async fn paths(&self, collection: &str) -> Vec<String> {
        let v = self.get(collection).await;
        v["data"]
            .as_array()
            .unwrap_or_else(|| panic!("{collection}: {v}"))
            .iter()
            .map(|i| {
                i["path"]
                    .as_str()
                    .or(i["name"].as_str())
                    .unwrap()
                    .to_string()
            })
            .collect()
    }
}

#[tokio::test]
async fn login_gives_a_bearer_token_and_everything_else_needs_one() {
    let nx = Nx::start(&["--username", "root", "--password", "s3cret"]);
    let sim = &nx.sim;
    let vgs = "/storage/volumeGroups";
    assert_error(&sim.raw(None, "GET", vgs, None).await, 401, "EAUTH");
    assert_error(&sim.raw(Some("nope"), "GET", vgs, None).await, 401, "EAUTH");
    let wrong = json!({"username": "root", "password": "x"});
    assert_error(
        &sim.raw(None, "POST", "/auth/login", Some(&wrong)).await,
        401,
        "EAUTH",
    );
    for bad in [
        json!({"username": "root"}),
        json!({"username": "root", "password": "s3cret", "x": 1}),
    ] {
        let got = sim.raw(None, "POST", "/auth/login", Some(&bad)).await;
        assert_error(&got, 400, "EBADARG");
    }
    let good = json!({"username": "root", "password": "s3cret"});
    let (s, v) = sim.raw(None, "POST", "/auth/login", Some(&good)).await;
    assert_eq!(s, 200, "{v}");
    let token = v["token"].as_str().unwrap();
    let (s, v) = sim.raw(Some(token), "GET", vgs, None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["data"].as_array().unwrap().len(), 3, "{v}");
    // A second login gives a second token; both stay valid.
    let (_, v2) = sim.raw(None, "POST", "/auth/login", Some(&good)).await;
    assert_ne!(v2["token"], v["token"]);
    assert_eq!(sim.raw(Some(token), "GET", vgs, None).await.0, 200);
}

#[tokio::test]
async fn a_token_expires_after_its_lifetime_and_on_the_control_request() {
    let nx = Nx::start(&["--token-ttl-secs", "1"]);
    let sim = &nx.sim;
    let token = sim.login().await;
    let path = "/storage/pools";
    // The first answer may come before or after the second passes; either way the token
    // ends up refused with EAUTH, and a new login works again.
    crate::support::eventually("the token to expire", async || {
        let got = sim.raw(Some(&token), "GET", path, None).await;
        if got.0 == 401 {
            assert_error(&got, 401, "EAUTH");
            return true;
        }
        assert_eq!(got.0, 200, "{}", got.1);
        false
    })
    .await;
    let fresh = sim.login().await;
    let got = sim.raw(Some(&fresh), "GET", path, None).await;
    // The fresh token is good until it ages too; refused only with EAUTH.
    assert!(got.0 == 200 || got.1["code"] == "EAUTH", "{}", got.1);

    let nx = Nx::start(&[]);
    let token = nx.sim.login().await;
    assert_eq!(nx.sim.raw(Some(&token), "GET", path, None).await.0, 200);
    assert_eq!(
        nx.sim.control("POST", "/__sim/expire-tokens").await["tokens"],
        0
    );
    assert_error(
        &nx.sim.raw(Some(&token), "GET", path, None).await,
        401,
        "EAUTH",
    );
    let token = nx.sim.login().await;
    assert_eq!(nx.sim.raw(Some(&token), "GET", path, None).await.0, 200);
}

#[tokio::test]
async fn malformed_requests_are_refused_and_change_nothing() {
    let nx = Nx::start(&[]);
    let sim = &nx.sim;
    let token = sim.login().await;
    let t = Some(token.as_str());
    assert_error(
        &sim.raw(t, "GET", "/storage/nothing", None).await,
        404,
        "ENOENT",
    );
    assert_error(
        &sim.raw(t, "DELETE", "/storage/volumeGroups", None).await,
        405,
        "EBADARG",
    );
    assert_error(
        &sim.raw(
            t,
            "POST",
            "/storage/volumeGroups",
            Some(&json!({"path": "tank/x"})),
        )
        .await,
        405,
        "EBADARG",
    );
    // Not JSON, unknown and missing fields, mistyped values, unknown query parameters.
    let r = sim.post_text(&token, "/storage/volumes", "{not json").await;
    assert_error(&r, 400, "EBADARG");
    for body in [
        json!({"path": "tank/csi/v", "volumeSize": GIB, "colour": "red"}),
        json!({"volumeSize": GIB}),
        json!({"path": "tank/csi/v"}),
        json!({"path": "tank/csi/v", "volumeSize": "1G"}),
        json!({"path": "tank/csi/v", "volumeSize": GIB, "sparseVolume": "yes"}),
        json!(["tank/csi/v"]),
    ] {
        let got = sim.raw(t, "POST", "/storage/volumes", Some(&body)).await;
        assert_error(&got, 400, "EBADARG");
    }
    let got = sim.raw(t, "GET", "/storage/volumes?colour=red", None).await;
    assert_error(&got, 400, "EBADARG");
    let got = sim.raw(t, "GET", "/storage/volumes?limit=x", None).await;
    assert_error(&got, 400, "EBADARG");
    assert!(nx.paths("/storage/volumes").await.is_empty());
    assert!(nx.paths("/storage/snapshots").await.is_empty());
    // `fields` naming a field the objects do not have.
    nx.zvol("tank/csi/v", GIB, true).await;
    let got = sim
        .raw(t, "GET", "/storage/volumes?fields=path,colour", None)
        .await;
    assert_error(&got, 400, "EBADARG");
    let one = "/storage/volumes/tank%2Fcsi%2Fv?fields=colour";
    assert_error(&sim.raw(t, "GET", one, None).await, 400, "EBADARG");
}

#[tokio::test]
async fn injected_faults_answer_instead_of_the_request() {
    let nx = Nx::start(&[
        "--fail",
        "POST@storage/volumes:1",
        "--fail",
        "storage/snapshots/*:1:404",
        "--fail",
        "san/**:1:503/EAGAIN",
        "--fail",
        "GET@storage/pools:0",
    ]);
    let body = json!({"path": "tank/csi/v1", "volumeSize": GIB});
    nx.refused("POST", "/storage/volumes", Some(body), 500, "EBUSY")
        .await;
    assert!(
        nx.paths("/storage/volumes").await.is_empty(),
        "nothing created"
    );
    let snap = format!("/storage/snapshots/{}", esc("tank/csi/v1@s"));
    nx.refused("GET", &snap, None, 404, "ENOENT").await;
    // The rule names one segment below snapshots: the collection still answers.
    nx.get("/storage/snapshots").await;
    nx.refused("GET", "/san/iscsi/targets", None, 503, "EAGAIN")
        .await;
    nx.refused("GET", "/san/lunMappings", None, 503, "EAGAIN")
        .await;
    // Rate 0 never fails.
    for _ in 0..5 {
        nx.get("/storage/pools").await;
    }
}

#[tokio::test]
async fn the_appliance_survives_a_restart_from_its_state_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("nx.json");
    let state_arg = state.to_str().unwrap();
    let args = ["--volume-groups", VGS, "--state", state_arg];
    let first = NexentaSim::start(dir.path(), &args);
    let (s, _) = first
        .run(
            "POST",
            "/storage/volumes",
            Some(&json!({"path": "tank/csi/keep", "volumeSize": GIB})),
        )
        .await;
    assert_eq!(s, 201);
    let (s, _) = first
        .run(
            "POST",
            "/storage/snapshots",
            Some(&json!({"path": "tank/csi/keep@s1"})),
        )
        .await;
    assert_eq!(s, 201);
    let (s, _) = first
        .run(
            "POST",
            "/san/hostgroups",
            Some(&json!({"name": "hg", "members": ["iqn.1993-08.org.debian:01:n1"]})),
        )
        .await;
    assert_eq!(s, 201);
    drop(first);
    // Another --volume-groups does not reshape an existing appliance.
    let args = ["--volume-groups", "other/vg:1GiB", "--state", state_arg];
    let second = NexentaSim::start(dir.path(), &args);
    let (_, v) = second
        .request(
            "GET",
            &format!("/storage/volumes/{}", esc("tank/csi/keep")),
            None,
        )
        .await;
    assert_eq!(v["volumeSize"], GIB, "{v}");
    let (_, v) = second
        .request("GET", "/storage/snapshots?parent=tank%2Fcsi%2Fkeep", None)
        .await;
    assert_eq!(v["data"][0]["path"], "tank/csi/keep@s1", "{v}");
    let (_, v) = second.request("GET", "/san/hostgroups/hg", None).await;
    assert_eq!(v["members"], json!(["iqn.1993-08.org.debian:01:n1"]));
    let (_, v) = second
        .request("GET", "/storage/volumeGroups?pool=other", None)
        .await;
    assert_eq!(v["data"], json!([]), "{v}");
}

#[tokio::test]
async fn an_ha_pair_shares_one_appliance_and_fails_over() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("pair.json");
    let state_arg = state.to_str().unwrap();
    let a = NexentaSim::start(dir.path(), &["--volume-groups", VGS, "--state", state_arg]);
    let b = NexentaSim::start(
        dir.path(),
        &["--volume-groups", VGS, "--state", state_arg, "--down"],
    );
    // Each node has its own certificate.
    assert!(a.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    assert_ne!(a.ca_pem(), b.ca_pem());
    // B starts down: connections fail; A serves.
    let token_a = a.login().await;
    assert!(
        b.try_raw(None, "GET", "/storage/pools", None)
            .await
            .is_err()
    );
    assert_eq!(b.control("GET", "/__sim/status").await["down"], true);
    let body = json!({"path": "tank/csi/v1", "volumeSize": GIB, "sparseVolume": false});
    assert_eq!(a.run("POST", "/storage/volumes", Some(&body)).await.0, 201);
    // B comes up and sees what A made; A's token is A's own.
    assert_eq!(b.control("POST", "/__sim/up").await["down"], false);
    assert_error(
        &b.raw(Some(&token_a), "GET", "/storage/volumes", None).await,
        401,
        "EAUTH",
    );
    let (_, v) = b
        .request("GET", "/storage/volumes?parent=tank%2Fcsi", None)
        .await;
    assert_eq!(v["data"][0]["path"], "tank/csi/v1", "{v}");
    // A job started on B is polled to its end on A.
    let (s, job) = b
        .request(
            "POST",
            "/storage/volumes",
            Some(&json!({"path": "tank/csi/v2", "volumeSize": GIB})),
        )
        .await;
    assert_eq!(s, 202, "{job}");
    let href = job["links"][0]["href"].as_str().unwrap().to_string();
    let mut status = 202;
    while status == 202 {
        status = a.raw(Some(&token_a), "GET", &href, None).await.0;
    }
    assert_eq!(status, 201);
    // A goes down mid-run: a kept-alive connection and new ones fail; B carries on.
    assert_eq!(a.control("POST", "/__sim/down").await["down"], true);
    assert!(
        a.try_raw(Some(&token_a), "GET", "/storage/pools", None)
            .await
            .is_err()
    );
    let (s, _) = b
        .run(
            "POST",
            "/storage/snapshots",
            Some(&json!({"path": "tank/csi/v1@s"})),
        )
        .await;
    assert_eq!(s, 201);
    // A comes back with its token still valid and sees B's snapshot; space is shared too.
    a.control("POST", "/__sim/up").await;
    let (s, v) = a
        .raw(Some(&token_a), "GET", "/storage/snapshots", None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["data"][0]["path"], "tank/csi/v1@s", "{v}");
    let (_, va) = a
        .raw(Some(&token_a), "GET", "/storage/pools/tank", None)
        .await;
    let (_, vb) = b.request("GET", "/storage/pools/tank", None).await;
    assert_eq!(va, vb);
    assert_eq!(va["bytesAvailable"], 10 * GIB - 2 * GIB, "{va}");
}

#[test]
fn the_command_line_refuses_bad_options_by_name() {
    for (args, needle) in [
        (vec!["--volume-groups", "tank:1GiB"], "--volume-groups"),
        (
            vec!["--volume-groups", "tank/a:1GiB,tank/b:2GiB"],
            "same pool size",
        ),
        (vec!["--volume-groups", "tank/a:lots"], "--volume-groups"),
        (vec!["--fail", "storage/volumes"], "--fail"),
        (vec!["--fail", "PATCH@storage/volumes:1"], "--fail"),
        (vec!["--fail", "storage/volumes:1:200"], "--fail"),
        (vec!["--fail", "**/volumes:1"], "--fail"),
        (vec!["--token-ttl-secs", "0"], "--token-ttl-secs"),
        (vec!["--page-size", "0"], "--page-size"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_storch-sim"))
            .args(["nexentastor", "--listen", "127.0.0.1:0"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

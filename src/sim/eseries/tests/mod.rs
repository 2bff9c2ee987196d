//! Unit tests of the E-Series simulator: the fault rules, the routing table, the command line,
//! and requests through `handle` (the layer under the HTTP server) for what the integration
//! tests (tests/integration/eseries/, against the binary) cannot reach: the test hooks, call
//! counts and the state file written in place.

use serde_json::{Value, json};

use super::*;

fn opts() -> SimOptions {
    SimOptions {
        array: ArraySpec {
            pools: PoolSpec::parse_list("p1:ssd:4GiB,p2:hdd:4GiB:raidDiskPool").unwrap(),
            password: "pw".into(),
            ..SimOptions::default().array
        },
        tuning: Tuning {
            expand_polls: 1,
            copy_polls: 0,
        },
        ..SimOptions::default()
    }
}

async fn call(sh: &Shared, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let r = handle(
        sh,
        HttpRequest {
            method: method.into(),
            path: format!("/devmgr/v2{path}"),
            query: query.into(),
            authorization: Some(crate::sim::basic_auth(DEFAULT_USERNAME, DEFAULT_PASSWORD)),
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        },
    )
    .await;
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

async fn register(sh: &Shared) -> String {
    let (s, v) = call(
        sh,
        "POST",
        "/storage-systems",
        Some(json!({"controllerAddresses": ["10.0.0.10", "10.0.0.11"], "password": "pw"})),
    )
    .await;
    assert!(s == 200 || s == 201, "{v}");
    v["id"].as_str().unwrap().to_string()
}

#[test]
fn fail_rules_parse_and_match() {
    let r = FailRule::parse("POST@volumes:1:422/after").unwrap();
    assert_eq!(r.target.method.as_deref(), Some("POST"));
    assert_eq!(r.target.path, ["storage-systems", "*", "volumes"]);
    assert_eq!((r.status, r.mode), (422, FailMode::After));
    assert!(
        r.target
            .matches("POST", &["storage-systems", "abc", "volumes"])
    );
    assert!(
        !r.target
            .matches("GET", &["storage-systems", "abc", "volumes"])
    );
    assert!(
        !r.target
            .matches("POST", &["storage-systems", "abc", "volumes", "x"])
    );
    let r = FailRule::parse("volumes/*/expand:0.5").unwrap();
    assert_eq!(
        (r.status, r.mode, r.target.rate),
        (424, FailMode::Before, 0.5)
    );
    assert!(r.target.matches(
        "GET",
        &["storage-systems", "1", "volumes", "02ab", "expand"]
    ));
    let r = FailRule::parse("storage-systems:1:500").unwrap();
    assert!(r.target.matches("POST", &["storage-systems"]));
    assert!(!r.target.matches("GET", &["storage-systems", "1"]));
    let r = FailRule::parse("**:1:503").unwrap();
    assert!(
        r.target
            .matches("DELETE", &["storage-systems", "1", "hosts", "84ab"])
    );
    let r = FailRule::parse("volume-mappings/**:1:422/untagged").unwrap();
    assert_eq!(r.mode, FailMode::Untagged);
    assert!(
        r.target
            .matches("GET", &["storage-systems", "1", "volume-mappings"])
    );
    for bad in [
        "volumes",
        ":1",
        "volumes:x",
        "volumes:1.5",
        "volumes:1:200",
        "volumes:1:422/later",
        "PATCH@volumes:1",
        "**/volumes:1",
        "volumes:1:422:x",
    ] {
        assert!(FailRule::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn routes_resolve_by_method_and_path() {
    let r = api::resolve("GET", &["storage-systems", "id1", "volumes", "02ab"])
        .unwrap_or_else(|_| panic!());
    assert_eq!(r.route.path, "volumes/*");
    assert_eq!((r.system, r.args.as_slice()), ("id1", ["02ab"].as_slice()));
    let r = api::resolve("POST", &["storage-systems"]).unwrap_or_else(|_| panic!());
    assert_eq!(r.route.path, "storage-systems");
    let r = api::resolve("GET", &["storage-systems", "id1"]).unwrap_or_else(|_| panic!());
    assert_eq!(r.args, ["id1"]);
    assert!(matches!(
        api::resolve("PUT", &["storage-systems", "id1", "volumes"]),
        Err(true)
    ));
    assert!(matches!(
        api::resolve("GET", &["storage-systems", "id1", "snapshots"]),
        Err(false)
    ));
    for route in api::ROUTES {
        let twins = api::ROUTES
            .iter()
            .filter(|r| r.method == route.method && r.path == route.path)
            .count();
        assert_eq!(twins, 1, "{} {} is routed once", route.method, route.path);
    }
}

#[tokio::test]
async fn test_hooks_call_counts_and_the_offline_switch() {
    let sim = EseriesSim::start(opts()).await.unwrap();
    let sh = &sim.shared;
    let id = register(sh).await;
    let (s, v) = call(sh, "GET", &format!("/storage-systems/{id}/volumes/"), None).await;
    assert_eq!((s, v), (200, json!([])));
    assert_eq!(sim.calls("POST storage-systems"), 1);
    assert_eq!(sim.calls("GET volumes"), 1);
    sim.with_proxy(|p| p.array.offline = true);
    let (s, v) = call(sh, "GET", &format!("/storage-systems/{id}/volumes"), None).await;
    assert_eq!(s, 424);
    assert_eq!(v["retcode"], "storageSystemOffline");
    let (s, v) = call(sh, "GET", &format!("/storage-systems/{id}"), None).await;
    assert_eq!((s, v["status"].as_str()), (200, Some("offline")));
    sim.with_proxy(|p| p.array.offline = false);
    sim.set_fail_rules(vec![FailRule::parse("GET@volumes:1:503").unwrap()]);
    let (s, v) = call(sh, "GET", &format!("/storage-systems/{id}/volumes"), None).await;
    assert_eq!((s, v["retcode"].as_str()), (503, Some("injectedFault")));
    sim.set_fail_rules(Vec::new());
    let r = handle(
        sh,
        HttpRequest {
            method: "GET".into(),
            path: "/devmgr/v2/storage-systems".into(),
            query: String::new(),
            authorization: None,
            body: Vec::new(),
        },
    )
    .await;
    assert_eq!(r.status, 401);
    assert!(r.headers.iter().any(|(k, _)| *k == "WWW-Authenticate"));
    let (s, v) = call(sh, "POST", "/storage-systems", None).await;
    assert_eq!((s, v["retcode"].as_str()), (422, Some("invalidInput")));
    let r = handle(
        sh,
        HttpRequest {
            method: "POST".into(),
            path: "/devmgr/v2/storage-systems".into(),
            query: String::new(),
            authorization: Some(crate::sim::basic_auth(DEFAULT_USERNAME, DEFAULT_PASSWORD)),
            body: b"{not json".to_vec(),
        },
    )
    .await;
    assert_eq!(r.status, 400, "a body that is not JSON");
    assert!(sim.proxy().systems.contains_key(&id));
    sim.stop().await;
}

#[tokio::test]
async fn the_state_file_holds_every_change_and_start_settings_apply() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("es.json");
    let o = SimOptions {
        state: Some(path.clone()),
        ..opts()
    };
    let (id, vref) = {
        let sh = shared(&o).unwrap();
        let id = register(&sh).await;
        let pool = sh.store.lock().array.pools.keys().next().unwrap().clone();
        let (s, v) = call(
            &sh,
            "POST",
            &format!("/storage-systems/{id}/volumes"),
            Some(json!({"poolId": pool, "name": "v", "sizeUnit": "mb", "size": 64})),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        let vref = v["volumeRef"].as_str().unwrap().to_string();
        let (s, _) = call(
            &sh,
            "POST",
            &format!("/storage-systems/{id}/volumes/{vref}/expand"),
            Some(json!({"expansionSize": 128, "sizeUnit": "mb"})),
        )
        .await;
        assert_eq!(s, 200);
        (id, vref)
    };
    let on_disk: Proxy = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let e = on_disk.array.volumes[&vref].expansion.clone().unwrap();
    assert_eq!((e.target, e.polls_left), (128 << 20, 1), "written in place");

    let o2 = SimOptions {
        array: ArraySpec {
            password: "new".into(),
            features: Features::parse("none").unwrap(),
            ..o.array.clone()
        },
        ..o.clone()
    };
    let sh = shared(&o2).unwrap();
    let p = sh.store.lock().clone();
    assert_eq!(
        p.array.password, "new",
        "the array's password is the option's"
    );
    assert!(!p.array.features.expand);
    assert_eq!(p.array.volumes[&vref].label, "v");
    let (s, v) = call(&sh, "GET", &format!("/storage-systems/{id}/volumes"), None).await;
    assert_eq!((s, v["retcode"].as_str()), (422, Some("authFailPassword")));
    std::fs::write(&path, br#"{"format": 99}"#).unwrap();
    assert!(matches!(shared(&o), Err(SimError::State { .. })));
}

#[test]
fn command_line_options() {
    use crate::sim::cli::{Cli, Command};
    use clap::Parser;
    let parse = |args: &[&str]| {
        let cli = Cli::try_parse_from([&["storch-sim", "eseries"], args].concat())
            .map_err(|e| e.to_string())?;
        match cli.command {
            Command::Eseries(a) => a.options(),
            _ => unreachable!(),
        }
    };
    let o = parse(&[]).unwrap();
    assert_eq!(o.array.pools.len(), 2);
    assert_eq!(o.array.controllers, ["10.0.0.10", "10.0.0.11"]);
    assert_eq!(o.array.features, Features::ALL);
    assert_eq!(
        (o.username.as_str(), o.array.password.as_str()),
        ("admin", "")
    );
    let o = parse(&[
        "--pools",
        "a:ssd:1TiB:raid5:no-da",
        "--controllers",
        "192.0.2.1",
        "--portals",
        "192.0.2.10",
        "--array-password",
        "s3cret",
        "--offline",
        "--features",
        "expand",
        "--fail",
        "POST@volumes:0.5:422/after",
        "--expand-polls",
        "4",
        "--copy-polls",
        "0",
        "--host-groups",
        "trident,other",
        "--latency-ms",
        "5",
    ])
    .unwrap();
    assert_eq!(o.array.pools[0].raid, "raid5");
    assert!(!o.array.pools[0].da_capable);
    assert_eq!(o.array.controllers, ["192.0.2.1"]);
    assert!(o.array.offline);
    assert_eq!(
        o.array.features,
        Features {
            expand: true,
            copy: false
        }
    );
    assert_eq!(o.fail[0].mode, FailMode::After);
    assert_eq!((o.tuning.expand_polls, o.tuning.copy_polls), (4, 0));
    assert_eq!(o.latency, Duration::from_millis(5));
    assert_eq!(o.array.host_groups, ["trident", "other"]);
    assert!(parse(&[]).unwrap().array.host_groups.is_empty());
    for bad in [
        &["--pools", "a:ssd"][..],
        &["--controllers", "a,b,c"],
        &["--controllers", ""],
        &["--portals", "host.example"],
        &["--features", "clones"],
        &["--fail", "volumes"],
        &["--host-groups", "a,a"],
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
}

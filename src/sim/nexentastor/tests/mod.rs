//! Unit tests of the NexentaStor simulator: the fault rules, the routing table, path decoding,
//! the command line's volume groups, and requests through `handle` (the layer under the HTTP
//! server) for what the integration tests (tests/integration/nexentastor/, against the binary)
//! cannot reach: call counts and the appliance as the handle holds it.

use serde_json::{Value, json};

use super::*;

fn segs(p: &str) -> Vec<String> {
    p.split('/').map(str::to_string).collect()
}

#[test]
fn fail_rules_parse_and_match() {
    let r = FailRule::parse("POST@storage/volumes:1").unwrap();
    assert_eq!(
        (r.method.as_deref(), r.status, r.code.as_str()),
        (Some("POST"), 500, "EBUSY")
    );
    assert!(r.matches("POST", &segs("storage/volumes")));
    assert!(!r.matches("GET", &segs("storage/volumes")));
    assert!(!r.matches("POST", &segs("storage/volumes/x")));
    let r = FailRule::parse("storage/volumes/*:0.5:404").unwrap();
    assert_eq!((r.rate, r.status, r.code.as_str()), (0.5, 404, "ENOENT"));
    assert!(r.matches("DELETE", &segs("storage/volumes/tank/csi/v")[..3]));
    let r = FailRule::parse("san/**:1:401").unwrap();
    assert_eq!(r.code, "EAUTH");
    assert!(r.matches("GET", &segs("san/iscsi/targets")));
    assert_eq!(FailRule::parse("**:1:422/EFOO").unwrap().code, "EFOO");
    assert_eq!(FailRule::parse("x:1:409").unwrap().code, "EEXIST");
    assert_eq!(FailRule::parse("x:1:400").unwrap().code, "EINVAL");
    for bad in [
        "storage/volumes",
        ":1",
        "x:y",
        "x:2",
        "x:1:200",
        "x:1:500/ebusy",
        "PATCH@x:1",
        "**/x:1",
        "x:1:500:9",
    ] {
        assert!(FailRule::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn routes_are_unique_and_paths_decode() {
    for route in api::ROUTES {
        let twins = api::ROUTES
            .iter()
            .filter(|r| r.method == route.method && r.path == route.path)
            .count();
        assert_eq!(twins, 1, "{} {} is routed once", route.method, route.path);
    }
    let (route, args) = api::resolve("GET", &segments("/storage/volumes/tank%2Fcsi%2Fv").unwrap())
        .unwrap_or_else(|_| panic!());
    assert_eq!(
        (route.path, args.as_slice()),
        ("storage/volumes/*", ["tank/csi/v".to_string()].as_slice())
    );
    let s = segments("/v1.2.6/san/iscsi/remoteInitiators").unwrap();
    assert_eq!(s, segs("san/iscsi/remoteInitiators"));
    assert!(matches!(
        api::resolve("PUT", &segs("storage/pools")),
        Err(true)
    ));
    assert!(matches!(
        api::resolve("GET", &segs("storage/filesystems")),
        Err(false)
    ));
    assert!(segments("/storage/volumes/%zz").is_err());
    assert_eq!(api::decode("a+b%40c", true).unwrap(), "a b@c");
    assert_eq!(api::decode("a+b", false).unwrap(), "a+b");
    assert_eq!(api::encode("tank/csi@s 1"), "tank%2Fcsi%40s%201");
    assert!(api::is_version("v1") && api::is_version("v1.2.6"));
    assert!(!api::is_version("v") && !api::is_version("v1.") && !api::is_version("volumes"));
}

#[test]
fn volume_group_specs_parse() {
    let v = VolumeGroupSpec::parse_list("tank/a:1GiB, tank/b:1GiB,fast/c:2GiB").unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(
        (v[2].pool.as_str(), v[2].group.as_str(), v[2].pool_size),
        ("fast", "c", 2 << 30)
    );
    for bad in [
        "",
        "tank:1GiB",
        "tank/a",
        "tank/a:0",
        "tank/a b:1GiB",
        "t/a:1GiB,t/a:1GiB",
        "t/a:1GiB,t/b:2GiB",
    ] {
        assert!(VolumeGroupSpec::parse_list(bad).is_err(), "{bad}");
    }
}

async fn call(
    sh: &Shared,
    token: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let r = handle(
        sh,
        HttpRequest {
            method: method.into(),
            path: path.into(),
            query: query.into(),
            authorization: Some(format!("Bearer {token}")),
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        },
    )
    .await;
    (
        r.status,
        serde_json::from_slice(&r.body).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn requests_are_counted_by_route_and_jobs_run_on_their_last_poll() {
    let sh = shared(&SimOptions::default()).unwrap();
    let login = json!({"username": DEFAULT_USERNAME, "password": DEFAULT_PASSWORD});
    let (s, v) = call(&sh, "", "POST", "/auth/login", Some(login)).await;
    assert_eq!(s, 200);
    let t = v["token"].as_str().unwrap().to_string();
    let body = json!({"path": "tank/csi/v", "volumeSize": 1 << 30});
    let (s, job) = call(&sh, &t, "POST", "/storage/volumes", Some(body)).await;
    assert_eq!(s, 202);
    assert!(
        sh.store.snapshot().volumes.is_empty(),
        "not before its job ends"
    );
    let href = job["links"][0]["href"].as_str().unwrap();
    assert_eq!(call(&sh, &t, "GET", href, None).await.0, 202);
    assert_eq!(call(&sh, &t, "GET", href, None).await.0, 201);
    assert!(sh.store.snapshot().volumes.contains_key("tank/csi/v"));
    assert_eq!(sh.store.calls("POST auth/login"), 1);
    assert_eq!(sh.store.calls("POST storage/volumes"), 1);
    assert_eq!(sh.store.calls("GET jobStatus/*"), 2);
}

//! storch's own REST routes on a real socket: snapshots, resize, clones from snapshots,
//! placement explanations and the OpenAPI document, each in success and in error.

use crate::support::http::*;
use serde_json::{Value, json};

/// A backend `lab` with `p1` (SSD, snapshots) and `p2` (HDD, no snapshots); classes `fast`
/// (→ p1) and `slow` (→ p2).
async fn lab(client: &reqwest::Client, s: &TestServer) {
    let backend = crate::support::fake_backend(
        "lab",
        "file",
        &[("p1", crate::support::ssd()), ("p2", crate::support::hdd())],
    );
    let r = post(client, &s.url("/trident/v1/backend"), backend).await;
    assert_eq!(r.status, 201, "{}", r.json);
    for (name, media) in [("fast", "ssd"), ("slow", "hdd")] {
        let class = json!({"version": "1", "name": name, "attributes": {"media": media}});
        let r = post(client, &s.url("/trident/v1/storageclass"), class).await;
        assert_eq!(r.status, 201, "{}", r.json);
    }
}

async fn volume(client: &reqwest::Client, s: &TestServer, name: &str, class: &str) {
    let body = json!({"name": name, "size": "1Gi", "storageClass": class});
    let r = post(client, &s.url("/trident/v1/volume"), body).await;
    assert_eq!(r.status, 201, "{}", r.json);
}

fn is_rfc3339_ms(s: &str) -> bool {
    // 2026-01-02T03:04:05.678Z
    s.len() == 24
        && s.ends_with('Z')
        && s.as_bytes()[10] == b'T'
        && s.as_bytes()[19] == b'.'
        && humantime::parse_rfc3339(s).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_lifecycle_and_clone_from_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    lab(&c, &s).await;
    volume(&c, &s, "v1", "fast").await;

    let r = post(
        &c,
        &s.url("/trident/v1/volume/v1/snapshot"),
        json!({"name": "s1"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let snap = r.json["snapshot"].clone();
    let keys: Vec<&String> = snap.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["created", "name", "sizeBytes", "state", "volume"]);
    assert_eq!(snap["volume"], "v1");
    assert_eq!(snap["name"], "s1");
    assert_eq!(snap["state"], "online");
    assert!(snap["sizeBytes"].is_u64(), "{snap}");
    assert!(is_rfc3339_ms(snap["created"].as_str().unwrap()), "{snap}");

    let r = get(&c, &s.url("/trident/v1/volume/v1/snapshot/s1")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json, json!({"snapshot": snap}));

    let r = post(
        &c,
        &s.url("/trident/v1/volume/v1/snapshot"),
        json!({"name": "s2"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    volume(&c, &s, "a0", "fast").await;
    let r = post(
        &c,
        &s.url("/trident/v1/volume/a0/snapshot"),
        json!({"name": "z"}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);

    let r = get(&c, &s.url("/trident/v1/volume/v1/snapshot")).await;
    assert_eq!(r.status, 200);
    assert_eq!(pairs(&r.json["snapshots"]), ["v1/s1", "v1/s2"]);

    let r = get(&c, &s.url("/trident/v1/snapshot")).await;
    assert_eq!(r.status, 200);
    assert_eq!(pairs(&r.json["snapshots"]), ["a0/z", "v1/s1", "v1/s2"]);

    // A clone from a snapshot goes through the Trident create route.
    let clone = json!({"name": "c1", "size": "1Gi", "cloneSourceVolume": "v1",
                       "cloneSourceSnapshot": "s1"});
    let r = post(&c, &s.url("/trident/v1/volume"), clone).await;
    assert_eq!(r.status, 201, "{}", r.json);
    let r = get(&c, &s.url("/trident/v1/volume/c1")).await;
    assert_eq!(r.json["volume"]["Config"]["cloneSourceSnapshot"], "s1");
    assert_eq!(r.json["volume"]["state"], "online");
    let bad_clone = json!({"name": "c2", "size": "1Gi", "cloneSourceVolume": "v1",
                           "cloneSourceSnapshot": "nope"});
    let r = post(&c, &s.url("/trident/v1/volume"), bad_clone).await;
    assert_eq!(r.status, 400, "{}", r.json);
    assert_eq!(r.json["backend"], "");

    let r = delete(&c, &s.url("/trident/v1/volume/v1/snapshot/s2")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    let r = delete(&c, &s.url("/trident/v1/volume/v1/snapshot/s2")).await;
    assert_eq!(r.status, 404, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"error": "snapshot s2 of volume v1 not found"})
    );
    let r = get(&c, &s.url("/trident/v1/volume/v1/snapshot")).await;
    assert_eq!(r.json["snapshots"].as_array().unwrap().len(), 1);
    s.stop().await;
}

/// `volume/name` of each snapshot in a list.
fn pairs(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}/{}",
                s["volume"].as_str().unwrap(),
                s["name"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_refusals_are_clear_4xx() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    lab(&c, &s).await;
    volume(&c, &s, "v1", "fast").await;
    volume(&c, &s, "h1", "slow").await;
    let snap = |v: &str| s.url(&format!("/trident/v1/volume/{v}/snapshot"));

    // The pool does not offer snapshots.
    let r = post(&c, &snap("h1"), json!({"name": "s"})).await;
    assert_eq!(r.status, 400, "{}", r.json);
    assert_eq!(r.json["snapshot"], Value::Null);
    assert_eq!(
        r.json["error"],
        "pool p2 of backend lab does not offer snapshots"
    );
    // No such volume.
    let r = post(&c, &snap("nope"), json!({"name": "s"})).await;
    assert_eq!(r.status, 404, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"snapshot": null, "error": "volume nope was not found"})
    );
    // Duplicate.
    assert_eq!(
        post(&c, &snap("v1"), json!({"name": "s"})).await.status,
        201
    );
    let r = post(&c, &snap("v1"), json!({"name": "s"})).await;
    assert_eq!(r.status, 409, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"snapshot": null, "error": "snapshot s of volume v1 already exists"})
    );
    // Bad bodies.
    for (body, want) in [
        (json!({}), "name is mandatory"),
        (json!({"name": ""}), "name is mandatory"),
        (json!({"name": "a/b"}), "name must not contain '/'"),
    ] {
        let r = post(&c, &snap("v1"), body.clone()).await;
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(r.json, json!({"snapshot": null, "error": want}), "{body}");
    }
    let r = post(&c, &snap("v1"), json!({"nam": "x"})).await;
    assert_eq!(r.status, 400);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid JSON: nam: unknown field `nam`"),
        "{}",
        r.json
    );
    // Reads of things that are not there.
    let r = get(&c, &snap("nope")).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json,
        json!({"snapshots": [], "error": "volume nope was not found"})
    );
    let r = get(&c, &s.url("/trident/v1/volume/v1/snapshot/zz")).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json,
        json!({"snapshot": null, "error": "snapshot zz of volume v1 not found"})
    );
    let r = delete(&c, &s.url("/trident/v1/volume/nope/snapshot/zz")).await;
    assert_eq!(r.status, 404, "{}", r.json);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_grows_volumes_and_refuses_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    lab(&c, &s).await;
    volume(&c, &s, "v1", "fast").await;
    let resize = |v: &str| s.url(&format!("/trident/v1/volume/{v}/resize"));

    let r = post(&c, &resize("v1"), json!({"size": "2Gi"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let v = &r.json["volume"];
    assert_eq!(v["Config"]["name"], "v1");
    assert_eq!(v["Config"]["size"], "2Gi");
    assert_eq!(v["backend"], "lab");
    assert_eq!(v["pool"], "p1");
    assert_eq!(v["state"], "online");
    let r = get(&c, &s.url("/trident/v1/volume/v1")).await;
    assert_eq!(r.json["volume"]["Config"]["size"], "2Gi");

    // The same size again is fine.
    let r = post(&c, &resize("v1"), json!({"size": "2Gi"})).await;
    assert_eq!(r.status, 200, "{}", r.json);

    let r = post(&c, &resize("v1"), json!({"size": "1Mi"})).await;
    assert_eq!(r.status, 400, "{}", r.json);
    assert_eq!(r.json["volume"], Value::Null);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .contains("shrinking to 1048576 is not supported"),
        "{}",
        r.json
    );
    for (body, want) in [
        (json!({}), "size is mandatory".to_string()),
        (
            json!({"size": "0"}),
            "invalid size \"0\": size must be greater than zero".to_string(),
        ),
    ] {
        let r = post(&c, &resize("v1"), body.clone()).await;
        assert_eq!(r.status, 400, "{body}");
        assert_eq!(r.json, json!({"volume": null, "error": want}));
    }
    let r = post(&c, &resize("v1"), json!({"size": "lots"})).await;
    assert_eq!(r.status, 400);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .starts_with("invalid size \"lots\""),
        "{}",
        r.json
    );
    let r = post(&c, &resize("nope"), json!({"size": "2Gi"})).await;
    assert_eq!(r.status, 404, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"volume": null, "error": "volume nope was not found"})
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_every_pool_and_checks_its_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    lab(&c, &s).await;
    let explain = |q: &str| s.url(&format!("/trident/v1/storageclass/fast/explain{q}"));

    let r = get(&c, &explain("")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let e = &r.json["explanation"];
    assert_eq!(e["storageClass"], "fast");
    assert_eq!(e["protocol"], "");
    assert_eq!(e["sizeBytes"], Value::Null);
    let pools = e["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2);
    assert_eq!(
        pools[0],
        json!({"backend": "lab", "pool": "p1", "candidate": true, "reasons": []})
    );
    assert_eq!(pools[1]["pool"], "p2");
    assert_eq!(pools[1]["candidate"], false);
    assert!(!pools[1]["reasons"].as_array().unwrap().is_empty());

    let r = get(&c, &explain("?protocol=block&size=10Gi")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let e = &r.json["explanation"];
    assert_eq!(e["protocol"], "block");
    assert_eq!(e["sizeBytes"], 10u64 << 30);
    let p1 = &e["pools"][0];
    assert_eq!(p1["candidate"], false);
    assert!(
        p1["reasons"][0]
            .as_str()
            .unwrap()
            .contains("protocol mismatch"),
        "{p1}"
    );

    let r = get(&c, &explain("?protocol=file&size=1000Ti")).await;
    let p1 = &r.json["explanation"]["pools"][0];
    assert_eq!(p1["candidate"], false);
    assert!(
        p1["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("not enough free capacity"),
        "{p1}"
    );

    for (query, param) in [
        ("?protocol=nfs", "protocol"),
        ("?size=lots", "size"),
        ("?size=0", "size"),
        ("?protocol=file&protocol=block", "protocol"),
        ("?colour=blue", "\"colour\""),
    ] {
        let r = get(&c, &explain(query)).await;
        assert_eq!(r.status, 400, "{query}");
        assert_eq!(r.json["explanation"], Value::Null, "{query}");
        let msg = r.json["error"].as_str().unwrap();
        assert!(
            msg.starts_with(&format!("invalid query parameter {param}: ")),
            "{query}: {msg}"
        );
    }
    let r = get(&c, &s.url("/trident/v1/storageclass/nope/explain")).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json,
        json!({"explanation": null, "error": "storage class nope was not found"})
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_lists_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    let r = get(&c, &s.url("/openapi.json")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    assert!(r.json["openapi"].as_str().unwrap().starts_with("3."));
    for (method, path) in storch::api::route_list() {
        let op = &r.json["paths"][path][method.to_lowercase()];
        assert!(op.is_object(), "{method} {path} is not documented");
        assert!(op["responses"].is_object(), "{method} {path}");
    }
    s.stop().await;
}

/// Follows `continue` from `path` with `limit`, returning every item under `key` and the
/// number of pages; each page holds at most `limit` items.
async fn all_pages(
    c: &reqwest::Client,
    s: &TestServer,
    path: &str,
    key: &str,
    limit: usize,
) -> (Vec<Value>, usize) {
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut url = format!("{}?limit={limit}", s.url(path));
        if let Some(t) = &token {
            url.push_str(&format!("&continue={t}"));
        }
        let r = get(c, &url).await;
        assert_eq!(r.status, 200, "{url}: {}", r.json);
        pages += 1;
        let page = r.json[key].as_array().unwrap().clone();
        assert!(page.len() <= limit, "{url}: {}", r.json);
        items.extend(page);
        match r.json.get("continue") {
            Some(Value::String(t)) => token = Some(t.clone()),
            None => return (items, pages),
            other => panic!("continue is {other:?}"),
        }
    }
}

/// Issue 18 item 6: volumes, snapshots, events and explain come in pages with `limit` and
/// `continue`; without `limit` the lists keep Trident's shape; a page is stable while names
/// are created and deleted around it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_lists_come_in_pages() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    lab(&c, &s).await;
    for i in 0..7 {
        volume(&c, &s, &format!("v{i}"), "fast").await;
    }
    for snap in ["a", "b", "c"] {
        let r = post(
            &c,
            &s.url("/trident/v1/volume/v1/snapshot"),
            json!({"name": snap}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.json);
    }

    // Trident's shape without a limit.
    let r = get(&c, &s.url("/trident/v1/volume")).await;
    assert_eq!(
        r.json,
        json!({"volumes": ["v0", "v1", "v2", "v3", "v4", "v5", "v6"]})
    );
    let (names, pages) = all_pages(&c, &s, "/trident/v1/volume", "volumes", 3).await;
    assert_eq!(
        names,
        json!(["v0", "v1", "v2", "v3", "v4", "v5", "v6"])
            .as_array()
            .unwrap()
            .clone()
    );
    assert_eq!(pages, 3);

    // The token is the last name: deletes and creates before it do not shift the next page.
    let r = get(&c, &s.url("/trident/v1/volume?limit=2")).await;
    assert_eq!(r.json, json!({"volumes": ["v0", "v1"], "continue": "v1"}));
    assert_eq!(
        delete(&c, &s.url("/trident/v1/volume/v0")).await.status,
        200
    );
    volume(&c, &s, "a0", "fast").await;
    let r = get(&c, &s.url("/trident/v1/volume?limit=2&continue=v1")).await;
    assert_eq!(r.json, json!({"volumes": ["v2", "v3"], "continue": "v3"}));
    let r = get(&c, &s.url("/trident/v1/volume?limit=9&continue=v3")).await;
    assert_eq!(
        r.json,
        json!({"volumes": ["v4", "v5", "v6"]}),
        "the last page has no token"
    );

    // Snapshots: of one volume, and all of them.
    let (snaps, pages) = all_pages(&c, &s, "/trident/v1/volume/v1/snapshot", "snapshots", 2).await;
    let names: Vec<&str> = snaps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!((names, pages), (vec!["a", "b", "c"], 2));
    let r = get(&c, &s.url("/trident/v1/snapshot?limit=1")).await;
    assert_eq!(r.json["continue"], "v1/a", "{}", r.json);
    let (snaps, _) = all_pages(&c, &s, "/trident/v1/snapshot", "snapshots", 2).await;
    assert_eq!(snaps.len(), 3);

    // Explain: pools by backend and pool.
    let r = get(&c, &s.url("/trident/v1/storageclass/fast/explain?limit=1")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["explanation"]["pools"].as_array().unwrap().len(), 1);
    assert_eq!(r.json["continue"], "lab/p1");
    let r = get(
        &c,
        &s.url("/trident/v1/storageclass/fast/explain?limit=1&continue=lab/p1"),
    )
    .await;
    assert_eq!(r.json["explanation"]["pools"][0]["pool"], "p2");
    assert!(r.json.get("continue").is_none(), "{}", r.json);

    // Events: a cut list says where to go on.
    let all = get(&c, &s.url("/trident/v1/events?limit=100000")).await;
    let total = all.json["events"].as_array().unwrap().len();
    assert!(all.json.get("continue").is_none());
    let (events, pages) = all_pages(&c, &s, "/trident/v1/events", "events", 5).await;
    assert_eq!(events.len(), total);
    assert_eq!(pages, total.div_ceil(5));

    // Bad paging is a 400 naming the parameter; an unknown one too.
    for (query, name) in [
        ("limit=0", "limit"),
        ("limit=10001", "limit"),
        ("page=2", "\"page\""),
    ] {
        let r = get(&c, &s.url(&format!("/trident/v1/volume?{query}"))).await;
        assert_eq!(r.status, 400, "{query}: {}", r.json);
        let e = r.json["error"].as_str().unwrap();
        assert!(
            e.starts_with(&format!("invalid query parameter {name}")),
            "{e}"
        );
    }
    s.stop().await;
}

/// Issue 18 item 6: what one object may hold is bounded — a backend of more pools than
/// allowed or an offer of too many values is refused naming the field, and nothing is
/// recorded; /metrics shows at most MAX_POOL_SERIES pools one by one and sums the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_bounded_and_metrics_fold_extra_pools() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    let pools = |n: usize| -> Vec<(String, Value)> {
        (0..n)
            .map(|i| (format!("p{i:04}"), crate::support::ssd()))
            .collect()
    };
    let backend = |name: &str, pools: &[(String, Value)]| {
        let pools: Vec<(&str, Value)> =
            pools.iter().map(|(n, v)| (n.as_str(), v.clone())).collect();
        crate::support::fake_backend(name, "file", &pools)
    };
    let max = storch::drivers::MAX_POOLS_PER_BACKEND;
    let r = post(
        &c,
        &s.url("/trident/v1/backend"),
        backend("huge", &pools(max + 1)),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.json);
    let e = r.json["error"].as_str().unwrap();
    assert!(e.contains("pools") && e.contains(&max.to_string()), "{e}");
    assert_eq!(
        get(&c, &s.url("/trident/v1/backend/huge")).await.status,
        404
    );

    let mut wide = crate::support::fake_backend("wide", "file", &[("p", crate::support::ssd())]);
    let values: Vec<String> = (0..=storch::model::attributes::MAX_OFFERED_VALUES)
        .map(|i| format!("m{i}"))
        .collect();
    wide["pools"]["p"]["attributes"]["media"] = json!({"offer": values});
    let r = post(&c, &s.url("/trident/v1/backend"), wide).await;
    assert_eq!(r.status, 400, "{}", r.json);
    let e = r.json["error"].as_str().unwrap();
    assert!(e.contains("pools.p.attributes") && e.contains("64"), "{e}");
    let events = get(&c, &s.url("/trident/v1/events")).await;
    assert_eq!(events.json["events"], json!([]), "nothing recorded");

    // Two backends of 600 pools: 1200 pools, MAX_POOL_SERIES shown, the rest folded.
    for name in ["b1", "b2"] {
        let r = post(
            &c,
            &s.url("/trident/v1/backend"),
            backend(name, &pools(600)),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.json);
    }
    let text = c
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let shown = text
        .lines()
        .filter(|l| l.starts_with("storch_pool_capacity_bytes{"))
        .count();
    assert_eq!(shown, storch::api::prometheus::MAX_POOL_SERIES);
    let folded = 1200 - storch::api::prometheus::MAX_POOL_SERIES;
    assert!(
        text.contains(&format!("\nstorch_pool_series_folded {folded}\n")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("storch_pool_capacity_bytes ")),
        "the sum"
    );
    // Sorted by backend and pool: all of b1's, then b2's first ones.
    assert!(text.contains("storch_pool_capacity_bytes{backend=\"b1\",pool=\"p0599\"}"));
    assert!(!text.contains("storch_pool_capacity_bytes{backend=\"b2\",pool=\"p0599\"}"));
    s.stop().await;
}

//! `/trident/v1/backend`: add, get, list, update, delete, and refused bodies.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_add_get_list_update_delete() {
    let api = Api::start().await;
    let mut be = ssd_backend("nas");
    be["password"] = json!("pw-canary-5531");
    be["username"] = json!("admin");
    be["chapInitiatorSecret"] = json!("chap-canary-5532");
    be["apiToken"] = json!("token-canary-5533");
    let r = api.post_json(&format!("{V1}/backend"), &be).await;
    assert_eq!(r.status, 201, "{}", r.json);
    // The fake driver reads no CHAP secret or token: named (never their values) as ignored.
    assert_eq!(
        r.json,
        json!({"backend": "nas", "warnings": [
            "unknown field \"apiToken\" was ignored",
            "unknown field \"chapInitiatorSecret\" was ignored",
        ]})
    );

    // a class so that pools show it
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "gold", "attributes": {"media": "ssd"}}),
        201,
    )
    .await;

    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let b = &r.json["backend"];
    assert_eq!(r.json.as_object().unwrap().len(), 1);
    assert_eq!(b["name"], "nas");
    assert_eq!(b["protocol"], "file");
    assert_eq!(b["online"], true);
    assert_eq!(b["state"], "online");
    assert_eq!(b["volumes"], json!([]));
    assert_eq!(b["config"]["storageDriverName"], "fake");
    let shown = r.json.to_string();
    for canary in ["pw-canary-5531", "chap-canary-5532", "token-canary-5533"] {
        assert!(!shown.contains(canary), "a secret is shown: {shown}");
    }
    for key in b["config"].as_object().unwrap().keys() {
        let k = key.to_ascii_lowercase();
        assert!(
            !k.contains("password") && !k.contains("secret") && !k.contains("token"),
            "config shows {key}"
        );
    }
    let pools = b["storage"].as_object().unwrap();
    assert_eq!(pools.len(), 2, "{}", b["storage"]);
    let fast = &b["storage"]["fast"];
    assert_eq!(fast["name"], "fast");
    assert_eq!(fast["storageClasses"], json!(["gold"]));
    let attrs = &fast["storageAttributes"];
    assert_eq!(attrs["media"], json!({"offer": ["ssd"]}));
    assert_eq!(attrs["snapshots"], json!({"offer": true}));
    assert_eq!(attrs["IOPS"], json!({"min": 100, "max": 10000}));
    assert_eq!(
        attrs["provisioningType"]["offer"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect::<std::collections::BTreeSet<_>>(),
        ["thick", "thin"].into()
    );
    assert_eq!(attrs["backendType"], json!({"offer": ["fake"]}));
    let slow = &b["storage"]["slow"];
    assert_eq!(slow["name"], "slow");
    assert_eq!(slow["storageClasses"], json!([]));
    assert_eq!(
        slow["storageAttributes"]["snapshots"],
        json!({"offer": false})
    );
    assert_eq!(
        slow["storageAttributes"]["media"],
        json!({"offer": ["hdd"]})
    );

    // a YAML body
    let yaml = "version: 1\nstorageDriverName: fake\nbackendName: san\ninstanceName: san\n\
                protocol: block\npools:\n  p1:\n    sizeBytes: 10737418240\n    attributes:\n      \
                media: {offer: [ssd]}\n      IOPS: {min: 10, max: 20}\n";
    let r = api.post(&format!("{V1}/backend"), yaml).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "san"}));
    let r = api.get(&format!("{V1}/backend/san")).await;
    assert_eq!(r.json["backend"]["protocol"], "block");
    assert_eq!(
        r.json["backend"]["storage"]["p1"]["storageAttributes"]["IOPS"],
        json!({"min": 10, "max": 20})
    );
    assert_eq!(
        r.json["backend"]["storage"]["p1"]["storageClasses"],
        json!(["gold"])
    );

    let backends = api.list("backend", "backends").await;
    assert_eq!(backends, ["nas", "san"]);

    // POST of an existing name is an update: 201, the new pools replace the old
    let mut be2 = ssd_backend("nas");
    be2["pools"]["extra"] = json!({"attributes": {}, "sizeBytes": 1u64 << 30});
    let r = api.post_json(&format!("{V1}/backend"), &be2).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["storage"].as_object().unwrap().len(), 3);
    assert_eq!(api.list("backend", "backends").await, ["nas", "san"]);

    // POST /backend/{name}: 200; back to two pools
    let r = api
        .post_json(&format!("{V1}/backend/nas"), &ssd_backend("nas"))
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["storage"].as_object().unwrap().len(), 2);

    // an update never renames
    let r = api
        .post_json(&format!("{V1}/backend/nas"), &ssd_backend("nas2"))
        .await;
    assert_eq!(r.status, 400, "{}", r.json);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .contains("does not rename"),
        "{}",
        r.json
    );
    assert_eq!(api.list("backend", "backends").await, ["nas", "san"]);
    // DELETE: 200 {}, then 404
    let r = api.delete(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    assert_eq!(api.list("backend", "backends").await, ["san"]);
    let r = api
        .refused(Method::DELETE, &format!("{V1}/backend/nas"), None, 404)
        .await;
    assert_eq!(error_of(&r, None), "backend nas not found");
    let r = api
        .refused(Method::GET, &format!("{V1}/backend/nas"), None, 404)
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", Value::Null))),
        "backend nas was not found"
    );
    // the class lost the deleted backend's pools
    let r = api.get(&format!("{V1}/storageclass/gold")).await;
    assert_eq!(r.json["storageClass"]["storage"], json!({"san": ["p1"]}));
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_of_an_unknown_backend_is_404() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    let r = api
        .refused_post(
            &format!("{V1}/backend/nope"),
            ssd_backend("nope").to_string(),
            404,
        )
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", json!("")))),
        "backend nope was not found"
    );
    // even when the body names an existing backend
    let r = api
        .refused_post(
            &format!("{V1}/backend/nope"),
            ssd_backend("nas").to_string(),
            404,
        )
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", json!("")))),
        "backend nope was not found"
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_backend_with_volumes_takes_it_offline() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("v", "1Gi", "any"), 201)
        .await;

    let r = api.delete(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    assert!(
        api.list("backend", "backends").await.is_empty(),
        "offline backends are not listed"
    );
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "offline backends can be fetched: {}", r.json);
    assert_eq!(r.json["backend"]["online"], false);
    assert_eq!(r.json["backend"]["state"], "offline");
    assert_eq!(r.json["backend"]["volumes"], json!(["v"]));
    // its volume is still listed and shown
    assert_eq!(api.list("volume", "volumes").await, ["v"]);
    let r = api.get(&format!("{V1}/volume/v")).await;
    assert_eq!(r.json["volume"]["backend"], "nas");
    // its pools left the class; no new volume can go there
    let r = api.get(&format!("{V1}/storageclass/any")).await;
    assert_eq!(r.json["storageClass"]["storage"], json!({}));
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("w", "1Gi", "any").to_string(),
            400,
        )
        .await;
    error_of(&r, Some(("backend", json!(""))));
    // deleting it again is still 200, and it stays offline
    let r = api.delete(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    assert!(api.list("backend", "backends").await.is_empty());

    // adding it again brings it back online, with its volume
    let r = api
        .post_json(&format!("{V1}/backend"), &ssd_backend("nas"))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(api.list("backend", "backends").await, ["nas"]);
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["online"], true);
    assert_eq!(r.json["backend"]["volumes"], json!(["v"]));
    let r = api.delete(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.status, 200, "{}", r.json);

    // the last volume's delete purges it
    let r = api.delete(&format!("{V1}/volume/v")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let r = api
        .refused(Method::GET, &format!("{V1}/backend/nas"), None, 404)
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", Value::Null))),
        "backend nas was not found"
    );
    api.shutdown().await;
}

/// Re-posting a backend: an identical body records nothing and keeps the running driver (so
/// the volumes of a fake backend without `statePath` stay); an update whose driver cannot reach
/// the backend's volumes (a new in-memory fake knows none) is refused and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_never_orphans_the_backends_volumes() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("v", "1Gi", "any"), 201)
        .await;
    let events = api.get(&format!("{V1}/events")).await.json;
    for path in ["backend", "backend/nas"] {
        let r = api
            .post_json(&format!("{V1}/{path}"), &ssd_backend("nas"))
            .await;
        assert!(r.status == 200 || r.status == 201, "{}", r.json);
    }
    assert_eq!(api.get(&format!("{V1}/events")).await.json, events);
    let r = api.get(&format!("{V1}/volume/v")).await;
    assert_eq!(r.json["volume"]["orphaned"], false, "{}", r.json);

    let mut changed = ssd_backend("nas");
    changed["pools"]["extra"] = changed["pools"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    let r = api.post_json(&format!("{V1}/backend/nas"), &changed).await;
    assert_eq!(r.status, 400, "{}", r.json);
    let msg = r.json["error"].as_str().unwrap();
    assert!(msg.contains("does not reach 1 of its volumes (v)"), "{msg}");
    assert_eq!(api.get(&format!("{V1}/events")).await.json, events);

    let mut renamed = ssd_backend("other");
    renamed["pools"] = changed["pools"].clone();
    let r = api.post_json(&format!("{V1}/backend/nas"), &renamed).await;
    assert_eq!(r.status, 400, "{}", r.json);
    assert!(
        r.json["error"]
            .as_str()
            .unwrap()
            .contains("does not rename"),
        "{}",
        r.json
    );
    assert_eq!(api.get(&format!("{V1}/events")).await.json, events);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_backend_bodies_are_400_and_change_nothing() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    let base = ssd_backend("other");
    let with = |key: &str, value: Value| {
        let mut b = base.clone();
        b[key] = value;
        b.to_string()
    };
    let without = |key: &str| {
        let mut b = base.clone();
        b.as_object_mut().unwrap().remove(key);
        b.to_string()
    };
    // (body, a piece the message must contain)
    let cases: Vec<(String, &str)> = vec![
        (
            "{\"version\":1,\n\"storageDriverName\":".into(),
            "invalid config format: ",
        ),
        (
            "version: 1\nstorageDriverName: fake\n  bad: [indent\n".into(),
            "invalid config format: ",
        ),
        (
            "{\"version\": 1, \"pools\": {\"p\": }}}".into(),
            "invalid config format: ",
        ),
        ("".into(), "invalid config format: the document is empty"),
        ("[1, 2]".into(), "invalid config format: expected a mapping"),
        (
            "just words".into(),
            "invalid config format: expected a mapping",
        ),
        ("a: 1\na: 2\n".into(), "duplicate mapping key"),
        (with("version", json!("x")), "version"),
        (with("version", json!(2)), "version"),
        (with("pools", json!([1])), "pools"),
        (with("pools", json!("oops")), "pools"),
        (with("protocol", json!("nfs")), "protocol"),
        (
            with("storageDriverName", json!("nope")),
            "unknown storage driver: nope",
        ),
        (with("storageDriverName", json!(5)), "storageDriverName"),
        (without("storageDriverName"), "storage driver name"),
        (
            with("backendName", json!("a/b")),
            "backendName must not contain '/'",
        ),
        (with("backendName", json!("..")), "backendName"),
        (with("backendName", json!("x".repeat(300))), "backendName"),
        (
            with(
                "pools",
                json!({"p": {"attributes": {"colour": {"offer": ["red"]}}, "sizeBytes": 1}}),
            ),
            "colour",
        ),
        (
            with("pools", json!({"p": {"sizeBytes": 1024}})),
            "attributes",
        ),
        (
            with(
                "pools",
                json!({"p": {"attributes": {"IOPS": {"offer": true}}, "sizeBytes": 1}}),
            ),
            "IOPS",
        ),
        (with("failureRate", json!("often")), "failureRate"),
        (with("latency", json!("soon")), "latency"),
    ];
    for (body, needle) in &cases {
        for path in [format!("{V1}/backend"), format!("{V1}/backend/nas")] {
            let r = api.refused_post(&path, body.clone(), 400).await;
            let msg = error_of(&r, Some(("backend", json!(""))));
            assert!(
                msg.contains(needle),
                "POST {path} {body}: {msg:?} does not contain {needle:?}"
            );
        }
    }
    // nothing was added or renamed, the existing backend is as it was
    assert_eq!(api.list("backend", "backends").await, ["nas"]);
    api.shutdown().await;
}

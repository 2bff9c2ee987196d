//! The bad-input suite: every route of the route table (`storch::api::route_list`) is walked
//! with wrong methods, bad names in its path and, where it reads a body, malformed bodies,
//! wrong types, keys given twice, unknown fields (storch's own bodies), bad sizes, wrong
//! content types, oversize and deep bodies. Every refusal goes through [`Api::refused_typed`],
//! which checks the answer's envelope and that neither the objects nor the event log changed.
//! A route this suite does not know fails it, so a new route must be added to [`shape`].
//!
//! Beside it, the input policy's accepting side: canonical sizes, `warnings` for the fields a
//! Trident-shaped body had that storch ignored, YAML only where the body says YAML.

use super::*;

/// How a route takes input, as far as this suite goes.
enum Shape {
    /// No body (GET, DELETE, and POSTs that read none).
    NoBody,
    /// A JSON body: one that would succeed as it is, and whether the body is Trident-shaped
    /// (unknown fields ignored with a warning) or storch's own (unknown fields refused).
    Body {
        good: Value,
        trident: bool,
        yaml: bool,
    },
}

/// The objects the suite's paths name; each exists, so a refusal is the bad input's doing.
const NAMES: [(&str, &str); 4] = [
    ("{backend}", "b1"),
    ("{volume}", "v1"),
    ("{snapshot}", "s1"),
    ("{storageClass}", "gold"),
];

/// What each route of the table takes. `None`: a route the suite does not know.
fn shape(method: &str, path: &str) -> Option<Shape> {
    let body = |good: Value, trident: bool| Shape::Body {
        good,
        trident,
        yaml: false,
    };
    Some(match (method, path) {
        ("GET" | "DELETE", _) => Shape::NoBody,
        ("POST", "/trident/v1/backend") => Shape::Body {
            good: ssd_backend("b2"),
            trident: true,
            yaml: true,
        },
        ("POST", "/trident/v1/backend/{backend}") => Shape::Body {
            good: ssd_backend("b1"),
            trident: true,
            yaml: true,
        },
        ("POST", "/trident/v1/backend/{backend}/reconcile") => Shape::NoBody,
        ("POST", "/trident/v1/backend/{backend}/state") => body(json!({"state": "normal"}), false),
        ("POST", "/trident/v1/volume") => body(volume("v2", "1Gi", "gold"), true),
        ("POST", "/trident/v1/storageclass") => body(json!({"name": "silver"}), true),
        ("POST", "/trident/v1/volume/{volume}/resize") => body(json!({"size": "2Gi"}), false),
        ("POST", "/trident/v1/volume/{volume}/snapshot") => body(json!({"name": "s2"}), false),
        ("POST", "/trident/v1/volume/import") => body(
            json!({"backend": "b1", "internalName": "x", "name": "v3", "storageClass": "gold"}),
            false,
        ),
        _ => return None,
    })
}

fn concrete(template: &str) -> String {
    NAMES
        .iter()
        .fold(template.to_string(), |p, (k, v)| p.replace(k, v))
}

/// A core with a backend `b1`, a class `gold`, a volume `v1` and its snapshot `s1`.
async fn populated() -> Api {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("b1"), 201)
        .await;
    backend_online(&api.client, &api.base, "b1").await;
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "gold", "attributes": {"media": "ssd"}}),
        201,
    )
    .await;
    api.ok(&format!("{V1}/volume"), &volume("v1", "1Gi", "gold"), 201)
        .await;
    api.ok(
        &format!("{V1}/volume/v1/snapshot"),
        &json!({"name": "s1"}),
        201,
    )
    .await;
    api
}

/// `depth` nested lists under `key`.
fn deep(key: &str, depth: usize) -> String {
    format!("{{\"{key}\": {}{}}}", "[".repeat(depth), "]".repeat(depth))
}

/// The good body's text with its first key given again.
fn with_duplicate(good: &Value) -> String {
    let (k, v) = good.as_object().unwrap().iter().next().unwrap();
    let text = good.to_string();
    format!("{{\"{k}\": {v}, {}", &text[1..])
}

fn error(r: &Reply) -> &str {
    r.json["error"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_bad_input_and_records_nothing() {
    let api = populated().await;
    let routes = storch::api::route_list();
    let uncovered: Vec<String> = routes
        .iter()
        .filter(|(m, p)| shape(m, p).is_none())
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    assert!(
        uncovered.is_empty(),
        "routes the bad-input suite does not cover (add them to `shape`): {uncovered:?}"
    );
    // Whether a route with `method` matches the concrete `path` (`/volume/import` is also
    // `/volume/{volume}` to a GET).
    let served = |path: &str, method: &str| {
        routes.iter().any(|(m, template)| {
            let (t, p): (Vec<&str>, Vec<&str>) =
                (template.split('/').collect(), path.split('/').collect());
            *m == method
                && t.len() == p.len()
                && t.iter().zip(&p).all(|(t, p)| t == p || t.starts_with('{'))
        })
    };
    let mut tried = 0usize;
    for (method, template) in &routes {
        let path = concrete(template);
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        // Methods the path does not have: 405, nothing changes.
        for other in ["GET", "POST", "DELETE", "PUT", "PATCH"] {
            if served(&path, other) {
                continue;
            }
            let om = Method::from_bytes(other.as_bytes()).unwrap();
            let body = (other != "GET").then(|| b"{}".to_vec());
            let r = api.refused(om, &path, body, 405).await;
            assert!(r.headers.contains_key("allow"), "{other} {path}: no Allow");
            tried += 1;
        }
        // Bad names in every path segment that names an object.
        for (param, _) in NAMES.iter().filter(|(k, _)| template.contains(k)) {
            for bad in ["a%5Cb".to_string(), "x".repeat(300)] {
                let path = concrete(&template.replace(param, &bad));
                let body = match shape(method, template) {
                    Some(Shape::Body { good, .. }) => Some(good.to_string().into_bytes()),
                    _ => None,
                };
                let r = api.refused(m.clone(), &path, body, 400).await;
                assert!(error(&r).contains(" name "), "{method} {path}: {}", r.json);
                tried += 1;
            }
        }
        let Some(Shape::Body {
            good,
            trident,
            yaml,
        }) = shape(method, template)
        else {
            continue;
        };
        let post = |body: Vec<u8>, ctype: Option<&'static str>, status: u16| {
            let path = path.clone();
            let api = &api;
            async move {
                api.refused_typed(Method::POST, &path, Some(body), ctype, status)
                    .await
            }
        };
        // Malformed documents and documents of the wrong type.
        for bad in [
            "{",
            "{\"a\": }",
            "{} {}",
            "[]",
            "[1, 2]",
            "\"x\"",
            "42",
            "null",
            "",
        ] {
            let r = post(bad.into(), Some("application/json"), 400).await;
            assert!(!error(&r).is_empty(), "{path} {bad}");
            tried += 1;
        }
        // A key given twice.
        let r = post(
            with_duplicate(&good).into_bytes(),
            Some("application/json"),
            400,
        )
        .await;
        assert!(error(&r).contains("duplicate key"), "{path}: {}", r.json);
        // Every field of the body with a value of the wrong type.
        for key in good.as_object().unwrap().keys() {
            if yaml && !["version", "storageDriverName", "backendName"].contains(&key.as_str()) {
                continue;
            }
            let mut wrong = good.clone();
            wrong[key] = json!([1, [2]]);
            let r = post(wrong.to_string().into_bytes(), None, 400).await;
            assert!(error(&r).contains(key.as_str()), "{path} {key}: {}", r.json);
            tried += 1;
        }
        // Unknown fields: storch's own bodies refuse them, naming the field.
        if !trident {
            let mut unknown = good.clone();
            unknown["bogusField"] = json!(1);
            let r = post(unknown.to_string().into_bytes(), None, 400).await;
            assert!(error(&r).contains("bogusField"), "{path}: {}", r.json);
        }
        // Content types: JSON, or YAML where YAML is documented, else 415 before reading.
        let mut types = vec![
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=latin1",
            "application/xml",
        ];
        if !yaml {
            types.push("application/yaml");
        }
        for t in types {
            let r = post(good.to_string().into_bytes(), Some(t), 415).await;
            assert!(error(&r).contains("Content-Type"), "{path} {t}: {}", r.json);
            tried += 1;
        }
        // A body typed JSON is never read as YAML.
        let as_yaml = "name: x\nsize: 1Gi\n";
        post(as_yaml.into(), Some("application/json"), 400).await;
        // Oversize and deep bodies.
        let mut big = good.to_string().into_bytes();
        big.splice(1..1, vec![b' '; 1 << 20]);
        post(big, Some("application/json"), 413).await;
        let r = post(deep("name", 200).into_bytes(), None, 400).await;
        assert!(error(&r).contains("deeper than 64"), "{path}: {}", r.json);
        tried += 4;
        // Sizes, where the body has one: strict spelling, above zero, within what every
        // candidate pool's driver takes.
        if good.get("size").is_some() {
            for bad in [
                " 1Gi", "1Gi ", "1 Gi", "1gi", "1gb", "1.5Gi", "+1Gi", "-1Gi", "0", "Gi", "",
                "16Ei",
            ] {
                let mut body = good.clone();
                body["size"] = json!(bad);
                let r = post(body.to_string().into_bytes(), None, 400).await;
                assert!(
                    error(&r).contains("size") || error(&r) == MANDATORY,
                    "{path} size {bad:?}: {}",
                    r.json
                );
                tried += 1;
            }
        }
    }
    assert!(tried > 200, "only {tried} bad requests were tried");
    api.shutdown().await;
}

/// Issue 18 item 4: a size below every candidate pool's minimum is refused before anything
/// is recorded (it used to be tried on every pool, recording an event per attempt), naming
/// `size` and each pool's reason, and explain gives the same reason per pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_no_pool_takes_are_refused_before_anything_is_recorded() {
    let api = populated().await;
    for size in ["1", "1Ki", "1048575"] {
        let r = api
            .refused_post(
                &format!("{V1}/volume"),
                volume("tiny", size, "gold").to_string(),
                400,
            )
            .await;
        let msg = error(&r);
        assert!(msg.starts_with("size: "), "{msg}");
        assert!(
            msg.contains("b1/fast: requested volume size") && msg.contains("too small"),
            "{msg}"
        );
        assert!(msg.contains("1048576 bytes (1 MiB)"), "{msg}");
    }
    let r = api
        .get(&format!("{V1}/storageclass/gold/explain?size=1Ki"))
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    let pools = r.json["explanation"]["pools"].as_array().unwrap();
    assert!(!pools.is_empty());
    for p in pools {
        assert_eq!(p["candidate"], false, "{p}");
        let reasons = p["reasons"].to_string();
        assert!(reasons.contains("too small"), "{p}");
    }
    // The minimum itself is fine.
    let r = api
        .post_json(&format!("{V1}/volume"), &volume("small", "1Mi", "gold"))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    api.shutdown().await;
}

/// Sizes are stored in one spelling; Trident-shaped bodies name the fields they ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_are_canonical_and_ignored_fields_are_named() {
    let api = populated().await;
    for (name, given, stored) in [
        ("g", "1G", "1Gi"),
        ("gib", "1GiB", "1Gi"),
        ("mi", "2048Mi", "2Gi"),
        ("bytes", "1073741824", "1Gi"),
        ("si", "2GB", "2GB"),
    ] {
        let r = api
            .post_json(&format!("{V1}/volume"), &volume(name, given, "gold"))
            .await;
        assert_eq!(r.status, 201, "{}", r.json);
        assert!(r.json.get("warnings").is_none(), "{}", r.json);
        let r = api.get(&format!("{V1}/volume/{name}")).await;
        assert_eq!(r.json["volume"]["Config"]["size"], stored, "{given}");
    }
    let r = api
        .post_json(
            &format!("{V1}/volume/mi/resize"),
            &json!({"size": "3072Mi"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["volume"]["Config"]["size"], "3Gi");

    let mut v = volume("extra", "1Gi", "gold");
    v["bogus"] = json!(1);
    v["sizeBytes"] = json!("x");
    let r = api.post_json(&format!("{V1}/volume"), &v).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"backend": "b1", "warnings": [
            "unknown field \"bogus\" was ignored",
            "unknown field \"sizeBytes\" was ignored"
        ]})
    );
    let r = api
        .post_json(
            &format!("{V1}/storageclass"),
            &json!({"name": "silver", "attributes": {"media": "hdd"}, "provisioner": "x"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"storageClass": "silver", "warnings": ["unknown field \"provisioner\" was ignored"]})
    );
    api.shutdown().await;
}

/// Attribute values are checked against what the attribute allows, in classes and in the
/// offers of a backend's pools alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attribute_values_outside_the_attribute_are_refused() {
    let api = populated().await;
    for attributes in [
        json!({"media": "floppy"}),
        json!({"media": "SSD"}),
        json!({"provisioningType": "thinnish"}),
        json!({"backendType": "ontap"}),
    ] {
        let (name, value) = attributes.as_object().unwrap().iter().next().unwrap();
        let r = api
            .refused_post(
                &format!("{V1}/storageclass"),
                json!({"name": "odd", "attributes": attributes}).to_string(),
                400,
            )
            .await;
        let msg = error(&r);
        assert!(
            msg.contains(&format!(
                "invalid value {value} for storage attribute {name}"
            )),
            "{msg}"
        );
    }
    let floppy = fake_backend(
        "b9",
        "file",
        &[("p", json!({"media": {"offer": ["floppy"]}}))],
    );
    let r = api
        .refused_post(&format!("{V1}/backend"), floppy.to_string(), 400)
        .await;
    assert!(error(&r).contains("floppy"), "{}", r.json);
    api.shutdown().await;
}

/// YAML is read where the body says it is YAML (or says nothing, for a backend config, as
/// Trident reads it); a body typed JSON is read as JSON only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_configs_are_yaml_only_when_typed_yaml_or_untyped() {
    let api = populated().await;
    let yaml = "version: 1\nstorageDriverName: fake\nbackendName: y1\ninstanceName: y1\n\
                pools:\n  p1:\n    sizeBytes: 10737418240\n    attributes: {}\n";
    let r = api
        .refused_typed(
            Method::POST,
            &format!("{V1}/backend"),
            Some(yaml.into()),
            Some("application/json"),
            400,
        )
        .await;
    assert!(error(&r).contains("application/yaml"), "{}", r.json);
    let dup = format!("{yaml}backendName: y2\n");
    let r = api
        .refused_typed(
            Method::POST,
            &format!("{V1}/backend"),
            Some(dup.into()),
            Some("application/yaml"),
            400,
        )
        .await;
    assert!(error(&r).contains("duplicate"), "{}", r.json);
    let r = api
        .call_typed(
            Method::POST,
            &format!("{V1}/backend"),
            Some(yaml.into()),
            Some("application/yaml"),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "y1"}));
    api.shutdown().await;
}

/// Issue 18 item 7: a backend config is Trident-shaped, so keys storch does not read are
/// accepted, and the answer names each one under `warnings` (nested ones by path), on create,
/// on a re-post and on update; never a value, secret or not. A refused config records nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_configs_name_the_keys_storch_ignores() {
    let api = populated().await;
    let mut b = ssd_backend("b3");
    b["limitAggregateUsage"] = json!("80%");
    b["defaults"] = json!({"size": "2Gi", "sizee": "3Gi"});
    b["pools"]["fast"]["sizeByte"] = json!(1);
    b["passwrd"] = json!("hunter2-canary");
    let want = json!({"backend": "b3", "warnings": [
        "unknown field \"defaults.sizee\" was ignored",
        "unknown field \"limitAggregateUsage\" was ignored",
        "unknown field \"passwrd\" was ignored",
        "unknown field \"pools.fast.sizeByte\" was ignored",
    ]});
    let r = api.post_json(&format!("{V1}/backend"), &b).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, want);
    assert!(!r.json.to_string().contains("hunter2"), "{}", r.json);
    // The same config again records nothing, and says the same.
    let before = api.log_len().await;
    let r = api.post_json(&format!("{V1}/backend"), &b).await;
    assert_eq!((r.status, &r.json), (201, &want));
    assert_eq!(api.log_len().await, before);
    // An update, keys matched case-insensitively as the drivers read them.
    let mut update = ssd_backend("b3");
    update["InstanceName"] = update["instanceName"].take();
    update.as_object_mut().unwrap().remove("instanceName");
    update["Protocol"] = json!("file");
    update.as_object_mut().unwrap().remove("protocol");
    update["storagePool"] = json!("x");
    let r = api.post_json(&format!("{V1}/backend/b3"), &update).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"backend": "b3", "warnings": ["unknown field \"storagePool\" was ignored"]})
    );
    // A config that uses every key it has: no warnings at all.
    let r = api
        .post_json(&format!("{V1}/backend/b3"), &ssd_backend("b3"))
        .await;
    assert_eq!((r.status, &r.json), (200, &json!({"backend": "b3"})));
    // Refusals name the field that is wrong and record nothing, whatever else the body has.
    let mut bad = b.clone();
    bad["version"] = json!(2);
    let r = api
        .refused_post(&format!("{V1}/backend"), bad.to_string(), 400)
        .await;
    assert!(r.json.get("warnings").is_none(), "{}", r.json);
    assert!(error(&r).contains("version"), "{}", r.json);
    let mut bad = b.clone();
    bad["defaults"]["size"] = json!("lots");
    let r = api
        .refused_post(&format!("{V1}/backend/b3"), bad.to_string(), 400)
        .await;
    assert!(error(&r).contains("defaults.size"), "{}", r.json);
    api.shutdown().await;
}

/// Issue 18: a resize to a size the backend's driver cannot make (here above the fake
/// array's `limitVolumeSize`) is a 400 naming `size` before the array is asked or anything is
/// recorded; within the limit it goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resizes_beyond_the_drivers_limit_are_refused_before_anything_is_recorded() {
    let api = populated().await;
    let mut limited = ssd_backend("small");
    limited["limitVolumeSize"] = json!("10Gi");
    api.ok(&format!("{V1}/backend"), &limited, 201).await;
    backend_online(&api.client, &api.base, "small").await;
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "capped", "storagePools": {"small": ["fast"]}}),
        201,
    )
    .await;
    api.ok(
        &format!("{V1}/volume"),
        &volume("grow", "1Gi", "capped"),
        201,
    )
    .await;
    let r = api
        .refused_post(
            &format!("{V1}/volume/grow/resize"),
            json!({"size": "11Gi"}).to_string(),
            400,
        )
        .await;
    let msg = error(&r);
    assert!(msg.starts_with("size: "), "{msg}");
    assert!(
        msg.contains("too large") && msg.contains("10737418240 bytes (10 GiB)"),
        "{msg}"
    );
    // A create above the limit is refused up front too (placement), also naming `size`.
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("huge", "11Gi", "capped").to_string(),
            400,
        )
        .await;
    assert!(error(&r).starts_with("size: "), "{}", r.json);
    let r = api
        .post_json(
            &format!("{V1}/volume/grow/resize"),
            &json!({"size": "10Gi"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["volume"]["Config"]["size"], "10Gi");
    api.shutdown().await;
}

//! Requests as such: names in paths, body size limits, concurrent creates, reproductions of
//! bugs found, and the real binary.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_in_paths_are_refused_and_touch_nothing() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("a"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "a"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("a", "1Gi", "a"), 201)
        .await;
    let long = "x".repeat(300);
    // (encoded name, what the message says)
    let names: Vec<(String, &str)> = vec![
        ("a%2Fb".into(), "must not contain '/'"),
        ("a%2fb".into(), "must not contain '/'"),
        ("%2E%2E%2Fa".into(), "must not contain '/'"),
        ("a%00b".into(), "must not contain NUL"),
        ("a%5Cb".into(), "must not contain '\\'"),
        (long, "is longer than 253 bytes"),
    ];
    for (what, field) in [
        ("backend", "backend name"),
        ("volume", "volume name"),
        ("storageclass", "storage class name"),
    ] {
        for (name, says) in &names {
            let path = format!("{V1}/{what}/{name}");
            let mut methods = vec![Method::GET, Method::DELETE];
            if what == "backend" {
                methods.push(Method::POST);
            }
            for method in methods {
                let body = (method == Method::POST).then(|| ssd_backend("a").to_string().into());
                let r = api.refused(method.clone(), &path, body, 400).await;
                let msg = r.json["error"].as_str().unwrap();
                assert_eq!(msg, format!("{field} {says}"), "{method} {path}");
                let payload = match (what, &method) {
                    (_, &Method::DELETE) => None,
                    ("backend", &Method::POST) => Some(("backend", json!(""))),
                    ("backend", _) => Some(("backend", Value::Null)),
                    ("volume", _) => Some(("volume", Value::Null)),
                    _ => Some(("storageClass", Value::Null)),
                };
                error_of(&r, payload);
            }
        }
    }
    // percent-encoded dots are decoded to ".." and refused (URL parsing resolves "%2E%2E" as
    // "..", so this goes over a raw socket)
    for (method, what, field) in [
        ("GET", "volume", "volume name"),
        ("DELETE", "volume", "volume name"),
        ("GET", "backend", "backend name"),
        ("DELETE", "storageclass", "storage class name"),
    ] {
        for segment in ["..", "%2E%2E", "%2e."] {
            let before = api.state().await;
            let r = raw_exchange(
                api.addr,
                &raw_head(method, &format!("{V1}/{what}/{segment}"), ""),
                None,
            )
            .await;
            assert_eq!(r.status, 400, "{method} {what}/{segment}: {}", r.json);
            assert_eq!(
                r.json["error"],
                format!("{field} must not be \".\" or \"..\""),
                "{method} {what}/{segment}"
            );
            assert!(r.head.to_ascii_lowercase().contains("x-request-id"));
            assert_eq!(api.state().await, before);
        }
    }
    // the objects called "a" are all still there
    assert_eq!(api.list("backend", "backends").await, ["a"]);
    assert_eq!(api.list("volume", "volumes").await, ["a"]);
    assert_eq!(api.list("storageclass", "storageClasses").await, ["a"]);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_names_in_paths_are_decoded() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("a b", "1Gi", "any"), 201)
        .await;
    let r = api.get(&format!("{V1}/volume/a%20b")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["volume"]["Config"]["name"], "a b");
    let r = api.get(&format!("{V1}/backend/n%61s")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let r = api.delete(&format!("{V1}/volume/a%20b")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert!(api.list("volume", "volumes").await.is_empty());
    // a segment that does not decode to UTF-8: 400 with the operation's envelope
    let r = api
        .refused(Method::GET, &format!("{V1}/volume/%FF"), None, 400)
        .await;
    assert!(
        error_of(&r, Some(("volume", Value::Null))).starts_with("invalid path: "),
        "{}",
        r.json
    );
    let r = api
        .refused(Method::DELETE, &format!("{V1}/backend/%FF"), None, 400)
        .await;
    assert!(error_of(&r, None).starts_with("invalid path: "));
    let r = api
        .refused_post(
            &format!("{V1}/backend/%FF"),
            ssd_backend("nas").to_string(),
            400,
        )
        .await;
    assert!(error_of(&r, Some(("backend", json!("")))).starts_with("invalid path: "));
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Body size

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_one_mib_are_413_and_the_server_stays_healthy() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    const MIB: usize = 1024 * 1024;
    // A valid JSON document padded with spaces to `len` bytes.
    let padded = |doc: &Value, len: usize| {
        let mut s = doc.to_string();
        assert!(s.len() <= len);
        s.push_str(&" ".repeat(len - s.len()));
        s.into_bytes()
    };
    let cases = [
        (format!("{V1}/backend"), "backend"),
        (format!("{V1}/backend/nas"), "backend"),
        (format!("{V1}/volume"), "backend"),
        (format!("{V1}/storageclass"), "storageClass"),
    ];
    for (path, key) in &cases {
        for len in [2 * MIB, MIB + 1] {
            // Only the head is sent: the server refuses a declared length over the cap before
            // reading any of the body. (A client that went on writing the body could see a
            // reset instead of the answer, because the server closes without reading it.)
            let before = api.state().await;
            let r = raw_exchange(
                api.addr,
                &raw_head("POST", path, &format!("content-length: {len}\r\n")),
                None,
            )
            .await;
            assert_eq!(r.status, 413, "{path} {len}: {}", r.json);
            assert_eq!(
                r.json,
                json!({*key: "", "error": format!("request body is larger than the limit of {MIB} bytes")}),
                "{path} {len}"
            );
            assert_eq!(api.state().await, before, "{path} {len} changed the state");
        }
        // healthy afterwards
        let r = api.get("/trident/v1/version").await;
        assert_eq!(r.status, 200);
    }
    // exactly 1 MiB is read
    let r = api
        .post(
            &format!("{V1}/storageclass"),
            padded(&json!({"name": "edge"}), MIB),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let r = api
        .post(
            &format!("{V1}/volume"),
            padded(&volume("edge", "1Gi", "any"), MIB),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(api.list("volume", "volumes").await, ["edge"]);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_bodies_over_one_mib_are_413() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    for (path, key) in [
        (format!("{V1}/backend"), "backend"),
        (format!("{V1}/backend/nas"), "backend"),
        (format!("{V1}/volume"), "backend"),
        (format!("{V1}/storageclass"), "storageClass"),
    ] {
        let before = api.state().await;
        let r = raw_exchange(
            api.addr,
            &raw_head("POST", &path, "transfer-encoding: chunked\r\n"),
            Some(2 * 1024 * 1024),
        )
        .await;
        assert_eq!(r.status, 413, "{path}: {}", r.json);
        assert_eq!(
            r.json,
            json!({key: "", "error": "request body is larger than the limit of 1048576 bytes"}),
            "{path}"
        );
        let head = r.head.to_ascii_lowercase();
        assert!(
            head.contains("content-type: application/json; charset=utf-8"),
            "{head}"
        );
        assert!(head.contains("x-request-id"), "{head}");
        assert_eq!(api.state().await, before, "{path}");
    }
    // a small chunked body is fine
    let r = raw_exchange(
        api.addr,
        &{
            let body = json!({"name": "chunky"}).to_string();
            format!(
                "{}transfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n",
                raw_head("POST", &format!("{V1}/storageclass"), ""),
                body.len()
            )
        },
        None,
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"storageClass": "chunky"}));
    let r = api.get("/trident/v1/version").await;
    assert_eq!(r.status, 200);
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Concurrency

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_of_one_name_are_one_201_and_the_rest_409() {
    let api = Api::start().await;
    api.ok(
        &format!("{V1}/backend"),
        &fake_backend("b", "file", &[("p1", ssd()), ("p2", ssd())]),
        201,
    )
    .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let client = api.client.clone();
        let url = format!("{}{V1}/volume", api.base);
        tasks.push(tokio::spawn(async move {
            let r = client
                .post(url)
                .body(volume("same", "1Gi", "any").to_string())
                .send()
                .await
                .unwrap();
            reply(r, "concurrent create").await
        }));
    }
    let mut created = 0;
    for t in tasks {
        let r = t.await.unwrap();
        match r.status {
            201 => {
                assert_eq!(r.json, json!({"backend": "b"}));
                created += 1;
            }
            409 => assert_eq!(
                error_of(&r, Some(("backend", json!("")))),
                "volume same already exists"
            ),
            other => panic!("unexpected {other}: {}", r.json),
        }
    }
    assert_eq!(created, 1);
    assert_eq!(api.list("volume", "volumes").await, ["same"]);
    let r = api.get(&format!("{V1}/backend/b")).await;
    assert_eq!(r.json["backend"]["volumes"], json!(["same"]));
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Bugs found (reproductions, ignored until fixed)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_explain_endpoint_a_failed_create_points_at_exists() {
    let api = Api::start().await;
    let mut be = fake_backend("broken", "file", &[("p1", hdd())]);
    be["failPools"] = json!({"p1": "p1 is on fire"});
    api.ok(&format!("{V1}/backend"), &be, 201).await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let r = api
        .failed_post(
            &format!("{V1}/volume"),
            volume("x", "1Gi", "any").to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("backend", json!(""))));
    let hint = "GET /trident/v1/storageclass/any/explain";
    assert!(msg.contains(hint), "{msg}");
    let r = api.get(&format!("{V1}/storageclass/any/explain")).await;
    assert_eq!(
        r.status, 200,
        "the error message sends users to {hint}, which answers {}",
        r.json
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_required_storage_regex_names_required_storage() {
    let api = Api::start().await;
    let r = api
        .refused_post(
            &format!("{V1}/storageclass"),
            json!({"name": "gold", "requiredStorage": {"(": ["fast"]}}).to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("storageClass", json!(""))));
    assert!(
        msg.contains("requiredStorage") && !msg.contains("additionalStoragePools"),
        "the client sent requiredStorage, the error says: {msg}"
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_passes_validation_can_be_created() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let name = "v".repeat(253);
    let r = api
        .post_json(&format!("{V1}/volume"), &volume(&name, "1Gi", "any"))
        .await;
    let msg = r.json["error"].as_str().unwrap_or_default();
    assert!(
        r.status == 201 || (r.status == 400 && msg.starts_with("name ")),
        "a 253-byte name is valid for the API, so it must be created, or refused up front \
         naming the field; got {}: {msg}",
        r.status
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_413_says_connection_close() {
    let api = Api::start().await;
    let big = format!("{}{}", json!({"name": "big"}), " ".repeat(2 << 20));
    // The server refuses at the cap and closes the connection; its answer must say so, or a
    // pooled client sends its next request on the dying connection. A raw keep-alive request
    // (only the head, so the answer cannot be lost to a reset while the body is sent):
    let r = raw_exchange(
        api.addr,
        &format!(
            "POST {V1}/storageclass HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\n",
            big.len()
        ),
        None,
    )
    .await;
    assert_eq!(r.status, 413, "{}", r.json);
    let connection = r.head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("connection")
            .then(|| v.trim().to_ascii_lowercase())
    });
    // What a keep-alive client sees: some of its follow-up requests fail outright.
    let mut failed = Vec::new();
    for i in 0..50 {
        let r = api
            .client
            .post(format!("{}{V1}/storageclass", api.base))
            .body(big.clone())
            .send()
            .await;
        // The server answers before reading the whole body and closes the connection, so the
        // client may see either the 413 or a reset while it is still sending; both are fine.
        if let Ok(r) = r {
            assert_eq!(r.status().as_u16(), 413, "oversized POST {i}");
        }
        if let Err(e) = api
            .client
            .get(format!("{}{V1}/backend", api.base))
            .send()
            .await
        {
            failed.push(format!("{i}: {e:?}"));
        }
    }
    assert_eq!(
        connection.as_deref(),
        Some("close"),
        "413 without Connection: close; follow-up GETs on the pooled connection that failed: \
         {failed:#?}"
    );
    assert!(failed.is_empty(), "{failed:#?}");
    api.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// The real binary

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_binary_serves_the_api() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let client = storch::net::client();
    let mut server = Server::start(&data, &[]);
    server.wait_ready(&client).await;
    let url = server.url.clone();
    let send = async |method: Method, path: &str, body: Option<Value>| {
        let mut req = client.request(method.clone(), format!("{url}{path}"));
        if let Some(b) = body {
            req = req.body(b.to_string());
        }
        let r = req.send().await.unwrap();
        reply(r, &format!("{method} {path}")).await
    };

    let r = send(Method::GET, "/trident/version", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["version"], "18.07.0");
    let r = send(
        Method::POST,
        "/trident/v1/backend",
        Some(ssd_backend("nas")),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));
    let r = send(
        Method::POST,
        "/trident/v1/storageclass",
        Some(json!({"name": "gold", "attributes": {"media": "ssd"}})),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let r = send(
        Method::POST,
        "/trident/v1/volume",
        Some(volume("v1", "1Gi", "gold")),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "nas"}));
    let r = send(Method::GET, "/trident/v1/volume/v1", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["volume"]["pool"], "fast");
    assert_eq!(r.json["volume"]["Config"]["size"], "1Gi");
    let r = send(
        Method::POST,
        "/trident/v1/volume",
        Some(json!({"name": "v2"})),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json, json!({"backend": "", "error": MANDATORY}));
    let r = send(Method::PUT, "/trident/v1/volume/v1", None).await;
    assert_eq!(r.status, 405);
    server.stop();

    // the same data comes back after a restart
    let mut server = Server::start(&data, &[]);
    server.wait_ready(&client).await;
    let r = client
        .get(format!("{}/trident/v1/volume", server.url))
        .send()
        .await
        .unwrap();
    let r = reply(r, "list after restart").await;
    assert_eq!(r.json, json!({"volumes": ["v1"]}));
    server.stop();
}

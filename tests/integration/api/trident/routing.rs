//! Requests the router itself answers: the version, request ids, unknown paths, wrong methods,
//! HEAD and OPTIONS.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_on_both_paths_has_exactly_two_fields() {
    let api = Api::start().await;
    for path in ["/trident/version", "/trident/v1/version"] {
        let r = api.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.json["version"], "18.07.0", "{path}");
        assert!(r.json["storchVersion"].is_string(), "{}", r.json);
        assert_eq!(r.json.as_object().unwrap().len(), 2, "{}", r.json);
    }
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_ids_are_made_or_echoed() {
    let api = Api::start().await;
    let a = api.get("/trident/v1/version").await;
    let b = api.get("/trident/v1/version").await;
    assert_ne!(a.headers["x-request-id"], b.headers["x-request-id"]);
    // a safe client id is echoed, on success and on error
    for path in ["/trident/v1/version", "/trident/v1/volume/nope", "/nowhere"] {
        let r = api
            .client
            .get(format!("{}{path}", api.base))
            .header("x-request-id", "client-id-42")
            .send()
            .await
            .unwrap();
        let r = reply(r, path).await;
        assert_eq!(r.headers["x-request-id"], "client-id-42", "{path}");
    }
    // an unsafe one is replaced
    let r = api
        .client
        .get(format!("{}/trident/v1/version", api.base))
        .header("x-request-id", "a b/c")
        .send()
        .await
        .unwrap();
    let r = reply(r, "unsafe id").await;
    let rid = r.headers["x-request-id"].to_str().unwrap();
    assert_ne!(rid, "a b/c");
    assert!(!rid.is_empty());
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_are_json_404_and_change_nothing() {
    let api = Api::start().await;
    for (method, path) in [
        (Method::GET, "/"),
        (Method::GET, "/trident"),
        (Method::GET, "/trident/v2/volume"),
        (Method::GET, "/trident/v1/volumes"),
        (Method::POST, "/trident/v1/snapshots"),
        (Method::GET, "/trident/v1/volume/a/b"),
        (Method::DELETE, "/trident/v1/backend/a/b"),
        (Method::GET, "/trident/v1/storageclass/a/b/c"),
        (Method::PUT, "/trident/v1/nodes"),
    ] {
        let r = api
            .refused(method.clone(), path, Some(b"{}".to_vec()), 404)
            .await;
        assert_eq!(
            error_of(&r, None),
            "no such API path",
            "{method} {path}: {}",
            r.json
        );
    }
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailing_slashes_redirect_to_the_path_without() {
    let api = Api::start().await;
    let r = api.get("/trident/v1/backend/").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.headers["location"], "/trident/v1/backend");
    let r = api.get("/trident/v1/volume/v1/?x=1").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.headers["location"], "/trident/v1/volume/v1?x=1");
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_are_json_405_with_allow_and_change_nothing() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    let cases: &[(Method, &str, &[&str])] = &[
        (Method::POST, "/trident/version", &["GET"]),
        (Method::DELETE, "/trident/v1/version", &["GET"]),
        (Method::PUT, "/trident/v1/backend", &["GET", "POST"]),
        (Method::DELETE, "/trident/v1/backend", &["GET", "POST"]),
        (
            Method::PUT,
            "/trident/v1/backend/nas",
            &["GET", "POST", "DELETE"],
        ),
        (
            Method::PATCH,
            "/trident/v1/backend/nas",
            &["GET", "POST", "DELETE"],
        ),
        (Method::DELETE, "/trident/v1/volume", &["GET", "POST"]),
        (Method::PUT, "/trident/v1/volume/v1", &["GET", "DELETE"]),
        (Method::POST, "/trident/v1/volume/v1", &["GET", "DELETE"]),
        (Method::PUT, "/trident/v1/storageclass", &["GET", "POST"]),
        (
            Method::POST,
            "/trident/v1/storageclass/gold",
            &["GET", "DELETE"],
        ),
    ];
    for (method, path, allowed) in cases {
        let body = json!({"name": "v1", "size": "1G"}).to_string().into_bytes();
        let r = api.refused(method.clone(), path, Some(body), 405).await;
        let msg = error_of(&r, None);
        assert!(
            msg.contains(method.as_str()) && msg.contains("Allow"),
            "{method} {path}: {msg}"
        );
        let allow = r
            .headers
            .get("allow")
            .unwrap_or_else(|| panic!("{method} {path}: no Allow header"))
            .to_str()
            .unwrap()
            .to_string();
        let allow: Vec<&str> = allow.split(',').map(str::trim).collect();
        for m in *allowed {
            assert!(allow.contains(m), "{method} {path}: Allow {allow:?}");
        }
        assert!(
            !allow.contains(&method.as_str()),
            "{method} {path}: Allow {allow:?}"
        );
    }
    // the backend is untouched by the PUT/PATCH on its path
    assert_eq!(api.list("backend", "backends").await, ["nas"]);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_and_options() {
    let api = Api::start().await;
    // HEAD answers like GET, without a body
    for path in [
        "/trident/version",
        "/trident/v1/backend",
        "/trident/v1/volume",
    ] {
        let r = api
            .client
            .head(format!("{}{path}", api.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        assert_eq!(r.headers()["content-type"], CONTENT_TYPE, "{path}");
        assert!(r.headers().contains_key("x-request-id"), "{path}");
        assert!(r.bytes().await.unwrap().is_empty(), "{path}");
    }
    // OPTIONS is a wrong method like any other
    let r = api
        .refused(Method::OPTIONS, "/trident/v1/volume", None, 405)
        .await;
    error_of(&r, None);
    let allow = r.headers["allow"].to_str().unwrap();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    api.shutdown().await;
}

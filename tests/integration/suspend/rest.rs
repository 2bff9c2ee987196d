//! `POST /trident/v1/backend/{b}/state` on a real socket: bad bodies are 400s naming `state`
//! that change nothing, the answer is the backend with its `userState`, a repeat records
//! nothing, creates are refused naming the suspension, and explain says why.

use serde_json::{Value, json};

use crate::support::http::*;

/// The kinds of backend `b`'s events, and how many events the log holds.
async fn kinds(c: &reqwest::Client, s: &TestServer, b: &str) -> (Vec<String>, usize) {
    let all = get(c, &s.url("/trident/v1/events")).await.json["events"]
        .as_array()
        .map_or(0, Vec::len);
    let r = get(c, &s.url(&format!("/trident/v1/events?object=backend/{b}"))).await;
    let kinds = r.json["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    (kinds, all)
}

async fn raw_post(c: &reqwest::Client, url: &str, body: &str) -> (u16, Value) {
    let r = c.post(url).body(body.to_string()).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_route_suspends_and_resumes_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    let backend = crate::support::fake_backend("lab", "file", &[("p1", super::cloning_ssd())]);
    assert_eq!(
        post(&c, &s.url("/trident/v1/backend"), backend)
            .await
            .status,
        201
    );
    let class = json!({"name": "fast", "attributes": {"media": "ssd"}});
    assert_eq!(
        post(&c, &s.url("/trident/v1/storageclass"), class)
            .await
            .status,
        201
    );
    let url = s.url("/trident/v1/backend/lab/state");
    let (_, before) = kinds(&c, &s, "lab").await;

    for (body, want) in [
        (
            r#"{"state":"paused"}"#,
            r#"invalid state "paused"; acceptable values: normal, suspended"#,
        ),
        (r#"{"state":""}"#, "state is mandatory"),
        ("{}", "state is mandatory"),
        (r#"{"state":1}"#, "invalid JSON: state: invalid type"),
        (
            r#"{"state":"normal","userState":"x"}"#,
            "unknown field `userState`",
        ),
        ("suspended", "invalid JSON"),
    ] {
        let (status, answer) = raw_post(&c, &url, body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["backend"], Value::Null, "{body}: {answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(error.contains(want), "{body}: {error}");
    }
    let (status, answer) = raw_post(
        &c,
        &s.url("/trident/v1/backend/nope/state"),
        r#"{"state":"suspended"}"#,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(
        answer,
        json!({"backend": null, "error": "backend nope was not found"})
    );
    assert_eq!(
        kinds(&c, &s, "lab").await.1,
        before,
        "refusals change nothing"
    );

    let r = post(&c, &url, json!({"state": "suspended"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let b = &r.json["backend"];
    assert_eq!(
        (&b["name"], &b["userState"], &b["state"], &b["online"]),
        (
            &json!("lab"),
            &json!("suspended"),
            &json!("online"),
            &json!(true)
        )
    );
    let (k, n) = kinds(&c, &s, "lab").await;
    assert_eq!(k.last().map(String::as_str), Some("BackendSuspended"));
    assert_eq!(n, before + 1);
    // Again: the same answer, nothing recorded.
    let again = post(&c, &url, json!({"state": "suspended"})).await;
    assert_eq!((again.status, &again.json), (200, &r.json));
    assert_eq!(kinds(&c, &s, "lab").await.1, before + 1);
    let shown = get(&c, &s.url("/trident/v1/backend/lab")).await;
    assert_eq!(shown.json["backend"]["userState"], "suspended");
    let listed = get(&c, &s.url("/trident/v1/backend")).await;
    assert_eq!(listed.json, json!({"backends": ["lab"]}));

    let body = json!({"name": "v1", "size": "1Gi", "storageClass": "fast"});
    let refused = post(&c, &s.url("/trident/v1/volume"), body.clone()).await;
    assert_eq!(refused.status, 400, "{}", refused.json);
    let error = refused.json["error"].as_str().unwrap();
    assert!(
        error.contains("lab suspended by the operator (no new volumes land there)"),
        "{error}"
    );
    let explained = get(&c, &s.url("/trident/v1/storageclass/fast/explain")).await;
    assert_eq!(
        explained.json["explanation"]["pools"][0]["reasons"],
        json!(["backend lab is suspended by the operator (no new volumes land there)"])
    );

    let r = post(&c, &url, json!({"state": "normal"})).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["backend"]["userState"], "normal");
    let (k, _) = kinds(&c, &s, "lab").await;
    assert_eq!(k.last().map(String::as_str), Some("BackendResumed"));
    let made = post(&c, &s.url("/trident/v1/volume"), body).await;
    assert_eq!(made.status, 201, "{}", made.json);
    s.stop().await;
}

//! `GET /trident/v1/events` on a real socket: lists, filters, paging, bad parameters, and
//! NDJSON follow streams (events committed after the stream opened arrive; the stream ends
//! with `limit` and when the server stops, without holding the shutdown up).

use std::time::Duration;

use crate::support::http::*;
use serde_json::{Value, json};

/// Reads NDJSON lines from a streaming response.
struct Lines {
    response: reqwest::Response,
    buf: Vec<u8>,
}

impl Lines {
    /// The next line as JSON; `None` when the stream ended. Panics after 10 s of silence.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(at) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=at).collect();
                return Some(serde_json::from_slice(&line[..line.len() - 1]).unwrap());
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk())
                .await
                .expect("no event line within 10 s")
                .ok()?;
            match chunk {
                Some(bytes) => self.buf.extend_from_slice(&bytes),
                None => {
                    assert!(self.buf.is_empty(), "a partial last line: {:?}", self.buf);
                    return None;
                }
            }
        }
    }
}

async fn follow(client: &reqwest::Client, url: &str) -> Lines {
    let response = client.get(url).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    Lines {
        response,
        buf: Vec::new(),
    }
}

async fn setup(c: &reqwest::Client, s: &TestServer) {
    let mut backend = crate::support::fake_backend("lab", "file", &[("p1", crate::support::ssd())]);
    backend["password"] = json!("canary-pw-5150");
    assert_eq!(
        post(c, &s.url("/trident/v1/backend"), backend).await.status,
        201
    );
    let class = json!({"name": "gold", "attributes": {"media": "ssd"}});
    assert_eq!(
        post(c, &s.url("/trident/v1/storageclass"), class)
            .await
            .status,
        201
    );
}

fn kinds(events: &Value) -> Vec<String> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_listed_filtered_and_paged() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    setup(&c, &s).await;
    let r = c
        .post(s.url("/trident/v1/volume"))
        .header("x-request-id", "make-v1")
        .body(json!({"name": "v1", "size": "1Gi", "storageClass": "gold"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert_eq!(
        delete(&c, &s.url("/trident/v1/volume/v1")).await.status,
        200
    );
    let body = json!({"name": "v2", "size": "1Gi", "storageClass": "gold"});
    assert_eq!(
        post(&c, &s.url("/trident/v1/volume"), body).await.status,
        201
    );

    let r = get(&c, &s.url("/trident/v1/events")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let events = r.json["events"].as_array().unwrap();
    assert!(events.len() >= 11, "{}", r.json);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "gapless from 1");
        let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "event",
                "hash",
                "id",
                "kind",
                "requestId",
                "seq",
                "stream",
                "summary",
                "time"
            ]
        );
        let time = e["time"].as_str().unwrap();
        assert!(time.len() == 24 && time.ends_with('Z'), "{time}");
        assert!(humantime::parse_rfc3339(time).is_ok(), "{time}");
        assert_eq!(e["hash"].as_str().unwrap().len(), 64);
        assert!(uuid::Uuid::parse_str(e["id"].as_str().unwrap()).is_ok());
    }
    assert_eq!(events[0]["kind"], "BackendAdded");
    assert_eq!(events[0]["stream"], "backend/lab");
    assert_eq!(events[0]["summary"], "backend lab added (fake)");
    assert_eq!(events[0]["event"]["name"], "lab");
    assert_eq!(events[0]["event"]["event"]["secrets"], "<sealed>");
    assert!(!String::from_utf8_lossy(&r.body).contains("canary-pw-5150"));

    // One object.
    let r = get(&c, &s.url("/trident/v1/events?object=volume/v1")).await;
    assert_eq!(
        kinds(&r.json["events"]),
        [
            "VolumeRequested",
            "PlacementPlanned",
            "VolumeCreated",
            "VolumeDeleteRequested",
            "VolumeDeleted"
        ]
    );
    let first = &r.json["events"][0];
    assert_eq!(first["requestId"], "make-v1");
    assert_eq!(first["stream"], "volume/v1");
    let r = get(&c, &s.url("/trident/v1/events?object=volume/nope")).await;
    assert_eq!(r.json, json!({"events": []}));

    // Since and limit.
    let r = get(&c, &s.url("/trident/v1/events?since=5&limit=3")).await;
    let seqs: Vec<u64> = r.json["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [5, 6, 7]);
    let r = get(&c, &s.url("/trident/v1/events?since=100000")).await;
    assert_eq!(r.json, json!({"events": []}));

    // Bad parameters name themselves.
    for (query, param) in [
        ("object=disk/x", "object"),
        ("object=volume", "object"),
        ("object=volume/", "object"),
        ("since=-1", "since"),
        ("since=x", "since"),
        ("limit=0", "limit"),
        ("limit=100001", "limit"),
        ("follow=maybe", "follow"),
        ("objet=volume/v1", "\"objet\""),
    ] {
        let r = get(&c, &s.url(&format!("/trident/v1/events?{query}"))).await;
        assert_eq!(r.status, 400, "{query}");
        assert_eq!(r.json["events"], json!([]), "{query}");
        let msg = r.json["error"].as_str().unwrap();
        assert!(
            msg.starts_with(&format!("invalid query parameter {param}: ")),
            "{query}: {msg}"
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_stream_gets_events_committed_after_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    setup(&c, &s).await;

    // Only volume/v3, live: nothing yet.
    let mut lines = follow(
        &c,
        &s.url("/trident/v1/events?follow=true&object=volume/v3"),
    )
    .await;
    let body = json!({"name": "v3", "size": "1Gi", "storageClass": "gold"});
    assert_eq!(
        post(&c, &s.url("/trident/v1/volume"), body).await.status,
        201
    );
    let mut got = Vec::new();
    for _ in 0..3 {
        let e = lines.next().await.expect("an event");
        assert_eq!(e["stream"], "volume/v3");
        got.push(e["kind"].as_str().unwrap().to_string());
    }
    assert_eq!(
        got,
        ["VolumeRequested", "PlacementPlanned", "VolumeCreated"]
    );
    assert_eq!(
        delete(&c, &s.url("/trident/v1/volume/v3")).await.status,
        200
    );
    assert_eq!(lines.next().await.unwrap()["kind"], "VolumeDeleteRequested");
    assert_eq!(lines.next().await.unwrap()["kind"], "VolumeDeleted");

    // From the start with a limit: the backlog, then the stream ends by itself.
    let mut lines = follow(&c, &s.url("/trident/v1/events?follow=1&since=1&limit=2")).await;
    assert_eq!(lines.next().await.unwrap()["seq"], 1);
    assert_eq!(lines.next().await.unwrap()["seq"], 2);
    assert!(lines.next().await.is_none());

    // Bad parameters are refused before streaming.
    let r = get(&c, &s.url("/trident/v1/events?follow=true&object=x")).await;
    assert_eq!(r.status, 400);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_follow_streams_end_when_the_server_stops() {
    let dir = tempfile::tempdir().unwrap();
    let s = TestServer::plain(&dir.path().join("data")).await;
    let c = storch::net::client();
    let mut a = follow(&c, &s.url("/trident/v1/events?follow=true")).await;
    let mut b = follow(
        &c,
        &s.url("/trident/v1/events?follow=true&object=backend/x"),
    )
    .await;
    setup(&c, &s).await;
    assert_eq!(a.next().await.unwrap()["kind"], "BackendAdded");

    // The default grace period is 30 s; the stop must not wait for these streams.
    let started = std::time::Instant::now();
    s.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    while a.next().await.is_some() {}
    assert!(b.next().await.is_none());
}

//! The web dashboard (`/ui/`) in a real browser: `storch serve` with a token, a local and a
//! fake backend, driven through headless Chromium over WebDriver (`support::webdriver`).
//! Every page must load without console errors and show what the REST API returns; the
//! events page must follow new events live; without the token the page shows only the token
//! prompt. Screenshots of each page go to `target/ui-screenshots/`.
//!
//! One test function, so that only one browser runs at a time.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::etcd::Etcd;
use crate::support::http::TOKEN;
use crate::support::webdriver::{Browser, screenshot_dir};
use crate::support::*;

/// A REST client that sends the token.
struct Api {
    http: reqwest::Client,
    url: String,
}

impl Api {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(TOKEN);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> Value {
        let (s, v) = self.send(reqwest::Method::GET, path, None).await;
        assert_eq!(s, 200, "GET {path}: {v}");
        v
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let (s, v) = self.send(reqwest::Method::POST, path, Some(body)).await;
        assert!(s == 200 || s == 201, "POST {path}: {s} {v}");
        v
    }

    async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

fn write_config(path: &Path, pools: &Path) {
    let text = format!(
        "backends:\n  - version: 1\n    storageDriverName: local\n    backendName: local\n    pools:\n      fast:\n        path: {fast}\n        media: ssd\n        capacity: 10Gi\n      bulk:\n        path: {bulk}\n        media: hdd\n        capacity: 20Gi\nstorageClasses:\n  - name: fast\n    attributes: {{media: ssd}}\n  - name: bulk\n    attributes: {{media: hdd}}\n",
        fast = pools.join("fast").display(),
        bulk = pools.join("bulk").display(),
    );
    std::fs::write(path, text).unwrap();
}

/// Waits until `css` exists on the page and its text satisfies `ok`; returns the text.
async fn wait_text(b: &Browser, what: &str, css: &str, ok: impl Fn(&str) -> bool) -> String {
    let mut last = None;
    for _ in 0..3000 {
        if let Some(t) = b.text(css).await {
            if ok(&t) {
                return t;
            }
            last = Some(t);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("{what}: {css} never matched; last text {last:?}");
}

/// Waits until the page at `hash` has been drawn (the app marks the body when it is).
async fn open(b: &Browser, base: &str, hash: &str, page: &str) {
    b.eval("document.body.removeAttribute('data-loaded');", json!([]))
        .await;
    b.goto(&format!("{base}/ui/{hash}")).await;
    wait_text(b, page, "body", |_| true).await;
    eventually(&format!("page {page} drawn"), async || {
        b.eval("return document.body.dataset.loaded || null;", json!([]))
            .await
            == json!(page)
    })
    .await;
}

async fn no_console_errors(b: &Browser, page: &str) {
    let errors = b.console_errors().await;
    assert!(errors.is_empty(), "console errors on {page}: {errors:#?}");
}

fn format_bytes(n: u64) -> String {
    // The page's `bytes()`: binary units, one decimal under 100.
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i < units.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else if v >= 100.0 {
        format!("{v:.0} {}", units[i])
    } else {
        format!("{v:.1} {}", units[i])
    }
}

/// The volume names of the table's rows, in order.
async fn rows(b: &Browser) -> Value {
    b.eval(
        "return [...document.querySelectorAll('#volume-table tbody tr')].map(r => r.dataset.volume);",
        json!([]),
    )
    .await
}

fn op_count(metrics: &str, operation: &str) -> u64 {
    let needle = format!("operation=\"{operation}\"");
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("storch_operation_duration_seconds_count{") && l.contains(&needle)
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_a_real_browser() {
    let tmp = tempfile::tempdir().unwrap();
    let pools = tmp.path().join("pools");
    let config = tmp.path().join("storch.yaml");
    write_config(&config, &pools);
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    // Replicated through a real etcd, so that a standby can be shown at the end.
    let etcd = Etcd::start().await;
    let key = tmp.path().join("secret.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    let args = |id: &'static str| -> Vec<String> {
        [
            "--config",
            config.to_str().unwrap(),
            "--auth-token-file",
            token_file.to_str().unwrap(),
            "--etcd-endpoints",
            &etcd.endpoint,
            "--etcd-lease-ttl",
            "10s",
            "--etcd-identity",
            id,
            "--secrets-key-file",
            key.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let leader_args = args("leader-a");
    let leader_args: Vec<&str> = leader_args.iter().map(String::as_str).collect();
    let server = Server::start_with(&tmp.path().join("data-a"), &leader_args, &[]);
    let api = Api {
        http: storch::net::client(),
        url: server.url.clone(),
    };
    eventually("the config file applied", async || {
        api.send(reqwest::Method::GET, "/trident/v1/storageclass", None)
            .await
            .1["storageClasses"]
            == json!(["bulk", "fast"])
    })
    .await;
    api.post(
        "/trident/v1/backend",
        fake_backend("fake1", "file", &[("ssd1", ssd()), ("hdd1", hdd())]),
    )
    .await;
    eventually("fake1 online", async || {
        api.send(reqwest::Method::GET, "/trident/v1/backend/fake1", None)
            .await
            .1["backend"]["state"]
            == "online"
    })
    .await;
    // 60 volumes (more than a page), a snapshot and a clone.
    for i in 0..60 {
        let class = if i % 3 == 0 { "bulk" } else { "fast" };
        api.post(
            "/trident/v1/volume",
            json!({"name": format!("vol-{i:02}"), "size": format!("{}Mi", 64 + i), "storageClass": class, "protocol": "file"}),
        )
        .await;
    }
    api.post(
        "/trident/v1/volume/vol-01/snapshot",
        json!({"name": "snap-a"}),
    )
    .await;
    api.post(
        "/trident/v1/volume",
        json!({"name": "vol-01-clone", "size": "65Mi", "cloneSourceVolume": "vol-01", "cloneSourceSnapshot": "snap-a"}),
    )
    .await;

    let shots = screenshot_dir();
    let base = server.url.clone();
    let b = Browser::start(1280, 800).await;

    // Without the token: the prompt, and no data.
    b.goto(&format!("{base}/ui/")).await;
    wait_text(&b, "token prompt", "#login-title", |t| t == "Sign in").await;
    eventually("the prompt is shown", async || {
        b.eval(
            "return !document.getElementById('login').hidden;",
            json!([]),
        )
        .await
            == json!(true)
    })
    .await;
    let shown = b
        .eval(
            "return document.getElementById('page').textContent;",
            json!([]),
        )
        .await;
    assert_eq!(shown, json!(""), "data shown without a token");
    assert!(b.find("[data-backend]").await.is_none());
    b.screenshot(&shots.join("login.png")).await;
    // A wrong token is refused, and still nothing is shown.
    b.type_into("#token", "not-the-token-0123456789\n").await;
    wait_text(&b, "refusal", "#login-error", |t| t.contains("refused")).await;
    assert!(b.find("[data-backend]").await.is_none());
    assert_eq!(
        b.eval("return sessionStorage.length;", json!([])).await,
        json!(0),
        "a refused token is not kept"
    );
    // (the refused data calls are logged by the browser as failed loads; read and drop them)
    b.console().await;

    // The token, typed once: kept in the tab's sessionStorage, never in the URL.
    b.type_into("#token", &format!("{TOKEN}\n")).await;
    eventually("overview drawn", async || {
        b.eval("return document.body.dataset.loaded || null;", json!([]))
            .await
            == json!("overview")
    })
    .await;
    let url = b.eval("return location.href;", json!([])).await;
    assert!(!url.as_str().unwrap().contains(TOKEN), "{url}");
    assert_eq!(
        b.eval("return Object.keys(localStorage).length;", json!([]))
            .await,
        json!(0)
    );

    // Overview: the totals and every pool as the API has them. Background work (a reconcile
    // reading sizes back) may still change a pool's usage after the page was drawn: until the
    // page drawn after a read agrees with it, read and draw again.
    let mut ov = api.get("/storch/v1/overview").await["overview"].clone();
    for _ in 0..50 {
        let mut agree = true;
        for backend in ov["backends"].as_array().unwrap() {
            for pool in backend["pools"].as_array().unwrap() {
                let p = format!(
                    "[data-pool=\"{}/{}\"] [data-field=used]",
                    backend["name"].as_str().unwrap(),
                    pool["name"].as_str().unwrap()
                );
                let used = format_bytes(pool["usedBytes"].as_u64().unwrap());
                agree &= b.text(&p).await.unwrap() == used;
            }
        }
        if agree {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        ov = api.get("/storch/v1/overview").await["overview"].clone();
        b.eval(
            "document.body.removeAttribute('data-loaded'); location.reload();",
            json!([]),
        )
        .await;
        eventually("overview drawn again", async || {
            b.eval("return document.body.dataset.loaded || null;", json!([]))
                .await
                == json!("overview")
        })
        .await;
    }
    assert_eq!(ov["totals"]["volumes"], 61);
    assert_eq!(
        b.text("#total-volumes").await.unwrap(),
        ov["totals"]["volumes"].to_string()
    );
    assert_eq!(
        b.text("#total-backends").await.unwrap(),
        ov["totals"]["backends"].to_string()
    );
    assert_eq!(
        b.text("#total-snapshots").await.unwrap(),
        ov["totals"]["snapshots"].to_string()
    );
    assert_eq!(
        b.text("#total-used").await.unwrap(),
        format_bytes(ov["totals"]["usedBytes"].as_u64().unwrap())
    );
    wait_text(&b, "verification", "#log-verified", |t| t == "verified").await;
    for backend in ov["backends"].as_array().unwrap() {
        let name = backend["name"].as_str().unwrap();
        let sel = format!("[data-backend=\"{name}\"]");
        assert_eq!(
            b.text(&format!("{sel} [data-field=volumes]"))
                .await
                .unwrap(),
            backend["volumes"].to_string(),
            "{name}"
        );
        for pool in backend["pools"].as_array().unwrap() {
            let p = format!("[data-pool=\"{name}/{}\"]", pool["name"].as_str().unwrap());
            assert_eq!(
                b.text(&format!("{p} [data-field=pool-volumes]"))
                    .await
                    .unwrap(),
                pool["volumes"].to_string(),
                "{p}"
            );
            assert_eq!(
                b.text(&format!("{p} [data-field=used]")).await.unwrap(),
                format_bytes(pool["usedBytes"].as_u64().unwrap()),
                "{p}"
            );
        }
    }
    assert_eq!(
        b.text("[data-alert]").await.unwrap(),
        "Nothing needs attention."
    );
    no_console_errors(&b, "overview").await;
    b.screenshot(&shots.join("overview.png")).await;

    // Storage classes: each pool's verdict and the spread, as explained by the API.
    open(&b, &base, "#/classes", "classes").await;
    let classes = api.get("/storch/v1/storageclasses").await["storageClasses"].clone();
    for class in classes.as_array().unwrap() {
        let name = class["name"].as_str().unwrap();
        let matched = class["explanation"]["pools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["candidate"] == true)
            .count();
        assert!(matched > 0, "{name}");
        let sel = format!("[data-class=\"{name}\"]");
        assert_eq!(
            b.text(&format!("{sel} [data-field=matched]"))
                .await
                .unwrap(),
            matched.to_string()
        );
        let placed: u64 = class["spread"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["volumes"].as_u64().unwrap())
            .sum();
        assert_eq!(
            b.text(&format!("{sel} [data-field=class-volumes]"))
                .await
                .unwrap(),
            placed.to_string()
        );
        // a pool the class does not match says why
        let refused = class["explanation"]["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["candidate"] == false)
            .expect("a pool outside the class");
        let row = format!(
            "{sel} tr[data-pool=\"{}/{}\"]",
            refused["backend"].as_str().unwrap(),
            refused["pool"].as_str().unwrap()
        );
        assert!(
            b.text(&row)
                .await
                .unwrap()
                .contains(refused["reasons"][0].as_str().unwrap()),
            "{row}"
        );
    }
    no_console_errors(&b, "classes").await;
    b.screenshot(&shots.join("classes.png")).await;

    // Volumes: the first page, a filter typed in, a sort clicked, the next page.
    open(&b, &base, "#/volumes", "volumes").await;
    let page1 = api.get("/storch/v1/volumes").await;
    let names: Vec<Value> = page1["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].clone())
        .collect();
    assert_eq!(names.len(), 50);
    assert_eq!(rows(&b).await, Value::Array(names));
    assert_eq!(b.text("#volume-range").await.unwrap(), "1–50 of 61");
    b.click(".pager button:last-child").await;
    wait_text(&b, "second page", "#volume-range", |t| t == "51–61 of 61").await;
    eventually("second page rows", async || {
        rows(&b).await.as_array().map(Vec::len) == Some(11)
    })
    .await;
    b.type_into("#f-name", "-clone\n").await;
    wait_text(&b, "filtered", "#volume-range", |t| {
        t.starts_with("1–1 of 1")
    })
    .await;
    assert_eq!(rows(&b).await, json!(["vol-01-clone"]));
    open(&b, &base, "#/volumes", "volumes").await;
    b.click("#volume-table th:nth-child(5) button.sort").await;
    let by_size = api.get("/storch/v1/volumes?sort=size&limit=3").await;
    eventually("sorted by size", async || {
        let shown = rows(&b).await;
        shown.as_array().is_some_and(|r| {
            r.len() == 50
                && r[..3]
                    .iter()
                    .zip(by_size["volumes"].as_array().unwrap())
                    .all(|(a, v)| *a == v["name"])
        })
    })
    .await;
    assert_eq!(
        b.eval(
            "return document.querySelector('#volume-table th:nth-child(5)').getAttribute('aria-sort');",
            json!([])
        )
        .await,
        json!("ascending")
    );
    // The created column, sorted by a click: each row shows the commit time the API gives.
    b.click("#volume-table th:nth-child(8) button.sort").await;
    let by_created = api.get("/storch/v1/volumes?sort=created").await;
    let expected: Vec<Value> = by_created["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| match v["created"].as_str() {
            Some(t) => json!([v["name"], t, t.replace('T', " ").replace('Z', "")]),
            None => json!([v["name"], null, "—"]),
        })
        .collect();
    assert_eq!(expected.len(), 50);
    assert!(expected.iter().all(|e| !e[1].is_null()), "{expected:?}");
    eventually("sorted by created", async || {
        let shown = b
            .eval(
                "return [...document.querySelectorAll('#volume-table tbody tr')].map(r => {
                   const cell = r.querySelector('td[data-label=Created]');
                   const t = cell.querySelector('time');
                   return [r.dataset.volume, t ? t.getAttribute('datetime') : null, cell.textContent];
                 });",
                json!([]),
            )
            .await;
        shown == Value::Array(expected.clone())
    })
    .await;
    no_console_errors(&b, "volumes").await;
    b.screenshot(&shots.join("volumes.png")).await;

    // One volume: its snapshot, its clone, its whole history.
    open(&b, &base, "#/volume/vol-01", "volume").await;
    let history = api.get("/trident/v1/events?object=volume/vol-01").await["events"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        b.eval(
            "return document.querySelectorAll('#volume-history li').length;",
            json!([])
        )
        .await,
        json!(history)
    );
    assert!(b.text("#snapshots").await.unwrap().contains("snap-a"));
    assert_eq!(b.text("#clones").await.unwrap(), "vol-01-clone");
    assert!(
        b.text("#placement-attempts")
            .await
            .unwrap()
            .contains("succeeded")
    );
    no_console_errors(&b, "volume").await;
    b.screenshot(&shots.join("volume.png")).await;

    // Events: the timeline follows new events live.
    open(&b, &base, "#/events", "events").await;
    wait_text(&b, "following", "#follow-state", |t| t == "following live").await;
    wait_text(&b, "verify", "#verify-state", |t| t.starts_with("verified")).await;
    api.post(
        "/trident/v1/volume",
        json!({"name": "live-one", "size": "1Gi", "storageClass": "fast"}),
    )
    .await;
    wait_text(
        &b,
        "the new volume's events",
        "#event-timeline li:first-child",
        |t| t.contains("VolumeCreated") && t.contains("volume/live-one"),
    )
    .await;
    no_console_errors(&b, "events").await;
    b.screenshot(&shots.join("events.png")).await;
    // filtered by kind: only those events
    open(&b, &base, "#/events?kind=SnapshotCreated", "events").await;
    wait_text(&b, "filtered events", "#event-timeline", |t| {
        t.contains("snap-a")
    })
    .await;
    let kinds = b
        .eval(
            "return [...document.querySelectorAll('#event-timeline .kind')].map(e => e.textContent);",
            json!([]),
        )
        .await;
    assert!(
        kinds
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k == "SnapshotCreated"),
        "{kinds}"
    );

    // Throughput: the operation counts /metrics has.
    open(&b, &base, "#/throughput", "throughput").await;
    let creates = op_count(&api.metrics().await, "create_volume");
    assert_eq!(creates, 62);
    assert_eq!(
        b.text("#throughput-ops tr[data-op=create_volume] [data-field=total]")
            .await
            .unwrap(),
        creates.to_string()
    );
    no_console_errors(&b, "throughput").await;
    b.screenshot(&shots.join("throughput.png")).await;

    // Every form control has a label; a phone-width overview does not scroll sideways.
    open(&b, &base, "#/volumes", "volumes").await;
    let unlabelled = b
        .eval(
            "return [...document.querySelectorAll('input, select')].filter(e => !e.labels || !e.labels.length).map(e => e.id);",
            json!([]),
        )
        .await;
    assert_eq!(unlabelled, json!([]));
    b.set_size(390, 844).await;
    open(&b, &base, "#/overview", "overview").await;
    let overflow = b
        .eval(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
            json!([]),
        )
        .await;
    assert!(
        overflow.as_i64().unwrap() <= 0,
        "sideways scroll {overflow}"
    );
    b.screenshot(&shots.join("overview-phone.png")).await;
    no_console_errors(&b, "overview at phone width").await;

    // A standby: the same pages from the replicated state, under a banner naming the leader.
    let standby_args = args("standby-b");
    let standby_args: Vec<&str> = standby_args.iter().map(String::as_str).collect();
    let standby = Server::start_with(&tmp.path().join("data-b"), &standby_args, &[]);
    let standby_api = Api {
        http: storch::net::client(),
        url: standby.url.clone(),
    };
    let volumes = api.get("/storch/v1/overview").await["overview"]["totals"]["volumes"].clone();
    eventually("the standby caught up", async || {
        let (s, v) = standby_api
            .send(reqwest::Method::GET, "/storch/v1/overview", None)
            .await;
        s == 200
            && v["overview"]["standbyOf"] == "leader-a"
            && v["overview"]["totals"]["volumes"] == volumes
    })
    .await;
    b.set_size(1280, 800).await;
    // another origin: another sessionStorage, so the token is asked for again
    b.goto(&format!("{}/ui/", standby.url)).await;
    wait_text(&b, "standby prompt", "#login-title", |t| t == "Sign in").await;
    b.type_into("#token", &format!("{TOKEN}\n")).await;
    wait_text(&b, "standby banner", "#standby", |t| {
        t.contains("The leader is leader-a")
    })
    .await;
    assert_eq!(
        b.eval(
            "return document.getElementById('standby').hidden;",
            json!([])
        )
        .await,
        json!(false)
    );
    wait_text(&b, "standby totals", "#total-volumes", |t| {
        t.parse::<u64>().ok() == volumes.as_u64()
    })
    .await;
    assert_eq!(
        b.text("[data-alert]").await.unwrap(),
        "Nothing needs attention.",
        "a standby alerts on what the leader recorded: no backend failed there"
    );
    b.console().await; // the prompt's refused calls
    open(&b, &standby.url, "#/volumes", "volumes").await;
    assert_eq!(rows(&b).await.as_array().unwrap().len(), 50);
    no_console_errors(&b, "standby").await;
    b.screenshot(&shots.join("standby.png")).await;
    drop(standby);

    // Forgetting the token hides the data again.
    open(&b, &base, "#/overview", "overview").await;
    b.click("#forget-token").await;
    wait_text(&b, "prompt again", "#login-error", |t| {
        t.contains("forgotten")
    })
    .await;
    assert!(b.find("[data-backend]").await.is_none());
    assert_eq!(
        b.eval("return sessionStorage.length;", json!([])).await,
        json!(0)
    );
    drop(b);
    drop(server);
    drop(etcd);
}

/// The dashboard's reads in-process, without a browser: the volume history served from the
/// stream index equals the event log's list for that object, also after more events (the
/// index catches up); bad queries are refused naming the parameter; only the static files are
/// served without the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_reads_agree_with_the_log_and_need_the_token() {
    use storch::api::{AuthToken, RouterOptions, ServeOptions};
    let tmp = tempfile::tempdir().unwrap();
    let rt = start(tmp.path()).await;
    let server = crate::support::http::TestServer::start(
        rt,
        ServeOptions {
            router: RouterOptions {
                auth: Some(AuthToken::new(TOKEN).unwrap()),
            },
            ..ServeOptions::default()
        },
    )
    .await;
    let api = Api {
        http: storch::net::client(),
        url: server.url.clone(),
    };
    api.post(
        "/trident/v1/backend",
        fake_backend("f", "file", &[("p", ssd())]),
    )
    .await;
    eventually("f online", async || {
        api.send(reqwest::Method::GET, "/trident/v1/backend/f", None)
            .await
            .1["backend"]["state"]
            == "online"
    })
    .await;
    api.post("/trident/v1/storageclass", json!({"name": "any"}))
        .await;
    let history = async |name: &str| -> (Value, Value) {
        let detail = api.get(&format!("/storch/v1/volumes/{name}")).await;
        let listed = api
            .get(&format!("/trident/v1/events?object=volume/{name}"))
            .await;
        (
            detail["volume"]["history"].clone(),
            listed["events"].clone(),
        )
    };
    for i in 0..3 {
        api.post(
            "/trident/v1/volume",
            json!({"name": format!("v{i}"), "size": "1Gi", "storageClass": "any"}),
        )
        .await;
    }
    let (served, listed) = history("v1").await;
    assert_eq!(served.as_array().unwrap().len(), 3, "{served}");
    assert_eq!(served, listed);
    // more events after the index was built: a snapshot of v1, and a new volume
    api.post("/trident/v1/volume/v1/snapshot", json!({"name": "s"}))
        .await;
    api.post(
        "/trident/v1/volume",
        json!({"name": "v9", "size": "1Gi", "storageClass": "any"}),
    )
    .await;
    let (served, listed) = history("v1").await;
    assert_eq!(served.as_array().unwrap().len(), 5, "{served}");
    assert_eq!(served, listed);
    let (served, listed) = history("v9").await;
    assert_eq!(served, listed);
    let detail = api.get("/storch/v1/volumes/v1").await["volume"].clone();
    assert_eq!(detail["snapshots"][0]["name"], "s");
    assert_eq!(detail["sizeBytes"], 1u64 << 30);
    // Created: the commit time of its `VolumeCreated`, in the page and its table row.
    let created = history("v1")
        .await
        .0
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "VolumeCreated")
        .map(|e| e["time"].clone())
        .unwrap();
    assert_eq!(detail["created"], created);
    let row = api.get("/storch/v1/volumes?name=v1").await["volumes"][0].clone();
    assert_eq!(
        (row["name"].clone(), row["created"].clone()),
        (json!("v1"), created)
    );

    // the table
    let page = api.get("/storch/v1/volumes?sort=-name&limit=2").await;
    assert_eq!(
        (page["matched"].clone(), page["total"].clone()),
        (json!(4), json!(4))
    );
    let names: Vec<&str> = page["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["v9", "v2"]);
    for (query, field) in [
        ("limit=0", "limit"),
        ("sort=colour", "sort"),
        ("state=gone", "state"),
        ("offset=x", "offset"),
    ] {
        let (s, v) = api
            .send(
                reqwest::Method::GET,
                &format!("/storch/v1/volumes?{query}"),
                None,
            )
            .await;
        assert_eq!(s, 400, "{query}: {v}");
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .starts_with(&format!("invalid query parameter {field}:")),
            "{v}"
        );
        assert_eq!(v["volumes"], json!([]), "the operation's envelope");
    }
    let (s, v) = api
        .send(reqwest::Method::GET, "/storch/v1/volumes/nope", None)
        .await;
    assert_eq!((s, v["volume"].clone()), (404, Value::Null), "{v}");

    // without the token: the static files only
    let bare = storch::net::client();
    for path in [
        "/storch/v1/overview",
        "/storch/v1/volumes",
        "/storch/v1/volumes/v1",
        "/storch/v1/storageclasses",
        "/storch/v1/log/verify",
    ] {
        let r = bare
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path}");
    }
    for path in ["/ui/", "/ui/app.js", "/ui/style.css"] {
        let r = bare
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }
    let r = bare
        .get(format!("{}/ui/nothing.js", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let verify = api.get("/storch/v1/log/verify").await;
    assert_eq!(verify["verification"]["ok"], true);
    assert_eq!(
        verify["verification"]["events"],
        api.get("/storch/v1/overview").await["overview"]["head"]
    );
    server.stop().await;
}

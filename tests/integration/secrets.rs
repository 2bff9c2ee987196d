//! A canary password planted in a backend must appear nowhere: not in the server's log (at
//! debug level), not in any file of the data dir (event log, checkpoints), not in any API
//! response — and the backend must still work after a restart (the secret is sealed, not lost).

use std::path::Path;

use crate::support::*;
use serde_json::json;

const CANARY: &str = "CANARY-pw-7f3a91c2";

fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            hits.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            hits.push(path.display().to_string());
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_canary_password_is_nowhere() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let client = storch::net::client();
    let mut responses = String::new();
    let env = [("RUST_LOG", "trace")];

    let mut backend = fake_backend("secretive", "block", &[("p1", ssd())]);
    backend["username"] = json!("admin");
    backend["password"] = json!(CANARY);
    backend["chapTargetSecret"] = json!(CANARY);
    backend["nested"] =
        json!({"EndPoint": format!("https://admin:{CANARY}@10.0.0.1/json-rpc/8.0")});

    let mut server = Server::start(&data, &env);
    server.wait_ready(&client).await;
    let url = server.url.clone();
    let mut call = async |method: reqwest::Method, path: &str, body: Option<String>| {
        let mut req = client.request(method, format!("{url}{path}"));
        if let Some(b) = body {
            req = req.body(b);
        }
        let r = req.send().await.unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        responses.push_str(&text);
        (status.as_u16(), text)
    };
    let (s, t) = call(
        reqwest::Method::POST,
        "/trident/v1/backend",
        Some(backend.to_string()),
    )
    .await;
    assert_eq!(s, 201, "{t}");
    // the same config again as YAML (an update)
    let yaml = format!(
        "version: 1\nstorageDriverName: fake\nbackendName: secretive\ninstanceName: secretive\nprotocol: block\npassword: {CANARY}\npools:\n  p1:\n    attributes: {{}}\n    sizeBytes: 107374182400\n"
    );
    let (s, t) = call(
        reqwest::Method::POST,
        "/trident/v1/backend/secretive",
        Some(yaml),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    // bad configs that carry the canary: the errors must not echo it
    for bad in [
        json!({"version": 1, "storageDriverName": "fake", "password": CANARY, "pools": "oops"}),
        json!({"version": 1, "storageDriverName": "nope", "password": CANARY}),
        json!({"version": CANARY, "storageDriverName": "fake"}),
    ] {
        let (s, _) = call(
            reqwest::Method::POST,
            "/trident/v1/backend",
            Some(bad.to_string()),
        )
        .await;
        assert_eq!(s, 400);
    }
    let (s, _) = call(
        reqwest::Method::POST,
        "/trident/v1/storageclass",
        Some(json!({"name": "any"}).to_string()),
    )
    .await;
    assert_eq!(s, 201);
    let (s, t) = call(
        reqwest::Method::POST,
        "/trident/v1/volume",
        Some(json!({"name": "v1", "size": "1Gi", "storageClass": "any"}).to_string()),
    )
    .await;
    assert_eq!(s, 201, "{t}");
    for path in [
        "/trident/v1/backend",
        "/trident/v1/backend/secretive",
        "/trident/v1/volume/v1",
        "/trident/v1/storageclass/any",
    ] {
        let (s, _) = call(reqwest::Method::GET, path, None).await;
        assert_eq!(s, 200, "{path}");
    }
    server.stop();

    // After a restart the backend comes back with its (sealed) secrets and works.
    let mut server = Server::start(&data, &env);
    server.wait_ready(&client).await;
    let url = server.url.clone();
    let mut online = false;
    for _ in 0..500 {
        let r = client
            .get(format!("{url}/trident/v1/backend/secretive"))
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        responses.push_str(&text);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        if v["backend"]["state"] == "online" {
            online = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        online,
        "backend not online after restart; log:\n{}",
        server.log()
    );
    let r = client
        .delete(format!("{url}/trident/v1/volume/v1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    server.stop();

    if let Some(at) = responses.find(CANARY) {
        let from = at.saturating_sub(300);
        panic!(
            "an API response carried the canary: …{}…",
            &responses[from..at + CANARY.len()]
        );
    }
    assert!(
        !responses.contains("admin:"),
        "an API response carried URL credentials"
    );
    let hits = files_containing(tmp.path(), CANARY.as_bytes());
    assert!(hits.is_empty(), "the canary is in {hits:?}");
    assert!(
        server.log().len() > 1000,
        "the server logged (at trace level)"
    );
}

/// Modes of everything under `dir` (relative path → mode), dirs included.
fn modes(dir: &Path, root: &Path, out: &mut Vec<(String, u32)>) {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        out.push((rel, meta.permissions().mode() & 0o777));
        if meta.is_dir() {
            modes(&path, root, out);
        }
    }
}

/// The data dir and the log's dir are 0700 and every file in them 0600, as created and after
/// a restart; a data dir an operator loosened is reported at start and left as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_dir_and_the_log_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("state")).unwrap();
    let data = tmp.path().join("state/data");
    let client = storch::net::client();
    for round in 0..2 {
        let mut server = Server::start(&data, &[]);
        server.wait_ready(&client).await;
        let mut found = vec![("".to_string(), {
            std::fs::metadata(&data).unwrap().permissions().mode() & 0o777
        })];
        modes(&data, &data, &mut found);
        assert!(found.iter().any(|(p, _)| p == "log"), "{found:?}");
        assert!(found.iter().any(|(p, _)| p == "secret.key"), "{found:?}");
        let loose: Vec<_> = found
            .iter()
            .filter(|(p, m)| {
                let want = if data.join(p).is_dir() { 0o700 } else { 0o600 };
                (round == 0 || !p.is_empty()) && *m != want
            })
            .collect();
        assert!(loose.is_empty(), "round {round}: {loose:?}");
        if round == 1 {
            let log = server.log();
            assert!(
                log.contains("has mode 0750") && log.contains("chmod 700"),
                "the loosened data dir is reported:\n{log}"
            );
        }
        server.stop();
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o750)).unwrap();
    }
}

//! storch's main job on one machine, end to end: `storch serve --config FILE` with the local
//! driver, real directories and image files on disk, SIGHUP reconciliation, and a crash test
//! after which the disk and the log agree.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::support::*;
use serde_json::{Value, json};

fn write_config(path: &Path, pools: &Path, with_bulk_class: bool) {
    let mut text = format!(
        "backends:\n  - version: 1\n    storageDriverName: local\n    backendName: local\n    pools:\n      fast:\n        path: {fast}\n        media: ssd\n      bulk:\n        path: {bulk}\n        media: hdd\n        capacity: 20Gi\nstorageClasses:\n  - name: fast\n    attributes: {{media: ssd}}\n  - name: any\n",
        fast = pools.join("fast").display(),
        bulk = pools.join("bulk").display(),
    );
    if with_bulk_class {
        text.push_str("  - name: bulk\n    attributes: {media: hdd}\n");
    }
    std::fs::write(path, text).unwrap();
}

async fn req(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (u16, Value) {
    let mut r = client.request(method, url);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_a_config_file_makes_real_volumes() {
    let tmp = tempfile::tempdir().unwrap();
    let pools = tmp.path().join("pools");
    let config = tmp.path().join("storch.yaml");
    write_config(&config, &pools, true);
    let data = tmp.path().join("data");
    let server = Server::start_with(&data, &["--config", config.to_str().unwrap()], &[]);
    server.wait_ready(&storch::net::client()).await;
    let c = storch::net::client();
    let url = server.url.clone();
    use reqwest::Method as M;
    eventually("classes from the file", async || {
        req(&c, M::GET, format!("{url}/trident/v1/storageclass"), None)
            .await
            .1["storageClasses"]
            == json!(["any", "bulk", "fast"])
    })
    .await;

    // a file volume: a directory; a thin and a thick block volume: image files
    let (s, b) = req(
        &c,
        M::POST,
        format!("{url}/trident/v1/volume"),
        Some(json!({"name": "docs", "size": "1Gi", "storageClass": "fast", "protocol": "file"})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let (_, v) = req(&c, M::GET, format!("{url}/trident/v1/volume/docs"), None).await;
    let dir = v["volume"]["Config"]["accessInformation"]["localPath"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(Path::new(&dir).is_dir(), "{dir}");
    assert!(
        dir.starts_with(pools.join("fast").to_str().unwrap()),
        "{dir}"
    );

    let mut images = Vec::new();
    for (name, class, thick) in [("thin", "fast", false), ("thick", "bulk", true)] {
        let mut body =
            json!({"name": name, "size": "64Mi", "storageClass": class, "protocol": "block"});
        if thick {
            body["spaceReserve"] = json!("volume");
        }
        let (s, b) = req(&c, M::POST, format!("{url}/trident/v1/volume"), Some(body)).await;
        assert_eq!(s, 201, "{b}");
        let (_, v) = req(&c, M::GET, format!("{url}/trident/v1/volume/{name}"), None).await;
        let path = v["volume"]["Config"]["accessInformation"]["localPath"]
            .as_str()
            .unwrap()
            .to_string();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 64 << 20, "{name}: exactly the requested size");
        let allocated = meta.blocks() * 512;
        if thick {
            assert!(
                allocated >= 64 << 20,
                "thick image is allocated: {allocated}"
            );
        } else {
            assert!(allocated < 1 << 20, "thin image is sparse: {allocated}");
        }
        images.push(path);
    }

    // clone a file volume: the content comes along
    std::fs::write(Path::new(&dir).join("hello.txt"), "hi").unwrap();
    let (s, b) = req(
        &c,
        M::POST,
        format!("{url}/trident/v1/volume"),
        Some(json!({"name": "docs-copy", "size": "1Gi", "cloneSourceVolume": "docs"})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let (_, v) = req(
        &c,
        M::GET,
        format!("{url}/trident/v1/volume/docs-copy"),
        None,
    )
    .await;
    let copy = v["volume"]["Config"]["accessInformation"]["localPath"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        std::fs::read_to_string(Path::new(&copy).join("hello.txt")).unwrap(),
        "hi"
    );

    // delete: the files go
    for name in ["docs-copy", "thin"] {
        let (s, _) = req(
            &c,
            M::DELETE,
            format!("{url}/trident/v1/volume/{name}"),
            None,
        )
        .await;
        assert_eq!(s, 200);
    }
    assert!(!Path::new(&copy).exists());
    assert!(!Path::new(&images[0]).exists());

    // SIGHUP: the class removed from the file goes, volumes stay
    write_config(&config, &pools, false);
    server.signal("HUP");
    eventually("bulk class removed", async || {
        req(&c, M::GET, format!("{url}/trident/v1/storageclass"), None)
            .await
            .1["storageClasses"]
            == json!(["any", "fast"])
    })
    .await;
    let (s, _) = req(&c, M::GET, format!("{url}/trident/v1/volume/thick"), None).await;
    assert_eq!(s, 200, "volumes are never deleted by a config change");

    // an invalid file changes nothing
    std::fs::write(
        &config,
        "backends:\n  - {version: 1, storageDriverName: nope}\n",
    )
    .unwrap();
    server.signal("HUP");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, sc) = req(&c, M::GET, format!("{url}/trident/v1/storageclass"), None).await;
    assert_eq!(sc["storageClasses"], json!(["any", "fast"]));
    let (_, be) = req(&c, M::GET, format!("{url}/trident/v1/backend"), None).await;
    assert_eq!(be["backends"], json!(["local"]));
    assert!(
        server.log().contains("config reload refused"),
        "{}",
        server.log()
    );
}

/// Every invalid declaration stops the start: exit non-zero, the file, entry and field named,
/// and the message printed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_config_file_stops_start_up_naming_the_entry() {
    let fake = "{version: 1, storageDriverName: fake, backendName: b, protocol: file, \
                pools: {p: {size: 1Gi, attributes: {}}}}";
    for (text, needle) in [
        (
            "storageClasses:\n  - {name: x, attributes: {media: 3}}\n".to_string(),
            "storageClasses[0]",
        ),
        (
            format!("backends:\n  - {fake}\n  - {fake}\n"),
            "backends[1] (b): backend b is declared twice",
        ),
        (
            "storageClasses:\n  - {name: x}\n  - {name: x}\n".into(),
            "storage class x is declared twice",
        ),
        (
            "storageClasses:\n  - {name: bad/name}\n".into(),
            "storageClasses[0]: name",
        ),
        (
            "storageClasses:\n  - {name: x, storagePools: {b: [\"(\"]}}\n".into(),
            "storageClasses[0] (x)",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("bad.yaml");
        std::fs::write(&config, &text).unwrap();
        let (mut child, log) = crate::support::server::spawn(
            &tmp.path().join("data"),
            &["--config", config.to_str().unwrap()],
            &[],
        );
        assert!(
            !crate::support::server::exit_status(&mut child).success(),
            "{text}"
        );
        let err = std::fs::read_to_string(&log).unwrap();
        assert!(
            err.contains("bad.yaml") && err.contains(needle),
            "{text}\n{err}"
        );
        assert_eq!(err.matches(needle).count(), 1, "printed once:\n{err}");
        assert!(!err.contains("listening"), "{err}");
    }
}

/// What the local array holds: volume directories and image files under every pool.
fn on_disk(pools: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for pool in ["fast", "bulk"] {
        let Ok(entries) = std::fs::read_dir(pools.join(pool).join("volumes")) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            out.insert(name.trim_end_matches(".img").to_string());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_the_local_driver_leaves_disk_and_log_in_agreement() {
    let _heavy = crate::support::heavy();
    let rounds = crate::support::rounds("STORCH_CRASH_ROUNDS", 20).min(20);
    let tmp = tempfile::tempdir().unwrap();
    let pools = tmp.path().join("pools");
    let config = tmp.path().join("storch.yaml");
    write_config(&config, &pools, true);
    let data = tmp.path().join("data");
    let args = ["--config", config.to_str().unwrap()];
    let client = storch::net::client();
    for round in 0..rounds {
        let mut server = Server::start_with(&data, &args, &[]);
        server.wait_ready(&client).await;
        let tasks: Vec<_> = (0..4)
            .map(|c| {
                let client = client.clone();
                let url = server.url.clone();
                tokio::spawn(async move {
                    for i in 0.. {
                        let name = format!("r{round}c{c}v{i}");
                        let protocol = if i % 2 == 0 { "file" } else { "block" };
                        let body = json!({"name": name, "size": "4Mi", "storageClass": "any", "protocol": protocol});
                        if client.post(format!("{url}/trident/v1/volume")).json(&body).send().await.is_err() {
                            return;
                        }
                        if i % 3 == 2 && client.delete(format!("{url}/trident/v1/volume/{name}")).send().await.is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 300)).await;
        server.kill();
        for t in tasks {
            t.await.unwrap();
        }
    }
    let mut server = Server::start_with(&data, &args, &[]);
    server.wait_ready(&client).await;
    let url = server.url.clone();
    let mut names: BTreeSet<String> = BTreeSet::new();
    eventually("every volume settled", async || {
        let (_, list) = req(
            &client,
            reqwest::Method::GET,
            format!("{url}/trident/v1/volume"),
            None,
        )
        .await;
        names = serde_json::from_value(list["volumes"].clone()).unwrap();
        for n in &names {
            let (_, v) = req(
                &client,
                reqwest::Method::GET,
                format!("{url}/trident/v1/volume/{n}"),
                None,
            )
            .await;
            if v["volume"]["state"] != "online" {
                return false;
            }
        }
        true
    })
    .await;
    server.stop();
    let expected: BTreeSet<String> = names.iter().map(|n| format!("storch-{n}")).collect();
    assert_eq!(
        on_disk(&pools),
        expected,
        "no directory or image the log does not know, none missing"
    );
    let log =
        storch::log::EventLog::open(&data.join("log"), storch::log::Durability::Flush).unwrap();
    assert_eq!(log.verify().first_bad, None);
}

/// Issue 18 item 5: over REST a local pool must lie below a `--local-root`, away from other
/// backends' pools, and in an empty directory or one storch initialised; a refused config
/// creates nothing and records nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_pools_stay_below_the_operators_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let root = tmp.path().join("root");
    let server = Server::start_with(&data, &["--local-root", root.to_str().unwrap()], &[]);
    let c = storch::net::client();
    server.wait_ready(&c).await;
    let url = server.url.clone();
    use reqwest::Method as M;
    let backend = |name: &str, path: &Path| {
        json!({"version": 1, "storageDriverName": "local", "backendName": name,
               "pools": {"p": {"path": path, "media": "ssd"}}})
    };
    let add =
        async |doc: Value| req(&c, M::POST, format!("{url}/trident/v1/backend"), Some(doc)).await;

    // Outside every root (here the data dir is not one: --local-root replaces it).
    for path in [
        tmp.path().join("outside/p"),
        data.join("p"),
        root.join("../escape"),
    ] {
        let (status, body) = add(backend("b", &path)).await;
        assert_eq!(status, 400, "{path:?}: {body}");
        let e = body["error"].as_str().unwrap();
        assert!(
            e.contains("invalid value for pools.p.path") && e.contains("--local-root"),
            "{e}"
        );
        assert!(!path.join("volumes").exists(), "nothing made in {path:?}");
    }
    assert!(!tmp.path().join("outside").exists());

    // A directory that holds someone else's files.
    let foreign = root.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    let (status, body) = add(backend("b", &foreign)).await;
    assert_eq!(status, 400, "{body}");
    let e = body["error"].as_str().unwrap();
    assert!(e.contains("is not empty") && e.contains("notes.txt"), "{e}");
    let mut left: Vec<_> = std::fs::read_dir(&foreign)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["notes.txt"], "nothing added to it");

    // Below the root: accepted; the same directory (or one inside it) for another backend is not.
    let (status, body) = add(backend("b", &root.join("pools/p"))).await;
    assert_eq!(status, 201, "{body}");
    for (name, path) in [
        ("c", root.join("pools/p")),
        ("c", root.join("pools/p/inner")),
        ("c", root.join("pools")),
    ] {
        let (status, body) = add(backend(name, &path)).await;
        assert_eq!(status, 400, "{path:?}: {body}");
        let e = body["error"].as_str().unwrap();
        assert!(e.contains("overlaps pool p of backend b"), "{e}");
    }
    let (_, list) = req(&c, M::GET, format!("{url}/trident/v1/backend"), None).await;
    assert_eq!(list["backends"], json!(["b"]));
    // Updating b itself may keep its own directory.
    let mut update = backend("b", &root.join("pools/p"));
    update["storagePrefix"] = json!("x-");
    let (status, body) = add(update).await;
    assert_eq!(status, 201, "{body}");
    let (_, events) = req(
        &c,
        M::GET,
        format!("{url}/trident/v1/events?object=backend/c"),
        None,
    )
    .await;
    assert_eq!(
        events["events"],
        json!([]),
        "nothing recorded for the refused backend"
    );
}

/// The file's backend configs and storage classes are Trident-shaped: fields storch ignores
/// are accepted, and the log says which, once per entry, naming the file and the entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_fields_in_the_config_file_are_logged_per_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("storch.yaml");
    let pools = tmp.path().join("pools");
    let text = format!(
        "backends:\n  - version: 1\n    storageDriverName: local\n    backendName: local\n    colour: red\n    defaults: {{sizee: 1Gi}}\n    pools:\n      fast: {{path: {fast}}}\nstorageClasses:\n  - {{name: fast, provisioner: x}}\n",
        fast = pools.join("fast").display(),
    );
    std::fs::write(&config, text).unwrap();
    let server = Server::start_with(
        &tmp.path().join("data"),
        &["--config", config.to_str().unwrap()],
        &[],
    );
    server.wait_ready(&storch::net::client()).await;
    let file = config.display().to_string();
    let backend = format!(
        "{file}: backends[0] (local): unknown field \"colour\" was ignored; unknown field \"defaults.sizee\" was ignored"
    );
    let class =
        format!("{file}: storageClasses[0] (fast): unknown field \"provisioner\" was ignored");
    eventually("the warnings are logged", async || {
        let log = server.log();
        log.contains(&backend) && log.contains(&class)
    })
    .await;
    let log = server.log();
    assert_eq!(log.matches("was ignored").count(), 3, "{log}");
}

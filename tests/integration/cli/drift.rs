//! `get volume` showing a volume its array lost as `missing`, `get orphans`, `import volume`
//! and `reconcile backend`, against a `storch serve` child whose fake array (a state file) is
//! changed by hand while it is stopped; `/metrics` counts the missing volume.

use std::time::{Duration, Instant};

use super::{Server, create_volume};

const BACKEND: &str = "\
version: 1
storageDriverName: fake
backendName: lab
instanceName: lab
protocol: file
statePath: STATE
pools:
  fast:
    attributes:
      media: {offer: [ssd]}
    sizeBytes: 107374182400
";

#[test]
fn missing_volumes_orphans_and_import_through_the_cli() {
    let mut server = Server::start();
    server.wait_ready();
    let dir = server.data_dir.parent().unwrap().to_path_buf();
    let state = dir.join("fake-array.json");
    let doc = BACKEND.replace("STATE", state.to_str().unwrap());
    let file = dir.join("backend.yaml");
    std::fs::write(&file, &doc).unwrap();
    server
        .run(&["create", "backend", "-f", file.to_str().unwrap()])
        .ok();
    server
        .run_with(
            &["create", "storageclass", "-f", "-"],
            Some(r#"{"name": "gold", "attributes": {"media": "ssd"}}"#),
        )
        .ok();
    create_volume(&server, "v1", "1Gi");
    create_volume(&server, "v2", "1Gi");
    server.stop();

    // Behind storch's back: v1 destroyed, a stray volume made.
    let json = storch::api::input::parse_backend_doc(doc.as_bytes()).unwrap();
    let tool = storch::drivers::build_driver(&json).unwrap().driver;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tool.destroy("trident-v1").await.unwrap();
        let stray = storch::drivers::testing::req("trident-stray", "fast", 1 << 30);
        tool.create(&stray).await.unwrap();
    });

    let server = Server::start_on(&server.data_dir.clone(), &[]);
    server.wait_ready();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = server
            .run(&["get", "volume", "v1", "-o", "json"])
            .ok()
            .json();
        if v["items"][0]["state"] == "missing" {
            break;
        }
        assert!(Instant::now() < deadline, "v1 never shown missing: {v}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let rows = server.run(&["get", "volume"]).ok().table(&[
        "NAME",
        "SIZE",
        "STORAGE CLASS",
        "PROTOCOL",
        "BACKEND",
        "POOL",
        "STATE",
    ]);
    let states: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[6].as_str()))
        .collect();
    assert_eq!(states, [("v1", "missing"), ("v2", "online")]);

    let orphans =
        server
            .run(&["get", "orphans"])
            .ok()
            .table(&["BACKEND", "INTERNAL NAME", "POOL", "SIZE"]);
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    assert_eq!(orphans[0][..3], ["lab", "trident-stray", "fast"]);

    let imported = server
        .run(&[
            "import",
            "volume",
            "lab",
            "trident-stray",
            "--name",
            "stray",
            "--class",
            "gold",
            "--no-manage",
            "-o",
            "json",
        ])
        .ok()
        .json();
    assert_eq!(imported["items"][0]["state"], "online");
    assert_eq!(imported["items"][0]["managed"], false);
    server
        .run(&[
            "import",
            "volume",
            "lab",
            "trident-v2",
            "--name",
            "again",
            "--class",
            "gold",
        ])
        .fails_with("already owned by storch volume v2");
    assert!(
        server
            .run(&["get", "orphans", "-o", "name"])
            .ok()
            .stdout
            .is_empty()
    );

    let out = server.run(&["reconcile", "backend", "lab"]).ok();
    assert!(
        out.stdout
            .starts_with("backend lab: 2 volumes on the array; missing: none"),
        "{}",
        out.stdout
    );
    let metrics = rt.block_on(async {
        let c = storch::net::client();
        c.get(format!("{}/metrics", server.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    assert!(
        metrics.contains("storch_backend_missing_volumes{backend=\"lab\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("storch_volumes{state=\"missing\"} 1"),
        "{metrics}"
    );
}

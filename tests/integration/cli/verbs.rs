//! The client verbs against a server: backends, classes and volumes in every output format,
//! errors, an unreachable server, versions, completions, snapshots, clones, resize, explain.

use super::*;

#[test]
fn backends_in_every_format() {
    let server = server_with_lab();
    let headers = ["NAME", "DRIVER", "STATE", "USER STATE", "VOLUMES"];
    for kind in ["backend", "backends", "b"] {
        let rows = server.run(&["get", kind]).ok().table(&headers);
        assert_eq!(rows, [["lab", "fake", "online", "normal", "0"]]);
    }
    let rows = server
        .run(&["get", "backend", "lab", "-o", "wide"])
        .ok()
        .table(&[
            "NAME",
            "DRIVER",
            "STATE",
            "USER STATE",
            "VOLUMES",
            "PROTOCOL",
            "POOLS",
        ]);
    assert_eq!(
        rows,
        [["lab", "fake", "online", "normal", "0", "file", "2"]]
    );

    let out = server.run(&["get", "backend", "-o", "json"]).ok();
    assert!(
        out.stdout.starts_with("{\n  \"items\": [\n    {"),
        "indented by 2: {}",
        out.stdout
    );
    let doc = out.json();
    assert_eq!(doc["items"].as_array().unwrap().len(), 1);
    assert_eq!(doc["items"][0]["name"], "lab");
    assert_eq!(doc["items"][0]["config"]["storageDriverName"], "fake");
    assert!(doc["items"][0]["storage"]["fast"].is_object());

    let yaml = server.run(&["get", "backend", "-o", "yaml"]).ok().stdout;
    assert!(yaml.starts_with("items:\n"), "{yaml}");
    assert!(yaml.contains("name: lab"), "{yaml}");

    assert_eq!(server.run(&["get", "b", "-o", "name"]).ok().stdout, "lab\n");

    // update: the pools change, the backend is shown again.
    let changed = BACKEND_YAML.replace("  slow:", "  cold:");
    let out = server
        .run_with(
            &["update", "backend", "lab", "-f", "-", "-o", "json"],
            Some(&changed),
        )
        .ok();
    let storage = &out.json()["items"][0]["storage"];
    assert!(
        storage["cold"].is_object() && storage["slow"].is_null(),
        "{storage}"
    );
    server
        .run_with(&["update", "backend", "-f", "-"], Some(&changed))
        .fails_with("backend name not specified");
    server
        .run_with(&["update", "backend", "a", "b", "-f", "-"], Some(&changed))
        .fails_with("multiple backend names specified");
    server
        .run(&["create", "backend"])
        .fails_with("no input file was specified");

    server.run(&["delete", "backend", "lab"]).ok();
    let rows = server.run(&["get", "backend"]).ok().table(&headers);
    assert!(rows.is_empty());
    assert_eq!(
        server.run(&["get", "backend", "-o", "json"]).ok().json(),
        json!({"items": []})
    );
}

#[test]
fn storage_classes_and_volumes_in_every_format() {
    let server = server_with_lab();
    // A storage class from a YAML file on stdin.
    server
        .run_with(
            &["create", "sc", "-f", "-", "-o", "name"],
            Some("name: bronze\nattributes:\n  media: hdd\n"),
        )
        .ok();
    for kind in ["storageclass", "storageclasses", "sc"] {
        let rows = server.run(&["get", kind]).ok().table(&["NAME", "POOLS"]);
        assert_eq!(rows, [["bronze", "1"], ["gold", "1"]]);
    }
    let doc = server.run(&["get", "sc", "gold", "-o", "json"]).ok().json();
    assert_eq!(doc["items"][0]["Config"]["name"], "gold");
    assert_eq!(doc["items"][0]["Config"]["attributes"]["media"], "ssd");
    assert_eq!(doc["items"][0]["storage"], json!({"lab": ["fast"]}));

    // Volumes: YAML on stdin, JSON from a file.
    let out = create_volume(&server, "v1", "1Gi");
    let volume_headers = [
        "NAME",
        "SIZE",
        "STORAGE CLASS",
        "PROTOCOL",
        "BACKEND",
        "POOL",
        "STATE",
    ];
    assert_eq!(
        out.table(&volume_headers),
        [["v1", "1 GiB", "gold", "file", "lab", "fast", "online"]]
    );
    let file = server.data_dir.parent().unwrap().join("v2.json");
    std::fs::write(
        &file,
        r#"{"name": "v2", "size": "2147483648", "storageClass": "gold", "accessMode": "ReadWriteMany"}"#,
    )
    .unwrap();
    server
        .run(&["create", "v", "-f", file.to_str().unwrap()])
        .ok();

    for kind in ["volume", "volumes", "v"] {
        let rows = server.run(&["get", kind]).ok().table(&volume_headers);
        assert_eq!(
            rows,
            [
                ["v1", "1 GiB", "gold", "file", "lab", "fast", "online"],
                ["v2", "2 GiB", "gold", "file", "lab", "fast", "online"],
            ]
        );
    }
    let rows = server
        .run(&["get", "volume", "v2", "-o", "wide"])
        .ok()
        .table(&[
            "NAME",
            "INTERNAL NAME",
            "SIZE",
            "STORAGE CLASS",
            "PROTOCOL",
            "BACKEND",
            "POOL",
            "ACCESS MODE",
            "STATE",
        ]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][0], "v2");
    assert!(!rows[0][1].is_empty(), "internal name: {rows:?}");
    assert_eq!(rows[0][7], "ReadWriteMany");

    let doc = server.run(&["get", "volume", "-o", "json"]).ok().json();
    let names: Vec<&str> = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["Config"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["v1", "v2"]);
    assert_eq!(doc["items"][0]["backend"], "lab");
    let yaml = server.run(&["get", "v", "v1", "-o", "yaml"]).ok().stdout;
    assert!(
        yaml.contains("Config:") && yaml.contains("name: v1"),
        "{yaml}"
    );
    assert_eq!(
        server.run(&["get", "v", "-o", "name"]).ok().lines(),
        ["v1", "v2"]
    );

    // Deletes: tridentctl's argument errors, then by name and --all.
    server
        .run(&["delete", "volume", "--all", "v1"])
        .fails_with("cannot use --all switch and specify individual volumes");
    server
        .run(&["delete", "storageclass"])
        .fails_with("storage class name not specified");
    server.run(&["delete", "volume", "v1"]).ok();
    assert_eq!(server.run(&["get", "v", "-o", "name"]).ok().lines(), ["v2"]);
    server.run(&["delete", "volume", "--all"]).ok();
    server.run(&["delete", "sc", "--all"]).ok();
    assert_eq!(server.run(&["get", "v", "-o", "name"]).ok().stdout, "");
    assert_eq!(server.run(&["get", "sc", "-o", "name"]).ok().stdout, "");
}

#[test]
fn errors_say_what_failed_and_exit_1() {
    let server = server_with_lab();
    server
        .run(&["get", "backend", "nope"])
        .fails_with("could not get backend nope: backend nope was not found (404 Not Found)");
    server
        .run(&["get", "volume", "nope"])
        .fails_with("could not get volume nope:");
    // What exists is printed before the error for what does not.
    let classes = server.run(&["get", "sc", "-o", "name"]).ok();
    let first = classes.lines()[0].to_string();
    let out = server
        .run(&["get", "sc", &first, "nope", "-o", "name"])
        .fails_with("could not get storage class nope:");
    assert_eq!(out.lines(), [first.as_str()]);
    server
        .run(&["delete", "storageclass", "nope"])
        .fails_with("could not delete storage class nope:");
    // A bad document is refused by the server, with its reason.
    server
        .run_with(&["create", "volume", "-f", "-"], Some(r#"{"name": "x"}"#))
        .fails_with("could not create volume:");
    server
        .run_with(
            &["create", "backend", "-f", "-"],
            Some("- just\n- a list\n"),
        )
        .fails_with("could not parse stdin");
    server
        .run(&["create", "sc", "-f", "/nonexistent/sc.json"])
        .fails_with("could not read /nonexistent/sc.json");
    // --debug shows the exchange on stderr.
    let out = server.run(&["--debug", "get", "backend", "nope"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("> GET http://") && out.stderr.contains("< 404 Not Found"),
        "{}",
        out.stderr
    );
    // clap's own usage errors keep clap's exit code.
    assert_eq!(server.run(&["get", "nodes"]).code, 2);
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn an_unreachable_server_is_named() {
    let address = format!("127.0.0.1:{}", closed_port());
    storch(&["--server", &address, "get", "backend"], &[], None).fails_with(&format!(
        "cannot reach the storch server at http://{address}"
    ));
    // The environment: STORCH_SERVER first, then TRIDENT_SERVER, then 127.0.0.1:8000.
    let other = format!("127.0.0.1:{}", closed_port());
    storch(
        &["get", "volume"],
        &[("STORCH_SERVER", &address), ("TRIDENT_SERVER", &other)],
        None,
    )
    .fails_with(&format!("http://{address}"));
    storch(&["get", "volume"], &[("TRIDENT_SERVER", &other)], None)
        .fails_with(&format!("http://{other}"));
    // The flag wins over the environment.
    storch(
        &["get", "sc", "-s", &other],
        &[("STORCH_SERVER", &address)],
        None,
    )
    .fails_with(&format!("http://{other}"));
    storch(&["-s", "ftp://x:1", "get", "sc"], &[], None).fails_with("invalid server");
}

#[test]
fn versions() {
    let server = Server::start();
    server.wait_ready();
    let me = env!("CARGO_PKG_VERSION");
    let rows = server
        .run(&["version"])
        .ok()
        .table(&["SERVER VERSION", "CLIENT VERSION"]);
    assert_eq!(rows, [[me, me]]);
    let doc = server.run(&["version", "-o", "json"]).ok().json();
    assert_eq!(doc["server"]["version"], me);
    assert_eq!(doc["client"]["tridentVersion"], "18.07.0");
    // --client needs no server.
    let address = format!("127.0.0.1:{}", closed_port());
    let out = storch(
        &["-s", &address, "version", "--client", "-o", "json"],
        &[],
        None,
    )
    .ok();
    assert_eq!(out.json()["client"]["version"], me);
    assert!(out.json().get("server").is_none());
}

#[test]
fn completion_scripts() {
    for shell in ["bash", "zsh", "fish"] {
        let out = storch(&["completion", shell], &[], None).ok();
        assert!(out.stdout.len() > 1000, "{shell}: {}", out.stdout);
        assert!(out.stdout.contains("storch"), "{shell}");
    }
    assert_eq!(storch(&["completion", "tcsh"], &[], None).code, 2);
}

#[test]
fn snapshots_clones_and_resize() {
    let server = server_with_lab();
    create_volume(&server, "src", "1Gi");

    let out = server
        .run(&["create", "snapshot", "src/s1", "-o", "json"])
        .ok();
    let snap = &out.json()["items"][0];
    assert_eq!(snap["volume"], "src");
    assert_eq!(snap["name"], "s1");
    server.run(&["create", "snap", "src/s2"]).ok();
    let headers = ["VOLUME", "NAME", "SIZE", "CREATED", "STATE"];
    let rows = server.run(&["get", "snapshot"]).ok().table(&headers);
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0][0].as_str(), rows[0][1].as_str()), ("src", "s1"));
    assert_eq!(
        server
            .run(&["get", "snapshots", "src", "-o", "name"])
            .ok()
            .lines(),
        ["src/s1", "src/s2"]
    );
    assert_eq!(
        server
            .run(&["get", "snapshot", "src/s2", "-o", "name"])
            .ok()
            .lines(),
        ["src/s2"]
    );
    server
        .run(&["get", "snapshot", "src/nope"])
        .fails_with("could not get snapshot src/nope:");
    server
        .run(&["create", "snapshot", "src"])
        .fails_with("expected VOLUME/SNAPSHOT");

    // Clones of the volume and of a snapshot, without a file.
    let out = server
        .run(&[
            "create",
            "volume",
            "c1",
            "--clone-from",
            "src",
            "-o",
            "json",
        ])
        .ok();
    assert_eq!(out.json()["items"][0]["Config"]["cloneSourceVolume"], "src");
    let out = server
        .run(&[
            "create",
            "volume",
            "c2",
            "--clone-from",
            "src/s1",
            "-o",
            "json",
        ])
        .ok();
    let config = &out.json()["items"][0]["Config"];
    assert_eq!(config["cloneSourceVolume"], "src");
    assert_eq!(config["cloneSourceSnapshot"], "s1");
    server
        .run(&["create", "volume", "--clone-from", "src"])
        .fails_with("volume name not specified");

    // Resize shows the volume with its new size.
    let rows = server
        .run(&["resize", "volume", "src", "2Gi"])
        .ok()
        .table(&[
            "NAME",
            "SIZE",
            "STORAGE CLASS",
            "PROTOCOL",
            "BACKEND",
            "POOL",
            "STATE",
        ]);
    assert_eq!(rows[0][..2], ["src", "2 GiB"]);
    server
        .run(&["resize", "volume", "nope", "2Gi"])
        .fails_with("could not resize volume nope:");

    server.run(&["delete", "snapshot", "src/s1", "src/s2"]).ok();
    assert_eq!(
        server
            .run(&["get", "snapshot", "src", "-o", "name"])
            .ok()
            .stdout,
        ""
    );
    server
        .run(&["delete", "snapshot"])
        .fails_with("snapshot name not specified");
}

#[test]
fn explain_a_storage_class() {
    let server = server_with_lab();
    let out = server.run(&["explain", "storageclass", "gold"]).ok();
    assert!(
        out.stdout
            .starts_with("storage class gold (protocol any): 1 of 2 pools are candidates"),
        "{}",
        out.stdout
    );
    let rows = out.table(&["BACKEND", "POOL", "CANDIDATE", "REASONS"]);
    assert_eq!(rows.len(), 2);
    let fast = rows.iter().find(|r| r[1] == "fast").unwrap();
    assert_eq!(fast[2], "yes");
    assert_eq!(fast[3], "");
    let slow = rows.iter().find(|r| r[1] == "slow").unwrap();
    assert_eq!(slow[2], "no");
    assert!(slow[3].contains("media"), "{slow:?}");

    let out = server
        .run(&[
            "explain",
            "sc",
            "gold",
            "--protocol",
            "block",
            "--size",
            "1Ti",
            "-o",
            "json",
        ])
        .ok();
    let e = &out.json()["items"][0];
    assert_eq!(e["storageClass"], "gold");
    assert_eq!(e["protocol"], "block");
    assert_eq!(e["sizeBytes"], 1u64 << 40);
    assert!(
        e["pools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["candidate"] == false)
    );
    assert_eq!(
        server
            .run(&["explain", "sc", "gold", "-o", "name"])
            .ok()
            .stdout,
        "lab/fast\n"
    );
    server
        .run(&["explain", "sc", "nope"])
        .fails_with("could not explain storage class nope:");
}

/// `create backend -f` and `update backend -f` print the keys of the file the server ignored,
/// one `Warning:` line each on stderr, and still succeed; a resize above the backend driver's
/// largest volume exits 1 naming `size`, and records nothing.
#[test]
fn ignored_backend_keys_are_warned_and_oversize_resizes_refused() {
    let server = server_with_lab();
    let yaml = "version: 1\nstorageDriverName: fake\nbackendName: capped\ninstanceName: capped\n\
                limitVolumeSize: 10Gi\nlimitAggregateUsage: 80%\npools:\n  fast:\n    \
                attributes: {media: {offer: [ssd]}}\n    sizeBytes: 107374182400\n    \
                sizeByte: 1\n";
    let out = server.run_with(&["create", "backend", "-f", "-"], Some(yaml));
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        out.stderr.lines().collect::<Vec<_>>(),
        [
            "Warning: unknown field \"limitAggregateUsage\" was ignored",
            "Warning: unknown field \"pools.fast.sizeByte\" was ignored",
        ],
        "{out:#?}"
    );
    let dir = server.data_dir.parent().unwrap().to_path_buf();
    let file = dir.join("capped.yaml");
    std::fs::write(
        &file,
        yaml.replace("limitAggregateUsage", "autoExportPolicy"),
    )
    .unwrap();
    let out = server.run(&["update", "backend", "capped", "-f", file.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(
        out.stderr.lines().collect::<Vec<_>>(),
        [
            "Warning: unknown field \"autoExportPolicy\" was ignored",
            "Warning: unknown field \"pools.fast.sizeByte\" was ignored",
        ],
        "{out:#?}"
    );
    server
        .run_with(
            &["create", "storageclass", "-f", "-"],
            Some(r#"{"name": "capped", "storagePools": {"capped": ["fast"]}}"#),
        )
        .ok();
    server
        .run_with(
            &["create", "volume", "-f", "-"],
            Some("name: big\nsize: 1Gi\nstorageClass: capped\n"),
        )
        .ok();
    let events = |server: &Server| {
        let out = server.run(&["events", "-o", "json"]).ok();
        out.json()["items"].as_array().map(Vec::len)
    };
    let before = events(&server);
    server
        .run(&["resize", "volume", "big", "11Gi"])
        .fails_with("size: volume big cannot grow to 11Gi on backend capped");
    assert_eq!(events(&server), before);
    server.run(&["resize", "volume", "big", "10Gi"]).ok();
}

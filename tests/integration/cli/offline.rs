//! The offline audits on a stopped server's data dir: verify, export, replay.

use super::*;

/// Adds backend `lab`, class `gold` and three volumes, and (after a restart) deletes one;
/// returns the sequence just before the delete. The server is stopped at the end.
fn history(data_dir: &Path) -> u64 {
    let server = Server::start_on(data_dir, &[]);
    server.wait_ready();
    server
        .run_with(&["create", "backend", "-f", "-"], Some(BACKEND_YAML))
        .ok();
    server
        .run_with(
            &["create", "sc", "-f", "-"],
            Some(r#"{"name": "gold", "attributes": {"media": "ssd"}}"#),
        )
        .ok();
    for name in ["h1", "h2", "h3"] {
        create_volume(&server, name, "1Gi");
    }
    let mut server = server;
    server.stop();
    let before_delete = export(data_dir).last().unwrap()["seq"].as_u64().unwrap();
    let mut server = Server::start_on(data_dir, &[]);
    server.wait_ready();
    server.run(&["delete", "volume", "h2"]).ok();
    server.stop();
    before_delete
}

#[test]
fn offline_verify_export_and_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let before_delete = history(&data_dir);
    let dir = data_dir.to_str().unwrap();

    // A running server holds the data dir.
    let server = Server::start_on(&data_dir, &[]);
    storch(&["events", "verify", "--data-dir", dir], &[], None)
        .fails_with(&format!("the data dir {dir} is in use by a running storch"));
    let mut server = server;
    server.stop();

    let out = storch(&["events", "verify", "--data-dir", dir], &[], None).ok();
    assert!(out.stdout.contains("hash chain intact"), "{}", out.stdout);
    // STORCH_DATA_DIR works as for serve.
    storch(&["events", "verify"], &[("STORCH_DATA_DIR", dir)], None).ok();

    // Export: one event per line, in sequence; filters.
    let exported = export(&data_dir);
    for (i, e) in exported.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1);
        assert!(!e["summary"].as_str().unwrap().is_empty());
    }
    let out = storch(
        &[
            "events",
            "export",
            "--data-dir",
            dir,
            "--object",
            "volume/h2",
        ],
        &[],
        None,
    )
    .ok();
    assert!(
        out.lines()
            .iter()
            .all(|l| l.contains(r#""stream":"volume/h2""#))
    );
    assert!(out.stdout.contains("VolumeDeleted"), "{}", out.stdout);
    let out = storch(
        &[
            "events",
            "export",
            "--data-dir",
            dir,
            "--since",
            "2",
            "--limit",
            "2",
        ],
        &[],
        None,
    )
    .ok();
    assert_eq!(out.lines().len(), 2);
    assert!(out.lines()[0].contains(r#""seq":2"#), "{}", out.stdout);

    // Replay: before the delete there were three volumes; at the end two.
    let volume_headers = [
        "NAME",
        "SIZE",
        "STORAGE CLASS",
        "PROTOCOL",
        "BACKEND",
        "POOL",
        "STATE",
    ];
    let until = before_delete.to_string();
    let out = storch(&["replay", "--data-dir", dir, "--until", &until], &[], None).ok();
    assert!(
        out.stdout
            .starts_with(&format!("As of sequence {before_delete} (")),
        "{}",
        out.stdout
    );
    let volumes_table = Out {
        code: 0,
        stdout: out.stdout.split("VOLUMES\n").nth(1).unwrap().to_string(),
        stderr: String::new(),
    };
    let rows = volumes_table.table(&volume_headers);
    let names: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(names, ["h1", "h2", "h3"]);
    assert!(
        rows.iter()
            .all(|r| r[1] == "1 GiB" && r[4] == "lab" && r[6] == "online")
    );
    let doc = storch(&["replay", "--data-dir", dir, "-o", "json"], &[], None)
        .ok()
        .json();
    let names: Vec<&str> = doc["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["Config"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["h1", "h3"]);
    assert_eq!(doc["backends"][0]["name"], "lab");
    assert_eq!(doc["storageClasses"][0]["Config"]["name"], "gold");
    let doc = storch(
        &["replay", "--data-dir", dir, "--until", &until, "-o", "json"],
        &[],
        None,
    )
    .ok()
    .json();
    assert_eq!(doc["seq"], before_delete);
    // A time bound: the commit time of the event before the delete.
    let time = exported[before_delete as usize - 1]["time"]
        .as_str()
        .unwrap();
    let next_time = exported[before_delete as usize]["time"].as_str().unwrap();
    if time != next_time {
        let doc = storch(
            &["replay", "--data-dir", dir, "--until", time, "-o", "json"],
            &[],
            None,
        )
        .ok()
        .json();
        assert_eq!(doc["volumes"].as_array().unwrap().len(), 3, "{doc}");
    }
    let out = storch(
        &["replay", "--data-dir", dir, "--until", "0", "-o", "name"],
        &[],
        None,
    )
    .ok();
    assert_eq!(out.stdout, "");
    storch(&["replay", "--data-dir", dir, "--until", "soon"], &[], None)
        .fails_with("invalid --until");

    // Flip a byte of one record: verify names it and fails.
    let bad = 4u64;
    {
        let log = storch::log::EventLog::open(&data_dir.join("log"), Default::default()).unwrap();
        log.corrupt_for_tests(bad, |raw| {
            let at = raw.len() / 2;
            raw[at] ^= 0x20;
        });
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(log.shutdown())
            .unwrap();
    }
    let out = storch(&["events", "verify", "--data-dir", dir], &[], None)
        .fails_with(&format!("corrupt at sequence {bad}"));
    assert!(
        out.stdout
            .contains(&format!("{} events check out", bad - 1)),
        "{}",
        out.stdout
    );
    // Replay before the bad record still works; past it, it fails naming it.
    storch(&["replay", "--data-dir", dir, "--until", "3"], &[], None).ok();
    storch(&["replay", "--data-dir", dir], &[], None)
        .fails_with(&format!("corrupt at sequence {bad}"));
    let out = storch(&["events", "export", "--data-dir", dir], &[], None)
        .fails_with(&format!("corrupt at sequence {bad}"));
    assert_eq!(out.lines().len(), bad as usize - 1);

    // No data dir at all.
    let missing = data_dir.parent().unwrap().join("missing");
    storch(
        &["events", "verify", "--data-dir", missing.to_str().unwrap()],
        &[],
        None,
    )
    .fails_with("there is no event log");
}

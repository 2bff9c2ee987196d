//! `storch events` against a server: lists, filters and `--follow`.

use super::*;

#[test]
fn events_from_the_server() {
    let server = server_with_lab();
    create_volume(&server, "v1", "1Gi");

    let doc = server.run(&["events", "-o", "json"]).ok().json();
    let events = doc["items"].as_array().unwrap().clone();
    assert!(events.len() >= 5, "{doc}");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1);
        for key in [
            "time",
            "id",
            "requestId",
            "kind",
            "stream",
            "summary",
            "hash",
            "event",
        ] {
            assert!(!e[key].is_null(), "{key} in {e}");
        }
    }
    let lines = server.run(&["events"]).ok().stdout;
    assert_eq!(lines.lines().count(), events.len());
    let first = lines.lines().next().unwrap();
    assert!(first.trim_start().starts_with("1  "), "{first}");
    assert!(first.contains("BackendAdded"), "{first}");
    assert!(first.contains("backend lab added"), "{first}");
    assert!(
        first.contains(events[0]["requestId"].as_str().unwrap()),
        "{first}"
    );

    // Filters.
    let doc = server
        .run(&["events", "--object", "volume/v1", "-o", "json"])
        .ok()
        .json();
    let items = doc["items"].as_array().unwrap();
    assert!(!items.is_empty());
    assert!(items.iter().all(|e| e["stream"] == "volume/v1"), "{doc}");
    let doc = server
        .run(&["events", "--since", "3", "--limit", "2", "-o", "json"])
        .ok()
        .json();
    let seqs: Vec<u64> = doc["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [3, 4]);
    server
        .run(&["events", "--object", "pool/x"])
        .fails_with("could not get events:");

    // The offline export gives the same objects.
    let mut server = server;
    server.stop();
    let exported = export(&server.data_dir);
    assert_eq!(exported[..events.len()], events[..]);
}

#[test]
fn events_follow_prints_new_events() {
    let server = server_with_lab();
    let backlog = server.run(&["events", "-o", "name"]).ok().lines().len();
    let mut args: Vec<String> = server.client_flags.clone();
    args.extend(["events", "--follow", "-o", "json"].map(String::from));
    let mut child = Command::new(env!("CARGO_BIN_EXE_storch"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = || {
        rx.recv_timeout(Duration::from_secs(20))
            .expect("a followed event within 20 s")
    };
    // The backlog first, one JSON object per line.
    for i in 1..=backlog {
        let e: Value = serde_json::from_str(&next()).unwrap();
        assert_eq!(e["seq"], i as u64);
    }
    // Then what happens after it started.
    create_volume(&server, "late", "1Gi");
    let mut seen = Vec::new();
    let found = loop {
        let e: Value = serde_json::from_str(&next()).unwrap();
        seen.push(e.clone());
        if e["stream"] == "volume/late" && e["kind"] == "VolumeCreated" {
            break e;
        }
        assert!(seen.len() < 50, "{seen:#?}");
    };
    assert_eq!(
        found["seq"].as_u64().unwrap() as usize,
        backlog + seen.len()
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
}

//! A log shorter than what was acknowledged, end to end: sled drops everything after a stretch
//! of its file it cannot read without a word; storch compares what is left with the watermark
//! it keeps beside the log, so `events verify` and `serve` say what is missing, and `serve
//! --truncate-corrupt-tail` starts on what is left with an event saying so.

use std::time::{Duration, Instant};

use super::*;
use storch::log::{Durability, EventLog};

/// A stopped server's data dir with backend `lab`, class `gold` and 20 volumes.
fn twenty_volumes(data_dir: &Path) {
    let mut server = Server::start_on(data_dir, &[]);
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
    for i in 0..20 {
        create_volume(&server, &format!("v{i}"), "1Gi");
    }
    server.stop();
}

/// Drops the second half of the records from the store, as sled does with everything after
/// a stretch of its file it cannot read (the log's unit tests flip and tear sled's file
/// itself); the watermark beside it is left as it was. Returns the sequence of the first
/// record dropped and the head.
fn lose_the_second_half(data_dir: &Path) -> (u64, u64) {
    let log = EventLog::open(&data_dir.join("log"), Durability::Flush).unwrap();
    let head = log.head().0;
    let middle = head / 2;
    for seq in (middle..=head).rev() {
        log.put_raw_for_tests(seq, None);
    }
    (middle, head)
}

fn wait_for_log(server: &Server, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = server.serve.log();
        if log.contains(text) {
            return log;
        }
        assert!(Instant::now() < deadline, "never logged {text:?}:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_log_shorter_than_acknowledged_stops_the_start_until_the_operator_cuts_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    twenty_volumes(&data_dir);
    let dir = data_dir.to_str().unwrap();
    storch(&["events", "verify", "--data-dir", dir], &[], None).ok();
    let (middle, head) = lose_the_second_half(&data_dir);

    // verify: what checks out, then the acknowledged sequences that are missing.
    let out = storch(&["events", "verify", "--data-dir", dir], &[], None)
        .fails_with("acknowledged records are missing");
    assert!(
        out.stdout
            .contains(&format!("..={head} were acknowledged and are missing")),
        "{out:#?}"
    );
    let kept = {
        let log = EventLog::open(&data_dir.join("log"), Durability::Flush).unwrap();
        log.head().0
    };
    assert_eq!(kept, middle - 1);
    assert!(
        out.stderr
            .contains(&format!("corrupt at sequence {}", kept + 1)),
        "{out:#?}"
    );

    // serve refuses to start, naming what is missing; nothing is served.
    let mut server = Server::start_on(&data_dir, &[]);
    let log = wait_for_log(&server, "refusing to start");
    assert!(
        log.contains(&format!(
            "sequences {}..={head} were acknowledged but cannot be read back",
            kept + 1
        )),
        "{log}"
    );
    assert!(log.contains("--truncate-corrupt-tail"), "{log}");
    assert_ne!(server.run(&["get", "volume"]).code, 0);
    server.stop();

    // The operator accepts the shorter log: it starts, with an event saying what was cut.
    let mut server = Server::start_on(&data_dir, &["--truncate-corrupt-tail"]);
    server.wait_ready();
    let volumes = server.run(&["get", "volume", "-o", "json"]).ok().json();
    assert!(
        volumes["items"].as_array().unwrap().len() < 20,
        "some volumes were in the lost records: {volumes}"
    );
    server.stop();
    let events = export(&data_dir);
    let cut = events
        .iter()
        .find(|e| e["kind"] == "LogTailCutBack")
        .expect("the cut-back is recorded");
    assert_eq!(cut["seq"], kept + 1, "{cut}");
    assert_eq!(cut["stream"], "log", "{cut}");
    assert_eq!(cut["event"]["event"]["TailCutBack"]["from"], head, "{cut}");
    assert_eq!(cut["event"]["event"]["TailCutBack"]["to"], kept, "{cut}");
    storch(&["events", "verify", "--data-dir", dir], &[], None).ok();

    // And it starts again without the flag.
    let mut server = Server::start_on(&data_dir, &[]);
    server.wait_ready();
    server.stop();
}

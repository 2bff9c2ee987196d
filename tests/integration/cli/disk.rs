//! A log shorter than what was acknowledged, end to end: sled drops everything after a stretch
//! of its file it cannot read without a word; storch compares what is left with the watermark
//! it keeps beside the log, so `events verify` and `serve` say what is missing, and `serve
//! --truncate-corrupt-tail` starts on what is left with an event saying so. And a log whose
//! disk fills up, on a real small filesystem: writes stop below the reserve and resume once
//! space is freed.

use std::time::{Duration, Instant};

use super::*;
use crate::support::http::{get, post};
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

/// A tmpfs of a given size mounted on a temporary dir (root only, as CI runs), unmounted when
/// dropped, a failed test included.
struct SmallFs {
    mount: PathBuf,
    _tmp: tempfile::TempDir,
}

impl SmallFs {
    /// `Err` says why there is none (not root, no tmpfs): the caller skips.
    fn mount(size: &str) -> Result<SmallFs, String> {
        let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mount = tmp.path().join("fs");
        std::fs::create_dir(&mount).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&mount)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(SmallFs { mount, _tmp: tmp })
    }

    /// Writes `name` until the filesystem has no room left; returns the bytes written.
    fn fill(&self, name: &str) -> u64 {
        use std::io::Write;
        let mut f = std::fs::File::create(self.mount.join(name)).unwrap();
        let mut written = 0;
        for chunk in [1 << 20, 4096] {
            let block = vec![0xA5u8; chunk];
            loop {
                match f.write_all(&block) {
                    Ok(()) => written += chunk as u64,
                    Err(e) if e.raw_os_error() == Some(28) => break,
                    Err(e) => panic!("filling {name}: {e}"),
                }
            }
        }
        written
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // Lazily, so that a server a failed test left running does not keep it mounted.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.mount)
            .status();
    }
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// The log's disk, a real 96 MiB filesystem, fills up under a running server: creates get
/// 503 naming free and reserved space, reads go on, `/readyz` fails naming the disk and
/// `storch_log_writable` is 0, with one log line; once the file that filled it is removed,
/// creates succeed again without a restart, and after a restart every acknowledged volume is
/// there and `events verify` passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_disk_that_fills_up_refuses_writes_and_resumes_when_space_is_freed() {
    let fs = match SmallFs::mount("96m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("skipped: no small filesystem to fill: {why}");
            return;
        }
    };
    // The data dir is the mount itself, so that the server's log goes beside it.
    let data = fs.mount.clone();
    let args = ["--log-min-free", "16Mi"];
    let c = storch::net::client();
    let mut server = support::Server::start_with(&data, &args, &[]);
    server.wait_ready(&c).await;
    let url = |path: &str| format!("{}{path}", server.url);
    let backend = support::fake_backend("lab", "file", &[("p1", support::ssd())]);
    assert_eq!(
        post(&c, &url("/trident/v1/backend"), backend).await.status,
        201
    );
    let class = json!({"name": "gold", "attributes": {"media": "ssd"}});
    assert_eq!(
        post(&c, &url("/trident/v1/storageclass"), class)
            .await
            .status,
        201
    );
    let volume = |name: &str| json!({"name": name, "size": "1Gi", "storageClass": "gold"});
    let acknowledged: Vec<String> = (0..5).map(|i| format!("v{i}")).collect();
    for name in &acknowledged {
        let r = post(&c, &url("/trident/v1/volume"), volume(name)).await;
        assert_eq!(r.status, 201, "{:?}", r.json);
    }

    let filled = fs.fill("filler");
    assert!(filled > 32 << 20, "the filler took {filled} bytes");
    for _ in 0..3 {
        let r = post(&c, &url("/trident/v1/volume"), volume("refused")).await;
        assert_eq!(r.status, 503, "{:?}", r.json);
        assert_eq!(r.headers["retry-after"], "1");
        let msg = r.json["error"].as_str().unwrap();
        assert!(msg.contains("the event log's disk is full: "), "{msg}");
        assert!(msg.contains("16 MiB reserved"), "{msg}");
        assert!(msg.contains("resume by themselves"), "{msg}");
        assert!(
            !msg.contains("os error"),
            "sled never met the full disk: {msg}"
        );
    }
    // Reads go on.
    let r = get(&c, &url("/trident/v1/volume/v0")).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let r = get(&c, &url("/trident/v1/volume")).await;
    assert_eq!(
        r.json["volumes"].as_array().unwrap().len(),
        5,
        "{:?}",
        r.json
    );
    let r = get(&c, &url("/readyz")).await;
    assert_eq!(r.status, 503);
    let reason = r.json["reasons"][0].as_str().unwrap();
    assert!(reason.contains("the event log's disk is full"), "{reason}");
    let text = get_text(&c, &url("/metrics")).await;
    assert_eq!(metric(&text, "storch_log_writable"), Some(0.0), "{text}");
    let log = server.log();
    assert_eq!(
        log.matches("below its reserve of free space").count(),
        1,
        "one line for the state, none per request:\n{log}"
    );
    assert!(!log.contains("refused: the event log"), "{log}");
    assert!(!log.contains("append failed"), "{log}");

    std::fs::remove_file(fs.mount.join("filler")).unwrap();
    support::eventually("writes to resume", async || {
        get(&c, &url("/readyz")).await.status == 200
    })
    .await;
    let text = get_text(&c, &url("/metrics")).await;
    assert_eq!(metric(&text, "storch_log_writable"), Some(1.0), "{text}");
    assert!(
        server
            .log()
            .contains("space was freed on the event log's disk")
    );
    let r = post(&c, &url("/trident/v1/volume"), volume("after")).await;
    assert_eq!(r.status, 201, "{:?}", r.json);
    server.stop();

    // Every acknowledged volume is there after a restart; the refused one never was.
    let mut server = support::Server::start_with(&data, &args, &[]);
    server.wait_ready(&c).await;
    let url = |path: &str| format!("{}{path}", server.url);
    for name in acknowledged.iter().map(String::as_str).chain(["after"]) {
        let r = get(&c, &url(&format!("/trident/v1/volume/{name}"))).await;
        assert_eq!(r.status, 200, "{name}: {:?}", r.json);
    }
    assert_eq!(
        get(&c, &url("/trident/v1/volume/refused")).await.status,
        404
    );
    server.stop();
    let out = storch(
        &["events", "verify", "--data-dir", data.to_str().unwrap()],
        &[],
        None,
    )
    .ok();
    assert!(out.stdout.contains("hash chain intact"), "{out:#?}");
}

async fn get_text(c: &reqwest::Client, url: &str) -> String {
    c.get(url).send().await.unwrap().text().await.unwrap()
}

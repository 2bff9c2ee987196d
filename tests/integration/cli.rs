//! End-to-end tests of the `storch` client verbs and offline audits: the real binary against
//! a real `storch serve` child.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support;

/// What a `storch` run printed and how it ended.
#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    #[track_caller]
    fn ok(self) -> Out {
        assert_eq!(self.code, 0, "expected success: {self:#?}");
        assert!(self.stderr.is_empty(), "stderr: {}", self.stderr);
        self
    }

    /// Exit 1 and an `Error: …` line containing `want`.
    #[track_caller]
    fn fails_with(self, want: &str) -> Out {
        assert_eq!(self.code, 1, "expected exit 1: {self:#?}");
        assert!(
            self.stderr.starts_with("Error: ") && self.stderr.contains(want),
            "expected an error with {want:?}: {self:#?}"
        );
        self
    }

    #[track_caller]
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }

    /// The data rows of a bordered table, each a list of trimmed cells, after checking the
    /// header row.
    #[track_caller]
    fn table(&self, headers: &[&str]) -> Vec<Vec<String>> {
        let rows: Vec<Vec<String>> = self
            .stdout
            .lines()
            .filter(|l| l.starts_with('|'))
            .map(|l| {
                l.trim_matches('|')
                    .split('|')
                    .map(|c| c.trim().to_string())
                    .collect()
            })
            .collect();
        assert!(!rows.is_empty(), "no table: {}", self.stdout);
        assert_eq!(rows[0], headers, "{}", self.stdout);
        rows[1..].to_vec()
    }

    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

/// Runs the binary with a clean environment for server discovery.
fn storch(args: &[&str], envs: &[(&str, &str)], stdin: Option<&str>) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_storch"));
    cmd.args(args)
        .env_remove("STORCH_SERVER")
        .env_remove("TRIDENT_SERVER")
        .env_remove("STORCH_TOKEN")
        .env_remove("STORCH_CA_CERT")
        .env_remove("STORCH_DATA_DIR")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("storch runs");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    Out {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// A `storch serve` child ([`support::Server`]) and the flags every client call against it
/// needs.
struct Server {
    serve: support::Server,
    /// `http://127.0.0.1:PORT` (or https).
    url: String,
    data_dir: PathBuf,
    /// Flags every client call against this server needs (`--server`, TLS, token).
    client_flags: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    /// A fresh data dir in a temporary directory.
    fn start() -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let mut server = Server::start_on(&tmp.path().join("data"), &[]);
        server._tmp = Some(tmp);
        server
    }

    fn start_on(data_dir: &Path, extra: &[&str]) -> Server {
        let serve = support::Server::start_with(data_dir, extra, &[]);
        Server {
            url: serve.url.clone(),
            client_flags: vec!["--server".into(), serve.url.clone()],
            serve,
            data_dir: data_dir.to_path_buf(),
            _tmp: None,
        }
    }

    /// `storch --server URL ARGS…`
    fn run(&self, args: &[&str]) -> Out {
        self.run_with(args, None)
    }

    fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Out {
        let mut all: Vec<&str> = self.client_flags.iter().map(String::as_str).collect();
        all.extend(args);
        storch(&all, &[], stdin)
    }

    /// Waits (at most 30 s) until the API answers through the client (replay done).
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.run(&["get", "backend"]);
            if out.code == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "server not ready: {out:#?}\nlog:\n{}",
                self.serve.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM and wait for a clean exit (the log is closed then).
    fn stop(&mut self) {
        self.serve.stop();
    }
}

const BACKEND_YAML: &str = "\
version: 1
storageDriverName: fake
backendName: lab
instanceName: lab
protocol: file
pools:
  fast:
    attributes:
      media: {offer: [ssd]}
      snapshots: {offer: true}
    sizeBytes: 107374182400
  slow:
    attributes:
      media: {offer: [hdd]}
    sizeBytes: 107374182400
";

/// A server with backend `lab` (pools fast: ssd, slow: hdd) and class `gold` (ssd).
fn server_with_lab() -> Server {
    let server = Server::start();
    server.wait_ready();
    let dir = server.data_dir.parent().unwrap().to_path_buf();
    let file = dir.join("backend.yaml");
    std::fs::write(&file, BACKEND_YAML).unwrap();
    server
        .run(&["create", "backend", "-f", file.to_str().unwrap()])
        .ok();
    server
        .run_with(
            &["create", "storageclass", "-f", "-"],
            Some(r#"{"name": "gold", "attributes": {"media": "ssd"}}"#),
        )
        .ok();
    server
}

fn create_volume(server: &Server, name: &str, size: &str) -> Out {
    server
        .run_with(
            &["create", "volume", "-f", "-"],
            Some(&format!("name: {name}\nsize: {size}\nstorageClass: gold\n")),
        )
        .ok()
}

#[test]
fn backends_in_every_format() {
    let server = server_with_lab();
    let headers = ["NAME", "DRIVER", "STATE", "VOLUMES"];
    for kind in ["backend", "backends", "b"] {
        let rows = server.run(&["get", kind]).ok().table(&headers);
        assert_eq!(rows, [["lab", "fake", "online", "0"]]);
    }
    let rows = server
        .run(&["get", "backend", "lab", "-o", "wide"])
        .ok()
        .table(&["NAME", "DRIVER", "STATE", "VOLUMES", "PROTOCOL", "POOLS"]);
    assert_eq!(rows, [["lab", "fake", "online", "0", "file", "2"]]);

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
    assert_eq!(server.run(&["get", "pools"]).code, 2);
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

/// The events of a stopped server's data dir, through `storch events export`.
fn export(data_dir: &Path) -> Vec<Value> {
    let out = storch(
        &["events", "export", "--data-dir", data_dir.to_str().unwrap()],
        &[],
        None,
    )
    .ok();
    out.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

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

/// A CA, and a server certificate for localhost and 127.0.0.1 signed by it: (CA PEM, server
/// certificate PEM, server key PEM).
fn test_pki() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "storch test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[test]
fn https_with_a_token() {
    let tmp = tempfile::tempdir().unwrap();
    let (ca, cert, key) = test_pki();
    let path = |name: &str, text: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (ca_file, cert_file, key_file) = (
        path("ca.pem", &ca),
        path("server.pem", &cert),
        path("server.key", &key),
    );
    let token = "s3cret-token-for-tests";
    let token_file = path("token", &format!("{token}\n"));
    let mut server = Server::start_on(
        &tmp.path().join("data"),
        &[
            "--tls-cert",
            &cert_file,
            "--tls-key",
            &key_file,
            "--auth-token-file",
            &token_file,
        ],
    );
    assert!(server.url.starts_with("https://"), "{}", server.url);
    server.client_flags = vec![
        "--server".into(),
        server.url.clone(),
        "--ca-cert".into(),
        ca_file.clone(),
        "--token".into(),
        token.into(),
    ];
    server.wait_ready();
    server
        .run_with(&["create", "sc", "-f", "-"], Some(r#"{"name": "gold"}"#))
        .ok();
    assert_eq!(
        server.run(&["get", "sc", "-o", "name"]).ok().stdout,
        "gold\n"
    );
    // The token from the environment works too.
    storch(
        &[
            "-s",
            &server.url,
            "--ca-cert",
            &ca_file,
            "get",
            "sc",
            "-o",
            "name",
        ],
        &[("STORCH_TOKEN", token)],
        None,
    )
    .ok();
    // No token, or a wrong one: 401.
    storch(
        &["-s", &server.url, "--ca-cert", &ca_file, "get", "sc"],
        &[],
        None,
    )
    .fails_with("401 Unauthorized");
    storch(
        &[
            "-s",
            &server.url,
            "--ca-cert",
            &ca_file,
            "--token",
            "wrong",
            "get",
            "sc",
        ],
        &[],
        None,
    )
    .fails_with("401 Unauthorized");
    // A certificate from an unknown CA is refused before anything is sent.
    let out = storch(
        &["-s", &server.url, "--token", token, "get", "sc"],
        &[],
        None,
    )
    .fails_with(&format!("cannot reach the storch server at {}", server.url));
    assert!(
        out.stderr.contains("pass it with --ca-cert"),
        "{}",
        out.stderr
    );
    // Plain http to a TLS port fails too, with a hint.
    let plain = server.url.replace("https://", "");
    storch(&["-s", &plain, "--token", token, "get", "sc"], &[], None)
        .fails_with("use --server https://");
    server.stop();
}

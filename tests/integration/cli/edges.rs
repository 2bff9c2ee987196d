//! Issue 18 item 9, the CLI's edges: exit codes and `Error:` lines, client options on the
//! server commands, a clone's pool, deleting a volume that has snapshots, and the server's
//! certificate check.

use super::*;

/// A command line clap cannot parse exits 2 with `Error: …` and the usage; a command that
/// runs and fails exits 1 with `Error: …` (as the README says).
#[test]
fn usage_errors_exit_2_and_failures_exit_1_both_with_error_lines() {
    let out = storch(&["get", "volume", "--no-such-flag"], &[], None);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.starts_with("Error: "), "{out:#?}");
    assert!(
        out.stderr.contains("--no-such-flag") && out.stderr.contains("Usage:"),
        "{out:#?}"
    );
    let out = storch(&["frobnicate"], &[], None);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.starts_with("Error: "), "{out:#?}");
    // Help and version are not errors.
    let out = storch(&["--version"], &[], None);
    assert_eq!(out.code, 0, "{out:#?}");
    // A failure at run time: exit 1.
    storch(&["--server", "127.0.0.1:1", "get", "backend"], &[], None)
        .fails_with("cannot reach the storch server");
}

/// `serve --help` does not list the client options, and giving one to `serve` is an error
/// rather than silently nothing.
#[test]
fn serve_takes_no_client_options() {
    let out = storch(&["serve", "--help"], &[], None);
    assert_eq!(out.code, 0, "{out:#?}");
    for flag in [
        "--server",
        "--output",
        "--token",
        "--ca-cert",
        "--debug",
        "Client options",
    ] {
        assert!(
            !out.stdout.contains(flag),
            "{flag} in serve --help:\n{}",
            out.stdout
        );
    }
    assert!(out.stdout.contains("--local-root"), "{}", out.stdout);
    let help = storch(&["get", "--help"], &[], None);
    assert!(
        help.stdout.contains("--server"),
        "client verbs keep them: {}",
        help.stdout
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for args in [
        vec!["serve", "--server", "127.0.0.1:1"],
        vec!["-o", "json", "serve"],
        vec!["serve", "--debug"],
    ] {
        let mut all = args.clone();
        all.extend(["--data-dir", data.to_str().unwrap()]);
        let out = storch(&all, &[], None);
        assert_eq!(out.code, 2, "{args:?}: {out:#?}");
        assert!(
            out.stderr.starts_with("Error: ") && out.stderr.contains("is a client option"),
            "{args:?}: {out:#?}"
        );
    }
    assert!(!data.exists(), "nothing was started");
}

/// A clone shows the pool it lives on (REST keeps Trident's empty `pool` and adds
/// `placedPool`), and `delete volume` refuses a volume with snapshots unless told.
#[test]
fn clones_show_their_pool_and_snapshots_are_not_deleted_silently() {
    let server = server_with_lab();
    create_volume(&server, "src", "1Gi");
    server.run(&["create", "snapshot", "src/s1"]).ok();
    server
        .run(&["create", "volume", "copy", "--clone-from", "src"])
        .ok();
    let headers = [
        "NAME",
        "SIZE",
        "STORAGE CLASS",
        "PROTOCOL",
        "BACKEND",
        "POOL",
        "STATE",
    ];
    let rows = server.run(&["get", "volume", "copy"]).ok().table(&headers);
    assert_eq!(rows[0][5], "fast", "{rows:?}");
    let doc = server
        .run(&["get", "volume", "copy", "-o", "json"])
        .ok()
        .json();
    assert_eq!(doc["items"][0]["pool"], "", "Trident's shape");
    assert_eq!(doc["items"][0]["placedPool"], "fast");

    server
        .run(&["delete", "volume", "copy", "src"])
        .fails_with("volume src has 1 snapshot(s) (s1)");
    // Nothing was deleted, not even the volume named before it.
    let names = server.run(&["get", "volume", "-o", "name"]).ok().stdout;
    assert_eq!(names, "copy\nsrc\n");
    server
        .run(&["delete", "volume", "copy", "src", "--with-snapshots"])
        .ok();
    assert_eq!(server.run(&["get", "volume", "-o", "name"]).ok().stdout, "");
}

/// The listing follows pages: more volumes than one page still all come back.
#[test]
fn get_volume_follows_pages() {
    let server = server_with_lab();
    let names: Vec<String> = (0..3).map(|i| format!("v{i}")).collect();
    for n in &names {
        create_volume(&server, n, "1Mi");
    }
    let out = server.run(&["--debug", "get", "volume", "-o", "name"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert_eq!(out.stdout, "v0\nv1\nv2\n");
    assert!(
        out.stderr.contains("limit="),
        "the client asks for pages: {}",
        out.stderr
    );
}

//! The dependency rules of ARCHITECTURE.md, checked: each framework crate is used in one module
//! only, and the pure layers stay pure.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Files under `src/` (relative paths) that mention `crate_name` as a path (`name::`).
fn users_of(crate_name: &str) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let needle = format!("{crate_name}::");
    files
        .into_iter()
        .filter(|f| {
            std::fs::read_to_string(f).unwrap().lines().any(|l| {
                let code = l.split("//").next().unwrap_or("");
                code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .any(|tok| tok.starts_with(&needle))
            })
        })
        .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
        .collect()
}

#[track_caller]
fn only_in(crate_name: &str, allowed: &[&str]) {
    for file in users_of(crate_name) {
        assert!(
            allowed.iter().any(|a| file.starts_with(a)),
            "{file} uses {crate_name}, which only {allowed:?} may import"
        );
    }
}

#[test]
fn each_framework_crate_lives_in_one_module() {
    only_in("sled", &["log/"]);
    only_in("actix", &["actors/"]);
    only_in("axum", &["api/"]);
    only_in("kube", &["k8s/"]);
    only_in("k8s_openapi", &["k8s/"]);
    only_in("tonic", &["csi/"]);
    only_in("prost", &["csi/"]);
    only_in("prost_types", &["csi/"]);
    only_in("tokio_stream", &["csi/"]);
    only_in("tar", &["cli/archive.rs"]);
    only_in("flate2", &["cli/archive.rs"]);
}

/// Client HTTP goes through `net` (drivers and replication build on it); servers — the REST
/// API and the simulators — speak hyper and rustls; XML is encoded in the wire modules only.
#[test]
fn http_tls_and_xml_crates_live_where_they_serve() {
    only_in("reqwest", &["net/", "drivers/", "replication/"]);
    only_in("hyper", &["api/", "sim/"]);
    only_in("hyper_util", &["api/", "sim/"]);
    only_in("rustls", &["net/", "api/", "sim/"]);
    only_in("tokio_rustls", &["api/", "sim/"]);
    only_in("quick_xml", &["wire/"]);
}

/// Modules that must not know each other: the frontends are siblings, replication sits below
/// the API, `net` and `wire` below everything that uses them, and a simulator shares only
/// wire formats with its driver.
#[test]
fn siblings_and_low_modules_do_not_import_upwards() {
    let rules: &[(&str, &[&str])] = &[
        ("replication/", &["crate::api", "crate::k8s", "crate::cli"]),
        ("api/", &["crate::k8s", "crate::cli", "crate::csi"]),
        ("k8s/", &["crate::api", "crate::cli", "crate::csi"]),
        ("csi/", &["crate::api", "crate::k8s", "crate::cli"]),
        ("sim/", &["crate::drivers", "crate::actors", "crate::api"]),
        (
            "net/",
            &[
                "crate::drivers",
                "crate::actors",
                "crate::api",
                "crate::k8s",
                "crate::cli",
                "crate::replication",
                "crate::sim",
            ],
        ),
        ("wire/", &["crate::drivers", "crate::sim", "crate::net"]),
    ];
    for (module, forbidden) in rules {
        for path in *forbidden {
            for file in users_of(path) {
                assert!(!file.starts_with(module), "{file} uses {path}");
            }
        }
    }
}

/// etcd's API (its JSON gateway's `/v3/…` paths) is spoken in one place.
#[test]
fn only_replication_talks_to_etcd() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        if rel.starts_with("replication/") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains("\"/v3/"),
            "{rel} calls etcd's API directly; use replication::etcd"
        );
    }
}

#[test]
fn pure_layers_stay_pure() {
    for io in [
        "std::fs",
        "tokio",
        "reqwest",
        "crate::drivers",
        "crate::actors",
    ] {
        // Projections fold envelopes (log types) but do no I/O and call no one.
        only_in(
            io,
            &[
                "log/",
                "actors/",
                "api/",
                "cli/",
                "drivers/",
                "net/",
                "bench/",
                "sim/",
                "bin/",
                "config.rs",
                "secrets.rs",
                "k8s/",
                "csi/",
                "replication/",
            ],
        );
    }
    for forbidden in [
        "crate::drivers",
        "crate::actors",
        "crate::log",
        "crate::projections",
        "tokio",
    ] {
        for file in users_of(forbidden) {
            assert!(
                !file.starts_with("events/") && !file.starts_with("model/"),
                "{file} uses {forbidden}"
            );
        }
    }
    for file in users_of("crate::drivers") {
        assert!(
            !file.starts_with("projections/") && !file.starts_with("log/"),
            "{file} uses drivers"
        );
    }
    for forbidden in [
        "crate::events",
        "crate::actors",
        "crate::log",
        "crate::projections",
    ] {
        for file in users_of(forbidden) {
            assert!(
                !file.starts_with("drivers/"),
                "{file}: drivers never see {forbidden}"
            );
        }
    }
}

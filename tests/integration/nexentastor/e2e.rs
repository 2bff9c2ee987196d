//! The seed's whole `nexentastor_map` file end to end against `storch-sim nexentastor`:
//! `storch serve --config` makes one backend per entry, named after it, and volumes land in
//! the volume group their class selects with iSCSI access (CHAP); `storch create backend -f`
//! takes the same file; the password and the CHAP secret are nowhere in clear in the data dir.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::nexentastor::NexentaSim;
use crate::support::server::Server;
use crate::support::{backend_online, create, get_json};
use storch::sim::nexentastor::DEFAULT_PASSWORD;

const CHAP_SECRET: &str = "chap-canary-0451";

/// The map file (YAML, as the seed writes it) with two entries on one appliance.
fn write_map(path: &Path, sim: &NexentaSim) {
    let pem: String = sim
        .ca_pem()
        .lines()
        .map(|l| format!("      {l}\n"))
        .collect();
    let text = format!(
        "nexentastor_map:\n  nexstor-1:\n    restIp: {url}\n    username: admin\n    password: {DEFAULT_PASSWORD}\n    defaultDataIp: 192.0.2.40\n    defaultVolumeGroup: tank/csi\n    dynamicTargetLunAllocation: true\n    numOfLunsPerTarget: 2\n    zone: zone-a\n    trustedCACertificate: |\n{pem}  nexstor-2:\n    restIp: {url}\n    username: admin\n    password: {DEFAULT_PASSWORD}\n    defaultDataIp: 192.0.2.41\n    defaultVolumeGroup: tank/b\n    defaultTarget: iqn.2005-07.com.nexenta:01:b\n    defaultTargetGroup: tg-b\n    useChapAuth: true\n    chapUser: storch\n    chapSecret: {CHAP_SECRET}\n    trustedCACertificate: |\n{pem}",
        url = sim.url
    );
    std::fs::write(path, text).unwrap();
}

pub(super) fn contains_bytes(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    for entry in walk(dir) {
        if let Ok(bytes) = std::fs::read(&entry)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            hits.push(entry.display().to_string());
        }
    }
    hits
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_the_seed_map_file() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = NexentaSim::start(
        tmp.path(),
        &["--volume-groups", "tank/csi:100GiB,tank/b:100GiB"],
    );
    let map = tmp.path().join("nexentastor_map.yaml");
    write_map(&map, &sim);
    let data = tmp.path().join("data");
    let server = Server::start_with(&data, &["--config", map.to_str().unwrap()], &[]);
    let c = storch::net::client();
    server.wait_ready(&c).await;
    let url = server.url.clone();
    for name in ["nexstor-1", "nexstor-2"] {
        backend_online(&c, &url, name).await;
    }
    let (_, b) = get_json(&c, &format!("{url}/trident/v1/backend/nexstor-2")).await;
    let shown = b.to_string();
    assert!(
        !shown.contains(DEFAULT_PASSWORD) && !shown.contains(CHAP_SECRET),
        "{shown}"
    );

    // A class per volume group; a volume in each.
    for (class, backend, vg) in [
        ("nx-a", "nexstor-1", "tank/csi"),
        ("nx-b", "nexstor-2", "tank/b"),
    ] {
        let body = json!({"name": class, "attributes": {"backendType": "nexentastor-iscsi"},
            "storagePools": {backend: [vg]}});
        create(&c, &url, "storageclass", &body).await;
        let vol = json!({"name": format!("vol-{class}"), "size": "1Gi", "storageClass": class,
            "protocol": "block"});
        create(&c, &url, "volume", &vol).await;
        let (_, v) = get_json(&c, &format!("{url}/trident/v1/volume/vol-{class}")).await;
        let v: &Value = &v["volume"];
        assert_eq!(v["backend"], backend, "{v}");
        assert_eq!(v["pool"], vg, "{v}");
        let a = &v["Config"]["accessInformation"];
        assert!(
            a["iscsiTargetIqn"].as_str().unwrap().starts_with("iqn."),
            "{a}"
        );
        if class == "nx-b" {
            assert_eq!(a["iscsiTargetPortal"], "192.0.2.41:3260", "{a}");
            assert_eq!(a["iscsiUsername"], "storch", "{a}");
        }
    }
    let (_, zvols) = sim
        .request("GET", "/storage/volumes?parent=tank%2Fb", None)
        .await;
    assert_eq!(zvols["data"].as_array().unwrap().len(), 1, "{zvols}");
    // Sealed: neither the password nor the CHAP secret is in clear in the data dir.
    for secret in [DEFAULT_PASSWORD, CHAP_SECRET] {
        let hits = contains_bytes(&data, secret.as_bytes());
        assert!(hits.is_empty(), "{secret} in clear in {hits:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_backend_takes_the_seed_map_file() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = NexentaSim::start(
        tmp.path(),
        &["--volume-groups", "tank/csi:100GiB,tank/b:100GiB"],
    );
    let map = tmp.path().join("nexentastor_map.yaml");
    write_map(&map, &sim);
    let server = Server::start(&tmp.path().join("data"), &[]);
    let c = storch::net::client();
    server.wait_ready(&c).await;
    let create = || {
        let args = ["--server", &server.url, "create", "backend", "-f"];
        let mut args = args.to_vec();
        args.push(map.to_str().unwrap());
        crate::cli::storch(&args, &[], None)
    };
    let out = create();
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("nexstor-1") && out.stdout.contains("nexstor-2"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(CHAP_SECRET));
    // A broken entry: refused, naming the entry and the key.
    std::fs::write(
        &map,
        "nexentastor_map:\n  nx3:\n    restIp: https://h\n    usernme: a\n",
    )
    .unwrap();
    let out = create();
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("usernme"), "{}", out.stderr);
    // A map without entries: refused before anything is sent, naming the file and the key.
    std::fs::write(&map, "nexentastor_map: {}\n").unwrap();
    let out = create();
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("nexentastor_map.yaml") && out.stderr.contains("nexentastor_map:"),
        "{}",
        out.stderr
    );
}

//! Storage class parameters of `nexentastor-iscsi` through the REST API of a real `storch
//! serve` and `storch-sim nexentastor`: the class's `volumeGroup` selects the pool, its other
//! parameters override the backend's defaults on the appliance, its `chapSecret` is sealed
//! (not in the event export, the GET output or the data dir, yet used after a restart), and
//! parameters no driver (or not the class's driver) takes are refused naming them.

use serde_json::{Value, json};

use crate::support::nexentastor::{NexentaSim, esc};
use crate::support::server::Server;
use crate::support::{backend_online, create, get_json};
use storch::sim::nexentastor::{DEFAULT_PASSWORD, DEFAULT_USERNAME};

const CANARY: &str = "class-chap-canary-7781";
const TARGET: &str = "iqn.2005-07.com.nexenta:01:gold";
const HOST: &str = "iqn.1993-08.org.debian:01:ops1";

fn backend(sim: &NexentaSim) -> Value {
    json!({
        "version": 1, "storageDriverName": "nexentastor-iscsi", "backendName": "nx",
        "restIp": sim.url, "username": DEFAULT_USERNAME, "password": DEFAULT_PASSWORD,
        "defaultDataIp": "192.0.2.40", "defaultVolumeGroup": "tank/csi",
        "volumeGroups": ["tank/b"], "dynamicTargetLunAllocation": true,
        "trustedCACertificate": sim.ca_pem(),
    })
}

fn gold() -> Value {
    json!({"name": "nx-gold", "attributes": {"backendType": "nexentastor-iscsi"},
        "parameters": {"volumeGroup": "tank/b", "dataIp": "192.0.2.77", "targetGroup": "tg-gold",
            "target": TARGET, "hostGroup": "hg-ops", "sparseVolume": "false",
            "dynamicTargetLunAllocation": "false", "useChapAuth": "true", "chapUser": "gold",
            "chapSecret": CANARY}})
}

async fn post(c: &reqwest::Client, url: &str, kind: &str, body: &Value) -> (u16, String) {
    let r = c
        .post(format!("{url}/trident/v1/{kind}"))
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The volume's zvol, target, target group and LUN mapping on the appliance.
async fn check_on_appliance(sim: &NexentaSim, path: &str) {
    let (_, z) = sim
        .request("GET", &format!("/storage/volumes?path={}", esc(path)), None)
        .await;
    assert_eq!(z["data"][0]["sparseVolume"], false, "{z}");
    let (_, t) = sim
        .request("GET", &format!("/san/iscsi/targets/{}", esc(TARGET)), None)
        .await;
    assert_eq!(t["authentication"], "chap", "{t}");
    assert_eq!(t["chapUser"], "gold", "{t}");
    assert_eq!(
        t["portals"],
        json!([{"address": "192.0.2.77", "port": 3260}]),
        "{t}"
    );
    let (_, g) = sim.request("GET", "/san/targetgroups/tg-gold", None).await;
    assert_eq!(g["members"], json!([TARGET]), "{g}");
    let (_, m) = sim
        .request(
            "GET",
            &format!("/san/lunMappings?volume={}", esc(path)),
            None,
        )
        .await;
    let m = &m["data"][0];
    assert_eq!(
        (m["hostGroup"].as_str(), m["targetGroup"].as_str()),
        (Some("hg-ops"), Some("tg-gold")),
        "{m}"
    );
}

async fn create_volume(c: &reqwest::Client, url: &str, name: &str) -> Value {
    let vol = json!({"name": name, "size": "1Gi", "storageClass": "nx-gold", "protocol": "block"});
    create(c, url, "volume", &vol).await;
    let (_, v) = get_json(c, &format!("{url}/trident/v1/volume/{name}")).await;
    let v = v["volume"].clone();
    assert_eq!(
        (v["backend"].as_str(), v["pool"].as_str()),
        (Some("nx"), Some("tank/b")),
        "{v}"
    );
    let a = &v["Config"]["accessInformation"];
    assert_eq!(a["iscsiTargetPortal"], "192.0.2.77:3260", "{a}");
    assert_eq!(a["iscsiTargetIqn"], TARGET, "{a}");
    assert_eq!(a["iscsiUsername"], "gold", "{a}");
    assert_eq!(a["iscsiInitiatorSecret"], "<redacted>", "{a}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn class_parameters_reach_the_appliance_and_the_secret_stays_sealed() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = NexentaSim::start(
        tmp.path(),
        &["--volume-groups", "tank/csi:100GiB,tank/b:100GiB"],
    );
    let hg = json!({"name": "hg-ops", "members": [HOST]});
    assert_eq!(sim.run("POST", "/san/hostgroups", Some(&hg)).await.0, 201);
    let data = tmp.path().join("data");
    let mut server = Server::start(&data, &[]);
    let c = storch::net::client();
    server.wait_ready(&c).await;
    let url = server.url.clone();
    create(&c, &url, "backend", &backend(&sim)).await;
    backend_online(&c, &url, "nx").await;

    // Refused, naming the parameter (and the driver), changing nothing; the secret never echoed.
    let refusals = [
        (
            json!({"name": "x1", "parameters": {"colour": "red"}}),
            vec!["parameters.colour"],
        ),
        (
            json!({"name": "x2", "attributes": {"backendType": "ontap-nas"},
                   "parameters": {"volumeGroup": "tank/b"}}),
            vec!["parameters.volumeGroup", "ontap-nas"],
        ),
        (
            json!({"name": "x3", "parameters": {"numOfLunsPerTarget": "none"}}),
            vec!["parameters.numOfLunsPerTarget"],
        ),
        (
            json!({"name": "x4", "parameters": {"chapSecret": "short-c4n"}}),
            vec!["parameters.chapSecret"],
        ),
    ];
    for (body, wants) in refusals {
        let (status, text) = post(&c, &url, "storageclass", &body).await;
        assert_eq!(status, 400, "{body}: {text}");
        for want in wants {
            assert!(text.contains(want), "{want} not in {text}");
        }
        assert!(!text.contains("short-c4n"), "{text}");
    }
    let (_, classes) = get_json(&c, &format!("{url}/trident/v1/storageclass")).await;
    assert_eq!(classes["storageClasses"], json!([]), "{classes}");

    create(&c, &url, "storageclass", &gold()).await;
    // volumeGroup selects the pool: only tank/b of the two volume groups matches.
    let (_, class) = get_json(&c, &format!("{url}/trident/v1/storageclass/nx-gold")).await;
    assert_eq!(
        class["storageClass"]["storage"],
        json!({"nx": ["tank/b"]}),
        "{class}"
    );
    let shown = class.to_string();
    assert!(
        !shown.contains(CANARY) && shown.contains("<redacted>"),
        "{shown}"
    );
    assert_eq!(
        class["storageClass"]["Config"]["parameters"]["volumeGroup"],
        "tank/b"
    );

    create_volume(&c, &url, "vol-gold").await;
    check_on_appliance(&sim, "tank/b/vol-gold").await;

    // After a restart the sealed secret is opened again for the next volume.
    server.stop();
    let mut server = Server::start(&data, &[]);
    server.wait_ready(&c).await;
    let url = server.url.clone();
    backend_online(&c, &url, "nx").await;
    create_volume(&c, &url, "vol-gold-2").await;
    server.stop();

    let out = crate::cli::storch(
        &["events", "export", "--data-dir", data.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("StorageClassAdded"), "{}", out.stdout);
    assert!(
        out.stdout.contains("tank/b") && !out.stdout.contains(CANARY),
        "{}",
        out.stdout
    );
    let hits = super::e2e::contains_bytes(&data, CANARY.as_bytes());
    assert!(hits.is_empty(), "{CANARY} in clear in {hits:?}");
}

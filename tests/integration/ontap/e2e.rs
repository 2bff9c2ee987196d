//! End to end: the real `storch serve` binary against the ONTAP simulator, with the four
//! Trident-shaped backend files from `examples/` (only `managementLIF` changed, plus how to
//! trust the simulator's self-signed certificate).
//!
//! - every file is accepted; the `ontap-gold` class (ontap-nas, ssd, thin, snapshots) lands only
//!   on the SSD aggregate, and the simulator holds the FlexVol with the right options;
//! - NAS-economy and SAN volumes land as qtrees and mapped LUNs;
//! - an injected `volume-create` failure on one aggregate makes the scheduler fall through to
//!   the other pool;
//! - SIGKILL under load and restarts: afterwards the simulated array holds exactly the volumes
//!   storch knows (no orphan), and every acknowledged volume exists.

use std::collections::BTreeSet;

use crate::support::crash::CrashLoop;
use crate::support::ontap::*;
use crate::support::{Server, get_json};
use serde_json::{Value, json};
use storch::sim::ontap::{FailRule, OntapSim, SimOptions};

fn example(name: &str) -> Value {
    let path = format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// An example file pointed at the simulator, trusting its certificate.
fn pointed(sim: &OntapSim, file: &str, trust: bool) -> Value {
    let mut doc = example(file);
    doc["managementLIF"] = json!(sim.management_lif());
    if trust {
        doc["trustedCACertificate"] = json!(sim.ca_pem().unwrap());
    } else {
        doc["tlsVerify"] = json!(false);
    }
    doc
}

async fn sim(dir: &std::path::Path, state: Option<std::path::PathBuf>, api: Api) -> OntapSim {
    sim_in(
        dir,
        api.sim_options(SimOptions {
            svm: "svm0".into(),
            state,
            ..SimOptions::default()
        }),
    )
    .await
}

async fn post(client: &reqwest::Client, url: String, body: &Value) -> (u16, Value) {
    let r = client.post(url).json(body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn add_backend(client: &reqwest::Client, server: &Server, doc: &Value) -> String {
    let (status, body) = post(client, format!("{}/trident/v1/backend", server.url), doc).await;
    assert_eq!(status, 201, "{body}; log:\n{}", server.log());
    body["backend"].as_str().unwrap().to_string()
}

async fn add_class(client: &reqwest::Client, server: &Server, class: Value) {
    let (status, body) = post(
        client,
        format!("{}/trident/v1/storageclass", server.url),
        &class,
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

async fn add_volume(
    client: &reqwest::Client,
    server: &Server,
    name: &str,
    class: &str,
    extra: Value,
) -> Value {
    let mut body = json!({"name": name, "size": "1Gi", "storageClass": class});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let (status, resp) = post(client, format!("{}/trident/v1/volume", server.url), &body).await;
    assert_eq!(status, 201, "{name}: {resp}; log:\n{}", server.log());
    let (status, v) = get_json(client, &format!("{}/trident/v1/volume/{name}", server.url)).await;
    assert_eq!(status, 200);
    v["volume"].clone()
}

async fn trident_backend_files_classes_and_fallthrough(api: Api) {
    let tmp = tempfile::tempdir().unwrap();
    let sim = sim(tmp.path(), None, api).await;
    let server = Server::start(&tmp.path().join("data"), &[]);
    let client = storch::net::client();
    server.wait_ready(&client).await;

    let nas = add_backend(
        &client,
        &server,
        &pointed(&sim, "backend-ontap-nas.json", true),
    )
    .await;
    let eco = add_backend(
        &client,
        &server,
        &pointed(&sim, "backend-ontap-nas-economy.json", false),
    )
    .await;
    let san = add_backend(
        &client,
        &server,
        &pointed(&sim, "backend-ontap-san.json", true),
    )
    .await;
    let san_full = add_backend(
        &client,
        &server,
        &pointed(&sim, "backend-ontap-san-full.json", true),
    )
    .await;
    assert_eq!(nas, "ontapnas_192.0.2.10");
    assert_eq!(eco, "ontapnaseco_192.0.2.10");
    assert_eq!(san, "ontapsan_192.0.2.11");
    assert_eq!(san_full, "san-gold");
    // The same file again (its name derived by the driver) records nothing.
    let events = format!("{}/trident/v1/events", server.url);
    let before = get_json(&client, &events).await.1;
    let again = add_backend(
        &client,
        &server,
        &pointed(&sim, "backend-ontap-nas.json", true),
    )
    .await;
    assert_eq!(again, nas);
    assert_eq!(
        get_json(&client, &events).await.1,
        before,
        "an identical re-post"
    );

    // GET backend shows the live config, never the password.
    let (_, b) = get_json(&client, &format!("{}/trident/v1/backend/{nas}", server.url)).await;
    let text = b.to_string();
    assert!(!text.contains("netapp123"), "{text}");
    assert_eq!(b["backend"]["config"]["svm"], "svm0", "{b}");
    assert_eq!(b["backend"]["config"]["dataLIF"], "192.0.2.10");

    // The gold class: only the SSD aggregate of the ontap-nas backend matches.
    add_class(
        &client,
        &server,
        json!({"name": "ontap-gold", "attributes": {"backendType": "ontap-nas",
            "media": "ssd", "provisioningType": "thin", "snapshots": "true"}}),
    )
    .await;
    for i in 0..4 {
        let v = add_volume(
            &client,
            &server,
            &format!("gold-{i}"),
            "ontap-gold",
            json!({}),
        )
        .await;
        assert_eq!(v["backend"], nas.as_str(), "{v}");
        assert_eq!(v["pool"], "aggr1", "{v}");
        let internal = format!("trident_gold_{i}");
        assert_eq!(v["Config"]["internalName"], internal.as_str());
        assert_eq!(
            v["Config"]["accessInformation"]["nfsServerIp"],
            "192.0.2.10"
        );
        assert_eq!(
            v["Config"]["accessInformation"]["nfsPath"],
            format!("/{internal}").as_str()
        );
        let arr = sim.array();
        let fv = &arr.svms["svm0"].volumes[&internal];
        assert_eq!(fv.aggregates, ["aggr1"]);
        assert_eq!(fv.size, 1 << 30);
        assert_eq!(fv.space_guarantee, "none", "thin");
        assert_eq!(fv.snapshot_policy, "none");
        assert_eq!(fv.snapshot_reserve, 0);
        assert_eq!(fv.export_policy, "default");
        // ZAPI sends the mode as given, REST as the integer 777: the same mode.
        assert_eq!(
            storch::drivers::ontap::permissions_to_octal(&fv.unix_permissions),
            "0777"
        );
        assert_eq!(fv.security_style, "unix");
        assert!(!fv.snapdir);
        assert!(!fv.encrypt);
        assert_eq!(
            fv.junction.as_deref(),
            Some(format!("/{internal}").as_str())
        );
    }

    // Economy: a qtree in a pool FlexVol.
    add_class(
        &client,
        &server,
        json!({"name": "eco", "attributes": {"backendType": "ontap-nas-economy"}}),
    )
    .await;
    let v = add_volume(&client, &server, "eco-1", "eco", json!({})).await;
    assert_eq!(v["backend"], eco.as_str());
    let path = v["Config"]["accessInformation"]["nfsPath"]
        .as_str()
        .unwrap();
    assert!(
        path.starts_with("/trident_qtree_pool_trident_") && path.ends_with("/trident_eco_1"),
        "{path}"
    );

    // SAN: a mapped LUN with the target's IQN; the full file's backend uses its own prefix,
    // igroup and single portal.
    add_class(
        &client,
        &server,
        json!({"name": "block-gold", "storagePools": {"^san-gold$": ["aggr1"]}}),
    )
    .await;
    let v = add_volume(
        &client,
        &server,
        "lun-1",
        "block-gold",
        json!({"protocol": "block"}),
    )
    .await;
    assert_eq!(v["backend"], "san-gold");
    let access = &v["Config"]["accessInformation"];
    assert!(
        access["iscsiTargetIqn"]
            .as_str()
            .unwrap()
            .starts_with("iqn.1992-08.com.netapp")
    );
    assert_eq!(access["iscsiTargetPortal"], "192.0.2.11");
    assert_eq!(access["iscsiIgroup"], "k8s-workers");
    let arr = sim.array();
    let lun = &arr.svms["svm0"].luns["/vol/storch_lun_1/lun0"];
    assert!(lun.maps.contains_key("k8s-workers"));
    // Thick with a 10 % snapshot reserve, as the example file asks (issue 16, fault 2: a
    // space-reserved LUN as large as its FlexVol did not fit). The FlexVol's guarantee
    // carries thickness; it holds the LUN outside its reserve.
    let fv = &arr.svms["svm0"].volumes["storch_lun_1"];
    assert_eq!(
        fv.space_guarantee, "volume",
        "spaceReserve volume from the file's defaults"
    );
    assert!(!lun.space_reserved);
    assert!(fv.size * (100 - fv.snapshot_reserve) / 100 > lun.size);
    assert_eq!(
        arr.svms["svm0"].volumes["storch_lun_1"].snapshot_reserve,
        10
    );

    // Fault injection: volume-create fails on aggr1, so every ontap-nas volume falls through
    // to aggr2. The simulator scopes faults by aggregate for ZAPI calls only (its REST rules
    // match a method and a path), so this part runs over ZAPI.
    if api == Api::Zapi {
        add_class(
            &client,
            &server,
            json!({"name": "nas-any", "storagePools": {"^ontapnas_": ["aggr1", "aggr2"]}}),
        )
        .await;
        sim.set_fail_rules(vec![FailRule::parse("volume-create@aggr1:1.0").unwrap()]);
        let mut fell_through = false;
        for i in 0..30 {
            let before = sim.calls("volume-create");
            let v = add_volume(&client, &server, &format!("any-{i}"), "nas-any", json!({})).await;
            assert_eq!(v["pool"], "aggr2", "{v}");
            assert_eq!(v["backend"], nas.as_str());
            if sim.calls("volume-create") - before == 2 {
                fell_through = true;
                break;
            }
        }
        assert!(fell_through, "the scheduler never tried aggr1 first");
        sim.set_fail_rules(vec![]);
    }

    // Deleting through storch removes the FlexVol, the qtree and the LUN.
    for name in ["gold-0", "eco-1", "lun-1"] {
        let r = client
            .delete(format!("{}/trident/v1/volume/{name}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{name}");
    }
    let arr = sim.array();
    let svm = &arr.svms["svm0"];
    assert!(!svm.volumes.contains_key("trident_gold_0"));
    assert!(!svm.luns.contains_key("/vol/storch_lun_1/lun0"));
    assert!(
        !svm.volumes
            .keys()
            .any(|v| v.starts_with("trident_qtree_pool_")),
        "the emptied economy FlexVol is pruned"
    );
    drop(server);
}

async fn sigkill_under_load_leaves_no_orphan_on_the_array(api: Api) {
    let _heavy = crate::support::heavy();
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("array.json");
    let sim = sim(tmp.path(), Some(state.clone()), api).await;
    let crash = CrashLoop {
        rounds: crate::support::rounds("STORCH_ONTAP_CRASH_ROUNDS", 5),
        clients: 6,
        size: "100Mi",
        backend: pointed(&sim, "backend-ontap-nas.json", true),
        class: "nas-all",
        class_attributes: json!({"backendType": "ontap-nas"}),
        kill_while_starting_every: None,
        load_ms: (150, 500),
        drift: true,
    };
    let internal = |n: &str| storch::drivers::ontap::ontap_internal_name("trident_", n);
    // The simulated array holds exactly what storch knows, and says so in its state file too.
    let on_array = crash
        .run(&tmp.path().join("data"), internal, async || {
            array_volumes(&sim, "svm0").into_iter().collect()
        })
        .await;
    sim.stop().await;
    let on_disk: storch::sim::ontap::Array =
        serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    let persisted: BTreeSet<String> = on_disk.svms["svm0"]
        .volumes
        .iter()
        .filter(|(_, v)| !v.is_root)
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(persisted, on_array, "the state file matches");
}

crate::over_both_apis!(
    trident_backend_files_classes_and_fallthrough,
    sigkill_under_load_leaves_no_orphan_on_the_array,
);

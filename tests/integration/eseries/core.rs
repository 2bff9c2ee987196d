//! The eseries-iscsi driver under the core, against the `storch-sim eseries` binary:
//! `examples/backend-eseries.json` (Trident's file, pointed at the simulator) is a working
//! backend whose shown config holds neither password; media classes choose the pools; a
//! volume gets iSCSI access (the target's IQN, the `hostDataIP` portal, the array's LUN) and
//! its meta tags name it; resize expands it; a delete leaves nothing on the array. Clones need
//! the `offerClones` opt-in.

use serde_json::{Value, json};
use storch::actors::RequestCtx;
use storch::model::{StorageClassConfig, VolumeConfig};

use crate::support::eseries::{CONTROLLERS, EseriesSim};
use crate::support::*;

fn ctx() -> RequestCtx {
    RequestCtx::random()
}

/// The example file with the simulator's address, controllers and portal.
pub(crate) fn example(sim: &EseriesSim) -> Value {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/backend-eseries.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (host, port) = sim.host_port();
    doc["webProxyHostname"] = json!(host);
    doc["webProxyPort"] = json!(port.to_string());
    doc["controllerA"] = json!(CONTROLLERS[0]);
    doc["controllerB"] = json!(CONTROLLERS[1]);
    doc["hostDataIP"] = json!("10.0.1.10");
    doc["passwordArray"] = json!("array-secret-canary");
    doc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_backend_serves_media_classes_with_iscsi_volumes() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(
        dir.path(),
        true,
        &[
            "--pools",
            "pool_ssd:ssd:64GiB,pool_hdd:hdd:64GiB:raidDiskPool,spare:ssd:8GiB",
            "--array-password",
            "array-secret-canary",
        ],
    );
    let rt = start(&dir.path().join("core")).await;
    let core = rt.core();
    let name = core.add_backend(&ctx(), example(&sim)).await.unwrap();
    assert_eq!(name, "eseries_10.0.1.10");
    let view = core.get_backend(&name).unwrap();
    let pools: Vec<&str> = view.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(pools, ["pool_hdd", "pool_ssd"]);
    let shown = view.config.to_string();
    assert!(
        !shown.contains("canary") && !shown.contains(storch::sim::eseries::DEFAULT_PASSWORD),
        "{shown}"
    );
    for media in ["ssd", "hdd"] {
        let class = json!({"name": format!("eseries-{media}"),
            "attributes": {"media": media, "backendType": "eseries-iscsi"}});
        core.add_storage_class(
            &ctx(),
            StorageClassConfig::from_json(class.to_string().as_bytes()).unwrap(),
        )
        .await
        .unwrap();
    }
    let mut luns = Vec::new();
    for media in ["ssd", "hdd"] {
        let v = add_volume(
            &core,
            &ctx(),
            VolumeConfig {
                name: format!("vol_{media}"),
                size: "1Gi".into(),
                storage_class: format!("eseries-{media}"),
                ..VolumeConfig::default()
            },
        )
        .await
        .unwrap();
        assert_eq!(v.pool, format!("pool_{media}"));
        let internal = &v.config.internal_name;
        assert!(
            internal.starts_with("trident_") && internal.len() == 30,
            "{internal}"
        );
        let a = &v.config.access_information;
        assert!(a.iscsi_target_iqn.starts_with("iqn."), "{a:?}");
        assert_eq!(a.iscsi_target_portal, "10.0.1.10:3260");
        assert!(a.iscsi_lun_number > 0);
        luns.push(a.iscsi_lun_number);
    }
    assert_ne!(luns[0], luns[1], "one LUN per volume in the host group");
    let grown = resize_volume(&core, &ctx(), "vol_ssd", "2Gi")
        .await
        .unwrap();
    let (_, systems) = sim.request("GET", "/storage-systems", None).await;
    let id = systems[0]["id"].as_str().unwrap();
    let volumes = format!("/storage-systems/{id}/volumes");
    let (_, vols) = sim.request("GET", &volumes, None).await;
    let on_array = vols
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["label"] == grown.config.internal_name.as_str())
        .unwrap();
    assert_eq!(on_array["capacity"], (2u64 << 30).to_string(), "expanded");
    let tags = on_array["metadata"].to_string();
    assert!(
        tags.contains("vol_ssd") && tags.contains("storch"),
        "{tags}"
    );
    core.delete_volume(&ctx(), "vol_ssd").await.unwrap();
    core.delete_volume(&ctx(), "vol_hdd").await.unwrap();
    let (_, vols) = sim.request("GET", &volumes, None).await;
    assert_eq!(vols, json!([]), "deleted");
    rt.shutdown().await;
}

/// Clones through the core: Trident's pools offer `clones=false`, so the core refuses them;
/// with `offerClones` on an array that has volume copy jobs, a clone is a full copy in the
/// source's pool with its own LUN.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_need_the_opt_in_and_copy_the_volume() {
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(
        dir.path(),
        true,
        &[
            "--pools",
            "pool_ssd:ssd:64GiB",
            "--array-password",
            "array-secret-canary",
        ],
    );
    let rt = start(&dir.path().join("core")).await;
    let core = rt.core();
    let mut doc = example(&sim);
    doc["backendName"] = json!("es");
    core.add_backend(&ctx(), doc.clone()).await.unwrap();
    let class = json!({"name": "eseries", "attributes": {"backendType": "eseries-iscsi"}});
    core.add_storage_class(
        &ctx(),
        StorageClassConfig::from_json(class.to_string().as_bytes()).unwrap(),
    )
    .await
    .unwrap();
    let source = VolumeConfig {
        name: "src".into(),
        size: "1Gi".into(),
        storage_class: "eseries".into(),
        ..VolumeConfig::default()
    };
    add_volume(&core, &ctx(), source).await.unwrap();
    let clone = |name: &str| VolumeConfig {
        name: name.into(),
        clone_source_volume: "src".into(),
        ..VolumeConfig::default()
    };
    match add_volume(&core, &ctx(), clone("copy1")).await {
        Err(e) => assert!(e.to_string().contains("does not offer clones"), "{e}"),
        Ok(v) => panic!("cloned without the opt-in: {v:?}"),
    }
    doc["offerClones"] = json!(true);
    core.update_backend(&ctx(), "es", doc).await.unwrap();
    let copy = add_volume(&core, &ctx(), clone("copy2")).await.unwrap();
    let src = core.get_volume("src").unwrap();
    let (a, b) = (
        &src.config.access_information,
        &copy.config.access_information,
    );
    assert_eq!(a.iscsi_target_iqn, b.iscsi_target_iqn);
    assert_ne!(a.iscsi_lun_number, b.iscsi_lun_number);
    core.delete_volume(&ctx(), "copy2").await.unwrap();
    core.delete_volume(&ctx(), "src").await.unwrap();
    rt.shutdown().await;
}

//! The Controller against every other kind of backend: `local` on real directories and the
//! SolidFire, E-Series and NexentaStor simulator binaries. One lifecycle for each — a volume
//! (raw block where the family attaches over iSCSI), a snapshot where the family offers them,
//! an expansion, a publish to a node with its initiator (the array grants it where it needs
//! to), GetVolume naming the node, an unpublish, the deletes — and what the array holds at
//! the end is what it held at the start. Its steps (`create_volume`, `snapshot`, `expand`,
//! `publish_twice`, `delete_snapshot`) are the ONTAP lifecycle's too (`ontap`).

use std::collections::BTreeSet;

use serde_json::{Value, json};
use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::{
    ControllerExpandVolumeRequest, ControllerExpandVolumeResponse, ControllerPublishVolumeResponse,
    CreateSnapshotRequest, CreateVolumeRequest, DeleteSnapshotRequest, Snapshot, Volume,
    VolumeCapability,
};

use super::publish::{publish_req, published_nodes, unpublish_req};
use super::{Csi, block, create_request, mount, range, unique};

const NODE: &str = "worker-1,iqn.1993-08.org.debian:01:worker1";

/// What differs between the families in the lifecycle.
struct Family {
    /// A backend named `be`.
    backend: Value,
    capability: VolumeCapability,
    attachment: &'static str,
    snapshots: bool,
    /// Flags of `storch serve` the backend needs (a local backend's `--local-root`).
    serve_args: Vec<String>,
}

pub(super) const GIB: i64 = 1 << 30;

/// CreateVolume of `name` with one capability and 1 GiB, which must succeed.
pub(super) async fn create_volume(
    csi: &Csi,
    name: &str,
    capability: VolumeCapability,
    tune: impl FnOnce(&mut CreateVolumeRequest),
) -> Volume {
    let mut request = CreateVolumeRequest {
        capacity_range: range(GIB, 0),
        volume_capabilities: vec![capability],
        ..create_request(&unique(name))
    };
    tune(&mut request);
    let mut c = csi.controller.clone();
    c.create_volume(request)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
}

/// CreateSnapshot of `volume_id`, which must succeed and be ready to use.
pub(super) async fn snapshot(csi: &Csi, volume_id: &str, name: &str) -> Snapshot {
    let request = CreateSnapshotRequest {
        source_volume_id: volume_id.to_string(),
        name: unique(name),
        ..CreateSnapshotRequest::default()
    };
    let mut c = csi.controller.clone();
    let snap = c
        .create_snapshot(request)
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert!(snap.ready_to_use);
    snap
}

pub(super) async fn delete_snapshot(csi: &Csi, snapshot_id: String) {
    let request = DeleteSnapshotRequest {
        snapshot_id,
        ..Default::default()
    };
    csi.controller
        .clone()
        .delete_snapshot(request)
        .await
        .unwrap();
}

/// ControllerExpandVolume to 2 GiB, which must succeed with at least that capacity.
pub(super) async fn expand(csi: &Csi, volume_id: &str) -> ControllerExpandVolumeResponse {
    let grow = ControllerExpandVolumeRequest {
        volume_id: volume_id.to_string(),
        capacity_range: range(2 * GIB, 0),
        ..ControllerExpandVolumeRequest::default()
    };
    let mut c = csi.controller.clone();
    let grown = c.controller_expand_volume(grow).await.unwrap().into_inner();
    assert!(grown.capacity_bytes >= 2 * GIB, "{grown:?}");
    grown
}

/// ControllerPublishVolume to `node`, twice: the same answer both times (idempotent), whose
/// context keys are all storch's.
pub(super) async fn publish_twice(
    csi: &Csi,
    volume_id: &str,
    node: &str,
    capability: VolumeCapability,
) -> ControllerPublishVolumeResponse {
    let publish = publish_req(volume_id, node, capability, false);
    let mut c = csi.controller.clone();
    let first = c
        .controller_publish_volume(publish.clone())
        .await
        .unwrap()
        .into_inner();
    let again = c
        .controller_publish_volume(publish)
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first, again, "a publish is idempotent");
    assert!(
        first
            .publish_context
            .keys()
            .all(|k| k.starts_with("storch.io/")),
        "{first:?}"
    );
    first
}

/// Runs the lifecycle on a storch with `family`'s backend; `on_array` lists what the array
/// holds, compared before and after.
async fn lifecycle(family: Family, on_array: impl AsyncFn() -> BTreeSet<String>) {
    let before = on_array().await;
    let args: Vec<&str> = family.serve_args.iter().map(String::as_str).collect();
    let csi = Csi::start_on(&args, &[family.backend]).await;
    let mut c = csi.controller.clone();
    let volume = create_volume(&csi, "vol", family.capability.clone(), |_| {}).await;
    assert_eq!(
        volume.volume_context["storch.io/attachment"],
        family.attachment
    );
    assert_eq!(volume.volume_context["storch.io/backend"], "be");
    assert_ne!(on_array().await, before, "the array holds the volume");

    let snapshot = if family.snapshots {
        Some(snapshot(&csi, &volume.volume_id, "snap").await.snapshot_id)
    } else {
        None
    };
    expand(&csi, &volume.volume_id).await;

    publish_twice(&csi, &volume.volume_id, NODE, family.capability.clone()).await;
    assert_eq!(published_nodes(&csi, &volume.volume_id).await, [NODE]);
    for _ in 0..2 {
        c.controller_unpublish_volume(unpublish_req(&volume.volume_id, NODE))
            .await
            .unwrap();
    }
    assert!(published_nodes(&csi, &volume.volume_id).await.is_empty());

    if let Some(snapshot_id) = snapshot {
        delete_snapshot(&csi, snapshot_id).await;
    }
    csi.delete(&volume.volume_id).await;
    assert_eq!(on_array().await, before, "nothing is left on the array");
}

/// The entries of a directory tree's `volumes` folders, recursively.
fn local_volumes(root: &std::path::Path) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(root.join("volumes")) else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_on_local_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("pools/fast");
    std::fs::create_dir_all(&pool).unwrap();
    let backend = json!({"version": 1, "storageDriverName": "local", "backendName": "be",
        "pools": {"fast": {"path": pool, "media": "ssd"}}});
    let family = Family {
        backend,
        capability: mount(Mode::SingleNodeWriter),
        attachment: "local",
        snapshots: true,
        serve_args: vec!["--local-root".into(), tmp.path().display().to_string()],
    };
    lifecycle(family, async || local_volumes(&pool)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_on_the_solidfire_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = crate::support::solidfire::sf_sim_in(
        tmp.path(),
        1 << 40,
        Some("trident"),
        Default::default(),
    )
    .await;
    let backend = crate::support::solidfire::sf_backend_ok(&sim, json!({"backendName": "be"}));
    let family = Family {
        backend,
        capability: block(Mode::SingleNodeWriter),
        attachment: "iscsi",
        snapshots: true,
        serve_args: Vec::new(),
    };
    let list = async || {
        let cluster = sim.cluster();
        cluster.volumes.values().map(|v| v.name.clone()).collect()
    };
    lifecycle(family, list).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_on_the_eseries_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = crate::support::eseries::EseriesSim::start(
        tmp.path(),
        true,
        &["--pools", "pool_ssd:ssd:64GiB"],
    );
    let backend = crate::support::eseries::es_backend(&sim, json!({"backendName": "be"}));
    let family = Family {
        backend,
        capability: block(Mode::SingleNodeWriter),
        attachment: "iscsi",
        snapshots: false,
        serve_args: Vec::new(),
    };
    let list = async || {
        let (_, systems) = sim.request("GET", "/storage-systems", None).await;
        let Some(id) = systems[0]["id"].as_str() else {
            return BTreeSet::new();
        };
        let (_, volumes) = sim
            .request("GET", &format!("/storage-systems/{id}/volumes"), None)
            .await;
        volumes
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["label"].as_str().unwrap().to_string())
            .collect()
    };
    lifecycle(family, list).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_on_the_nexentastor_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = crate::support::nexentastor::NexentaSim::start(
        tmp.path(),
        &["--volume-groups", "tank/csi:100GiB"],
    );
    // A host group of the operator's: a node outside it is published through its own.
    let hg = json!({"name": "hg-ops", "members": ["iqn.1993-08.org.debian:01:ops1"]});
    assert_eq!(sim.run("POST", "/san/hostgroups", Some(&hg)).await.0, 201);
    let backend = json!({
        "version": 1, "storageDriverName": "nexentastor-iscsi", "backendName": "be",
        "restIp": sim.url, "username": storch::sim::nexentastor::DEFAULT_USERNAME,
        "password": storch::sim::nexentastor::DEFAULT_PASSWORD,
        "defaultDataIp": "192.0.2.40", "defaultVolumeGroup": "tank/csi",
        "defaultHostGroup": "hg-ops", "dynamicTargetLunAllocation": true,
        "trustedCACertificate": sim.ca_pem(),
    });
    let family = Family {
        backend,
        capability: block(Mode::SingleNodeWriter),
        attachment: "iscsi",
        snapshots: true,
        serve_args: Vec::new(),
    };
    lifecycle(family, async || sim.zvols("tank/csi").await).await;
}

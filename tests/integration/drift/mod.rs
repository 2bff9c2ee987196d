//! Drift between the log and the arrays, for every driver: a volume destroyed on its array
//! (through the array's own API, while storch is stopped) shows `missing` after a restart and
//! comes back `online` when it reappears; nothing is deleted on that basis. `import` covers
//! orphans and import over REST and the CLI.

mod arrays;
mod import;

use std::path::Path;

use serde_json::{Value, json};
use storch::actors::{Core, CoreOptions, CoreRuntime, EventFilter, RequestCtx, VolumeState};
use storch::model::{StorageClassConfig, VolumeConfig};

use crate::support::*;

pub(crate) fn ctx() -> RequestCtx {
    RequestCtx::random()
}

/// A core on `dir` without the periodic comparison (only at each backend's start and on
/// request), so what a test sees is what it asked for.
pub(crate) async fn start_core(dir: &Path) -> CoreRuntime {
    start_with(CoreOptions {
        reconcile_interval: std::time::Duration::ZERO,
        ..opts(dir)
    })
    .await
}

/// Adds `backend` and a class `c` with `attributes`; answers the backend's name.
pub(crate) async fn add_backend_and_class(
    core: &Core,
    backend: Value,
    attributes: Value,
) -> String {
    let name = core
        .add_backend(&ctx(), backend)
        .await
        .expect("backend added");
    let class = json!({"name": "c", "attributes": attributes});
    core.add_storage_class(
        &ctx(),
        StorageClassConfig::from_json(class.to_string().as_bytes()).unwrap(),
    )
    .await
    .expect("class added");
    name
}

pub(crate) async fn add(core: &Core, name: &str, size: &str) -> storch::actors::VolumeView {
    add_volume(
        core,
        &ctx(),
        VolumeConfig {
            name: name.into(),
            size: size.into(),
            storage_class: "c".into(),
            ..VolumeConfig::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("volume {name}: {e}"))
}

pub(crate) fn state(core: &Core, name: &str) -> VolumeState {
    core.get_volume(name).expect("the volume is known").state
}

/// The kinds of volume `name`'s events, oldest first.
pub(crate) async fn kinds(core: &Core, name: &str) -> Vec<String> {
    core.events(EventFilter {
        object: Some(format!("volume/{name}")),
        ..EventFilter::default()
    })
    .await
    .unwrap()
    .into_iter()
    .map(|e| e.kind)
    .collect()
}

/// Waits until volume `name` is in `want`.
pub(crate) async fn wait_state(core: &Core, name: &str, want: VolumeState) {
    eventually(&format!("volume {name} {}", want.as_str()), async || {
        state(core, name) == want
    })
    .await;
}

/// A backend of some driver, and how to act on its array behind storch's back.
pub(crate) struct Array {
    /// The backend config.
    pub backend: Value,
    /// The class attributes that select its pools.
    pub class: Value,
    /// A size every driver of the family takes.
    pub size: &'static str,
}

impl Array {
    /// A second driver on the same array, built from the same config: what an operator's
    /// tools do to the array, through the array's own API.
    pub(crate) fn tool(&self) -> std::sync::Arc<dyn storch::drivers::StorageDriver> {
        storch::drivers::build_driver(&self.backend)
            .expect("the backend config builds")
            .driver
    }
}

/// The scenario every driver runs: four volumes; one is destroyed on the array while storch
/// is stopped; after the restart it is `missing` (with `VolumeMissing`, in the metrics'
/// numbers), the others stay `online`; a reconcile on request changes nothing more; a delete
/// of the missing volume succeeds (there is nothing to destroy) and the rest are untouched.
pub(crate) async fn destroyed_while_stopped_is_missing_after_restart(array: Array) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("core");
    let rt = start_core(&data).await;
    let core = rt.core();
    let backend = add_backend_and_class(&core, array.backend.clone(), array.class.clone()).await;
    // More volumes than the simulators' page (3), so the listing pages.
    let names = ["d1", "d2", "d3", "d4"];
    let mut views = Vec::new();
    for n in names {
        views.push(add(&core, n, array.size).await);
    }
    let internal: Vec<String> = views
        .iter()
        .map(|v| v.config.internal_name.clone())
        .collect();
    let report = core.reconcile_backend(&backend).await.unwrap();
    assert!(
        report.missing.is_empty() && report.changed.is_empty() && report.orphans.is_empty(),
        "a fresh backend has no drift: {report:?}"
    );
    assert!(report.listed >= names.len(), "{report:?}");
    rt.shutdown().await;

    match views[1].config.access_information.local_path.as_str() {
        // A local volume: its directory removed by hand.
        "" => array
            .tool()
            .destroy(&internal[1])
            .await
            .expect("destroyed on the array"),
        dir => std::fs::remove_dir_all(dir).expect("the volume's directory removed"),
    }

    let rt = start_core(&data).await;
    let core = rt.core();
    wait_state(&core, "d2", VolumeState::Missing).await;
    for n in ["d1", "d3", "d4"] {
        assert_eq!(state(&core, n), VolumeState::Online, "{n}");
    }
    assert!(
        kinds(&core, "d2")
            .await
            .contains(&"VolumeMissing".to_string())
    );
    assert_eq!(core.stats().missing_by_backend.get(&backend), Some(&1));
    let again = core.reconcile_backend(&backend).await.unwrap();
    assert!(
        again.missing.is_empty() && again.found.is_empty(),
        "{again:?}"
    );
    assert_eq!(state(&core, "d2"), VolumeState::Missing);
    // A missing volume cannot be resized or snapshotted; a delete just forgets it.
    assert!(resize_volume(&core, &ctx(), "d2", "2Gi").await.is_err());
    core.delete_volume(&ctx(), "d2").await.unwrap();
    assert!(core.get_volume("d2").is_err());
    assert_eq!(core.stats().missing_by_backend.get(&backend), Some(&0));
    let listed = array.tool().list_volumes().await.unwrap();
    for (i, n) in [(0, "d1"), (2, "d3"), (3, "d4")] {
        assert!(
            listed.iter().any(|v| v.internal_name == internal[i]),
            "{n} is still on the array"
        );
    }
    rt.shutdown().await;
}

/// A volume that reappears on the array is `online` again (`VolumeFound`); one resized on the
/// array behind storch's back takes the array's size (`VolumeChangedOnArray`).
pub(crate) async fn found_again_and_resized_on_the_array(array: Array) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("core");
    let rt = start_core(&data).await;
    let core = rt.core();
    let backend = add_backend_and_class(&core, array.backend.clone(), array.class.clone()).await;
    let v = add(&core, "back", array.size).await;
    let grown = add(&core, "grown", array.size).await;
    let tool = array.tool();
    let on_array = tool.get(&v.config.internal_name).await.unwrap().unwrap();
    tool.destroy(&v.config.internal_name).await.unwrap();
    let report = core.reconcile_backend(&backend).await.unwrap();
    assert_eq!(report.missing, ["back"], "{report:?}");
    assert_eq!(state(&core, "back"), VolumeState::Missing);

    let mut again =
        storch::drivers::testing::req(&v.config.internal_name, &on_array.pool, on_array.size_bytes);
    again.config.size = on_array.size_bytes.to_string();
    tool.create(&again).await.expect("made again on the array");
    let size = tool
        .get(&grown.config.internal_name)
        .await
        .unwrap()
        .unwrap()
        .size_bytes;
    tool.resize(&grown.config.internal_name, 2 * size)
        .await
        .expect("grown on the array");
    let report = core.reconcile_backend(&backend).await.unwrap();
    assert_eq!(report.found, ["back"], "{report:?}");
    assert_eq!(report.changed, ["grown"], "{report:?}");
    assert_eq!(state(&core, "back"), VolumeState::Online);
    let view = core.get_volume("grown").unwrap();
    let now = tool
        .get(&grown.config.internal_name)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.config.size, now.size_bytes.to_string());
    assert!(
        kinds(&core, "grown")
            .await
            .contains(&"VolumeChangedOnArray".to_string())
    );
    assert!(
        kinds(&core, "back")
            .await
            .ends_with(&["VolumeFound".to_string()])
    );
    rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fake_backend_without_state_loses_its_volumes_at_restart_and_shows_them_missing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("core");
    let rt = start_core(&data).await;
    let core = rt.core();
    let backend = fake_backend("mem", "file", &[("p1", ssd())]);
    add_backend_and_class(&core, backend, json!({"media": "ssd"})).await;
    add(&core, "v1", "1Gi").await;
    add(&core, "v2", "1Gi").await;
    rt.shutdown().await;
    let rt = start_core(&data).await;
    let core = rt.core();
    wait_state(&core, "v1", VolumeState::Missing).await;
    wait_state(&core, "v2", VolumeState::Missing).await;
    assert_eq!(core.stats().missing_by_backend.get("mem"), Some(&2));
    // Nothing was deleted: both are still there to see.
    assert_eq!(core.list_volumes().unwrap(), ["v1", "v2"]);
    rt.shutdown().await;
}

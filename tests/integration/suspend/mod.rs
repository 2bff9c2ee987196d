//! Backend suspension (`POST /trident/v1/backend/{b}/state`, `storch update backend NAME
//! --state`): a suspended backend takes no new volumes but serves its own (deletes, snapshots,
//! clones, resizes); explain says why its pools are out; the state survives restarts. Here the
//! core in-process; `rest` the route on a real socket; `frontends` the CLI, CSI (with
//! `/metrics`) and Kubernetes refusals.

mod frontends;
mod rest;

use serde_json::{Value, json};
use storch::actors::{Core, CoreError, EventFilter, RequestCtx};
use storch::model::{StorageClassConfig, UserState, VolumeConfig};

use crate::support::*;

pub(crate) fn ctx() -> RequestCtx {
    RequestCtx::random()
}

/// Offers of an SSD pool that makes snapshots and clones.
pub(crate) fn cloning_ssd() -> Value {
    let mut offers = ssd();
    offers["clones"] = json!({"offer": true});
    offers
}

fn class(body: Value) -> StorageClassConfig {
    StorageClassConfig::from_json(body.to_string().as_bytes()).expect("valid class")
}

fn volume(name: &str, class: &str) -> VolumeConfig {
    VolumeConfig {
        name: name.into(),
        size: "1Gi".into(),
        storage_class: class.into(),
        ..VolumeConfig::default()
    }
}

/// Backends `a` and `b` (one cloning SSD pool `p1` each), class `fast` on both and `a-only`.
async fn two_backends(core: &Core) {
    for name in ["a", "b"] {
        let doc = fake_backend(name, "file", &[("p1", cloning_ssd())]);
        core.add_backend(&ctx(), doc).await.unwrap();
    }
    let fast = class(json!({"name": "fast", "attributes": {"media": "ssd"}}));
    core.add_storage_class(&ctx(), fast).await.unwrap();
    let a_only = class(json!({"name": "a-only", "storagePools": {"a": ["p1"]}}));
    core.add_storage_class(&ctx(), a_only).await.unwrap();
}

/// The kinds of backend `name`'s events, oldest first.
async fn backend_kinds(core: &Core, name: &str) -> Vec<String> {
    let filter = EventFilter {
        object: Some(format!("backend/{name}")),
        ..EventFilter::default()
    };
    let events = core.events(filter).await.unwrap();
    events.into_iter().map(|e| e.kind).collect()
}

/// The reasons explain gives for backend `backend`'s pool `p1` in `class`.
fn reasons(core: &Core, class: &str, backend: &str) -> Vec<String> {
    let explanation = core
        .explain(class, storch::model::Protocol::Any, None)
        .unwrap();
    let pool = explanation
        .pools
        .into_iter()
        .find(|p| p.backend == backend && p.pool == "p1")
        .expect("the pool is explained");
    assert_eq!(pool.candidate, pool.reasons.is_empty());
    pool.reasons
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_backend_takes_no_new_volumes_but_serves_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    two_backends(&core).await;
    let v1 = add_volume(&core, &ctx(), volume("v1", "a-only"))
        .await
        .unwrap();
    assert_eq!(v1.backend, "a");

    let view = core
        .set_backend_state(&ctx(), "a", UserState::Suspended)
        .await
        .unwrap();
    assert_eq!(view.user_state, UserState::Suspended);
    assert!(view.online, "still Trident-online: not deleted");
    let head = core.log_head();
    // The same state again records nothing.
    core.set_backend_state(&ctx(), "a", UserState::Suspended)
        .await
        .unwrap();
    assert_eq!(
        core.log_head(),
        head,
        "an idempotent suspend records nothing"
    );
    assert!(
        backend_kinds(&core, "a")
            .await
            .ends_with(&["BackendSuspended".to_string()])
    );
    assert_eq!(core.list_backends().unwrap(), ["a", "b"], "still listed");
    assert_eq!(core.stats().suspended_by_backend.get("a"), Some(&true));
    assert_eq!(core.stats().suspended_by_backend.get("b"), Some(&false));

    // New volumes go elsewhere; a class only `a` serves is refused for good, not "starting".
    for i in 0..6 {
        let v = add_volume(&core, &ctx(), volume(&format!("f{i}"), "fast"))
            .await
            .unwrap();
        assert_eq!(v.backend, "b", "f{i} landed on the suspended backend");
    }
    match add_volume(&core, &ctx(), volume("nowhere", "a-only")).await {
        Err(CoreError::Failed(m)) => {
            assert!(m.contains("a suspended by the operator"), "{m}");
            assert!(m.contains("storch explain storageclass a-only"), "{m}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(core.get_volume("nowhere").is_err(), "nothing recorded");
    let why = reasons(&core, "fast", "a");
    assert_eq!(
        why,
        ["backend a is suspended by the operator (no new volumes land there)"]
    );
    assert!(reasons(&core, "fast", "b").is_empty(), "b is a candidate");

    // Its own volumes are served: snapshot, clone (on the source's pool), resize, delete.
    let snap = create_snapshot(&core, &ctx(), "v1", "s1").await.unwrap();
    assert!(snap.created_ms.is_some());
    let mut copy = volume("v1-copy", "a-only");
    copy.clone_source_volume = "v1".into();
    copy.clone_source_snapshot = "s1".into();
    let copy = add_volume(&core, &ctx(), copy).await.unwrap();
    assert_eq!(copy.backend, "a", "a clone lives with its source");
    let grown = resize_volume(&core, &ctx(), "v1", "2Gi").await.unwrap();
    assert_eq!(grown.config.size, "2Gi");
    core.delete_volume(&ctx(), "v1-copy").await.unwrap();
    assert!(core.get_volume("v1-copy").is_err());

    match core
        .set_backend_state(&ctx(), "zz", UserState::Normal)
        .await
    {
        Err(CoreError::NotFound(m)) => assert_eq!(m, "backend zz was not found"),
        other => panic!("{other:?}"),
    }
    rt.shutdown().await;

    // It survives a restart (the checkpoint written at shutdown, and the log's replay).
    let rt = start(dir.path()).await;
    let core = rt.core();
    assert_eq!(
        core.get_backend("a").unwrap().user_state,
        UserState::Suspended
    );
    assert!(
        add_volume(&core, &ctx(), volume("late", "a-only"))
            .await
            .is_err()
    );
    let view = core
        .set_backend_state(&ctx(), "a", UserState::Normal)
        .await
        .unwrap();
    assert_eq!(view.user_state, UserState::Normal);
    assert!(
        backend_kinds(&core, "a")
            .await
            .ends_with(&["BackendResumed".to_string()])
    );
    assert!(reasons(&core, "fast", "a").is_empty());
    let back = add_volume(&core, &ctx(), volume("back", "a-only"))
        .await
        .unwrap();
    assert_eq!(back.backend, "a");
    rt.shutdown().await;
}

/// A suspension holds whatever the backend's health: a suspended backend whose driver cannot
/// start after a restart still refuses as suspended (an operator's decision, not a wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspension_is_the_reason_whatever_the_backends_health() {
    let dir = tempfile::tempdir().unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    let mut doc = fake_backend("slowstart", "file", &[("p1", ssd())]);
    doc["statePath"] = json!(dir.path().join("array.json"));
    core.add_backend(&ctx(), doc.clone()).await.unwrap();
    let only = class(json!({"name": "only", "storagePools": {"slowstart": ["p1"]}}));
    core.add_storage_class(&ctx(), only).await.unwrap();
    core.set_backend_state(&ctx(), "slowstart", UserState::Suspended)
        .await
        .unwrap();
    rt.shutdown().await;
    // The array's state file is unreadable at the next start: the driver keeps failing.
    std::fs::write(dir.path().join("array.json"), "not json").unwrap();
    let rt = start(dir.path()).await;
    let core = rt.core();
    match add_volume(&core, &ctx(), volume("x", "only")).await {
        Err(CoreError::Failed(m)) => assert!(m.contains("suspended by the operator"), "{m}"),
        other => panic!("expected a final refusal, got {other:?}"),
    }
    rt.shutdown().await;
}

//! The fake Kubernetes API server (`support::fake_kube`) against a real `kube::Client`: the verbs
//! with their apiserver semantics, watch and kube-runtime's watcher (including recovery from a
//! compacted history), fault injection, the PV binder emulation and the kubeconfig file.

use std::time::Duration;

use crate::support::fake_kube::FakeKube;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

/// A failure guard, never a timing assertion.
const GUARD: Duration = Duration::from_secs(20);

fn pvc(name: &str, labels: Value) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "gold",
        },
    }))
    .unwrap()
}

fn pv(name: &str, claim: Option<&PersistentVolumeClaim>) -> PersistentVolume {
    let claim_ref = claim.map(|c| {
        json!({
            "kind": "PersistentVolumeClaim",
            "namespace": c.metadata.namespace,
            "name": c.metadata.name,
            "uid": c.metadata.uid,
        })
    });
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "gold",
            "persistentVolumeReclaimPolicy": "Delete",
            "csi": {"driver": "storch.example.com", "volumeHandle": name},
            "claimRef": claim_ref,
        },
    }))
    .unwrap()
}

fn api_code(result: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn phase(obj: &Option<Value>) -> Option<String> {
    obj.as_ref()?
        .pointer("/status/phase")?
        .as_str()
        .map(str::to_string)
}

#[tokio::test]
async fn verbs_have_apiserver_semantics() {
    let fake = FakeKube::start().await;
    let client = fake.client();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();

    let created = pvcs
        .create(&pp, &pvc("data", json!({"app": "db"})))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("default"));
    let rv1: u64 = meta.resource_version.as_deref().unwrap().parse().unwrap();
    assert_eq!(
        created.status.clone().unwrap().phase.as_deref(),
        Some("Pending")
    );

    assert_eq!(
        api_code(pvcs.create(&pp, &pvc("data", json!({}))).await),
        (409, "AlreadyExists".to_string())
    );
    let spec = created.spec.clone().unwrap();
    assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"), "defaulted");
    let mut nameless = pvc("x", json!({}));
    nameless.metadata.name = None;
    assert_eq!(api_code(pvcs.create(&pp, &nameless).await).0, 422);
    nameless.metadata.generate_name = Some("gen-".into());
    let generated = pvcs.create(&pp, &nameless).await.unwrap();
    let generated_name = generated.metadata.name.clone().unwrap();
    assert!(generated_name.starts_with("gen-") && generated_name.len() == 9);
    let mut elsewhere = pvc("y", json!({}));
    elsewhere.metadata.namespace = Some("other".into());
    assert_eq!(api_code(pvcs.create(&pp, &elsewhere).await).0, 400);

    // get, list with selectors, all-namespaces list.
    assert_eq!(
        pvcs.get("data").await.unwrap().metadata.uid,
        created.metadata.uid
    );
    assert_eq!(
        api_code(pvcs.get("nope").await),
        (404, "NotFound".to_string())
    );
    let other: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "other");
    other
        .create(&pp, &pvc("data", json!({"app": "web"})))
        .await
        .unwrap();
    let names = |list: kube::core::ObjectList<PersistentVolumeClaim>| {
        list.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let lp = ListParams::default();
    assert_eq!(
        names(pvcs.list(&lp.clone().labels("app=db")).await.unwrap()),
        ["data"]
    );
    assert_eq!(
        names(pvcs.list(&lp.clone().labels("app")).await.unwrap()),
        ["data"]
    );
    assert_eq!(
        names(pvcs.list(&lp.clone().labels("app!=db")).await.unwrap()),
        [generated_name.as_str()]
    );
    let all: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let everything = all.list(&lp).await.unwrap();
    assert_eq!(everything.items.len(), 3);
    assert!(everything.metadata.continue_.is_none());
    assert!(everything.metadata.resource_version.is_some());
    let in_other = all
        .list(&lp.clone().fields("metadata.namespace=other"))
        .await
        .unwrap();
    assert_eq!(names(in_other), ["data"]);
    let by_name = lp
        .clone()
        .fields("metadata.name=data,metadata.namespace=default");
    assert_eq!(names(all.list(&by_name).await.unwrap()), ["data"]);

    // replace: optimistic locking, and the main endpoint keeps the status.
    let mut stale = created.clone();
    let mut fresh = pvcs.get("data").await.unwrap();
    fresh
        .metadata
        .labels
        .get_or_insert_default()
        .insert("tier".into(), "1".into());
    fresh.status.get_or_insert_default().phase = Some("Bound".into());
    let replaced = pvcs.replace("data", &pp, &fresh).await.unwrap();
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    assert_eq!(replaced.status.unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(replaced.metadata.uid, created.metadata.uid);
    stale
        .metadata
        .labels
        .get_or_insert_default()
        .insert("tier".into(), "2".into());
    assert_eq!(
        api_code(pvcs.replace("data", &pp, &stale).await),
        (409, "Conflict".to_string())
    );
    // The PVC spec is immutable but for requests (see `claim_sizes_follow_the_apiserver_rules`).
    let mut changed = pvcs.get("data").await.unwrap();
    changed.spec.as_mut().unwrap().storage_class_name = Some("silver".into());
    assert_eq!(api_code(pvcs.replace("data", &pp, &changed).await).0, 422);

    // merge patch with a stale resourceVersion is a conflict; without one it applies.
    let patch = json!({"metadata": {"resourceVersion": rv1.to_string(), "labels": {"x": "y"}}});
    assert_eq!(
        api_code(
            pvcs.patch("data", &PatchParams::default(), &Patch::Merge(&patch))
                .await
        )
        .0,
        409
    );
    let patch = json!({"metadata": {"labels": {"x": "y", "tier": null}}});
    let merged = pvcs
        .patch("data", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let labels = merged.metadata.labels.unwrap();
    assert_eq!(labels.get("x").map(String::as_str), Some("y"));
    assert!(!labels.contains_key("tier"));

    // json patch: test + add + replace; a failing test is refused.
    let ops = json!([
        {"op": "test", "path": "/metadata/labels/x", "value": "y"},
        {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1"}},
        {"op": "replace", "path": "/metadata/labels/x", "value": "w"},
    ]);
    let patched = pvcs
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(ops).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.annotations.unwrap()["a/b"], "1");
    assert_eq!(patched.metadata.labels.unwrap()["x"], "w");
    let ops = json!([{"op": "test", "path": "/metadata/labels/x", "value": "z"}]);
    let failed = pvcs
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(ops).unwrap()),
        )
        .await;
    assert_eq!(api_code(failed).0, 422);

    // strategic merge and server-side apply (which also creates).
    let patch = json!({"metadata": {"labels": {"s": "t"}}});
    pvcs.patch("data", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let applied = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "applied", "labels": {"via": "ssa"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    });
    let ssa = PatchParams::apply("storch-test").force();
    let made = pvcs
        .patch("applied", &ssa, &Patch::Apply(&applied))
        .await
        .unwrap();
    assert_eq!(made.metadata.labels.unwrap()["via"], "ssa");
    assert!(
        fake.get("persistentvolumeclaims", Some("default"), "applied")
            .is_some()
    );

    // status subresource: changes only the status.
    let patch = json!({"status": {"phase": "Bound"}, "metadata": {"labels": {"ignored": "1"}}});
    let with_status = pvcs
        .patch_status("data", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(with_status.status.unwrap().phase.as_deref(), Some("Bound"));
    assert!(!with_status.metadata.labels.unwrap().contains_key("ignored"));
    let got = pvcs.get_status("data").await.unwrap();
    assert_eq!(got.status.unwrap().phase.as_deref(), Some("Bound"));

    // a write that changes nothing does not bump the resourceVersion.
    let before = fake.resource_version();
    let same = json!({"metadata": {"labels": {"s": "t"}}});
    pvcs.patch("data", &PatchParams::default(), &Patch::Merge(&same))
        .await
        .unwrap();
    assert_eq!(fake.resource_version(), before);

    // delete: the object back, then 404; finalizers hold the object until they are gone.
    let deleted = pvcs.delete("data", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        deleted.left().unwrap().metadata.name.as_deref(),
        Some("data")
    );
    assert_eq!(api_code(pvcs.get("data").await).0, 404);
    assert_eq!(
        api_code(pvcs.delete("data", &DeleteParams::default()).await).0,
        404
    );
    let mut held = pvc("held", json!({}));
    held.metadata.finalizers = Some(vec!["storch/test".into()]);
    pvcs.create(&pp, &held).await.unwrap();
    pvcs.delete("held", &DeleteParams::default()).await.unwrap();
    let marked = pvcs.get("held").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    let patch = json!({"metadata": {"finalizers": null}});
    pvcs.patch("held", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(api_code(pvcs.get("held").await).0, 404);

    // cluster-scoped and other groups.
    let classes: Api<StorageClass> = Api::all(client.clone());
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "gold"}, "provisioner": "storch.example.com",
    }))
    .unwrap();
    let class = classes.create(&pp, &class).await.unwrap();
    assert_eq!(class.reclaim_policy.as_deref(), Some("Delete"), "defaulted");
    assert_eq!(classes.list(&lp).await.unwrap().items.len(), 1);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "storch");
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}))
            .unwrap();
    secrets.create(&pp, &secret).await.unwrap();
    assert!(fake.get("secrets", Some("storch"), "s").is_some());
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), "default");
    let event = serde_json::from_value(json!({
        "metadata": {"name": "e1"}, "eventTime": "2025-01-01T00:00:00.000000Z",
        "reason": "Provisioned", "action": "Provision", "type": "Normal",
        "reportingController": "storch", "reportingInstance": "storch-0",
    }))
    .unwrap();
    events.create(&pp, &event).await.unwrap();
    assert_eq!(fake.list("events.events.k8s.io", None).len(), 1);
    assert!(fake.list("events", None).is_empty());

    // an unknown path is a 404 Status.
    let request = hyper::Request::get("/apis/example.com/v1/widgets")
        .body(vec![])
        .unwrap();
    assert_eq!(api_code(client.request::<Value>(request).await).0, 404);

    let log = fake.requests();
    assert!(log.iter().any(|r| r.method == "PATCH"
        && r.resource.as_deref() == Some("persistentvolumeclaims")
        && r.status == 409));
    fake.shutdown().await;
}

#[tokio::test]
async fn raw_watch_streams_history_and_expires() {
    let fake = FakeKube::start().await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(fake.client(), "default");
    let pp = PostParams::default();
    pvcs.create(&pp, &pvc("a", json!({"app": "db"})))
        .await
        .unwrap();
    let rv = pvcs
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    pvcs.create(&pp, &pvc("b", json!({"app": "web"})))
        .await
        .unwrap();
    let patch = json!({"metadata": {"labels": {"app": "db"}}});
    pvcs.patch("b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    pvcs.delete("a", &DeleteParams::default()).await.unwrap();

    // From the list's resourceVersion with a selector: b moves into it (ADDED), a goes.
    let wp = WatchParams::default().labels("app=db").timeout(5);
    let mut stream = pvcs.watch(&wp, &rv).await.unwrap().boxed();
    let mut seen = Vec::new();
    while let Some(event) = tokio::time::timeout(GUARD, stream.next()).await.unwrap() {
        match event.unwrap() {
            WatchEvent::Added(p) => seen.push(format!("ADDED {}", p.metadata.name.unwrap())),
            WatchEvent::Modified(p) => seen.push(format!("MODIFIED {}", p.metadata.name.unwrap())),
            WatchEvent::Deleted(p) => seen.push(format!("DELETED {}", p.metadata.name.unwrap())),
            WatchEvent::Bookmark(_) => seen.push("BOOKMARK".into()),
            WatchEvent::Error(e) => panic!("{e:?}"),
        }
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen, ["ADDED b", "DELETED a"]);
    drop(stream);

    // From "0": the current objects as ADDED, then live changes until close_watches.
    let mut stream = pvcs
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(GUARD, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(first, WatchEvent::Added(ref p) if p.metadata.name.as_deref() == Some("b")));
    fake.wait_for(|f| f.open_watches() == 1, GUARD, "the watch registered")
        .await;
    pvcs.create(&pp, &pvc("c", json!({}))).await.unwrap();
    let live = tokio::time::timeout(GUARD, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(live, WatchEvent::Added(ref p) if p.metadata.name.as_deref() == Some("c")));
    fake.close_watches();
    let last = tokio::time::timeout(GUARD, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(last, WatchEvent::Bookmark(_)));
    assert!(
        tokio::time::timeout(GUARD, stream.next())
            .await
            .unwrap()
            .is_none()
    );

    // After compaction an old resourceVersion is 410 Expired, as an ERROR event.
    fake.compact();
    let mut stream = pvcs
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(GUARD, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
    assert!(
        tokio::time::timeout(GUARD, stream.next())
            .await
            .unwrap()
            .is_none()
    );
    fake.shutdown().await;
}

#[tokio::test]
async fn runtime_watcher_follows_changes_and_recovers_from_410() {
    let fake = FakeKube::start().await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(fake.client(), "default");
    let pp = PostParams::default();
    pvcs.create(&pp, &pvc("before", json!({}))).await.unwrap();

    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stream = watcher(pvcs.clone(), watcher::Config::default()).default_backoff();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            let line = match event {
                Ok(watcher::Event::Init) => "init".to_string(),
                Ok(watcher::Event::InitApply(p)) => format!("init {}", p.metadata.name.unwrap()),
                Ok(watcher::Event::InitDone) => "init-done".to_string(),
                Ok(watcher::Event::Apply(p)) => format!(
                    "apply {} {}",
                    p.metadata.name.unwrap(),
                    p.metadata
                        .labels
                        .unwrap_or_default()
                        .get("v")
                        .cloned()
                        .unwrap_or_default()
                ),
                Ok(watcher::Event::Delete(p)) => format!("delete {}", p.metadata.name.unwrap()),
                Err(e) => format!("error {e}"),
            };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut next_until = async |want: &str| -> Vec<String> {
        let mut got = Vec::new();
        loop {
            let line = tokio::time::timeout(GUARD, rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no {want:?} after {got:?}"))
                .unwrap();
            let done = line == want;
            got.push(line);
            if done {
                return got;
            }
        }
    };

    assert_eq!(
        next_until("init-done").await,
        ["init", "init before", "init-done"]
    );
    fake.wait_for(|f| f.open_watches() == 1, GUARD, "the watcher's watch")
        .await;
    pvcs.create(&pp, &pvc("p", json!({}))).await.unwrap();
    assert_eq!(next_until("apply p ").await, ["apply p "]);
    let patch = json!({"metadata": {"labels": {"v": "1"}}});
    pvcs.patch("p", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(next_until("apply p 1").await, ["apply p 1"]);
    pvcs.delete("p", &DeleteParams::default()).await.unwrap();
    assert_eq!(next_until("delete p").await, ["delete p"]);

    // Another actor writes while the watch is down (it cannot come back while watches fail)
    // and the history is compacted: the watcher's resumed watch gets 410, it relists and
    // carries on.
    fake.fail("WATCH", "persistentvolumeclaims", usize::MAX, 500);
    fake.close_watches();
    fake.put(
        "persistentvolumeclaims",
        json!({"metadata": {"name": "q", "namespace": "default"}, "spec": {}}),
    );
    fake.compact();
    fake.clear_failures();
    let relisted = next_until("init-done").await;
    assert!(
        relisted.iter().any(|l| l.contains("Expired")),
        "{relisted:?}"
    );
    assert!(relisted.contains(&"init q".to_string()), "{relisted:?}");
    fake.wait_for(|f| f.open_watches() == 1, GUARD, "the watcher's new watch")
        .await;
    let patch = json!({"metadata": {"labels": {"v": "2"}}});
    pvcs.patch("q", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(next_until("apply q 2").await, ["apply q 2"]);

    let lists = fake
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && !r.watch && r.name.is_none())
        .count();
    assert!(lists >= 2, "the watcher relisted");
    task.abort();
    let _ = task.await;
    fake.shutdown().await;
}

#[tokio::test]
async fn injected_failures_surface_as_api_errors() {
    let fake = FakeKube::start().await;
    let pvs: Api<PersistentVolume> = Api::all(fake.client());
    pvs.create(&PostParams::default(), &pv("pv-1", None))
        .await
        .unwrap();
    assert_eq!(
        phase(&fake.get("persistentvolumes", None, "pv-1")).as_deref(),
        Some("Available")
    );
    fake.fail("DELETE", "persistentvolumes", 2, 500);
    for _ in 0..2 {
        assert_eq!(
            api_code(pvs.delete("pv-1", &DeleteParams::default()).await),
            (500, "InternalError".to_string())
        );
    }
    pvs.delete("pv-1", &DeleteParams::default()).await.unwrap();
    fake.fail("LIST", "*", 1, 409);
    assert_eq!(api_code(pvs.list(&ListParams::default()).await).0, 409);
    // kube's client retries 429, 503 and 504 by itself.
    fake.fail("LIST", "persistentvolumes", 1, 503);
    assert!(
        pvs.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let failed: Vec<u16> = fake
        .requests()
        .iter()
        .filter(|r| r.status >= 500)
        .map(|r| r.status)
        .collect();
    assert_eq!(failed, [500, 500, 503]);
    fake.shutdown().await;
}

#[tokio::test]
async fn binder_binds_releases_and_loses() {
    let fake = FakeKube::start().await;
    let client = fake.client();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "apps");
    let pvs: Api<PersistentVolume> = Api::all(client);
    let pp = PostParams::default();

    let claim = pvcs.create(&pp, &pvc("data", json!({}))).await.unwrap();
    pvs.create(&pp, &pv("pv-data", Some(&claim))).await.unwrap();
    fake.wait_for(
        |f| {
            phase(&f.get("persistentvolumeclaims", Some("apps"), "data")).as_deref()
                == Some("Bound")
        },
        GUARD,
        "the claim bound",
    )
    .await;
    let bound = pvcs.get("data").await.unwrap();
    assert_eq!(bound.spec.unwrap().volume_name.as_deref(), Some("pv-data"));
    let status = bound.status.unwrap();
    assert_eq!(status.capacity.unwrap()["storage"].0, "1Gi");
    assert_eq!(status.access_modes.unwrap(), ["ReadWriteOnce"]);
    assert_eq!(
        pvs.get("pv-data")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Bound")
    );

    pvcs.delete("data", &DeleteParams::default()).await.unwrap();
    fake.wait_for(
        |f| phase(&f.get("persistentvolumes", None, "pv-data")).as_deref() == Some("Released"),
        GUARD,
        "the volume released",
    )
    .await;

    // A claim whose volume goes away is Lost; with the binder off nothing binds.
    let claim = pvcs.create(&pp, &pvc("other", json!({}))).await.unwrap();
    pvs.create(&pp, &pv("pv-other", Some(&claim)))
        .await
        .unwrap();
    pvs.delete("pv-other", &DeleteParams::default())
        .await
        .unwrap();
    fake.wait_for(
        |f| {
            phase(&f.get("persistentvolumeclaims", Some("apps"), "other")).as_deref()
                == Some("Lost")
        },
        GUARD,
        "the claim lost",
    )
    .await;
    fake.set_binder(false);
    let claim = pvcs.create(&pp, &pvc("manual", json!({}))).await.unwrap();
    pvs.create(&pp, &pv("pv-manual", Some(&claim)))
        .await
        .unwrap();
    assert_eq!(
        pvcs.get("manual")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Pending")
    );
    fake.set_binder(true);
    assert_eq!(
        phase(&fake.get("persistentvolumeclaims", Some("apps"), "manual")).as_deref(),
        Some("Bound")
    );
    fake.shutdown().await;
}

/// A claim's request changes only while it is Bound, grows only in a class with
/// `allowVolumeExpansion: true` (the `PersistentVolumeClaimResize` admission), and goes down
/// only while it stays above `status.capacity`; its status is written through `/status`.
#[tokio::test]
async fn claim_sizes_follow_the_apiserver_rules() {
    let fake = FakeKube::start().await;
    let client = fake.client();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let classes: Api<StorageClass> = Api::all(client.clone());
    let pvs: Api<PersistentVolume> = Api::all(client);
    let pp = PostParams::default();
    for (name, allow) in [("gold", Some(true)), ("fixed", None)] {
        let sc: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": name},
            "provisioner": "storch.io/storch",
            "allowVolumeExpansion": allow,
        }))
        .unwrap();
        classes.create(&pp, &sc).await.unwrap();
    }
    let resize =
        |size: &str| Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": size}}}}));
    let params = PatchParams::default();

    // Not bound yet: the request is immutable.
    let claim = pvcs.create(&pp, &pvc("data", json!({}))).await.unwrap();
    let (code, _) = api_code(pvcs.patch("data", &params, &resize("2Gi")).await);
    assert_eq!(code, 422);
    pvs.create(&pp, &pv("pv-data", Some(&claim))).await.unwrap();
    fake.wait_for(
        |f| {
            phase(&f.get("persistentvolumeclaims", Some("default"), "data")).as_deref()
                == Some("Bound")
        },
        GUARD,
        "the claim bound",
    )
    .await;
    // Bound, in a class that allows expansion: it grows; a status patch records capacity.
    let grown = pvcs.patch("data", &params, &resize("3Gi")).await.unwrap();
    assert_eq!(
        grown.spec.unwrap().resources.unwrap().requests.unwrap()["storage"].0,
        "3Gi"
    );
    let status = Patch::Merge(json!({"status": {"capacity": {"storage": "2Gi"}}}));
    let patched = pvcs.patch_status("data", &params, &status).await.unwrap();
    assert_eq!(
        patched.status.unwrap().capacity.unwrap()["storage"].0,
        "2Gi"
    );
    // Down to status.capacity or below: refused; above it (a failed expansion's recovery): ok.
    assert_eq!(
        api_code(pvcs.patch("data", &params, &resize("2Gi")).await).0,
        422
    );
    assert_eq!(
        api_code(pvcs.patch("data", &params, &resize("1Gi")).await).0,
        422
    );
    let lowered = pvcs
        .patch("data", &params, &resize("2560Mi"))
        .await
        .unwrap();
    assert_eq!(
        lowered.spec.unwrap().resources.unwrap().requests.unwrap()["storage"].0,
        "2560Mi"
    );

    // A class without allowVolumeExpansion: growing is forbidden, by the admission.
    let mut fixed = pvc("small", json!({}));
    fixed.spec.as_mut().unwrap().storage_class_name = Some("fixed".into());
    let claim = pvcs.create(&pp, &fixed).await.unwrap();
    let mut volume = pv("pv-small", Some(&claim));
    volume.spec.as_mut().unwrap().storage_class_name = Some("fixed".into());
    pvs.create(&pp, &volume).await.unwrap();
    fake.wait_for(
        |f| {
            phase(&f.get("persistentvolumeclaims", Some("default"), "small")).as_deref()
                == Some("Bound")
        },
        GUARD,
        "the fixed claim bound",
    )
    .await;
    let (code, reason) = api_code(pvcs.patch("small", &params, &resize("2Gi")).await);
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        fake.get("persistentvolumeclaims", Some("default"), "small")
            .unwrap()["spec"]["resources"]["requests"]["storage"],
        "1Gi"
    );
    fake.shutdown().await;
}

#[tokio::test]
async fn kubeconfig_file_reaches_the_fake() {
    storch::net::install_crypto_provider();
    let fake = FakeKube::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = fake.kubeconfig(dir.path());
    let config = kube::Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&path).unwrap(),
        &KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(config.default_namespace, "storch");
    let client = kube::Client::try_from(config).unwrap();
    let leases: Api<Lease> = Api::default_namespaced(client.clone());
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "storch-leader"},
        "spec": {"holderIdentity": "storch-0", "leaseDurationSeconds": 15},
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let stored = fake.get("leases", Some("storch"), "storch-leader").unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], "storch-0");
    assert_eq!(stored["apiVersion"], "coordination.k8s.io/v1");
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.minor, "33");
    fake.shutdown().await;
}

#[tokio::test]
async fn kube_event_recorder_creates_then_patches_a_series() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    let fake = FakeKube::start().await;
    let reporter = Reporter {
        controller: "storch".into(),
        instance: Some("storch-0".into()),
    };
    let recorder = Recorder::new(fake.client(), reporter);
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolume".into()),
        name: Some("pv-1".into()),
        ..ObjectReference::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: "Provisioned".into(),
        note: Some("made it".into()),
        action: "Provision".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.unwrap();
    recorder.publish(&event, &reference).await.unwrap();
    // A cluster-scoped object's events go to "default", and the repeat patches the series.
    let events = fake.list("events.events.k8s.io", Some("default"));
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["series"]["count"], 2);
    assert_eq!(events[0]["reportingInstance"], "storch-0");
    let log = fake.requests();
    let methods: Vec<&str> = log.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, ["POST", "PATCH"]);
    fake.shutdown().await;
}

/// What `storch install`, `uninstall` and `logs` ask of the API server, answered as the
/// apiserver does: SelfSubjectAccessReviews (allowed unless a test denies), server-side apply
/// (a field manager required and recorded; the sole manager's next apply replaces what it
/// dropped, the status stays), the version, pod logs by container, and a deleted namespace
/// taking its objects with it.
#[tokio::test]
async fn install_verbs_have_apiserver_semantics() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::LogParams;
    let fake = FakeKube::start().await;
    let client = fake.client();
    // Access reviews.
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let ask = |verb: &str, ns: &str| -> SelfSubjectAccessReview {
        serde_json::from_value(json!({"spec": {"resourceAttributes":
            {"verb": verb, "group": "apps", "resource": "deployments", "namespace": ns}}}))
        .unwrap()
    };
    let allowed = async |review: SelfSubjectAccessReview| {
        reviews
            .create(&PostParams::default(), &review)
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    };
    assert!(allowed(ask("create", "storch")).await);
    fake.deny("create", "apps", "deployments", Some("storch"));
    assert!(!allowed(ask("create", "storch")).await);
    assert!(allowed(ask("create", "other")).await);
    assert!(allowed(ask("patch", "storch")).await);
    assert!(
        fake.list("selfsubjectaccessreviews", None).is_empty(),
        "reviews are not stored"
    );
    // Server-side apply.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "storch");
    let doc = |image: &str, extra_label: bool| {
        let mut labels = json!({"app": "storch"});
        if extra_label {
            labels["tier"] = json!("api");
        }
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "storch", "namespace": "storch", "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": "storch"}},
                     "template": {"metadata": {"labels": {"app": "storch"}},
                                  "spec": {"containers": [{"name": "storch", "image": image}]}}},
        })
    };
    let no_manager = deployments
        .patch(
            "storch",
            &PatchParams::default(),
            &Patch::Apply(&doc("storch:1", true)),
        )
        .await;
    assert_eq!(api_code(no_manager).0, 400);
    assert!(fake.get("deployments", Some("storch"), "storch").is_none());
    let ssa = PatchParams::apply("storch-install").force();
    deployments
        .patch("storch", &ssa, &Patch::Apply(&doc("storch:1", true)))
        .await
        .unwrap();
    let mut stored = fake.get("deployments", Some("storch"), "storch").unwrap();
    let fields = stored["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0]["manager"], "storch-install");
    assert_eq!(fields[0]["operation"], "Apply");
    stored["status"] = json!({"readyReplicas": 1});
    fake.put("deployments", stored);
    deployments
        .patch("storch", &ssa, &Patch::Apply(&doc("storch:2", false)))
        .await
        .unwrap();
    let stored = fake.get("deployments", Some("storch"), "storch").unwrap();
    assert_eq!(
        stored["spec"]["template"]["spec"]["containers"][0]["image"],
        "storch:2"
    );
    assert!(
        stored["metadata"]["labels"]["tier"].is_null(),
        "the dropped label stayed"
    );
    assert_eq!(stored["status"]["readyReplicas"], 1);
    assert_eq!(
        stored["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // The version.
    fake.set_version("1", "30");
    let info = client.apiserver_version().await.unwrap();
    assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", "30"));
    // Pod logs.
    fake.put("pods", json!({"metadata": {"name": "p", "namespace": "storch"},
        "spec": {"containers": [{"name": "storch", "image": "x"}, {"name": "side", "image": "y"}]}}));
    fake.set_log("storch", "p", "storch", "line one\n");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "storch");
    let lp = |c: &str| LogParams {
        container: Some(c.into()),
        ..LogParams::default()
    };
    assert_eq!(pods.logs("p", &lp("storch")).await.unwrap(), "line one\n");
    assert_eq!(pods.logs("p", &lp("side")).await.unwrap(), "");
    assert_eq!(api_code(pods.logs("p", &lp("nope")).await).0, 400);
    assert_eq!(
        api_code(pods.logs("p", &LogParams::default()).await).0,
        400,
        "two containers, none named"
    );
    assert_eq!(api_code(pods.logs("gone", &lp("storch")).await).0, 404);
    // A deleted namespace takes what is in it.
    fake.put("namespaces", json!({"metadata": {"name": "storch"}}));
    fake.put("namespaces", json!({"metadata": {"name": "other"}}));
    fake.put(
        "secrets",
        json!({"metadata": {"name": "kept", "namespace": "other"}}),
    );
    fake.remove("namespaces", None, "storch");
    assert!(fake.get("deployments", Some("storch"), "storch").is_none());
    assert!(fake.get("pods", Some("storch"), "p").is_none());
    assert!(fake.get("secrets", Some("other"), "kept").is_some());
}

//! Orphans and import over REST: an array volume storch does not know is listed with its
//! backend, pool and size; an import adopts it under a name and class (idempotent), refuses
//! what it must (naming the field), and `noManage` keeps it on the array when deleted. A
//! NexentaStor zvol made by hand is imported by the seed's volume handle.

use serde_json::{Value, json};
use storch::api::ServeOptions;

use super::{Array, add, add_backend_and_class, ctx, start_core};
use crate::support::http::{TestServer, delete, get, post};
use crate::support::nexentastor::NexentaSim;
use crate::support::*;

const GIB: u64 = 1 << 30;

/// A nexentastor-iscsi backend `nx` on `sim` (volume group `tank/csi`).
pub(crate) fn nexenta_backend(sim: &NexentaSim) -> Value {
    json!({
        "version": 1, "storageDriverName": "nexentastor-iscsi", "backendName": "nx",
        "restIp": sim.url, "username": "admin",
        "password": storch::sim::nexentastor::DEFAULT_PASSWORD,
        "defaultDataIp": "192.0.2.40", "defaultVolumeGroup": "tank/csi",
        "dynamicTargetLunAllocation": true,
        "trustedCACertificate": sim.ca_pem(),
    })
}

fn import_body(backend: &str, internal: &str, name: &str, class: &str, no_manage: bool) -> Value {
    json!({"backend": backend, "internalName": internal, "name": name,
           "storageClass": class, "noManage": no_manage})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_listed_and_imported_once_with_refusals_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("core");
    let mut backend = fake_backend("st", "file", &[("p1", ssd()), ("p2", hdd())]);
    backend["statePath"] = json!(dir.path().join("fake-array.json"));
    let array = Array {
        backend: backend.clone(),
        class: json!({"media": "ssd"}),
        size: "1Gi",
    };
    let rt = start_core(&data).await;
    let core = rt.core();
    add_backend_and_class(&core, backend, json!({"media": "ssd"})).await;
    let hdd_class = json!({"name": "slow", "attributes": {"media": "hdd"}});
    core.add_storage_class(
        &ctx(),
        storch::model::StorageClassConfig::from_json(hdd_class.to_string().as_bytes()).unwrap(),
    )
    .await
    .unwrap();
    add(&core, "owned", "1Gi").await;
    rt.shutdown().await;
    // Made on the array by hand while storch was stopped.
    array
        .tool()
        .create(&storch::drivers::testing::req("trident-legacy", "p1", GIB))
        .await
        .unwrap();

    let rt = start_core(&data).await;
    let core = rt.core();
    let s = TestServer::start(rt, ServeOptions::default()).await;
    let c = storch::net::client();
    let orphans = get(&c, &s.url("/trident/v1/orphan")).await;
    assert_eq!(orphans.status, 200, "{:?}", orphans.json);
    assert_eq!(
        orphans.json["orphans"],
        json!([{"backend": "st", "internalName": "trident-legacy", "pool": "p1",
                "size": GIB.to_string()}])
    );
    let import = s.url("/trident/v1/volume/import");
    for (body, status, says) in [
        (
            import_body("st", "trident-legacy", "legacy", "slow", true),
            400,
            "storageClass",
        ),
        (
            import_body("st", "trident-legacy", "legacy", "none", true),
            400,
            "storageClass",
        ),
        (
            import_body("nope", "trident-legacy", "legacy", "c", true),
            404,
            "backend nope",
        ),
        (
            import_body("st", "trident-nope", "legacy", "c", true),
            404,
            "trident-nope",
        ),
        (
            import_body("st", "trident-owned", "legacy", "c", true),
            409,
            "owned",
        ),
        (
            import_body("st", "trident-legacy", "", "c", true),
            400,
            "name",
        ),
        (
            import_body("st", "trident-legacy", "owned", "c", true),
            409,
            "owned",
        ),
        (
            json!({"volumeHandle": "st", "name": "x", "storageClass": "c"}),
            400,
            "volumeHandle",
        ),
        (
            json!({"internalName": "x", "name": "x", "storageClass": "c"}),
            400,
            "backend",
        ),
    ] {
        let a = post(&c, &import, body.clone()).await;
        assert_eq!(a.status, status, "{body}: {:?}", a.json);
        let error = a.json["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{body}: {error}");
    }
    assert!(
        core_volumes(&c, &s).await == ["owned"],
        "refusals changed nothing"
    );

    let first = post(
        &c,
        &import,
        import_body("st", "trident-legacy", "legacy", "c", true),
    )
    .await;
    assert_eq!(first.status, 201, "{:?}", first.json);
    let v = &first.json["volume"];
    assert_eq!(v["state"], "online");
    assert_eq!(v["managed"], false);
    assert_eq!(
        (v["backend"].as_str(), v["pool"].as_str()),
        (Some("st"), Some("p1"))
    );
    assert_eq!(v["Config"]["size"], GIB.to_string());
    assert_eq!(v["Config"]["internalName"], "trident-legacy");
    let again = post(
        &c,
        &import,
        import_body("st", "trident-legacy", "legacy", "c", true),
    )
    .await;
    assert_eq!(
        (again.status, &again.json),
        (201, &first.json),
        "idempotent"
    );
    let other = post(
        &c,
        &import,
        import_body("st", "trident-legacy", "other", "c", true),
    )
    .await;
    assert_eq!(other.status, 409);
    assert!(other.json["error"].as_str().unwrap().contains("legacy"));
    let orphans = get(&c, &s.url("/trident/v1/orphan")).await;
    assert_eq!(orphans.json["orphans"], json!([]));
    let kinds = super::kinds(&core, "legacy").await;
    assert_eq!(kinds, ["VolumeImported"]);

    // Not managed: a delete forgets it and the array keeps it (an orphan again).
    assert_eq!(
        delete(&c, &s.url("/trident/v1/volume/legacy")).await.status,
        200
    );
    let orphans = get(&c, &s.url("/trident/v1/orphan")).await;
    assert_eq!(orphans.json["orphans"][0]["internalName"], "trident-legacy");
    // Managed: a delete destroys it.
    let managed = post(
        &c,
        &import,
        import_body("st", "trident-legacy", "mine", "c", false),
    )
    .await;
    assert_eq!(managed.status, 201, "{:?}", managed.json);
    assert!(managed.json["volume"].get("managed").is_none());
    assert_eq!(
        delete(&c, &s.url("/trident/v1/volume/mine")).await.status,
        200
    );
    let orphans = get(&c, &s.url("/trident/v1/orphan")).await;
    assert_eq!(orphans.json["orphans"], json!([]));
    s.stop().await;
}

async fn core_volumes(c: &reqwest::Client, s: &TestServer) -> Vec<String> {
    let a = get(c, &s.url("/trident/v1/volume")).await;
    serde_json::from_value(a.json["volumes"].clone()).unwrap()
}

/// The NexentaStor seed's pre-provisioned volumes: a zvol made by hand, imported by its
/// volume handle `nx:tank/csi/NAME` and not managed, stays on the appliance when deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nexentastor_zvol_is_imported_by_its_volume_handle() {
    let dir = tempfile::tempdir().unwrap();
    let sim = NexentaSim::start(dir.path(), &[]);
    let (st, body) = sim
        .run(
            "POST",
            "/storage/volumes",
            Some(&json!({"path": "tank/csi/handmade", "volumeSize": GIB,
                "sparseVolume": true, "volumeBlockSize": 8192})),
        )
        .await;
    assert!(st < 300, "{st} {body}");
    let rt = start_core(&dir.path().join("core")).await;
    let core = rt.core();
    let s = TestServer::start(rt, ServeOptions::default()).await;
    add_backend_and_class(
        &core,
        nexenta_backend(&sim),
        json!({"backendType": "nexentastor-iscsi"}),
    )
    .await;
    let c = storch::net::client();
    let import = s.url("/trident/v1/volume/import");
    let wrong_pool = json!({"volumeHandle": "nx:tank/other/handmade", "name": "hm",
        "storageClass": "c", "noManage": true});
    assert_eq!(post(&c, &import, wrong_pool).await.status, 404);
    let body = json!({"volumeHandle": "nx:tank/csi/handmade", "name": "hm",
        "storageClass": "c", "noManage": true});
    let a = post(&c, &import, body.clone()).await;
    assert_eq!(a.status, 201, "{:?}", a.json);
    assert_eq!(a.json["volume"]["pool"], "tank/csi");
    assert_eq!(a.json["volume"]["Config"]["size"], GIB.to_string());
    assert_eq!(post(&c, &import, body).await.json, a.json, "idempotent");
    assert_eq!(
        delete(&c, &s.url("/trident/v1/volume/hm")).await.status,
        200
    );
    let (st, _) = sim
        .request(
            "GET",
            &format!(
                "/storage/volumes/{}",
                crate::support::nexentastor::esc("tank/csi/handmade")
            ),
            None,
        )
        .await;
    assert_eq!(st, 200, "an unmanaged volume stays on the appliance");
    s.stop().await;
}

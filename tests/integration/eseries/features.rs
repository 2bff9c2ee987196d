//! Expansion and volume copy jobs on an array that supports them, and their refusal on one
//! that does not.

use serde_json::{Value, json};

use super::sim::*;

fn nosuch_volume() -> String {
    format!("02{}", "0".repeat(38))
}

fn expand(size: u64, unit: &str) -> Value {
    json!({"expansionSize": size, "sizeUnit": unit})
}

/// Reads the expansion's progress until it is idle: the percentages seen.
async fn wait_expanded(a: &Sys, vref: &str) -> Vec<u64> {
    let path = format!("/volumes/{vref}/expand");
    let mut seen = Vec::new();
    loop {
        let p = a.get(&path).await;
        seen.push(p["percentComplete"].as_u64().unwrap());
        if p["action"] == "none" {
            assert_eq!(p["percentComplete"], 100);
            return seen;
        }
        assert_eq!(p["action"], "remappingDve");
        assert!(seen.len() < 10, "the expansion never completes: {seen:?}");
    }
}

#[tokio::test]
async fn an_expansion_takes_space_at_once_and_completes() {
    let a = Sys::start(&["--expand-polls", "3"]).await;
    let caps = a.get("/capabilities").await;
    assert!(
        caps["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("dynamicVolumeExpansion")),
        "{caps}"
    );
    let ssd = a.pool("vg_ssd").await;
    let v = a.volume(&ssd, "grow", 1).await;
    let path = format!("/volumes/{v}/expand");
    assert_eq!(a.get(&path).await["action"], "none", "idle");
    let refused = [
        (expand(1, "gb"), "invalidInput"),
        (expand(2, "GB"), "invalidInput"),
        (json!({"expansionSize": 2}), "invalidInput"),
        (
            json!({"expansionSize": 2, "sizeUnit": "gb", "priority": 1}),
            "invalidInput",
        ),
        (expand(11, "gb"), "insufficientCapacity"),
    ];
    for (body, retcode) in refused {
        a.refused("POST", &path, Some(body), 422, retcode).await;
    }
    let vol = a
        .ok("POST", &path, expand(2 * 1024 * 1024, "kb"), 200)
        .await;
    assert_eq!(vol["action"], "remappingDve");
    assert_eq!(vol["capacity"], GIB.to_string(), "not yet grown");
    a.refused(
        "POST",
        &path,
        Some(expand(3, "gb")),
        422,
        "operationInProgress",
    )
    .await;
    let p = a.get(&format!("/storage-pools/{ssd}")).await;
    assert_eq!(
        p["usedSpace"],
        (2 * GIB).to_string(),
        "the pool's space is taken at once"
    );
    assert_eq!(wait_expanded(&a, &v).await, [33, 66, 100]);
    assert_eq!(
        a.get(&format!("/volumes/{v}")).await["capacity"],
        (2 * GIB).to_string()
    );
    let gone = format!("/volumes/{}/expand", nosuch_volume());
    a.refused("GET", &gone, None, 404, "notFound").await;
    a.refused("POST", &gone, Some(expand(2, "gb")), 404, "notFound")
        .await;

    // Reads of the volume count as progress too.
    a.ok("POST", &path, expand(3, "gb"), 200).await;
    for _ in 0..3 {
        a.get(&format!("/volumes/{v}")).await;
    }
    assert_eq!(
        a.get(&format!("/volumes/{v}")).await["capacity"],
        (3 * GIB).to_string()
    );
}

#[tokio::test]
async fn a_copy_job_clones_onto_a_large_enough_target_and_completes() {
    let a = Sys::start(&["--copy-polls", "2"]).await;
    let caps = a.get("/capabilities").await;
    assert!(
        caps["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("volumeCopy")),
        "{caps}"
    );
    let ssd = a.pool("vg_ssd").await;
    let src = a.volume(&ssd, "src", 2).await;
    let small = a.volume(&ssd, "small", 1).await;
    let dst = a.volume(&ssd, "dst", 2).await;
    let job = |s: &str, t: &str| json!({"sourceId": s, "targetId": t, "copyPriority": "priority2"});
    let refused = [
        (job(&src, &small), "illegalParam"),
        (job(&src, &nosuch_volume()), "notFound"),
        (job(&src, &src), "invalidInput"),
        (json!({"sourceId": src}), "invalidInput"),
        (
            json!({"sourceId": src, "targetId": dst, "copyPriority": "urgent"}),
            "invalidInput",
        ),
    ];
    for (body, retcode) in refused {
        a.refused("POST", "/volume-copy-jobs", Some(body), 422, retcode)
            .await;
    }
    let j = a
        .ok("POST", "/volume-copy-jobs", job(&src, &dst), 200)
        .await;
    assert!(is_ref(&j["volcopyRef"], "18"), "{j}");
    assert_eq!(j["status"], "inProgress");
    assert_eq!(j["sourceVolume"], src.as_str());
    assert_eq!(j["targetVolume"], dst.as_str());
    assert_eq!(j["copyPriority"], "priority2");
    let jref = j["volcopyRef"].as_str().unwrap().to_string();
    a.refused(
        "POST",
        "/volume-copy-jobs",
        Some(job(&small, &dst)),
        422,
        "operationInProgress",
    )
    .await;
    a.refused(
        "DELETE",
        &format!("/volumes/{dst}"),
        None,
        422,
        "operationInProgress",
    )
    .await;
    let path = format!("/volume-copy-jobs/{jref}");
    let mut statuses = Vec::new();
    loop {
        let j = a.get(&path).await;
        statuses.push(j["status"].as_str().unwrap().to_string());
        if j["status"] == "complete" {
            assert_eq!(j["percentComplete"], 100);
            assert_ne!(j["copyCompleteTime"], "0");
            break;
        }
        assert!(statuses.len() < 10, "{statuses:?}");
    }
    assert_eq!(statuses, ["inProgress", "complete"]);
    assert_eq!(
        a.get("/volume-copy-jobs").await.as_array().unwrap().len(),
        1
    );
    let updated = a
        .ok("POST", &path, json!({"copyPriority": "priority4"}), 200)
        .await;
    assert_eq!(updated["copyPriority"], "priority4");
    let (s, _) = a.call("DELETE", &path, None).await;
    assert_eq!(s, 204);
    a.refused("GET", &path, None, 404, "notFound").await;
    let (s, _) = a.call("DELETE", &format!("/volumes/{dst}"), None).await;
    assert_eq!(s, 204, "no copy job holds it any more");
}

/// A job from a new 1 GiB volume onto another: its ref.
async fn job(a: &Sys) -> (String, Value) {
    let ssd = a.pool("vg_ssd").await;
    let (src, dst) = (a.volume(&ssd, "s", 1).await, a.volume(&ssd, "t", 1).await);
    let body = json!({"sourceId": src, "targetId": dst});
    let j = a.ok("POST", "/volume-copy-jobs", body, 200).await;
    (j["volcopyRef"].as_str().unwrap().to_string(), j)
}

#[tokio::test]
async fn the_control_endpoint_recopies_and_stops() {
    let a = Sys::start(&["--copy-polls", "5"]).await;
    let (r, j) = job(&a).await;
    assert_eq!(j["status"], "inProgress");
    let control = |c: &str| format!("/volume-copy-jobs-control/{r}?control={c}");
    let (s, j) = a.call("POST", &control("stop"), None).await;
    assert_eq!((s, j["status"].as_str()), (200, Some("stopped")), "{j}");
    a.refused("POST", &control("stop"), None, 422, "illegalParam")
        .await;
    a.refused("POST", &control("pause"), None, 422, "invalidInput")
        .await;
    let bare = format!("/volume-copy-jobs-control/{r}");
    a.refused("POST", &bare, None, 422, "invalidInput").await;
    let (s, j) = a.call("POST", &control("start"), None).await;
    assert_eq!((s, j["status"].as_str()), (200, Some("inProgress")), "{j}");
    assert_eq!(j["percentComplete"], 0, "a re-copy starts over");
    let gone = format!(
        "/volume-copy-jobs-control/18{}?control=start",
        "0".repeat(38)
    );
    a.refused("POST", &gone, None, 404, "notFound").await;

    let a = Sys::start(&["--copy-polls", "0"]).await;
    let (r, j) = job(&a).await;
    assert_eq!(j["status"], "complete", "0 polls complete at once");
    let (s, j) = a
        .call(
            "POST",
            &format!("/volume-copy-jobs-control/{r}?control=start"),
            None,
        )
        .await;
    assert_eq!((s, j["status"].as_str()), (200, Some("complete")), "{j}");
}

#[tokio::test]
async fn an_array_without_the_features_refuses_expand_and_copy() {
    let a = Sys::start(&["--features", "none"]).await;
    let caps = a.get("/capabilities").await;
    let list = caps["capabilities"].as_array().unwrap();
    assert!(!list.contains(&json!("volumeCopy")), "{caps}");
    assert!(!list.contains(&json!("dynamicVolumeExpansion")), "{caps}");
    let states = caps["featureStates"].as_array().unwrap();
    assert!(states.iter().all(|f| f["isEnabled"] == false), "{caps}");
    let ssd = a.pool("vg_ssd").await;
    let (v1, v2) = (a.volume(&ssd, "a", 1).await, a.volume(&ssd, "b", 1).await);
    let path = format!("/volumes/{v1}/expand");
    a.refused(
        "POST",
        &path,
        Some(expand(2, "gb")),
        422,
        "featureNotSupported",
    )
    .await;
    a.refused("GET", &path, None, 422, "featureNotSupported")
        .await;
    let job = json!({"sourceId": v1, "targetId": v2});
    a.refused(
        "POST",
        "/volume-copy-jobs",
        Some(job),
        422,
        "featureNotSupported",
    )
    .await;
    a.refused("GET", "/volume-copy-jobs", None, 422, "featureNotSupported")
        .await;
    assert_eq!(
        a.get(&format!("/volumes/{v1}")).await["capacity"],
        GIB.to_string()
    );
    let perms = &a.get(&format!("/volumes/{v1}")).await["perms"];
    assert_eq!(
        (perms["allowDVE"].as_bool(), perms["copySource"].as_bool()),
        (Some(false), Some(false))
    );

    let a = Sys::start(&["--features", "copy"]).await;
    let caps = a.get("/capabilities").await;
    assert!(
        caps["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("volumeCopy"))
    );
    assert_eq!(a.get("/volume-copy-jobs").await, json!([]));
    let ssd = a.pool("vg_ssd").await;
    let v = a.volume(&ssd, "a", 1).await;
    let path = format!("/volumes/{v}/expand");
    a.refused(
        "POST",
        &path,
        Some(expand(2, "gb")),
        422,
        "featureNotSupported",
    )
    .await;
}

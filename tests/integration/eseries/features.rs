//! Expansion and volume copy jobs on an array that supports them, and their refusal on one
//! that does not.

use serde_json::{Value, json};

use super::sim::*;
use crate::support::eseries::EseriesSim;

async fn wait_expanded(sim: &EseriesSim, id: &str, vref: &str) -> Value {
    let path = sys(id, &format!("/volumes/{vref}/expand"));
    let mut seen = Vec::new();
    loop {
        let (s, p) = sim.request("GET", &path, None).await;
        assert_eq!(s, 200, "{p}");
        seen.push(p["percentComplete"].as_u64().unwrap());
        if p["action"] == "none" {
            assert_eq!(p["percentComplete"], 100);
            return json!(seen);
        }
        assert_eq!(p["action"], "remappingDve");
        assert!(seen.len() < 10, "the expansion never completes: {seen:?}");
    }
}

#[tokio::test]
async fn expansion_and_volume_copy_where_the_array_supports_them() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, id) = registered(
        dir.path(),
        false,
        &["--expand-polls", "3", "--copy-polls", "2"],
    )
    .await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let (_, caps) = sim.request("GET", &sys(&id, "/capabilities"), None).await;
    let caps_list = caps["capabilities"].as_array().unwrap();
    assert!(
        caps_list.contains(&json!("volumeCopy"))
            && caps_list.contains(&json!("dynamicVolumeExpansion")),
        "{caps}"
    );
    let src = create(&sim, &id, &ssd, "src", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();

    let expand = |size: u64, unit: &str| json!({"expansionSize": size, "sizeUnit": unit});
    let epath = sys(&id, &format!("/volumes/{src}/expand"));
    assert_error(
        &sim.request("POST", &epath, Some(&expand(1, "gb"))).await,
        422,
        "invalidInput",
    );
    assert_error(
        &sim.request("POST", &epath, Some(&expand(2, "GB"))).await,
        422,
        "invalidInput",
    );
    assert_error(
        &sim.request("POST", &epath, Some(&json!({"expansionSize": 2})))
            .await,
        422,
        "invalidInput",
    );
    assert_error(
        &sim.request("POST", &epath, Some(&expand(11, "gb"))).await,
        422,
        "insufficientCapacity",
    );
    let (_, idle) = sim.request("GET", &epath, None).await;
    assert_eq!(idle["action"], "none");
    let (s, v) = sim
        .request("POST", &epath, Some(&expand(2 * 1024 * 1024, "kb")))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["action"], "remappingDve");
    assert_error(
        &sim.request("POST", &epath, Some(&expand(3, "gb"))).await,
        422,
        "operationInProgress",
    );
    let (_, p) = sim
        .request("GET", &sys(&id, &format!("/storage-pools/{ssd}")), None)
        .await;
    assert_eq!(
        p["usedSpace"],
        (2 * GIB).to_string(),
        "the pool's space is taken at once"
    );
    assert_eq!(wait_expanded(&sim, &id, &src).await, json!([33, 66, 100]));
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{src}")), None)
        .await;
    assert_eq!(v["capacity"], (2 * GIB).to_string());
    let nosuch = format!("02{}", "0".repeat(38));
    assert_error(
        &sim.request("GET", &sys(&id, &format!("/volumes/{nosuch}/expand")), None)
            .await,
        404,
        "notFound",
    );

    // A clone: a target at least as large, then a copy job that completes.
    let small = create(&sim, &id, &ssd, "small", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let dst = create(&sim, &id, &ssd, "dst", 2).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let job = |s: &str, t: &str| json!({"sourceId": s, "targetId": t, "copyPriority": "priority2"});
    let jobs = sys(&id, "/volume-copy-jobs");
    assert_error(
        &sim.request("POST", &jobs, Some(&job(&src, &small))).await,
        422,
        "illegalParam",
    );
    assert_error(
        &sim.request("POST", &jobs, Some(&job(&src, &nosuch))).await,
        422,
        "notFound",
    );
    assert_error(
        &sim.request("POST", &jobs, Some(&json!({"sourceId": src})))
            .await,
        422,
        "invalidInput",
    );
    assert_error(
        &sim.request(
            "POST",
            &jobs,
            Some(&json!({"sourceId": src, "targetId": dst, "copyPriority": "urgent"})),
        )
        .await,
        422,
        "invalidInput",
    );
    let (s, j) = sim.request("POST", &jobs, Some(&job(&src, &dst))).await;
    assert_eq!(s, 200, "{j}");
    assert!(is_ref(&j["volcopyRef"], "18"), "{j}");
    assert_eq!(j["status"], "inProgress");
    assert_eq!(
        (j["sourceVolume"].as_str(), j["targetVolume"].as_str()),
        (Some(src.as_str()), Some(dst.as_str()))
    );
    let jref = j["volcopyRef"].as_str().unwrap().to_string();
    assert_error(
        &sim.request("POST", &jobs, Some(&job(&small, &dst))).await,
        422,
        "operationInProgress",
    );
    assert_error(
        &sim.request("DELETE", &sys(&id, &format!("/volumes/{dst}")), None)
            .await,
        422,
        "operationInProgress",
    );
    let jpath = sys(&id, &format!("/volume-copy-jobs/{jref}"));
    let mut statuses = Vec::new();
    loop {
        let (s, j) = sim.request("GET", &jpath, None).await;
        assert_eq!(s, 200, "{j}");
        statuses.push(j["status"].as_str().unwrap().to_string());
        if j["status"] == "complete" {
            assert_eq!(j["percentComplete"], 100);
            assert_ne!(j["copyCompleteTime"], "0");
            break;
        }
        assert!(statuses.len() < 10, "{statuses:?}");
    }
    assert_eq!(statuses, ["inProgress", "complete"]);
    // Re-copy and stop through the control endpoint.
    let control = |c: &str| {
        sys(
            &id,
            &format!("/volume-copy-jobs-control/{jref}?control={c}"),
        )
    };
    let (s, j) = sim.request("POST", &control("start"), None).await;
    assert_eq!((s, j["status"].as_str()), (200, Some("inProgress")), "{j}");
    let (s, j) = sim.request("POST", &control("stop"), None).await;
    assert_eq!((s, j["status"].as_str()), (200, Some("stopped")), "{j}");
    assert_error(
        &sim.request("POST", &control("stop"), None).await,
        422,
        "illegalParam",
    );
    assert_error(
        &sim.request("POST", &control("pause"), None).await,
        422,
        "invalidInput",
    );
    let (_, list) = sim.request("GET", &jobs, None).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let (s, _) = sim.request("DELETE", &jpath, None).await;
    assert_eq!(s, 204);
    assert_error(&sim.request("GET", &jpath, None).await, 404, "notFound");
    let (s, _) = sim
        .request("DELETE", &sys(&id, &format!("/volumes/{dst}")), None)
        .await;
    assert_eq!(s, 204, "no copy job holds it any more");
}

#[tokio::test]
async fn an_array_without_the_features_refuses_expand_and_copy() {
    let dir = tempfile::tempdir().unwrap();
    let (sim, id) = registered(dir.path(), false, &["--features", "none"]).await;
    let ssd = pool_ref(&sim, &id, "vg_ssd").await;
    let (_, caps) = sim.request("GET", &sys(&id, "/capabilities"), None).await;
    let list = caps["capabilities"].as_array().unwrap();
    assert!(
        !list.contains(&json!("volumeCopy")) && !list.contains(&json!("dynamicVolumeExpansion")),
        "{caps}"
    );
    assert!(
        caps["featureStates"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["isEnabled"] == false),
        "{caps}"
    );
    let a = create(&sim, &id, &ssd, "a", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let b = create(&sim, &id, &ssd, "b", 1).await["volumeRef"]
        .as_str()
        .unwrap()
        .to_string();
    let epath = sys(&id, &format!("/volumes/{a}/expand"));
    let body = json!({"expansionSize": 2, "sizeUnit": "gb"});
    assert_error(
        &sim.request("POST", &epath, Some(&body)).await,
        422,
        "featureNotSupported",
    );
    assert_error(
        &sim.request("GET", &epath, None).await,
        422,
        "featureNotSupported",
    );
    let jobs = sys(&id, "/volume-copy-jobs");
    assert_error(
        &sim.request("POST", &jobs, Some(&json!({"sourceId": a, "targetId": b})))
            .await,
        422,
        "featureNotSupported",
    );
    assert_error(
        &sim.request("GET", &jobs, None).await,
        422,
        "featureNotSupported",
    );
    let (_, v) = sim
        .request("GET", &sys(&id, &format!("/volumes/{a}")), None)
        .await;
    assert_eq!(v["capacity"], GIB.to_string());

    // Only copy: expansion still refused.
    drop(sim);
    let (sim, id) = registered(dir.path(), false, &["--features", "copy"]).await;
    let (_, caps) = sim.request("GET", &sys(&id, "/capabilities"), None).await;
    assert!(
        caps["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("volumeCopy"))
    );
    let (s, _) = sim
        .request("GET", &sys(&id, "/volume-copy-jobs"), None)
        .await;
    assert_eq!(s, 200);
}

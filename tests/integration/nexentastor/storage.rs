//! Pools, read-only volume groups, zvols (create, space accounting, grow, delete), snapshots,
//! clones and promote, asynchronous jobs, paging and field projection, over real HTTPS.

use serde_json::json;

use super::sim::{GIB, Nx, assert_error};
use crate::support::nexentastor::esc;

fn vol(path: &str) -> String {
    format!("/storage/volumes/{}", esc(path))
}

fn snap(path: &str) -> String {
    format!("/storage/snapshots/{}", esc(path))
}

#[tokio::test]
async fn volume_groups_are_read_only_and_report_their_pool_space() {
    let nx = Nx::start(&[]);
    let v = nx.get("/storage/volumeGroups?path=tank%2Fcsi").await;
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{v}");
    assert_eq!(data[0]["path"], "tank/csi");
    assert_eq!(data[0]["bytesAvailable"], 10 * GIB);
    assert_eq!(data[0]["bytesUsed"], 0);
    let v = nx
        .get(&format!("/storage/volumeGroups/{}", esc("fast/vg")))
        .await;
    assert_eq!(v["bytesAvailable"], 4 * GIB, "{v}");
    // No data wrapper on a single object; a filter matching nothing is an empty list.
    assert!(v.get("data").is_none());
    assert_eq!(
        nx.get("/storage/volumeGroups?path=tank%2Fnope").await["data"],
        json!([])
    );
    nx.refused(
        "GET",
        &format!("/storage/volumeGroups/{}", esc("tank/nope")),
        None,
        404,
        "ENOENT",
    )
    .await;
    // Unescaped, a dataset path is several segments: no such resource.
    nx.refused("GET", "/storage/volumeGroups/tank/csi", None, 404, "ENOENT")
        .await;
    for m in ["POST", "PUT", "DELETE"] {
        let path = format!("/storage/volumeGroups/{}", esc("tank/csi"));
        let got = nx
            .sim
            .request(m, &path, Some(&json!({"path": "tank/csi"})))
            .await;
        assert_error(&got, 405, "EBADARG");
    }
    let pools = nx.get("/storage/pools?fields=poolName,health,status").await;
    assert_eq!(
        pools["data"],
        json!([{"poolName": "fast", "health": "ONLINE", "status": "ONLINE"},
               {"poolName": "tank", "health": "ONLINE", "status": "ONLINE"}])
    );
}

#[tokio::test]
async fn zvols_are_created_through_a_polled_job_and_hold_pool_space() {
    let nx = Nx::start(&["--job-polls", "2"]);
    let body = json!({"path": "tank/csi/v1", "volumeSize": 2 * GIB, "sparseVolume": false,
                      "volumeBlockSize": 16384});
    let (s, job) = nx
        .sim
        .request("POST", "/storage/volumes", Some(&body))
        .await;
    assert_eq!(s, 202, "{job}");
    let href = job["links"][0]["href"].as_str().unwrap().to_string();
    assert_eq!(job["links"][0]["rel"], "monitor");
    // Not there until its job ends; every running answer repeats the monitor link.
    assert_eq!(
        nx.get("/storage/volumes?path=tank%2Fcsi%2Fv1").await["data"],
        json!([])
    );
    for _ in 0..2 {
        let (s, v) = nx.sim.request("GET", &href, None).await;
        assert_eq!(s, 202, "{v}");
        assert_eq!(v["links"][0]["href"], href.as_str(), "{v}");
    }
    let (s, _) = nx.sim.request("GET", &href, None).await;
    assert_eq!(s, 201);
    // The job keeps its answer for a late poll.
    assert_eq!(nx.sim.request("GET", &href, None).await.0, 201);
    nx.refused("GET", "/jobStatus/ffff", None, 404, "ENOENT")
        .await;

    let v = nx.get(&vol("tank/csi/v1")).await;
    assert_eq!(v["volumeSize"], 2 * GIB);
    assert_eq!(v["volumeBlockSize"], 16384);
    assert_eq!(v["sparseVolume"], false);
    assert_eq!(v["parent"], "tank/csi");
    nx.zvol("tank/other/thin", 50 * GIB, true).await;
    let g = nx.get("/storage/volumeGroups?path=tank%2Fcsi").await;
    assert_eq!(
        g["data"][0]["bytesAvailable"],
        8 * GIB,
        "thin zvols hold nothing: {g}"
    );
    assert_eq!(g["data"][0]["bytesUsed"], 2 * GIB);
    let other = nx
        .get(&format!("/storage/volumeGroups/{}", esc("tank/other")))
        .await;
    assert_eq!(
        other["bytesAvailable"],
        8 * GIB,
        "one pool, shared: {other}"
    );

    // Refusals: each answered by the job's end, nothing created.
    let create = |path: &str, size: u64, extra: serde_json::Value| {
        let mut b = json!({"path": path, "volumeSize": size});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let cases = [
        (create("tank/csi/v1", GIB, json!({})), 409, "EEXIST"),
        (create("tank/nope/v", GIB, json!({})), 404, "ENOENT"),
        (create("tank/csi", GIB, json!({})), 400, "EINVAL"),
        (create("tank/csi/a/b", GIB, json!({})), 400, "EINVAL"),
        (create("tank/csi/bad name", GIB, json!({})), 400, "EINVAL"),
        (create("tank/csi/odd", GIB + 1, json!({})), 400, "EINVAL"),
        (create("tank/csi/zero", 0, json!({})), 400, "EINVAL"),
        (
            create("tank/csi/blk", GIB, json!({"volumeBlockSize": 3000})),
            400,
            "EINVAL",
        ),
        (
            create("tank/csi/cmp", GIB, json!({"compressionMode": "zip"})),
            400,
            "EINVAL",
        ),
        (
            create("tank/csi/big", 9 * GIB, json!({"sparseVolume": false})),
            400,
            "ENOSPC",
        ),
    ];
    for (body, status, code) in cases {
        nx.refused("POST", "/storage/volumes", Some(body), status, code)
            .await;
    }
    assert_eq!(
        nx.paths("/storage/volumes").await,
        ["tank/csi/v1", "tank/other/thin"]
    );

    // Grow (not shrink, not past the pool, whole blocks only).
    nx.ok(
        "PUT",
        &vol("tank/csi/v1"),
        Some(json!({"volumeSize": 4 * GIB})),
        200,
    )
    .await;
    assert_eq!(nx.get(&vol("tank/csi/v1")).await["volumeSize"], 4 * GIB);
    let put = |size: u64| Some(json!({"volumeSize": size}));
    nx.refused("PUT", &vol("tank/csi/v1"), put(GIB), 400, "EINVAL")
        .await;
    nx.refused("PUT", &vol("tank/csi/v1"), put(11 * GIB), 400, "ENOSPC")
        .await;
    nx.refused(
        "PUT",
        &vol("tank/csi/v1"),
        put(4 * GIB + 512),
        400,
        "EINVAL",
    )
    .await;
    nx.refused("PUT", &vol("tank/csi/none"), put(GIB), 404, "ENOENT")
        .await;
    nx.refused(
        "PUT",
        &vol("tank/csi/v1"),
        Some(json!({"path": "x"})),
        400,
        "EBADARG",
    )
    .await;
    assert_eq!(nx.get(&vol("tank/csi/v1")).await["volumeSize"], 4 * GIB);
}

#[tokio::test]
async fn a_job_checks_again_when_it_runs() {
    let nx = Nx::start(&[]);
    let body = json!({"path": "tank/csi/twice", "volumeSize": GIB});
    let (s1, j1) = nx
        .sim
        .request("POST", "/storage/volumes", Some(&body))
        .await;
    let (s2, j2) = nx
        .sim
        .request("POST", "/storage/volumes", Some(&body))
        .await;
    assert_eq!((s1, s2), (202, 202), "{j1} {j2}");
    let poll = async |j: &serde_json::Value| {
        let href = j["links"][0]["href"].as_str().unwrap().to_string();
        loop {
            let got = nx.sim.request("GET", &href, None).await;
            if got.0 != 202 {
                return got;
            }
        }
    };
    assert_eq!(poll(&j1).await.0, 201);
    assert_error(&poll(&j2).await, 409, "EEXIST");
    // --job-polls 0: answered at once.
    let sync = Nx::start(&["--job-polls", "0"]);
    let (s, _) = sync
        .sim
        .request("POST", "/storage/volumes", Some(&body))
        .await;
    assert_eq!(s, 201);
    let (s, _) = sync
        .sim
        .request("DELETE", &vol("tank/csi/twice"), None)
        .await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn snapshots_clones_and_the_delete_rules() {
    let nx = Nx::start(&[]);
    nx.zvol("tank/csi/src", GIB, false).await;
    let body = |p: &str| Some(json!({"path": p}));
    nx.ok("POST", "/storage/snapshots", body("tank/csi/src@s1"), 201)
        .await;
    nx.ok("POST", "/storage/snapshots", body("tank/csi/src@s2"), 201)
        .await;
    nx.refused(
        "POST",
        "/storage/snapshots",
        body("tank/csi/src@s1"),
        409,
        "EEXIST",
    )
    .await;
    nx.refused(
        "POST",
        "/storage/snapshots",
        body("tank/csi/nope@s"),
        404,
        "ENOENT",
    )
    .await;
    nx.refused(
        "POST",
        "/storage/snapshots",
        body("tank/csi/src"),
        400,
        "EINVAL",
    )
    .await;
    nx.refused(
        "POST",
        "/storage/snapshots",
        body("tank/csi/src@"),
        400,
        "EINVAL",
    )
    .await;
    let s = nx.get(&snap("tank/csi/src@s1")).await;
    assert_eq!(
        (s["name"].as_str(), s["parent"].as_str()),
        (Some("s1"), Some("tank/csi/src"))
    );
    assert!(s["creationTxg"].is_string(), "{s}");
    assert!(s["creationTime"].as_str().unwrap().ends_with('Z'), "{s}");
    let listed = nx
        .get("/storage/snapshots?parent=tank%2Fcsi%2Fsrc&fields=path,name")
        .await;
    assert_eq!(
        listed["data"],
        json!([{"path": "tank/csi/src@s1", "name": "s1"}, {"path": "tank/csi/src@s2", "name": "s2"}])
    );
    assert_eq!(
        nx.get("/storage/snapshots?parent=tank%2Fcsi").await["data"],
        json!([])
    );
    let rec = nx
        .get("/storage/snapshots?parent=tank%2Fcsi&recursive=true")
        .await;
    assert_eq!(rec["data"].as_array().unwrap().len(), 2, "{rec}");

    // A clone from a snapshot: sparse, the snapshot's size, listed in `clones`.
    let clone = |target: &str| Some(json!({"targetPath": target}));
    nx.ok(
        "POST",
        &format!("{}/clone", snap("tank/csi/src@s2")),
        clone("tank/other/c1"),
        201,
    )
    .await;
    let c = nx.get(&vol("tank/other/c1")).await;
    assert_eq!(
        (c["volumeSize"].as_u64(), c["sparseVolume"].as_bool()),
        (Some(GIB), Some(true))
    );
    assert_eq!(c["originalSnapshot"], "tank/csi/src@s2");
    assert_eq!(
        nx.get(&snap("tank/csi/src@s2")).await["clones"],
        json!(["tank/other/c1"])
    );
    let clone_of = format!("{}/clone", snap("tank/csi/src@s2"));
    nx.refused("POST", &clone_of, clone("tank/other/c1"), 409, "EEXIST")
        .await;
    nx.refused("POST", &clone_of, clone("tank/none/c"), 404, "ENOENT")
        .await;
    let missing = format!("{}/clone", snap("tank/csi/src@s9"));
    nx.refused("POST", &missing, clone("tank/other/c2"), 404, "ENOENT")
        .await;

    // The delete rules: a snapshot with clones (EEXIST), a zvol whose snapshot has clones
    // (EEXIST), a zvol with snapshots and no snapshots=true (EBUSY).
    nx.refused("DELETE", &snap("tank/csi/src@s2"), None, 409, "EEXIST")
        .await;
    nx.refused(
        "DELETE",
        &format!("{}?snapshots=true", vol("tank/csi/src")),
        None,
        409,
        "EEXIST",
    )
    .await;
    nx.ok("DELETE", &snap("tank/csi/src@s1"), None, 200).await;
    nx.refused("DELETE", &snap("tank/csi/src@s1"), None, 404, "ENOENT")
        .await;
    // Promote the clone: the origin's snapshot moves to it, the origin becomes its clone.
    nx.refused(
        "POST",
        &format!("{}/promote", vol("tank/csi/src")),
        None,
        400,
        "EINVAL",
    )
    .await;
    nx.ok(
        "POST",
        &format!("{}/promote", vol("tank/other/c1")),
        None,
        200,
    )
    .await;
    assert_eq!(nx.get(&vol("tank/other/c1")).await["originalSnapshot"], "");
    assert_eq!(
        nx.get(&vol("tank/csi/src")).await["originalSnapshot"],
        "tank/other/c1@s2"
    );
    assert_eq!(
        nx.get(&snap("tank/other/c1@s2")).await["clones"],
        json!(["tank/csi/src"])
    );
    // Now the old origin goes; the snapshot, free of clones, can go with its zvol.
    nx.ok("DELETE", &vol("tank/csi/src"), None, 200).await;
    nx.refused("DELETE", &vol("tank/other/c1"), None, 500, "EBUSY")
        .await;
    nx.ok(
        "DELETE",
        &format!("{}?snapshots=true", vol("tank/other/c1")),
        None,
        200,
    )
    .await;
    nx.refused("DELETE", &vol("tank/other/c1"), None, 404, "ENOENT")
        .await;
    nx.refused(
        "DELETE",
        &format!("{}?snapshots=maybe", vol("tank/x/y")),
        None,
        400,
        "EBADARG",
    )
    .await;
    assert!(nx.paths("/storage/volumes").await.is_empty());
    assert!(nx.paths("/storage/snapshots").await.is_empty());
    let g = nx.get("/storage/volumeGroups?path=tank%2Fcsi").await;
    assert_eq!(
        g["data"][0]["bytesAvailable"],
        10 * GIB,
        "space returned: {g}"
    );
}

#[tokio::test]
async fn collections_page_by_offset_and_limit_with_next_links() {
    let nx = Nx::start(&["--page-size", "2"]);
    let names: Vec<String> = (0..5).map(|i| format!("tank/csi/v{i}")).collect();
    for n in &names {
        nx.zvol(n, GIB, true).await;
    }
    // Following `next` links from a bare GET walks every item once, two at a time.
    let mut seen = Vec::new();
    let mut href = "/storage/volumes?parent=tank%2Fcsi&fields=path".to_string();
    loop {
        let page = nx.get(&href).await;
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= 2, "{page}");
        seen.extend(data.iter().map(|d| d["path"].as_str().unwrap().to_string()));
        assert_eq!(data[0].as_object().unwrap().len(), 1, "fields=path: {page}");
        let next = page["links"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["rel"] == "next");
        match next {
            Some(l) => href = l["href"].as_str().unwrap().to_string(),
            None => break,
        }
    }
    assert_eq!(seen, names);
    // limit/offset as go-nexentastor pages: a short page ends it; limit is capped.
    let page = nx.get("/storage/volumes?offset=4&limit=2").await;
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    assert!(
        !page["links"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["rel"] == "next")
    );
    let page = nx.get("/storage/volumes?offset=1&limit=100").await;
    assert_eq!(
        page["data"].as_array().unwrap().len(),
        2,
        "capped at the page size"
    );
    assert_eq!(page["data"][0]["path"], "tank/csi/v1");
    assert_eq!(nx.get("/storage/volumes?offset=9").await["data"], json!([]));
    nx.refused("GET", "/storage/volumes?limit=0", None, 400, "EINVAL")
        .await;
}

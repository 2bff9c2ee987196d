//! iSCSI targets with portals and CHAP, target groups, host groups, LUN mappings with
//! server-picked LUN numbers, and remote initiators (with the API version prefix), over real
//! HTTPS.

use serde_json::json;

use super::sim::{GIB, Nx};

const TARGET: &str = "iqn.2005-07.com.nexenta:01:csi-t1";
const HOST: &str = "iqn.1993-08.org.debian:01:node1";

fn target(name: &str) -> String {
    format!(
        "/san/iscsi/targets/{}",
        crate::support::nexentastor::esc(name)
    )
}

#[tokio::test]
async fn targets_have_portals_and_chap_whose_secret_is_never_read_back() {
    let nx = Nx::start(&[]);
    let body = json!({"name": TARGET, "portals": [{"address": "10.0.0.5", "port": 3260},
                                                  {"address": "10.0.0.6"}]});
    nx.ok("POST", "/san/iscsi/targets", Some(body.clone()), 201)
        .await;
    nx.refused("POST", "/san/iscsi/targets", Some(body), 409, "EEXIST")
        .await;
    let fields = "name,state,authentication,alias,chapSecretSet,chapUser,portals";
    let v = nx
        .get(&format!("/san/iscsi/targets?name={TARGET}&fields={fields}"))
        .await;
    assert_eq!(
        v["data"],
        json!([{"name": TARGET, "state": "online", "authentication": "none", "alias": "",
                "chapSecretSet": false, "chapUser": "",
                "portals": [{"address": "10.0.0.5", "port": 3260},
                            {"address": "10.0.0.6", "port": 3260}]}])
    );
    // CHAP: a secret of 12 or more characters, needed before authentication chap.
    let put = |b: serde_json::Value| Some(b);
    nx.refused(
        "PUT",
        &target(TARGET),
        put(json!({"authentication": "chap"})),
        400,
        "EINVAL",
    )
    .await;
    let short = json!({"authentication": "chap", "chapUser": "u", "chapSecret": "short"});
    nx.refused("PUT", &target(TARGET), put(short), 400, "EINVAL")
        .await;
    nx.refused(
        "PUT",
        &target(TARGET),
        put(json!({"authentication": "kerberos"})),
        400,
        "EINVAL",
    )
    .await;
    let chap =
        json!({"authentication": "chap", "chapUser": "storch", "chapSecret": "abcdefghijkl"});
    nx.ok("PUT", &target(TARGET), put(chap), 200).await;
    let t = nx.get(&target(TARGET)).await;
    assert_eq!(t["authentication"], "chap");
    assert_eq!(t["chapUser"], "storch");
    assert_eq!(t["chapSecretSet"], true);
    assert!(!t.to_string().contains("abcdefghijkl"), "{t}");
    // Refused creates change nothing.
    for bad in [
        json!({"name": "not-an-iqn"}),
        json!({"name": "iqn.2005-07.com.nexenta:01:x", "portals": [{"address": "nowhere"}]}),
        json!({"name": "iqn.2005-07.com.nexenta:01:x", "portals": [{"address": "10.0.0.1", "port": 0}]}),
        json!({"name": "iqn.2005-07.com.nexenta:01:x", "authentication": "chap"}),
    ] {
        nx.refused("POST", "/san/iscsi/targets", Some(bad), 400, "EINVAL")
            .await;
    }
    nx.refused(
        "PUT",
        &target("iqn.2005-07.com.nexenta:01:none"),
        put(json!({})),
        404,
        "ENOENT",
    )
    .await;
    assert_eq!(nx.paths("/san/iscsi/targets").await, [TARGET]);
    // A target without a name gets one.
    nx.ok(
        "POST",
        "/san/iscsi/targets",
        Some(json!({"portals": []})),
        201,
    )
    .await;
    let names = nx.paths("/san/iscsi/targets").await;
    assert_eq!(names.len(), 2);
    assert!(names.iter().all(|n| n.starts_with("iqn.")), "{names:?}");
}

#[tokio::test]
async fn groups_name_existing_members_and_are_busy_while_mapped() {
    let nx = Nx::start(&[]);
    nx.ok(
        "POST",
        "/san/iscsi/targets",
        Some(json!({"name": TARGET})),
        201,
    )
    .await;
    let tg = |m: serde_json::Value| Some(json!({"name": "tg1", "members": m}));
    nx.refused(
        "POST",
        "/san/targetgroups",
        tg(json!(["iqn.2005-07.com.nexenta:01:none"])),
        404,
        "ENOENT",
    )
    .await;
    nx.ok("POST", "/san/targetgroups", tg(json!([TARGET])), 201)
        .await;
    nx.refused("POST", "/san/targetgroups", tg(json!([])), 409, "EEXIST")
        .await;
    let v = nx.get("/san/targetgroups/tg1?fields=name,members").await;
    assert_eq!(v, json!({"name": "tg1", "members": [TARGET]}));
    let hg = |m: serde_json::Value| Some(json!({"name": "hg1", "members": m}));
    nx.refused(
        "POST",
        "/san/hostgroups",
        hg(json!(["node1"])),
        400,
        "EINVAL",
    )
    .await;
    nx.refused(
        "POST",
        "/san/hostgroups",
        hg(json!([HOST, HOST])),
        400,
        "EINVAL",
    )
    .await;
    nx.ok("POST", "/san/hostgroups", hg(json!([HOST])), 201)
        .await;
    nx.refused(
        "POST",
        "/san/hostgroups",
        Some(json!({"name": "All"})),
        409,
        "EEXIST",
    )
    .await;
    let two = json!({"members": [HOST, "iqn.1993-08.org.debian:01:node2"]});
    nx.ok("PUT", "/san/hostgroups/hg1", Some(two), 200).await;
    let v = nx.get("/san/hostgroups").await;
    assert_eq!(v["data"][0]["members"].as_array().unwrap().len(), 2, "{v}");
    nx.refused(
        "PUT",
        "/san/hostgroups/none",
        Some(json!({"members": []})),
        404,
        "ENOENT",
    )
    .await;

    nx.zvol("tank/csi/v1", GIB, true).await;
    let map = json!({"volume": "tank/csi/v1", "targetGroup": "tg1", "hostGroup": "hg1"});
    nx.ok("POST", "/san/lunMappings", Some(map), 201).await;
    nx.refused("DELETE", "/san/targetgroups/tg1", None, 500, "EBUSY")
        .await;
    nx.refused("DELETE", "/san/hostgroups/hg1", None, 500, "EBUSY")
        .await;
    nx.refused("DELETE", &target(TARGET), None, 500, "EBUSY")
        .await;
    let vol = format!(
        "/storage/volumes/{}",
        crate::support::nexentastor::esc("tank/csi/v1")
    );
    nx.refused("DELETE", &vol, None, 500, "EBUSY").await;
    let id = nx.get("/san/lunMappings").await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    nx.ok("DELETE", &format!("/san/lunMappings/{id}"), None, 200)
        .await;
    nx.refused(
        "DELETE",
        &format!("/san/lunMappings/{id}"),
        None,
        404,
        "ENOENT",
    )
    .await;
    nx.ok("DELETE", "/san/targetgroups/tg1", None, 200).await;
    nx.ok("DELETE", "/san/hostgroups/hg1", None, 200).await;
    nx.ok("DELETE", &target(TARGET), None, 200).await;
    nx.ok("DELETE", &vol, None, 200).await;
}

#[tokio::test]
async fn lun_mappings_get_the_lowest_free_lun_of_their_target_group() {
    let nx = Nx::start(&[]);
    nx.ok(
        "POST",
        "/san/iscsi/targets",
        Some(json!({"name": TARGET})),
        201,
    )
    .await;
    for g in ["tg1", "tg2"] {
        let body = json!({"name": g, "members": [TARGET]});
        nx.ok("POST", "/san/targetgroups", Some(body), 201).await;
    }
    nx.ok(
        "POST",
        "/san/hostgroups",
        Some(json!({"name": "hg", "members": [HOST]})),
        201,
    )
    .await;
    for i in 0..4 {
        nx.zvol(&format!("tank/csi/v{i}"), GIB, true).await;
    }
    let map = |v: &str, tg: &str, hg: &str| {
        Some(json!({"volume": format!("tank/csi/{v}"), "targetGroup": tg, "hostGroup": hg}))
    };
    for v in ["v0", "v1", "v2"] {
        nx.ok("POST", "/san/lunMappings", map(v, "tg1", "hg"), 201)
            .await;
    }
    nx.refused(
        "POST",
        "/san/lunMappings",
        map("v0", "tg1", "hg"),
        409,
        "EEXIST",
    )
    .await;
    nx.refused(
        "POST",
        "/san/lunMappings",
        map("nope", "tg1", "hg"),
        404,
        "ENOENT",
    )
    .await;
    nx.refused(
        "POST",
        "/san/lunMappings",
        map("v3", "tgX", "hg"),
        404,
        "ENOENT",
    )
    .await;
    nx.refused(
        "POST",
        "/san/lunMappings",
        map("v3", "tg1", "hgX"),
        404,
        "ENOENT",
    )
    .await;
    let fields = "fields=id,volume,targetGroup,hostGroup,lun";
    let listed = nx
        .get(&format!("/san/lunMappings?targetGroup=tg1&{fields}"))
        .await;
    let luns: Vec<(String, u64)> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["volume"].as_str().unwrap().to_string(),
                m["lun"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut luns = luns;
    luns.sort();
    assert_eq!(
        luns,
        [
            ("tank/csi/v0".into(), 0),
            ("tank/csi/v1".into(), 1),
            ("tank/csi/v2".into(), 2)
        ]
    );
    // Another target group numbers from 0 again; a freed LUN is reused; an explicit one is
    // checked; `All` is every host.
    nx.ok("POST", "/san/lunMappings", map("v3", "tg2", "All"), 201)
        .await;
    let v = nx.get("/san/lunMappings?volume=tank%2Fcsi%2Fv3").await;
    assert_eq!(
        (
            v["data"][0]["lun"].as_u64(),
            v["data"][0]["hostGroup"].as_str()
        ),
        (Some(0), Some("All"))
    );
    let v1 = nx.get("/san/lunMappings?volume=tank%2Fcsi%2Fv1").await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    nx.ok("DELETE", &format!("/san/lunMappings/{v1}"), None, 200)
        .await;
    nx.ok("POST", "/san/lunMappings", map("v3", "tg1", "hg"), 201)
        .await;
    let v = nx
        .get("/san/lunMappings?volume=tank%2Fcsi%2Fv3&targetGroup=tg1")
        .await;
    assert_eq!(v["data"][0]["lun"], 1, "{v}");
    let mut explicit = map("v1", "tg1", "hg").unwrap();
    explicit["lun"] = json!(2);
    nx.refused(
        "POST",
        "/san/lunMappings",
        Some(explicit.clone()),
        409,
        "EEXIST",
    )
    .await;
    explicit["lun"] = json!(20000);
    nx.refused(
        "POST",
        "/san/lunMappings",
        Some(explicit.clone()),
        400,
        "EINVAL",
    )
    .await;
    explicit["lun"] = json!(7);
    nx.ok("POST", "/san/lunMappings", Some(explicit), 201).await;
    let v = nx
        .get(&format!("/san/lunMappings?volume=tank%2Fcsi%2Fv1&{fields}"))
        .await;
    assert_eq!(v["data"][0]["lun"], 7, "{v}");
    let one = nx
        .get(&format!(
            "/san/lunMappings/{}",
            v["data"][0]["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(one["volume"], "tank/csi/v1");
}

#[tokio::test]
async fn remote_initiators_carry_chap_under_the_versioned_path() {
    let nx = Nx::start(&[]);
    let base = "/v1.2.6/san/iscsi/remoteInitiators";
    let body = json!({"name": HOST, "chapUser": "node1", "chapSecret": "123456789012"});
    nx.ok("POST", base, Some(body.clone()), 201).await;
    nx.refused("POST", base, Some(body), 409, "EEXIST").await;
    let short = json!({"name": "iqn.1993-08.org.debian:01:n2", "chapSecret": "short"});
    nx.refused("POST", base, Some(short), 400, "EINVAL").await;
    let one = format!("{base}/{}", crate::support::nexentastor::esc(HOST));
    let v = nx.get(&one).await;
    assert_eq!(
        v,
        json!({"name": HOST, "chapUser": "node1", "chapSecretSet": true})
    );
    nx.ok("PUT", &one, Some(json!({"chapUser": "renamed"})), 200)
        .await;
    // The same objects without the version segment.
    let v = nx.get("/san/iscsi/remoteInitiators").await;
    assert_eq!(v["data"][0]["chapUser"], "renamed", "{v}");
    nx.ok("DELETE", &one, None, 200).await;
    nx.refused("GET", &one, None, 404, "ENOENT").await;
}

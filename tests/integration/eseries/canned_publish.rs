//! Per-host access (CSI ControllerPublish / ControllerUnpublish) against canned SANtricity
//! answers in the wire spec's shapes (§3.5: hosts with their iSCSI ports, one mapping per
//! volume, `DELETE …/volume-mappings/{ref}`): a node without a host gets one, and the
//! volume's group mapping moves to it with the same LUN; a volume mapped to another host is
//! refused before anything is made; unpublish maps the volume back to the group and deletes
//! the host storch made once nothing is mapped to it.

use serde_json::{Value, json};
use storch::drivers::{DriverError, HostAccess, PUBLISH_LUN_KEY as LUN_KEY, StorageDriver};

use super::canned::*;

const HOST2: &str = "84000000600A098000A4B28D000040325F2E6D33";
const MAP2: &str = "88000000600A098000A4B28D00004E7E5F2E7A05";
const NODE2_IQN: &str = "iqn.1993-08.org.debian:01:node2";
const NULL_REF: &str = "0000000000000000000000000000000000000000";

fn node2() -> HostAccess {
    HostAccess {
        node: "node2".into(),
        iscsi_initiator: Some(NODE2_IQN.into()),
    }
}

/// The host storch makes for node2, as the proxy answers it (in no host group).
fn host2() -> Value {
    json!({"hostRef": HOST2, "id": HOST2, "clusterRef": NULL_REF, "label": "storch_node2",
        "hostTypeIndex": 28, "isSAControlled": false, "initiators": [], "ports": [],
        "hostSidePorts": [{"type": "iscsi", "address": NODE2_IQN, "label": "storch_node2"}]})
}

fn node1() -> Value {
    json!({"hostRef": HOST, "clusterRef": GROUP, "label": "node1", "hostTypeIndex": 28,
        "isSAControlled": false, "initiators": [], "hostSidePorts": [
            {"type": "iscsi", "address": "iqn.1993-08.org.debian:01:node1", "label": "node1"}]})
}

fn host_mapping(volume: &str, lun: i32) -> Value {
    json!({"lunMappingRef": MAP2, "lun": lun, "ssid": 1, "perms": 15, "volumeRef": volume,
        "type": "host", "mapRef": HOST2})
}

#[tokio::test]
async fn publish_makes_the_node_s_host_and_moves_the_group_mapping_to_it() {
    let n = name("pvc-p1");
    let at_group = vol(
        VOL,
        &n,
        POOL_A,
        GIB,
        ours("pvc-p1"),
        json!([mapping(VOL, 7)]),
    );
    let c = canned(with(
        discovery(),
        vec![
            ("GET", p("/volumes"), 200, json!([at_group])),
            ("POST", p("/hosts"), 201, host2()),
            (
                "DELETE",
                p(&format!("/volume-mappings/{MAP}")),
                204,
                Value::Null,
            ),
            ("POST", p("/volume-mappings"), 200, host_mapping(VOL, 7)),
        ],
    ))
    .await;
    let d = driver(&c, json!({}));
    d.discover().await.unwrap();
    let context = d.publish(&n, &node2()).await.unwrap();
    assert_eq!(context.get(LUN_KEY).map(String::as_str), Some("7"));
    assert_eq!(
        bodies(&c, "POST", &p("/hosts")),
        [json!({"name": "storch_node2", "hostType": {"index": 28},
            "ports": [{"type": "iscsi", "port": NODE2_IQN, "label": "storch_node2"}]})],
        "the configured host type's index, the node's initiator as the one port"
    );
    assert_eq!(
        bodies(&c, "POST", &p("/volume-mappings")),
        [json!({"mappableObjectId": VOL, "targetId": HOST2, "lun": 7})],
        "the group's LUN, free on the new host"
    );
    let order: Vec<String> = calls(&c)
        .into_iter()
        .filter(|c| c.contains("mapping") || c.starts_with("POST /hosts"))
        .collect();
    assert_eq!(
        order,
        [
            "POST /hosts".to_string(),
            format!("DELETE /volume-mappings/{MAP}"),
            "POST /volume-mappings".to_string(),
        ],
        "one mapping per volume: the group's goes before the host's is made"
    );
}

#[tokio::test]
async fn a_volume_mapped_to_another_host_is_refused_before_anything_is_made() {
    let n = name("pvc-p2");
    // Mapped to node1's own host, not to the backend's group.
    let elsewhere = json!({"lunMappingRef": MAP, "lun": 3, "ssid": 1, "perms": 15,
        "volumeRef": VOL, "type": "host", "mapRef": HOST});
    let c = canned(with(
        discovery(),
        vec![(
            "GET",
            p("/volumes"),
            200,
            json!([vol(
                VOL,
                &n,
                POOL_A,
                GIB,
                ours("pvc-p2"),
                json!([elsewhere])
            )]),
        )],
    ))
    .await;
    let d = driver(&c, json!({}));
    d.discover().await.unwrap();
    let e = d.publish(&n, &node2()).await.unwrap_err();
    assert!(
        matches!(&e, DriverError::Conflict(m) if m.contains(HOST) && m.contains("node2")),
        "{e}"
    );
    let changes: Vec<String> = calls(&c)
        .into_iter()
        .filter(|c| !c.starts_with("GET") && !c.contains("/devmgr/v2/storage-systems"))
        .collect();
    assert!(changes.is_empty(), "nothing made or moved: {changes:?}");
}

#[tokio::test]
async fn unpublish_maps_back_to_the_group_and_deletes_the_host_storch_made() {
    let n = name("pvc-p3");
    let at_host = vol(
        VOL,
        &n,
        POOL_A,
        GIB,
        ours("pvc-p3"),
        json!([host_mapping(VOL, 7)]),
    );
    let at_group = vol(
        VOL,
        &n,
        POOL_A,
        GIB,
        ours("pvc-p3"),
        json!([mapping(VOL, 7)]),
    );
    let mut answers = discovery();
    answers.retain(|(m, path, _, _)| !(*m == "GET" && *path == p("/hosts")));
    answers.extend(vec![
        ("GET", p("/hosts"), 200, json!([node1(), host2()])),
        // The lookup and the group's free LUNs see the host's mapping; after the move the
        // host has none left.
        ("GET", p("/volumes"), 200, json!([at_host.clone()])),
        ("GET", p("/volumes"), 200, json!([at_host])),
        ("GET", p("/volumes"), 200, json!([at_group])),
        (
            "DELETE",
            p(&format!("/volume-mappings/{MAP2}")),
            204,
            Value::Null,
        ),
        ("POST", p("/volume-mappings"), 200, mapping(VOL, 7)),
        ("DELETE", p(&format!("/hosts/{HOST2}")), 204, Value::Null),
    ]);
    let c = canned(answers).await;
    let d = driver(&c, json!({}));
    d.discover().await.unwrap();
    d.unpublish(&n, &node2()).await.unwrap();
    assert_eq!(
        bodies(&c, "POST", &p("/volume-mappings")),
        [json!({"mappableObjectId": VOL, "targetId": GROUP, "lun": 7})],
        "back to the backend's group, at its LUN"
    );
    let changes: Vec<String> = calls(&c)
        .into_iter()
        .filter(|c| c.starts_with("DELETE") || c.starts_with("POST /volume-mappings"))
        .collect();
    assert_eq!(
        changes,
        [
            format!("DELETE /volume-mappings/{MAP2}"),
            "POST /volume-mappings".to_string(),
            format!("DELETE /hosts/{HOST2}"),
        ]
    );
}

//! `/trident/v1/volume`: add, get, list, delete, clones, refused bodies and sizes, placement
//! failures.

use super::*;

/// The VolumeConfig keys Trident always writes (docs/trident-contract.md#volume-config).
const ALWAYS_WRITTEN: &[&str] = &[
    "version",
    "name",
    "internalName",
    "size",
    "protocol",
    "spaceReserve",
    "securityStyle",
    "accessInformation",
    "blockSize",
    "fileSystem",
    "encryption",
    "cloneSourceVolume",
    "cloneSourceVolumeInternal",
    "cloneSourceSnapshot",
    "splitOnClone",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_add_get_list_delete() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(
        &format!("{V1}/backend"),
        &fake_backend("san", "block", &[("lun", hdd())]),
        201,
    )
    .await;
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "gold", "attributes": {"media": "ssd"}}),
        201,
    )
    .await;
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "bronze", "attributes": {"media": "hdd"}}),
        201,
    )
    .await;

    let free_before =
        api.get(&format!("{V1}/backend/nas")).await.json["backend"]["storage"]["fast"]["freeBytes"]
            .as_u64();
    let r = api
        .post_json(
            &format!("{V1}/volume"),
            &json!({"name": "v1", "size": "1GB", "storageClass": "gold",
                    "internalName": "client-chosen", "version": "7",
                    "accessInformation": {"nfsServerIp": "203.0.113.9", "nfsPath": "/evil"},
                    "snapshotPolicy": "daily", "unixPermissions": "0755",
                    "snapshotDirectory": "true", "exportPolicy": "default",
                    "unknownKey": {"ignored": true}}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"backend": "nas", "warnings": ["unknown field \"unknownKey\" was ignored"]}),
        "a Trident body's unknown fields are accepted and named"
    );

    let r = api.get(&format!("{V1}/volume/v1")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json.as_object().unwrap().len(), 1);
    let v = &r.json["volume"];
    assert!(v.get("config").is_none(), "the key is capital Config");
    let c = &v["Config"];
    for key in ALWAYS_WRITTEN {
        assert!(c.get(*key).is_some(), "Config.{key} missing: {c}");
    }
    assert_eq!(c["version"], "1");
    assert_eq!(c["name"], "v1");
    assert_eq!(c["internalName"], "trident-v1");
    assert_eq!(c["size"], "1GB", "size is kept verbatim");
    assert_eq!(c["protocol"], "file");
    assert_eq!(c["storageClass"], "gold");
    assert_eq!(
        c["accessInformation"],
        json!({"nfsServerIp": "192.0.2.1", "nfsPath": "/trident-v1"}),
        "the server fills accessInformation"
    );
    assert_eq!(c["snapshotPolicy"], "daily");
    assert_eq!(c["unixPermissions"], "0755");
    assert_eq!(c["snapshotDirectory"], "true");
    assert_eq!(c["exportPolicy"], "default");
    assert!(c.get("unknownKey").is_none());
    assert_eq!(v["backend"], "nas");
    assert_eq!(v["pool"], "fast");
    assert_eq!(v["orphaned"], false);
    assert_eq!(v["state"], "online");
    // the backend shows it and lost the capacity
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["volumes"], json!(["v1"]));
    if let (Some(before), Some(after)) = (
        free_before,
        r.json["backend"]["storage"]["fast"]["freeBytes"].as_u64(),
    ) {
        assert_eq!(before - after, 1_000_000_000, "1GB is SI");
    }

    // block, with an access mode, on the SAN backend
    let r = api
        .post_json(
            &format!("{V1}/volume"),
            &json!({"name": "lun1", "size": "2Gi", "storageClass": "bronze",
                    "protocol": "block", "accessMode": "ReadWriteOnce"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "san"}));
    let r = api.get(&format!("{V1}/volume/lun1")).await;
    let c = &r.json["volume"]["Config"];
    assert_eq!(c["protocol"], "block");
    assert_eq!(c["size"], "2Gi");
    assert_eq!(c["accessMode"], "ReadWriteOnce");
    assert_eq!(c["accessInformation"]["iscsiTargetPortal"], "192.0.2.1");
    assert_eq!(
        c["accessInformation"]["iscsiTargetIqn"],
        "iqn.2017-06.com.netapp:fake"
    );
    assert_eq!(r.json["volume"]["pool"], "lun");

    // RWX with any protocol lands on file
    let r = api
        .post_json(
            &format!("{V1}/volume"),
            &json!({"name": "shared", "size": "1Mi", "accessMode": "ReadWriteMany",
                    "storageClass": "gold"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let r = api.get(&format!("{V1}/volume/shared")).await;
    assert_eq!(r.json["volume"]["Config"]["protocol"], "file");

    assert_eq!(
        api.list("volume", "volumes").await,
        ["lun1", "shared", "v1"]
    );

    // duplicate: 409 with the create envelope
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("v1", "5Gi", "bronze").to_string(),
            409,
        )
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", json!("")))),
        "volume v1 already exists"
    );

    // DELETE: 200 {}, then 404
    let r = api.delete(&format!("{V1}/volume/v1")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    let r = api
        .refused(Method::DELETE, &format!("{V1}/volume/v1"), None, 404)
        .await;
    assert_eq!(error_of(&r, None), "volume v1 not found");
    let r = api
        .refused(Method::GET, &format!("{V1}/volume/v1"), None, 404)
        .await;
    assert_eq!(
        error_of(&r, Some(("volume", Value::Null))),
        "volume v1 was not found"
    );
    assert_eq!(api.list("volume", "volumes").await, ["lun1", "shared"]);
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(r.json["backend"]["volumes"], json!(["shared"]));
    // the name is free again
    api.ok(&format!("{V1}/volume"), &volume("v1", "1Gi", "gold"), 201)
        .await;
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_volumes_are_400_and_change_nothing() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    api.ok(&format!("{V1}/volume"), &volume("keep", "1Gi", "any"), 201)
        .await;
    let long = "n".repeat(300);
    let cases: Vec<(String, &str)> = vec![
        // mandatory fields: Trident's exact message
        (
            json!({"size": "1G", "storageClass": "any"}).to_string(),
            MANDATORY,
        ),
        (
            json!({"name": "v", "storageClass": "any"}).to_string(),
            MANDATORY,
        ),
        (json!({"name": "", "size": "1G"}).to_string(), MANDATORY),
        (json!({"name": "v", "size": ""}).to_string(), MANDATORY),
        ("{}".into(), MANDATORY),
        // malformed
        ("{\"name\":".into(), "invalid JSON: "),
        ("".into(), "invalid JSON: "),
        ("name: v\nsize: 1G\n".into(), "invalid JSON: "),
        ("[\"v\", \"1G\"]".into(), "invalid JSON: "),
        (
            format!("{} trailing", volume("v", "1G", "any")),
            "invalid JSON: ",
        ),
        // wrong types name the field
        (json!({"name": "v", "size": 5}).to_string(), "size"),
        (json!({"name": ["v"], "size": "1G"}).to_string(), "name"),
        (
            json!({"name": "v", "size": "1G", "snapshotDirectory": false}).to_string(),
            "snapshotDirectory",
        ),
        // protocol and access mode
        (
            json!({"name": "v", "size": "1G", "protocol": "nfs"}).to_string(),
            "protocol: nfs is an unsupported protocol",
        ),
        (
            json!({"name": "v", "size": "1G", "protocol": "FILE"}).to_string(),
            "protocol",
        ),
        (
            json!({"name": "v", "size": "1G", "storageClass": "any",
                   "accessMode": "ReadWriteMany", "protocol": "block"})
            .to_string(),
            "incompatible access mode (ReadWriteMany) and protocol (block)",
        ),
        (
            json!({"name": "v", "size": "1G", "accessMode": "ReadWriteSometimes"}).to_string(),
            "invalid accessMode",
        ),
        // the class must exist
        (
            volume("v", "1G", "nope").to_string(),
            "unknown storage class: nope",
        ),
        // names in the body
        (
            volume("a/b", "1G", "any").to_string(),
            "name must not contain '/'",
        ),
        (volume("..", "1G", "any").to_string(), "name must not be"),
        (volume(".", "1G", "any").to_string(), "name must not be"),
        (volume("a\u{0}b", "1G", "any").to_string(), "NUL"),
        (
            volume(&long, "1G", "any").to_string(),
            "longer than 253 bytes",
        ),
        (
            volume("v", "1G", "../any").to_string(),
            "storageClass must not contain '/'",
        ),
        (
            json!({"name": "v", "size": "1G", "cloneSourceVolume": "a/b"}).to_string(),
            "cloneSourceVolume",
        ),
    ];
    let mut cases = cases;
    for size in [
        "0",
        "-1",
        "1.5Gi",
        "abc",
        "99999999999999999999999",
        "0Gi",
        "1Q",
    ] {
        cases.push((volume("v", size, "any").to_string(), "size"));
    }
    for (body, needle) in &cases {
        let r = api
            .refused_post(&format!("{V1}/volume"), body.clone(), 400)
            .await;
        let msg = error_of(&r, Some(("backend", json!(""))));
        assert!(
            msg.contains(needle),
            "{body}: {msg:?} does not contain {needle:?}"
        );
    }
    assert_eq!(api.list("volume", "volumes").await, ["keep"]);
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sizes_name_the_field_and_the_value() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    for size in ["0", "-1", "1.5Gi", "abc", "99999999999999999999999"] {
        let r = api
            .refused_post(
                &format!("{V1}/volume"),
                volume("v", size, "any").to_string(),
                400,
            )
            .await;
        let msg = error_of(&r, Some(("backend", json!(""))));
        assert!(
            msg.starts_with(&format!("invalid size \"{size}\"")),
            "{size}: {msg}"
        );
    }
    // a huge value is not echoed whole
    let huge = "9".repeat(100_000);
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("v", &huge, "any").to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("backend", json!(""))));
    assert!(msg.starts_with("invalid size \""), "{msg}");
    assert!(msg.len() < 400, "{} bytes", msg.len());
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_pools_failing_names_every_pool_and_reason() {
    let api = Api::start().await;
    let mut be = fake_backend("broken", "file", &[("p1", hdd()), ("p2", hdd())]);
    be["failPools"] = json!({"p1": "p1 is on fire", "p2": "p2 is flooded"});
    api.ok(&format!("{V1}/backend"), &be, 201).await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let r = api
        .failed_post(
            &format!("{V1}/volume"),
            volume("x", "1Gi", "any").to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("backend", json!(""))));
    assert!(
        msg.starts_with("encountered error(s) in creating the volume: "),
        "{msg}"
    );
    for (pool, reason) in [("p1", "p1 is on fire"), ("p2", "p2 is flooded")] {
        assert!(
            msg.contains(&format!(
                "Failed to create volume x on storage pool {pool} from backend broken: {reason}"
            )),
            "{msg}"
        );
    }
    // nothing left behind; the name is free
    let r = api
        .refused(Method::GET, &format!("{V1}/volume/x"), None, 404)
        .await;
    error_of(&r, Some(("volume", Value::Null)));
    assert!(api.list("volume", "volumes").await.is_empty());
    // a healthy backend takes the same request
    api.ok(&format!("{V1}/backend"), &ssd_backend("ok"), 201)
        .await;
    let r = api
        .post_json(&format!("{V1}/volume"), &volume("x", "1Gi", "any"))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"backend": "ok"}));
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_matching_pool_is_400() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(
        &format!("{V1}/storageclass"),
        &json!({"name": "gold", "attributes": {"media": "ssd"}}),
        201,
    )
    .await;
    // a file-only class asked for block
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            json!({"name": "v", "size": "1Gi", "storageClass": "gold", "protocol": "block"})
                .to_string(),
            400,
        )
        .await;
    let msg = error_of(&r, Some(("backend", json!(""))));
    assert!(msg.contains("gold"), "{msg}");
    // bigger than any pool
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            volume("v", "1Pi", "gold").to_string(),
            400,
        )
        .await;
    error_of(&r, Some(("backend", json!(""))));
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_over_rest_land_on_the_source_backend() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("b1"), 201)
        .await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("b2"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let r = api
        .post_json(&format!("{V1}/volume"), &volume("src", "2Gi", "any"))
        .await;
    assert_eq!(r.status, 201, "{}", r.json);
    let src_backend = r.json["backend"].as_str().unwrap().to_string();
    for i in 0..4 {
        let name = format!("copy{i}");
        let r = api
            .post_json(
                &format!("{V1}/volume"),
                &json!({"name": name, "size": "1Gi", "cloneSourceVolume": "src"}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.json);
        assert_eq!(r.json, json!({"backend": src_backend}));
        let r = api.get(&format!("{V1}/volume/{name}")).await;
        let v = &r.json["volume"];
        assert_eq!(v["backend"], src_backend.as_str());
        assert_eq!(v["pool"], "", "Trident shows clones with an empty pool");
        assert_eq!(v["Config"]["cloneSourceVolume"], "src");
        assert_eq!(v["Config"]["cloneSourceVolumeInternal"], "trident-src");
        assert_eq!(v["Config"]["internalName"], format!("trident-{name}"));
        assert_eq!(v["Config"]["storageClass"], "any", "inherited");
    }
    // a missing source: 400 on create (the server maps a create's NotFound to 400)
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            json!({"name": "bad", "size": "1Gi", "cloneSourceVolume": "missing"}).to_string(),
            400,
        )
        .await;
    assert_eq!(
        error_of(&r, Some(("backend", json!("")))),
        "source volume not found: missing"
    );
    // a clone of an existing name: 409
    let r = api
        .refused_post(
            &format!("{V1}/volume"),
            json!({"name": "copy0", "size": "1Gi", "cloneSourceVolume": "src"}).to_string(),
            409,
        )
        .await;
    error_of(&r, Some(("backend", json!(""))));
    api.shutdown().await;
}

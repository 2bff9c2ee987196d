//! `/trident/v1/storageclass`: add, get, list, delete, and refused bodies.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_class_add_get_list_delete() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(
        &format!("{V1}/backend"),
        &fake_backend("san", "block", &[("fast", ssd())]),
        201,
    )
    .await;

    let gold = json!({"version": "1", "name": "gold",
                      "attributes": {"media": "ssd", "snapshots": "True", "IOPS": "01500"}});
    let r = api.post_json(&format!("{V1}/storageclass"), &gold).await;
    assert_eq!(r.status, 201, "{}", r.json);
    assert_eq!(r.json, json!({"storageClass": "gold"}));

    let r = api.get(&format!("{V1}/storageclass/gold")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(
        r.json,
        json!({"storageClass": {
            "Config": {"version": "1", "name": "gold",
                       "attributes": {"media": "ssd", "snapshots": "true", "IOPS": "1500"}},
            "storage": {"nas": ["fast"], "san": ["fast"]},
        }})
    );

    // duplicate: 409
    let r = api
        .refused_post(&format!("{V1}/storageclass"), gold.to_string(), 409)
        .await;
    assert_eq!(
        error_of(&r, Some(("storageClass", json!("")))),
        "storage class gold already exists"
    );

    // pool lists: requiredStorage is additionalStoragePools; no version defaults to "1"
    let picky = json!({"name": "picky",
                       "storagePools": {"^nas$": ["slow", "fast"]},
                       "requiredStorage": {"san": ["fast"]},
                       "excludeStoragePools": {"nas": ["fast"]}});
    api.ok(&format!("{V1}/storageclass"), &picky, 201).await;
    let r = api.get(&format!("{V1}/storageclass/picky")).await;
    assert_eq!(
        r.json["storageClass"]["Config"],
        json!({"version": "1", "name": "picky",
               "storagePools": {"^nas$": ["fast", "slow"]},
               "additionalStoragePools": {"san": ["fast"]},
               "excludeStoragePools": {"nas": ["fast"]}})
    );
    assert_eq!(
        r.json["storageClass"]["storage"],
        json!({"nas": ["slow"], "san": ["fast"]})
    );
    // both given: additionalStoragePools wins
    let both = json!({"name": "both", "additionalStoragePools": {"nas": ["slow"]},
                      "requiredStorage": {"san": ["fast"]}});
    api.ok(&format!("{V1}/storageclass"), &both, 201).await;
    let r = api.get(&format!("{V1}/storageclass/both")).await;
    assert_eq!(
        r.json["storageClass"]["Config"]["additionalStoragePools"],
        json!({"nas": ["slow"]})
    );
    assert!(
        r.json["storageClass"]["Config"]
            .get("requiredStorage")
            .is_none()
    );
    assert_eq!(r.json["storageClass"]["storage"], json!({"nas": ["slow"]}));

    // pool patterns are unanchored regexes (Go's MatchString)
    let loose = json!({"name": "loose", "storagePools": {"na": ["as"]}});
    api.ok(&format!("{V1}/storageclass"), &loose, 201).await;
    let r = api.get(&format!("{V1}/storageclass/loose")).await;
    assert_eq!(r.json["storageClass"]["storage"], json!({"nas": ["fast"]}));
    let r = api.delete(&format!("{V1}/storageclass/loose")).await;
    assert_eq!(r.status, 200, "{}", r.json);

    // an empty class matches every pool
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let r = api.get(&format!("{V1}/storageclass/any")).await;
    assert_eq!(
        r.json["storageClass"]["storage"],
        json!({"nas": ["fast", "slow"], "san": ["fast"]})
    );
    // pools list their classes
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(
        r.json["backend"]["storage"]["slow"]["storageClasses"],
        json!(["any", "both", "picky"])
    );

    assert_eq!(
        api.list("storageclass", "storageClasses").await,
        ["any", "both", "gold", "picky"]
    );

    // DELETE: 200 {}, then 404 on delete and get
    let r = api.delete(&format!("{V1}/storageclass/gold")).await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json, json!({}));
    let r = api
        .refused(
            Method::DELETE,
            &format!("{V1}/storageclass/gold"),
            None,
            404,
        )
        .await;
    assert_eq!(error_of(&r, None), "storage class gold not found");
    let r = api
        .refused(Method::GET, &format!("{V1}/storageclass/gold"), None, 404)
        .await;
    assert_eq!(
        error_of(&r, Some(("storageClass", Value::Null))),
        "storage class gold was not found"
    );
    assert_eq!(
        api.list("storageclass", "storageClasses").await,
        ["any", "both", "picky"]
    );
    let r = api.get(&format!("{V1}/backend/nas")).await;
    assert_eq!(
        r.json["backend"]["storage"]["fast"]["storageClasses"],
        json!(["any"])
    );
    api.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_storage_classes_are_400_and_change_nothing() {
    let api = Api::start().await;
    api.ok(&format!("{V1}/backend"), &ssd_backend("nas"), 201)
        .await;
    api.ok(&format!("{V1}/storageclass"), &json!({"name": "any"}), 201)
        .await;
    let cases: Vec<(String, &str)> = vec![
        ("{\"name\":".into(), "invalid JSON: "),
        ("".into(), "invalid JSON: "),
        ("name: gold\n".into(), "invalid JSON: "),
        ("[]".into(), "invalid JSON: "),
        (
            json!({"name": "gold", "attributes": {"snapshots": true}}).to_string(),
            "invalid JSON: unable to unmarshal map",
        ),
        (
            json!({"name": "gold", "attributes": {"IOPS": 1500}}).to_string(),
            "invalid JSON: unable to unmarshal map",
        ),
        (
            json!({"name": "gold", "attributes": {"colour": "blue"}}).to_string(),
            "invalid JSON: unrecognized storage attribute: colour",
        ),
        (
            json!({"name": "gold", "attributes": {"iops": "100"}}).to_string(),
            "unrecognized storage attribute: iops",
        ),
        (
            json!({"name": "gold", "attributes": {"IOPS": "lots"}}).to_string(),
            "IOPS",
        ),
        (
            json!({"name": "gold", "attributes": {"snapshots": "maybe"}}).to_string(),
            "snapshots",
        ),
        (
            json!({"name": "gold", "attributes": "media=ssd"}).to_string(),
            "attributes",
        ),
        (
            json!({"name": "gold", "storagePools": {"(": ["fast"]}}).to_string(),
            "storagePools",
        ),
        (
            json!({"name": "gold", "storagePools": {"nas": ["[a-"]}}).to_string(),
            "storagePools",
        ),
        (
            json!({"name": "gold", "additionalStoragePools": {"nas": ["*"]}}).to_string(),
            "additionalStoragePools",
        ),
        (
            json!({"name": "gold", "requiredStorage": {"(": ["fast"]}}).to_string(),
            "is not a valid regular expression",
        ),
        (
            json!({"name": "gold", "excludeStoragePools": {"nas": ["(?P<"]}}).to_string(),
            "excludeStoragePools",
        ),
        (
            json!({"name": "gold", "storagePools": {"nas": "fast"}}).to_string(),
            "storagePools",
        ),
        (
            json!({"name": "gold", "storagePools": {"nas": [1]}}).to_string(),
            "storagePools",
        ),
        (json!({"name": 5}).to_string(), "name"),
        (json!({"name": ""}).to_string(), "name must not be empty"),
        (
            json!({"attributes": {}}).to_string(),
            "name must not be empty",
        ),
        (
            json!({"name": "a/b"}).to_string(),
            "name must not contain '/'",
        ),
        (json!({"name": ".."}).to_string(), "name"),
        (json!({"name": "a\u{0}b"}).to_string(), "NUL"),
        (
            json!({"name": "g".repeat(300)}).to_string(),
            "longer than 253",
        ),
        (json!({"name": "gold", "version": 1}).to_string(), "version"),
    ];
    for (body, needle) in &cases {
        let r = api
            .refused_post(&format!("{V1}/storageclass"), body.clone(), 400)
            .await;
        let msg = error_of(&r, Some(("storageClass", json!(""))));
        assert!(
            msg.contains(needle),
            "{body}: {msg:?} does not contain {needle:?}"
        );
    }
    assert_eq!(api.list("storageclass", "storageClasses").await, ["any"]);
    api.shutdown().await;
}

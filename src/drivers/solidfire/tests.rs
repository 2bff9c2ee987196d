//! Unit tests of the solidfire-san driver: config parsing (fields named in errors, Go field
//! case, secrets kept out of views), names, and the Element error classes.

use serde_json::{Value, json};

use super::client::ElementError;
use super::config::*;
use super::wire::Qos;
use super::*;
use crate::drivers::testing::{class_name, merged};

fn base() -> Value {
    json!({
        "version": 1, "storageDriverName": "solidfire-san",
        "Endpoint": "https://admin:pa%40ss-canary@10.0.0.1/json-rpc/7.0",
        "SVIP": "10.0.0.2:3260", "TenantName": "trident",
        "Types": [
            {"Type": "Bronze", "Qos": {"minIOPS": 1000, "maxIOPS": 2000, "burstIOPS": 4000}},
            {"Type": "Gold", "Qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000}},
        ],
    })
}

fn parse(doc: &Value) -> DriverResult<SolidFireConfig> {
    let common = CommonConfig::parse(doc)?;
    SolidFireConfig::parse(doc, &common)
}

fn invalid(doc: Value) -> String {
    match parse(&doc) {
        Err(DriverError::Invalid(m)) => m,
        other => panic!("expected Invalid for {doc}, got {other:?}"),
    }
}

fn driver(doc: &Value) -> SolidFireDriver {
    let common = CommonConfig::parse(doc).unwrap();
    SolidFireDriver::from_config(doc, &common).unwrap()
}

#[test]
fn trident_backend_file_parses() {
    let c = parse(&base()).unwrap();
    // Versions below 8.0 are raised to 8.0; the password is percent-decoded.
    assert_eq!(c.url, "https://10.0.0.1/json-rpc/8.0");
    assert_eq!(c.api_version, "8.0");
    assert_eq!(c.username, "admin");
    assert_eq!(c.password.expose(), "pa@ss-canary");
    assert_eq!(c.svip, "10.0.0.2:3260");
    assert_eq!(c.tenant_name, "trident");
    assert_eq!(c.initiator_iface, "default");
    assert_eq!(c.legacy_name_prefix, "netappdvp-");
    assert_eq!(c.default_block_size, 512);
    assert!(!c.use_chap);
    assert!(c.tls.verify);
    let types = c.types.as_ref().unwrap();
    assert_eq!(types.len(), 2);
    assert_eq!(types[1].name, "Gold");
    assert_eq!(types[1].qos.burst_iops, 10000);
    assert_eq!(c.default_backend_name(), "solidfire_10.0.0.2");
}

#[test]
fn go_field_case_and_options() {
    let doc = json!({
        "version": 1, "storageDriverName": "solidfire-san",
        "EndPoint": "https://u:p@mvip.example:8443/json-rpc/10.3",
        "svip": "10.0.0.2:3260", "tenantname": "t", "initiatoriface": "eth1",
        "types": [{"type": "x", "qos": {"miniops": 100, "maxiops": 200, "burstiops": 300}}],
        "accessgroups": [3, 4], "usechap": "true", "defaultblocksize": 4096,
        "legacyNamePrefix": "old-", "limitVolumeSize": "50Gi", "tlsVerify": false,
    });
    let c = parse(&doc).unwrap();
    assert_eq!(c.url, "https://mvip.example:8443/json-rpc/10.3");
    assert_eq!(c.initiator_iface, "eth1");
    assert_eq!(c.access_groups, vec![3, 4]);
    assert!(c.use_chap);
    assert_eq!(c.default_block_size, 4096);
    assert_eq!(c.legacy_name_prefix, "old-");
    assert_eq!(c.limit_volume_size, Some(50 << 30));
    assert!(!c.tls.verify);
    assert_eq!(c.types.unwrap()[0].qos.min_iops, 100);
}

#[test]
fn without_types_one_default_pool() {
    for types in [Value::Null, json!([])] {
        let mut doc = base();
        doc["Types"] = types;
        let d = driver(&doc);
        assert!(d.config().types.is_none());
        let pools = d.pools();
        assert_eq!(pools.len(), 1);
        assert_eq!(pools[0].name, DEFAULT_POOL);
        assert_eq!(
            pools[0].offers["IOPS"],
            Offer::Int {
                min: 1000,
                max: 10000
            }
        );
    }
}

#[test]
fn one_pool_per_type_with_trident_offers() {
    let pools = driver(&base()).pools();
    let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["Bronze", "Gold"]);
    let gold = &pools[1].offers;
    assert_eq!(
        gold["IOPS"],
        Offer::Int {
            min: 6000,
            max: 8000
        }
    );
    assert_eq!(gold["media"], Offer::strings(["ssd"]));
    assert_eq!(gold["provisioningType"], Offer::strings(["thin"]));
    assert_eq!(gold["backendType"], Offer::strings(["solidfire-san"]));
    assert_eq!(gold["snapshots"], Offer::Bool(true));
    assert_eq!(gold["clones"], Offer::Bool(true));
    assert_eq!(gold["encryption"], Offer::Bool(false));
}

#[test]
fn config_errors_name_the_field() {
    let without = |key: &str| {
        let mut d = base();
        d.as_object_mut().unwrap().remove(key);
        d
    };
    assert!(invalid(without("Endpoint")).contains("EndPoint"));
    assert!(invalid(without("SVIP")).contains("SVIP"));
    assert!(invalid(without("TenantName")).contains("TenantName"));
    let with = |extra: Value| merged(base(), extra);
    for (extra, field) in [
        (json!({"Endpoint": "http://a:b@h/json-rpc/8.0"}), "EndPoint"),
        (json!({"Endpoint": "https://h/json-rpc/8.0"}), "EndPoint"),
        (json!({"Endpoint": "https://a:b@h/api/8.0"}), "EndPoint"),
        (json!({"Endpoint": "https://a:b@h/json-rpc/v8"}), "EndPoint"),
        (json!({"Endpoint": "not a url"}), "EndPoint"),
        (json!({"Endpoint": 5}), "EndPoint"),
        (json!({"Types": {"Type": "x"}}), "Types"),
        (json!({"Types": [{"Qos": {}}]}), "Types[0].Type"),
        (json!({"Types": [{"Type": "a"}]}), "Types[0].Qos"),
        (
            json!({"Types": [{"Type": "a", "Qos": {"minIOPS": 1, "maxIOPS": 2}}]}),
            "Types[0].Qos.burstIOPS",
        ),
        (
            json!({"Types": [{"Type": "a", "Qos": {"minIOPS": 5, "maxIOPS": 2, "burstIOPS": 9}}]}),
            "Types[0].Qos",
        ),
        (
            json!({"Types": [
                {"Type": "a", "Qos": {"minIOPS": 1, "maxIOPS": 2, "burstIOPS": 3}},
                {"Type": "a", "Qos": {"minIOPS": 1, "maxIOPS": 2, "burstIOPS": 3}}]}),
            "Types[1].Type",
        ),
        (json!({"AccessGroups": [1, 2, 3, 4, 5]}), "AccessGroups"),
        (json!({"AccessGroups": ["a"]}), "AccessGroups"),
        (json!({"AccessGroups": 1}), "AccessGroups"),
        (json!({"UseCHAP": "maybe"}), "UseCHAP"),
        (json!({"DefaultBlockSize": 1024}), "DefaultBlockSize"),
        (json!({"limitVolumeSize": "lots"}), "limitVolumeSize"),
        (json!({"tlsVerify": 3}), "tlsVerify"),
        (
            json!({"trustedCACertificate": "nope"}),
            "trustedCACertificate",
        ),
        (json!({"apiTimeout": "soon"}), "apiTimeout"),
    ] {
        let msg = invalid(with(extra.clone()));
        assert!(msg.contains(field), "{extra}: {msg}");
        assert!(!msg.contains("canary"), "{msg}");
    }
}

#[test]
fn secrets_stay_out_of_views() {
    let d = driver(&merged(base(), json!({"backendName": "sf1"})));
    let ext = d.external_config();
    let text = ext.to_string();
    assert!(
        !text.contains("canary") && !text.contains("admin"),
        "{text}"
    );
    assert!(!format!("{d:?}").contains("canary"));
    assert_eq!(ext["EndPoint"], "https://10.0.0.1/json-rpc/8.0");
    assert_eq!(ext["SVIP"], "10.0.0.2:3260");
    assert_eq!(ext["TenantName"], "trident");
    assert_eq!(ext["storagePrefix"], "");
    assert_eq!(ext["Types"][0]["QOS"]["minIOPS"], 1000);
    // The secrets module cuts the URL's user-info out of the stored document.
    let mut doc = base();
    let secrets = crate::secrets::split(&mut doc);
    assert!(!doc.to_string().contains("canary"), "{doc}");
    assert!(!secrets.is_empty());
}

#[test]
fn internal_names_follow_trident() {
    assert_eq!(
        solidfire_internal_name("default-basic_6cb6b.x"),
        "default-basic-6cb6b-x"
    );
    assert_eq!(solidfire_internal_name("a__b"), "a-b");
    assert_eq!(solidfire_internal_name("a_-b"), "a-b");
    // One non-overlapping pass, like Go's strings.Replace.
    assert_eq!(solidfire_internal_name("a___b"), "a--b");
    // The storage prefix is always empty.
    let d = driver(&merged(base(), json!({"storagePrefix": "px_"})));
    assert_eq!(d.internal_name("pvc_1"), "pvc-1");
}

fn api(name: &str) -> ElementError {
    ElementError::Api {
        method: "CreateVolume".into(),
        code: 500,
        name: name.into(),
        message: format!("{name} message"),
    }
}

fn class(e: ElementError) -> &'static str {
    class_name(&e.into_driver())
}

#[test]
fn element_error_classes() {
    for (name, want) in [
        ("xUnknownAccount", "not_found"),
        ("xVolumeIDDoesNotExist", "not_found"),
        ("xSnapshotIDDoesNotExist", "not_found"),
        ("xVolumeAccessGroupIDDoesNotExist", "not_found"),
        ("xAsyncHandleDoesNotExist", "not_found"),
        ("xDuplicateUsername", "exists"),
        ("xExceededLimit", "conflict"),
        ("xSliceFull", "conflict"),
        ("xInsufficientSpace", "conflict"),
        ("xMaxSnapshotsPerVolumeExceeded", "conflict"),
        ("xInvalidParameter", "invalid"),
        ("xMissingParameter", "invalid"),
        ("xQoSInvalid", "invalid"),
        ("xUnknownAPIMethod", "unsupported"),
        ("xUnknownMethod", "unsupported"),
        ("xNotReadyForIO", "unavailable"),
        ("xDBConnectionLoss", "unavailable"),
        ("xSomethingNew", "other"),
    ] {
        assert_eq!(class(api(name)), want, "{name}");
    }
    // The array's name and message are kept.
    let msg = api("xExceededLimit").into_driver().to_string();
    assert!(msg.contains("xExceededLimit message") && msg.contains("CreateVolume"));
    let msg = api("xUnknownAPIMethod").into_driver().to_string();
    assert!(msg.contains("needs Element 8.0"), "{msg}");
    assert_eq!(class(ElementError::Unauthorized), "invalid");
    let t = ElementError::Transport {
        method: "x".into(),
        msg: "refused".into(),
        retryable: true,
    };
    assert!(t.is_retryable());
    assert_eq!(class(t), "unavailable");
    assert_eq!(
        class(ElementError::Http {
            method: "x".into(),
            status: 503
        }),
        "unavailable"
    );
    assert!(api("xNotReadyForIO").is_retryable());
    assert!(!api("xExceededLimit").is_retryable());
}

#[test]
fn versions_compare_numerically() {
    assert!(version_less("7.0", "8.0"));
    assert!(version_less("8", "8.1"));
    assert!(!version_less("10.0", "8.0"));
    assert!(!version_less("8.0", "8"));
    assert_eq!(
        parse_endpoint("https://a:b@h/json-rpc/1.0")
            .unwrap()
            .version,
        "8.0"
    );
    assert_eq!(
        parse_endpoint("https://a:b@h/json-rpc/12.3/").unwrap().url,
        "https://h/json-rpc/12.3"
    );
}

fn discovered(default_qos: Option<Qos>) -> Discovered {
    Discovered {
        backend_name: "b".into(),
        account: serde_json::from_value(json!({"accountID": 7, "username": "trident"})).unwrap(),
        access_groups: vec![],
        use_chap: true,
        default_qos,
        serial_numbers: vec![],
    }
}

#[test]
fn qos_comes_from_the_volume_then_the_pool_type() {
    let d = driver(&base());
    let disc = discovered(None);
    let cfg = |qos: &str, t: &str| crate::model::VolumeConfig {
        qos: qos.into(),
        qos_type: t.into(),
        ..Default::default()
    };
    let gold = d.plan_qos(&disc, "Gold", &cfg("", "")).unwrap().unwrap();
    assert_eq!(
        (gold.min_iops, gold.max_iops, gold.burst_iops),
        (6000, 8000, 10000)
    );
    let bronze = d
        .plan_qos(&disc, "Gold", &cfg("", "Bronze"))
        .unwrap()
        .unwrap();
    assert_eq!(bronze.min_iops, 1000);
    let own = d
        .plan_qos(&disc, "Gold", &cfg("100,200,300", "Bronze"))
        .unwrap()
        .unwrap();
    assert_eq!(
        (own.min_iops, own.max_iops, own.burst_iops),
        (100, 200, 300)
    );
    match d.plan_qos(&disc, "Gold", &cfg("", "Platinum")) {
        Err(DriverError::Invalid(m)) => assert!(m.contains("type") && m.contains("Platinum")),
        other => panic!("{other:?}"),
    }
    match d.plan_qos(&disc, "Gold", &cfg("9,1,1", "")) {
        Err(DriverError::Invalid(m)) => assert!(m.contains("qos"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.plan_qos(&disc, "Silver", &cfg("", "")) {
        Err(DriverError::Invalid(m)) => assert!(m.contains("Silver"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Without Types: the default pool takes the cluster's default QoS (or `{}`).
    let mut doc = base();
    doc["Types"] = Value::Null;
    let d = driver(&doc);
    let q = Qos {
        min_iops: 50,
        max_iops: 15000,
        burst_iops: 15000,
    };
    assert_eq!(
        d.plan_qos(&discovered(Some(q)), DEFAULT_POOL, &cfg("", ""))
            .unwrap(),
        Some(q)
    );
    assert_eq!(
        d.plan_qos(&discovered(None), DEFAULT_POOL, &cfg("", ""))
            .unwrap(),
        None
    );
}

#[test]
fn sizes_are_checked_against_the_minimum_and_the_limit() {
    let d = driver(&merged(base(), json!({"limitVolumeSize": "2GB"})));
    assert!(d.check_size(MIN_VOLUME_BYTES).is_ok());
    assert!(d.check_size(2_000_000_000).is_ok());
    match d.check_size(MIN_VOLUME_BYTES - 1) {
        Err(DriverError::Invalid(m)) => assert!(m.contains("minimum"), "{m}"),
        other => panic!("{other:?}"),
    }
    match d.check_size(2_000_000_001) {
        Err(DriverError::Invalid(m)) => assert!(m.contains("limitVolumeSize"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Storch's 1 GB Gold volume `pvc-1` of account 7, 512e, as the array lists it.
fn gold_volume() -> wire::Volume {
    serde_json::from_value(json!({
        "volumeID": 42, "name": "pvc-1", "accountID": 7, "status": "active",
        "totalSize": 1_000_000_000u64, "enable512e": true,
        "qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000},
        "attributes": {"storch": {"name": "pvc-1", "createdBy": "storch", "pool": "Gold"}},
    }))
    .unwrap()
}

fn gold_plan(d: &SolidFireDriver) -> volumes::Plan {
    let req = crate::drivers::testing::req("pvc-1", "Gold", 1_000_000_000);
    volumes::Plan::create(d, &discovered(None), &req).unwrap()
}

#[test]
fn storch_volume_as_planned_is_adoptable() {
    let d = driver(&base());
    let v = gold_volume();
    assert!(volumes::is_ours(&v));
    assert_eq!(gold_plan(&d).mismatch(&v), None);
    // The cluster may round the size up to a whole MiB.
    let mut rounded = v.clone();
    rounded.total_size = 1_000_000_000 + 1000;
    assert_eq!(gold_plan(&d).mismatch(&rounded), None);
}

#[test]
fn storch_volume_made_otherwise_names_the_field() {
    let d = driver(&base());
    type Change = fn(&mut wire::Volume);
    let cases: [(&str, Change); 7] = [
        ("accountID is 8, planned 7", |v| v.account_id = 8),
        ("totalSize is 2000000000, planned 1000000000", |v| {
            v.total_size = 2_000_000_000
        }),
        ("qos.minIOPS is 1000, planned 6000", |v| {
            v.qos.min_iops = 1000
        }),
        ("qos.maxIOPS is 9000, planned 8000", |v| {
            v.qos.max_iops = 9000
        }),
        ("qos.burstIOPS is 12000, planned 10000", |v| {
            v.qos.burst_iops = 12000
        }),
        ("enable512e is false, planned true", |v| {
            v.enable512e = false
        }),
        (
            "pool (in its attributes) is \"Bronze\", planned \"Gold\"",
            |v| v.attributes["storch"]["pool"] = json!("Bronze"),
        ),
    ];
    for (want, change) in cases {
        let mut v = gold_volume();
        change(&mut v);
        let got = gold_plan(&d).mismatch(&v);
        assert_eq!(got.as_deref(), Some(format!("its {want}").as_str()));
    }
    // A 4K plan (DefaultBlockSize 4096) does not take a 512e volume.
    let native = driver(&merged(base(), json!({"DefaultBlockSize": 4096})));
    assert_eq!(
        gold_plan(&native).mismatch(&gold_volume()).as_deref(),
        Some("its enable512e is true, planned false")
    );
}

#[test]
fn a_volume_without_storch_attributes_for_its_name_is_not_ours() {
    let mut v = gold_volume();
    v.attributes = json!({"docker-name": "pvc-1", "fstype": "xfs"});
    assert!(!volumes::is_ours(&v), "Trident's attributes");
    v.attributes = json!({});
    assert!(!volumes::is_ours(&v), "no attributes");
    v.attributes = json!({"storch": {"name": "pvc-2", "createdBy": "storch"}});
    assert!(!volumes::is_ours(&v), "storch's attributes of another name");
    v.attributes = json!({"storch": {"name": "pvc-1", "createdBy": "someone"}});
    assert!(!volumes::is_ours(&v), "made by someone else");
}

#[test]
fn group_names_fit_element() {
    use super::publish::group_name;
    assert_eq!(group_name("worker-1"), "storch-worker-1");
    assert_eq!(group_name(&"n".repeat(200)).len(), 64);
}

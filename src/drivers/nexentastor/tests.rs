//! Unit tests: the config (seed keys, defaults, errors naming the field, secrets never
//! echoed), the map file, class overrides, names and error classes.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::client::NefError;
use super::config::{NexentaConfig, expand_map, parse_rest_ip};
use super::*;
use crate::model::Request;

fn base() -> Value {
    json!({
        "version": 1,
        "storageDriverName": "nexentastor-iscsi",
        "restIp": "https://10.0.0.1:8443,https://10.0.0.2",
        "username": "admin",
        "password": "pw-canary-1",
        "defaultDataIp": "10.0.1.1",
        "defaultVolumeGroup": "tank/csi",
        "defaultTarget": "iqn.2005-07.com.nexenta:01:csi",
        "defaultTargetGroup": "tg1",
    })
}

fn with(extra: Value) -> Value {
    crate::drivers::testing::merged(base(), extra)
}

fn invalid(doc: Value) -> String {
    match NexentaConfig::parse(&doc) {
        Err(DriverError::Invalid(msg)) => {
            assert!(!msg.contains("pw-canary"), "{msg}");
            assert!(!msg.contains("chap-canary"), "{msg}");
            msg
        }
        other => panic!("expected Invalid for {doc}, got {other:?}"),
    }
}

#[test]
fn seed_keys_and_defaults() {
    let c = NexentaConfig::parse(&base()).unwrap();
    assert_eq!(
        c.endpoints,
        ["https://10.0.0.1:8443", "https://10.0.0.2:8443"]
    );
    assert_eq!(c.username, "admin");
    assert_eq!(c.password.expose(), "pw-canary-1");
    assert_eq!(c.defaults.volume_group, "tank/csi");
    assert_eq!(c.defaults.host_group, "all");
    assert!(c.defaults.sparse);
    assert!(!c.defaults.dynamic);
    assert_eq!(c.defaults.luns_per_target, 256);
    assert!(!c.defaults.use_chap);
    assert!(c.tls.verify, "TLS is verified by default");
    assert_eq!(c.volume_groups, ["tank/csi"]);
    assert_eq!(c.default_backend_name(), "nexentastor_10.0.0.1");
    assert!(!format!("{c:?}").contains("pw-canary"));

    let c = NexentaConfig::parse(&with(json!({
        "sparseVolume": false, "dynamicTargetLunAllocation": "true", "numOfLunsPerTarget": 2,
        "useChapAuth": true, "chapUser": "u1", "chapSecret": "chap-canary-1234",
        "zone": "zone-1", "insecureSkipVerify": true, "iSCSITimeout": 300,
        "mountPointPermissions": "0750", "defaultHostGroup": "hg1",
        "volumeGroups": ["tank/other", "tank/csi"],
    })))
    .unwrap();
    assert!(!c.defaults.sparse && c.defaults.dynamic && c.defaults.use_chap);
    assert_eq!(c.defaults.luns_per_target, 2);
    assert_eq!(c.defaults.host_group, "hg1");
    assert_eq!(
        c.defaults.chap_secret.as_ref().unwrap().expose(),
        "chap-canary-1234"
    );
    assert!(!format!("{c:?}").contains("chap-canary"));
    assert_eq!(c.zone.as_deref(), Some("zone-1"));
    assert!(!c.tls.verify);
    assert_eq!(c.iscsi_timeout, Some(300));
    assert_eq!(c.mount_point_permissions.as_deref(), Some("0750"));
    assert_eq!(c.volume_groups, ["tank/csi", "tank/other"]);
}

#[test]
fn config_errors_name_the_field() {
    let mut no_ip = base();
    no_ip.as_object_mut().unwrap().remove("restIp");
    for (doc, needle) in [
        (no_ip, "missing restIp"),
        (with(json!({"restIp": ""})), "missing restIp"),
        (with(json!({"restIp": "ftp://x"})), "restIp"),
        (with(json!({"restIp": "https://a:b@x"})), "restIp"),
        (with(json!({"restIp": "https://x,,https://y"})), "restIp"),
        (with(json!({"username": 3})), "username"),
        (with(json!({"password": ""})), "missing password"),
        (
            with(json!({"defaultVolumeGroup": "tank"})),
            "defaultVolumeGroup",
        ),
        (
            with(json!({"defaultVolumeGroup": "a/b/c"})),
            "defaultVolumeGroup",
        ),
        (
            with(json!({"defaultDataIp": null})),
            "missing defaultDataIp",
        ),
        (with(json!({"defaultTarget": ""})), "missing defaultTarget"),
        (
            with(json!({"defaultTargetGroup": ""})),
            "missing defaultTargetGroup",
        ),
        (with(json!({"sparseVolume": "maybe"})), "sparseVolume"),
        (with(json!({"numOfLunsPerTarget": 0})), "numOfLunsPerTarget"),
        (
            with(json!({"numOfLunsPerTarget": "x"})),
            "numOfLunsPerTarget",
        ),
        (
            with(json!({"useChapAuth": true, "chapSecret": "chap-canary-1234"})),
            "chapUser",
        ),
        (
            with(json!({"useChapAuth": true, "chapUser": "u"})),
            "chapSecret",
        ),
        (with(json!({"chapSecret": "chap-canary"})), "chapSecret"),
        (with(json!({"iSCSITimeout": -1})), "iSCSITimeout"),
        (
            with(json!({"mountPointPermissions": "rwx"})),
            "mountPointPermissions",
        ),
        (
            with(json!({"trustedCACertificate": "nope"})),
            "trustedCACertificate",
        ),
        (with(json!({"volumeGroups": "tank/x"})), "volumeGroups"),
        (with(json!({"volumeGroups": ["tank"]})), "volumeGroups[0]"),
        (with(json!({"restIP": "x"})), "unknown key restIP"),
        (
            with(json!({"defaultVolumegroup": "x"})),
            "unknown key defaultVolumegroup",
        ),
    ] {
        let msg = invalid(doc.clone());
        assert!(msg.contains(needle), "{doc}: {msg}");
    }
    // Without fixed targets, dynamic allocation is needed.
    let c = NexentaConfig::parse(&with(json!({
        "defaultTarget": "", "defaultTargetGroup": "", "dynamicTargetLunAllocation": true
    })))
    .unwrap();
    assert!(c.defaults.dynamic);
}

#[test]
fn rest_ip_forms() {
    assert_eq!(
        parse_rest_ip("10.0.0.1, https://h2:9443 ,http://h3").unwrap(),
        ["https://10.0.0.1:8443", "https://h2:9443", "http://h3:8443"]
    );
    assert_eq!(parse_rest_ip("a,a").unwrap(), ["https://a:8443"]);
}

#[test]
fn class_parameters_override_the_defaults() {
    let c = NexentaConfig::parse(&with(json!({"volumeGroups": ["tank/b"]}))).unwrap();
    let s = |reqs: Vec<(&str, Request)>| {
        let map: BTreeMap<String, Request> =
            reqs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        c.settings("tank/b", &map)
    };
    let got = s(vec![
        ("volumeGroup", Request::String("tank/b".into())),
        ("dataIp", Request::String("10.9.9.9".into())),
        ("targetGroup", Request::String("tg9".into())),
        ("target", Request::String("iqn.x:9".into())),
        ("hostGroup", Request::String("hg9".into())),
        ("sparseVolume", Request::String("false".into())),
        ("dynamicTargetLunAllocation", Request::Bool(true)),
        ("numOfLunsPerTarget", Request::String("4".into())),
        ("useChapAuth", Request::Bool(true)),
        ("chapUser", Request::String("cu".into())),
        ("chapSecret", Request::String("chap-canary-class".into())),
        ("media", Request::String("ssd".into())),
    ])
    .unwrap();
    assert_eq!(got.volume_group, "tank/b");
    assert_eq!(got.data_ip, "10.9.9.9");
    assert_eq!(
        (got.target.as_str(), got.target_group.as_str()),
        ("iqn.x:9", "tg9")
    );
    assert_eq!(got.host_group, "hg9");
    assert!(!got.sparse && got.dynamic && got.use_chap);
    assert_eq!(got.luns_per_target, 4);
    assert_eq!(got.chap_secret.unwrap().expose(), "chap-canary-class");
    // Defaults stay when the class says nothing; provisioningType thick turns sparse off.
    let got = s(vec![("provisioningType", Request::String("thick".into()))]).unwrap();
    assert_eq!(got.data_ip, "10.0.1.1");
    assert!(!got.sparse);
    for (reqs, needle) in [
        (
            vec![("volumeGroup", Request::String("tank/csi".into()))],
            "parameters.volumeGroup",
        ),
        (
            vec![("sparseVolume", Request::String("perhaps".into()))],
            "parameters.sparseVolume",
        ),
        (
            vec![("numOfLunsPerTarget", Request::Int(0))],
            "parameters.numOfLunsPerTarget",
        ),
        (
            vec![("chapSecret", Request::String("short".into()))],
            "parameters.chapSecret",
        ),
        (
            vec![("useChapAuth", Request::Bool(true))],
            "parameters.chapUser",
        ),
        (
            vec![("provisioningType", Request::String("fat".into()))],
            "parameters.provisioningType",
        ),
    ] {
        match s(reqs) {
            Err(DriverError::Invalid(msg)) => assert!(msg.contains(needle), "{msg}"),
            other => panic!("{needle}: {other:?}"),
        }
    }
}

#[test]
fn map_file_becomes_one_backend_per_entry() {
    let doc = json!({"nexentastor_map": {
        "nexstor-1": {"restIp": "https://10.0.0.1:8443", "username": "admin",
            "password": "pw-canary-1", "defaultDataIp": "10.0.1.1",
            "defaultVolumeGroup": "tank/csi", "dynamicTargetLunAllocation": true},
        "nexstor-2": {"restIp": "10.0.0.2", "username": "admin", "password": "pw-canary-2",
            "defaultDataIp": "10.0.1.2", "defaultVolumeGroup": "tank/csi",
            "defaultTarget": "iqn.x:1", "defaultTargetGroup": "tg1"},
    }});
    let backends = expand_map(&doc).unwrap().unwrap();
    assert_eq!(backends.len(), 2);
    for (b, name) in backends.iter().zip(["nexstor-1", "nexstor-2"]) {
        assert_eq!(b["backendName"], name);
        assert_eq!(b["storageDriverName"], DRIVER_NAME);
        let built = crate::drivers::build_driver(b).unwrap();
        assert_eq!(built.common.backend_name.as_deref(), Some(name));
    }
    assert!(
        expand_map(&base()).is_none(),
        "a plain config is not a map file"
    );
    for (doc, needle) in [
        (json!({"nexentastor_map": {}}), "nexentastor_map"),
        (json!({"nexentastor_map": []}), "nexentastor_map"),
        (json!({"nexentastor_map": {"a": 1}}), "nexentastor_map.a"),
        (
            json!({"nexentastor_map": {"a/b": {}}}),
            "nexentastor_map.a/b",
        ),
        (
            json!({"nexentastor_map": {"a": {}}, "server": {}}),
            "unknown key \"server\"",
        ),
    ] {
        let msg = expand_map(&doc).unwrap().unwrap_err();
        assert!(msg.contains(needle), "{doc}: {msg}");
    }
}

#[test]
fn the_example_map_file_is_a_config_file() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/nexentastor/nexentastor_map.yaml");
    let c = crate::config::FileConfig::from_file(&path).unwrap();
    let names: Vec<&str> = c
        .backends
        .iter()
        .map(|b| b["backendName"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nexstor-1", "nexstor-2"]);
    // The single backend file and the classes of the same folder.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/nexentastor");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("backend.json")).unwrap()).unwrap();
    let built = crate::drivers::build_driver(&doc).unwrap();
    assert_eq!(built.common.backend_name.as_deref(), Some("nexstor-1"));
    for class in [
        "storage-class-thin.json",
        "storage-class-thick.json",
        "storage-class-chap.json",
    ] {
        let text = std::fs::read(dir.join(class)).unwrap();
        crate::model::StorageClassConfig::from_json(&text).unwrap();
    }
    // An entry with a bad key stops the file, naming the entry and the key.
    let err = crate::config::FileConfig::parse(
        Path::new("m.yaml"),
        "nexentastor_map:\n  nx:\n    restIp: https://h\n    usernme: a\n",
    )
    .unwrap_err();
    assert!(
        err.contains("backends[0] (nx)") && err.contains("usernme"),
        "{err}"
    );
}

#[test]
fn internal_names_are_dataset_names() {
    assert_eq!(nexenta_internal_name("", "pvc-1_a.b"), "pvc-1_a.b");
    assert_eq!(nexenta_internal_name("st_", "a b/c@d"), "st_a-b-c-d");
}

#[test]
fn error_codes_become_classes_keeping_the_message() {
    let api = |status: u16, code: &str| NefError::Api {
        call: "POST /storage/volumes".into(),
        status,
        code: code.into(),
        message: "appliance says so".into(),
    };
    type Is = fn(&DriverError) -> bool;
    let cases: Vec<(NefError, Is)> = vec![
        (api(400, "EEXIST"), |e| {
            matches!(e, DriverError::AlreadyExists(_))
        }),
        (api(404, "ENOENT"), |e| {
            matches!(e, DriverError::NotFound(_))
        }),
        (api(500, "EBUSY"), |e| matches!(e, DriverError::Conflict(_))),
        (api(400, "EINVAL"), |e| matches!(e, DriverError::Invalid(_))),
        (api(422, "EBADARG"), |e| {
            matches!(e, DriverError::Invalid(_))
        }),
        (api(401, "EAUTH"), |e| matches!(e, DriverError::Invalid(_))),
        (api(503, "EFAILED"), |e| {
            matches!(e, DriverError::Unavailable(_))
        }),
        (api(400, "EOTHER"), |e| matches!(e, DriverError::Other(_))),
    ];
    for (e, is) in cases {
        let d = e.clone().into_driver();
        assert!(is(&d), "{e:?} → {d:?}");
        assert!(d.to_string().contains("appliance says so"), "{d}");
    }
}

#[test]
fn built_through_the_registry() {
    let built = crate::drivers::build_driver(&base()).unwrap();
    assert_eq!(built.driver.driver_name(), DRIVER_NAME);
    let shown = built.driver.external_config().to_string();
    assert!(!shown.contains("pw-canary"), "{shown}");
    assert_eq!(
        crate::drivers::attachment(DRIVER_NAME, &crate::model::AccessInfo::default()),
        Some(Attachment::Iscsi)
    );
    let mut doc =
        with(json!({"useChapAuth": true, "chapUser": "u", "chapSecret": "chap-canary-1234"}));
    let secrets = crate::secrets::split(&mut doc);
    assert!(secrets.contains_key("/password") && secrets.contains_key("/chapSecret"));
    assert!(!doc.to_string().contains("canary"));
}

/// Every class parameter the model declares for this driver changes its setting, and a
/// class's values override the backend's defaults.
#[test]
fn the_declared_class_parameters_override_the_defaults() {
    let cfg = NexentaConfig::parse(&with(json!({"volumeGroups": ["tank/b"]}))).unwrap();
    let declared = crate::model::storage_class::driver_parameters::parameters_of(DRIVER_NAME);
    let sample = |name: &str| match name {
        "volumeGroup" => "tank/b",
        "dataIp" => "192.0.2.99",
        "targetGroup" => "tg-class",
        "target" => "iqn.2005-07.com.nexenta:01:class",
        "hostGroup" => "hg-class",
        "sparseVolume" | "dynamicTargetLunAllocation" => "false",
        "numOfLunsPerTarget" => "7",
        "useChapAuth" => "true",
        "chapUser" => "class-user",
        "chapSecret" => "class-secret-123",
        other => panic!("no sample for {other}: add one"),
    };
    let requests: BTreeMap<String, Request> = declared
        .iter()
        .map(|p| (p.name.to_string(), Request::String(sample(p.name).into())))
        .collect();
    let s = cfg.settings("tank/b", &requests).unwrap();
    assert_eq!(s.volume_group, "tank/b");
    assert_eq!(s.data_ip, "192.0.2.99");
    assert_eq!(
        (s.target_group.as_str(), s.target.as_str()),
        ("tg-class", "iqn.2005-07.com.nexenta:01:class")
    );
    assert_eq!(s.host_group, "hg-class");
    assert!(!s.sparse && !s.dynamic && s.use_chap);
    assert_eq!(s.luns_per_target, 7);
    assert_eq!(s.chap_user, "class-user");
    assert_eq!(
        s.chap_secret.as_ref().map(|x| x.expose()),
        Some("class-secret-123")
    );
}

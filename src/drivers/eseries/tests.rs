//! Unit tests of the eseries-iscsi driver: config parsing (fields named in errors, unknown
//! keys refused, TLS defaults, secrets kept out of views), names, offers, size units and the
//! SANtricity error classes.

use serde_json::{Value, json};

use super::client::ProxyError;
use super::config::*;
use super::volumes::size_units;
use super::wire::{ErrorBody, Pool};
use super::*;
use crate::drivers::testing::{class_name, merged};

/// Trident's sample E-Series backend file.
fn base() -> Value {
    json!({
        "version": 1,
        "storageDriverName": "eseries-iscsi",
        "webProxyHostname": "proxy.example",
        "webProxyPort": "8443",
        "webProxyUseHTTP": false,
        "webProxyVerifyTLS": false,
        "username": "rw",
        "password": "proxy-canary",
        "controllerA": "10.0.0.5",
        "controllerB": "10.0.0.6",
        "passwordArray": "array-canary",
        "hostDataIP": "10.0.0.101",
        "poolNameSearchPattern": "^pool_",
        "hostType": "linux_dm_mp",
        "accessGroupName": "k8s_hosts",
        "storagePrefix": "st_",
    })
}

fn parse(doc: &Value) -> DriverResult<EseriesConfig> {
    let common = CommonConfig::parse(doc)?;
    EseriesConfig::parse(doc, &common)
}

fn invalid(doc: Value) -> String {
    match parse(&doc) {
        Err(DriverError::Invalid(m)) => {
            assert!(!m.contains("canary"), "a secret in {m}");
            m
        }
        other => panic!("expected Invalid for {doc}, got {other:?}"),
    }
}

fn without(key: &str) -> Value {
    let mut d = base();
    d.as_object_mut().unwrap().remove(key);
    d
}

fn driver(doc: &Value) -> EseriesDriver {
    let common = CommonConfig::parse(doc).unwrap();
    EseriesDriver::from_config(doc, &common).unwrap()
}

#[test]
fn trident_backend_file_parses() {
    let c = parse(&base()).unwrap();
    assert_eq!(c.base_url, "https://proxy.example:8443/devmgr/v2");
    assert_eq!(c.username, "rw");
    assert_eq!(c.password.expose(), "proxy-canary");
    assert_eq!(c.password_array.expose(), "array-canary");
    assert_eq!(
        (c.controller_a.as_str(), c.controller_b.as_str()),
        ("10.0.0.5", "10.0.0.6")
    );
    assert_eq!(c.host_data_ip.to_string(), "10.0.0.101");
    assert!(c.pool_pattern.is_match("pool_a") && !c.pool_pattern.is_match("a_pool_"));
    assert_eq!(c.host_type_code(), "LnxALUA");
    assert_eq!(c.access_group_name, "k8s_hosts");
    assert_eq!(c.prefix, "st_");
    assert!(!c.tls.verify);
    assert_eq!(c.default_backend_name(), "eseries_10.0.0.101");
    assert_eq!(c.api_timeout, DEFAULT_API_TIMEOUT);
    assert!(!c.offer_clones);
    assert!(
        parse(&merged(base(), json!({"offerClones": true})))
            .unwrap()
            .offer_clones
    );
}

#[test]
fn defaults_fill_what_the_file_leaves_out() {
    let doc = json!({
        "version": 1, "storageDriverName": "eseries-iscsi", "webProxyHostname": "10.0.0.1",
        "username": "admin", "controllerA": "10.0.0.5", "controllerB": "10.0.0.5",
        "hostDataIP": "10.0.0.101",
    });
    let c = parse(&doc).unwrap();
    assert_eq!(c.base_url, "https://10.0.0.1:8443/devmgr/v2");
    assert_eq!(c.prefix, DEFAULT_PREFIX);
    assert_eq!(c.access_group_name, DEFAULT_ACCESS_GROUP);
    assert_eq!(c.host_type, DEFAULT_HOST_TYPE);
    assert!(c.pool_pattern.is_match("anything"));
    assert!(c.password_array.expose().is_empty());
    // Trident's default: the proxy's certificate is not checked (with a warning).
    assert!(!c.tls.verify);
    // Plain HTTP defaults to 8080; a numeric port is accepted too.
    let c = parse(&merged(doc.clone(), json!({"webProxyUseHTTP": true}))).unwrap();
    assert_eq!(c.base_url, "http://10.0.0.1:8080/devmgr/v2");
    let c = parse(&merged(doc.clone(), json!({"webProxyPort": 9443}))).unwrap();
    assert_eq!(c.web_proxy_port, 9443);
    let c = parse(&merged(doc.clone(), json!({"webProxyHostname": "fd00::1"}))).unwrap();
    assert_eq!(c.base_url, "https://[fd00::1]:8443/devmgr/v2");
    // The legacy key, and Go's case-insensitive matching.
    let mut legacy = doc.clone();
    legacy.as_object_mut().unwrap().remove("hostDataIP");
    legacy["hostData_IP"] = json!("10.0.0.102");
    legacy["WEBPROXYHOSTNAME"] = legacy
        .as_object_mut()
        .unwrap()
        .remove("webProxyHostname")
        .unwrap();
    let c = parse(&legacy).unwrap();
    assert_eq!(c.host_data_ip.to_string(), "10.0.0.102");
    // An empty storage prefix is allowed (names are then 22 characters).
    let c = parse(&merged(doc, json!({"storagePrefix": ""}))).unwrap();
    assert_eq!(c.prefix, "");
}

#[test]
fn tls_verifies_when_asked() {
    let verify = parse(&merged(base(), json!({"webProxyVerifyTLS": true}))).unwrap();
    assert!(verify.tls.verify && verify.tls.trusted_ca_pem.is_none());
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let mut doc = without("webProxyVerifyTLS");
    doc["trustedCACertificate"] = json!(pem);
    let ca = parse(&doc).unwrap();
    assert!(ca.tls.verify, "a trusted CA alone turns checking on");
    assert_eq!(ca.tls.trusted_ca_pem.as_deref(), Some(pem.trim()));
    assert!(
        invalid(merged(base(), json!({"trustedCACertificate": pem}))).contains("webProxyVerifyTLS")
    );
    let http = json!({"webProxyUseHTTP": true, "webProxyVerifyTLS": true});
    assert!(invalid(merged(base(), http)).contains("webProxyUseHTTP"));
    let http = parse(&merged(base(), json!({"webProxyUseHTTP": "true"}))).unwrap();
    assert!(http.base_url.starts_with("http://"));
}

#[test]
fn config_errors_name_the_field() {
    for key in [
        "webProxyHostname",
        "controllerA",
        "controllerB",
        "hostDataIP",
        "username",
    ] {
        let msg = invalid(without(key));
        assert!(msg.contains(key), "{key}: {msg}");
    }
    for (extra, field) in [
        (json!({"webProxyPort": "http"}), "webProxyPort"),
        (json!({"webProxyPort": 70000}), "webProxyPort"),
        (json!({"webProxyPort": "0"}), "webProxyPort"),
        (json!({"webProxyPort": true}), "webProxyPort"),
        (json!({"webProxyUseHTTP": "maybe"}), "webProxyUseHTTP"),
        (json!({"webProxyVerifyTLS": 3}), "webProxyVerifyTLS"),
        (
            json!({"webProxyHostname": "https://proxy/"}),
            "webProxyHostname",
        ),
        (json!({"controllerA": "10.0.0.5 10.0.0.6"}), "controllerA"),
        (json!({"hostDataIP": "data.example"}), "hostDataIP"),
        (json!({"hostDataIP": 5}), "hostDataIP"),
        (
            json!({"poolNameSearchPattern": "(["}),
            "poolNameSearchPattern",
        ),
        (json!({"hostType": "linux dm"}), "hostType"),
        (
            json!({"accessGroupName": "a-group-name-longer-than-thirty"}),
            "accessGroupName",
        ),
        (json!({"accessGroupName": "no spaces"}), "accessGroupName"),
        (json!({"storagePrefix": "nine_char"}), "storagePrefix"),
        (json!({"storagePrefix": "a.b"}), "storagePrefix"),
        (json!({"password": 5}), "password"),
        (json!({"passwordArray": ["x"]}), "passwordArray"),
        (
            json!({"trustedCACertificate": "nope"}),
            "trustedCACertificate",
        ),
        (json!({"apiTimeout": "soon"}), "apiTimeout"),
        (json!({"jobTimeout": "0s"}), "jobTimeout"),
        (json!({"offerClones": "sometimes"}), "offerClones"),
        (json!({"hostDataIp_": "10.0.0.1"}), "hostDataIp_"),
        (json!({"svm": "vs0"}), "svm"),
    ] {
        let msg = invalid(merged(base(), extra.clone()));
        assert!(msg.contains(field), "{extra}: {msg}");
    }
    assert!(invalid(merged(base(), json!({"svm": "x"}))).starts_with("unknown field svm"));
}

#[test]
fn both_passwords_are_sealed_and_never_shown() {
    let d = driver(&base());
    let ext = d.external_config();
    let text = ext.to_string();
    assert!(!text.contains("canary"), "{text}");
    assert!(!format!("{d:?}").contains("canary"));
    assert_eq!(
        ext,
        json!({"version": 1, "storageDriverName": "eseries-iscsi", "storagePrefix": "st_",
            "serialNumbers": [], "Username": "rw", "ControllerA": "10.0.0.5",
            "ControllerB": "10.0.0.6", "HostDataIP": "10.0.0.101"})
    );
    let mut doc = base();
    let secrets = crate::secrets::split(&mut doc);
    assert!(!doc.to_string().contains("canary"), "{doc}");
    let keys: Vec<&str> = secrets.keys().map(String::as_str).collect();
    assert_eq!(keys, ["/password", "/passwordArray"]);
}

#[test]
fn internal_names_are_the_prefix_and_22_base64url_characters() {
    let d = driver(&without("storagePrefix"));
    let a = d.internal_name("default-pvc-1");
    assert!(a.starts_with("trident_"), "{a}");
    assert_eq!(a.len(), 30);
    let id = &a["trident_".len()..];
    assert_eq!(id.len(), NAME_ID_LEN);
    assert!(
        id.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "{id}"
    );
    // A UUID: 16 bytes, version 8, RFC 4122 variant.
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(id)
        .unwrap();
    assert_eq!(bytes.len(), 16);
    assert_eq!(bytes[6] >> 4, 8);
    assert_eq!(bytes[8] >> 6, 0b10);
    // Deterministic (storch recomputes it at recovery), distinct per volume.
    assert_eq!(a, d.internal_name("default-pvc-1"));
    assert_ne!(a, d.internal_name("default-pvc-2"));
    assert_eq!(
        driver(&base()).internal_name("v").len(),
        "st_".len() + NAME_ID_LEN
    );
    assert_eq!(eseries_internal_name("", "v").len(), NAME_ID_LEN);
}

#[test]
fn pools_offer_exactly_tridents_attributes() {
    let pool = |media: &str| -> Pool {
        serde_json::from_value(json!({"volumeGroupRef": "04AB", "label": "pool_a",
            "freeSpace": "1000", "totalRaidedSpace": "4000", "driveMediaType": media}))
        .unwrap()
    };
    let p = pool_info(&pool("ssd"), false);
    assert_eq!(p.name, "pool_a");
    assert_eq!(p.total_bytes, Some(4000));
    let keys: Vec<&str> = p.offers.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "backendType",
            "clones",
            "encryption",
            "media",
            "provisioningType",
            "snapshots"
        ]
    );
    assert_eq!(p.offers["backendType"], Offer::strings(["eseries-iscsi"]));
    assert_eq!(p.offers["media"], Offer::strings(["ssd"]));
    assert_eq!(p.offers["provisioningType"], Offer::strings(["thick"]));
    for k in ["snapshots", "clones", "encryption"] {
        assert_eq!(p.offers[k], Offer::Bool(false), "{k}");
    }
    assert_eq!(
        pool_info(&pool("hdd"), false).offers["media"],
        Offer::strings(["hdd"])
    );
    assert!(
        !pool_info(&pool("unknown"), false)
            .offers
            .contains_key("media")
    );
    // storch's opt-in (offerClones on an array with volume copy jobs).
    assert_eq!(
        pool_info(&pool("ssd"), true).offers["clones"],
        Offer::Bool(true)
    );
}

#[test]
fn sizes_go_in_kib_while_they_fit_32_bits() {
    assert_eq!(size_units(1 << 30), ("kb", 1 << 20, 1024));
    assert_eq!(size_units(1_000_000_000), ("kb", 976_563, 1024));
    assert_eq!(size_units(1 << 20), ("kb", 1024, 1024));
    let four_tib = 4u64 << 40;
    assert_eq!(size_units(four_tib), ("mb", 4 << 20, 1 << 20));
}

fn api(status: u16, retcode: &str, message: &str) -> ProxyError {
    ProxyError::Api {
        call: "POST /storage-systems/1/volumes".into(),
        status,
        body: ErrorBody {
            error_message: message.into(),
            localized_message: String::new(),
            retcode: retcode.into(),
            code_type: "symbol".into(),
        },
    }
}

fn class(e: ProxyError) -> &'static str {
    class_name(&e.into_driver())
}

#[test]
fn santricity_errors_become_classes_and_keep_the_message() {
    for (status, retcode, message, want) in [
        (404, "", "The object was not found", "not_found"),
        (410, "", "gone", "not_found"),
        (422, "authFailPassword", "bad password", "invalid"),
        (422, "30", "bad password", "invalid"),
        (
            422,
            "insufficientSpace",
            "Not enough free capacity",
            "conflict",
        ),
        (422, "", "The volume is already mapped", "conflict"),
        (422, "duplicateName", "The name is already in use", "exists"),
        (422, "invalidParameter", "Invalid segment size", "invalid"),
        (422, "error", "Something odd", "other"),
        (424, "", "The storage-system is offline", "unavailable"),
        (503, "", "", "unavailable"),
        (400, "", "bad json", "invalid"),
        (403, "", "forbidden", "invalid"),
    ] {
        assert_eq!(
            class(api(status, retcode, message)),
            want,
            "{status} {retcode} {message}"
        );
    }
    let msg = api(422, "insufficientSpace", "Not enough free capacity")
        .into_driver()
        .to_string();
    assert!(
        msg.contains("Not enough free capacity") && msg.contains("insufficientSpace"),
        "{msg}"
    );
    assert!(
        msg.contains("422") && msg.contains("POST /storage-systems/1/volumes"),
        "{msg}"
    );
    let msg = api(422, "30", "x").into_driver().to_string();
    assert!(msg.contains("passwordArray"), "{msg}");
    let unauthorized = ProxyError::Unauthorized {
        call: "GET /x".into(),
    };
    let msg = unauthorized.clone().into_driver().to_string();
    assert!(
        msg.contains("401") && msg.contains("username and password"),
        "{msg}"
    );
    assert_eq!(class(unauthorized), "invalid");
    assert!(api(404, "", "no such resource").is_unsupported_feature());
    assert!(api(422, "featureNotSupported", "x").is_unsupported_feature());
    assert!(api(422, "error", "This array does not support volume copy").is_unsupported_feature());
    assert!(!api(422, "error", "Not enough space").is_unsupported_feature());
    assert!(api(424, "", "offline").is_retryable());
    assert!(api(424, "", "offline").into_driver().is_retryable());
    assert!(!api(422, "", "x").is_retryable());
    assert!(!api(422, "30", "x").into_driver().is_retryable());
}

#[test]
fn conformance_options_match_the_driver() {
    let o = conformance_options(1 << 30);
    assert_eq!(o.min_size_bytes, Some(MIN_VOLUME_BYTES));
    assert_eq!(o.snapshots, Support::Optional);
    assert_eq!(o.clones, Support::Optional);
    assert_eq!(o.resize, Support::Optional);
    assert!(o.capacity);
}

#[test]
fn host_labels_fit_the_array() {
    use super::publish::host_label;
    assert_eq!(host_label("worker-1"), "storch_worker-1");
    assert_eq!(host_label("node.example.com"), "storch_node_example_com");
    let long = "a-very-long-node-name.in.some.data-centre.example.com";
    let l = host_label(long);
    assert_eq!(l.len(), config::MAX_LABEL_LEN);
    assert!(l.starts_with("storch_a-very-long-no"), "{l}");
    assert_ne!(
        l,
        host_label(&format!("{long}x")),
        "the hash tells long names apart"
    );
}

#[test]
fn hosts_are_found_by_either_initiator_list() {
    let h: super::wire::Host = serde_json::from_value(json!({
        "hostRef": "84000000600A098000A4B28D", "clusterRef": super::wire::NULL_REF,
        "label": "n1", "hostTypeIndex": 28,
        "initiators": [{"initiatorRef": "89", "label": "n1_1",
            "nodeName": {"ioInterfaceType": "iscsi", "iscsiNodeName": "iqn.1993-08.org.debian:01:aa",
                "remoteNodeWWN": null}}],
        "hostSidePorts": [{"type": "iscsi", "address": "iqn.1993-08.org.debian:01:bb", "label": "p"}],
    }))
    .unwrap();
    assert_eq!(h.reference(), "84000000600A098000A4B28D");
    assert!(h.has_iscsi_initiator("IQN.1993-08.org.debian:01:AA"));
    assert!(h.has_iscsi_initiator("iqn.1993-08.org.debian:01:bb"));
    assert!(!h.has_iscsi_initiator("iqn.1993-08.org.debian:01:cc"));
}

use super::*;
use crate::model::Offer;
use serde_json::json;

fn parse(v: Value) -> StorageClassConfig {
    StorageClassConfig::from_json(v.to_string().as_bytes()).unwrap()
}

fn class(v: Value) -> CompiledClass {
    CompiledClass::compile(parse(v)).unwrap()
}

fn req(name: &str, value: &str) -> Request {
    Request::parse(name, value).unwrap()
}

#[test]
fn parses_a_full_class() {
    let cfg = parse(json!({
        "version": "1",
        "name": "gold",
        "attributes": {"snapshots": "T", "IOPS": "1500", "media": "ssd"},
        "storagePools": {"ontap.*": ["aggr2", "aggr1"]},
        "additionalStoragePools": {"sf": ["gold"]},
        "excludeStoragePools": {"ontap-old": [".*"]},
        "someFutureKey": 1,
    }));
    assert_eq!(cfg.version, "1");
    assert_eq!(cfg.name, "gold");
    assert_eq!(cfg.attributes["snapshots"], Request::Bool(true));
    assert_eq!(cfg.attributes["IOPS"], Request::Int(1500));
    assert_eq!(cfg.attributes["media"], Request::String("ssd".into()));
    assert_eq!(cfg.storage_pools["ontap.*"], ["aggr1", "aggr2"]);
    assert_eq!(cfg.additional_storage_pools["sf"], ["gold"]);
    assert_eq!(cfg.exclude_storage_pools["ontap-old"], [".*"]);
}

#[test]
fn defaults_and_nulls() {
    let cases = [
        (json!({}), "1", ""),
        (json!({"version": ""}), "1", ""),
        (json!({"version": null, "name": null}), "1", ""),
        (json!({"version": "2", "name": "x"}), "2", "x"),
        (json!({"name": ""}), "1", ""),
    ];
    for (wire, version, name) in cases {
        let cfg = parse(wire.clone());
        assert_eq!(
            (cfg.version.as_str(), cfg.name.as_str()),
            (version, name),
            "{wire}"
        );
    }
    let cfg = parse(json!({
        "attributes": null, "storagePools": null, "excludeStoragePools": {"b": null}
    }));
    assert!(cfg.attributes.is_empty() && cfg.storage_pools.is_empty());
    assert_eq!(cfg.exclude_storage_pools["b"], Vec::<String>::new());
}

#[test]
fn parse_errors() {
    let cases: &[(&str, &str)] = &[
        (r#"{"name":"#, "invalid JSON: EOF while parsing"),
        ("", "invalid JSON: "),
        (
            "[]",
            "invalid JSON: a storage class must be a JSON object, got a list",
        ),
        (
            "null",
            "invalid JSON: a storage class must be a JSON object, got null",
        ),
        (
            r#"{"attributes":{"snapshots":true}}"#,
            "invalid JSON: unable to unmarshal map: attributes.snapshots must be a JSON string",
        ),
        (
            r#"{"attributes":{"IOPS":1500}}"#,
            "invalid JSON: unable to unmarshal map: attributes.IOPS must be a JSON string",
        ),
        (
            r#"{"attributes":{"speed":"fast"}}"#,
            "invalid JSON: unrecognized storage attribute: speed",
        ),
        (
            r#"{"attributes":{"Snapshots":"true"}}"#,
            "invalid JSON: unrecognized storage attribute: Snapshots",
        ),
        (
            r#"{"attributes":{"storagePools":"x"}}"#,
            "invalid JSON: unrecognized storage attribute: storagePools",
        ),
        (
            r#"{"attributes":{"snapshots":"yes"}}"#,
            "invalid JSON: storage attribute value (yes) doesn't match the specified type (bool)",
        ),
        (
            r#"{"attributes":{"media":"SSD"}}"#,
            "invalid JSON: invalid value \"SSD\" for storage attribute media: expected one of hdd, hybrid, ssd",
        ),
        (
            r#"{"attributes":{"IOPS":"1.5k"}}"#,
            "invalid JSON: storage attribute value (1.5k) doesn't match the specified type (int)",
        ),
        (
            r#"{"attributes":["snapshots"]}"#,
            "invalid JSON: attributes must be an object",
        ),
        (
            r#"{"version":1}"#,
            "invalid JSON: version must be a string, got a number",
        ),
        (
            r#"{"name":false}"#,
            "invalid JSON: name must be a string, got a boolean",
        ),
        (
            r#"{"storagePools":["a"]}"#,
            "invalid JSON: storagePools must be an object, got a list",
        ),
        (
            r#"{"storagePools":{"b":"p"}}"#,
            "invalid JSON: storagePools.b must be a list of pool patterns, got a string",
        ),
        (
            r#"{"additionalStoragePools":{"b":[1]}}"#,
            "invalid JSON: additionalStoragePools.b: pool patterns must be strings, got a number",
        ),
        (
            r#"{"requiredStorage":{"b":[true]}}"#,
            "invalid JSON: requiredStorage.b: pool patterns must be strings",
        ),
        (
            r#"{"excludeStoragePools":7}"#,
            "invalid JSON: excludeStoragePools must be an object, got a number",
        ),
    ];
    for (body, want) in cases {
        let err = StorageClassConfig::from_json(body.as_bytes()).unwrap_err();
        assert!(err.starts_with(want), "{body}: {err}");
    }
    // Also through plain serde.
    assert!(
        serde_json::from_str::<StorageClassConfig>(r#"{"attributes":{"x":"1"}}"#)
            .unwrap_err()
            .to_string()
            .contains("unrecognized storage attribute: x")
    );
}

#[test]
fn required_storage_is_an_alias_of_additional() {
    let cases = [
        // Absent or null additionalStoragePools: requiredStorage is used.
        (json!({"requiredStorage": {"b": ["p"]}}), Some("p")),
        (
            json!({"requiredStorage": {"b": ["p"]}, "additionalStoragePools": null}),
            Some("p"),
        ),
        // Present (even empty): requiredStorage is ignored.
        (
            json!({"requiredStorage": {"b": ["p"]}, "additionalStoragePools": {"b": ["q"]}}),
            Some("q"),
        ),
        (
            json!({"requiredStorage": {"b": ["p"]}, "additionalStoragePools": {}}),
            None,
        ),
        (
            json!({"requiredStorage": "garbage", "additionalStoragePools": {}}),
            None,
        ),
    ];
    for (wire, want) in cases {
        let cfg = parse(wire.clone());
        let got = cfg.additional_storage_pools.get("b").map(|l| l[0].as_str());
        assert_eq!(got, want, "{wire}");
        let out = serde_json::to_value(&cfg).unwrap();
        assert!(out.get("requiredStorage").is_none(), "{wire}");
    }
}

#[test]
fn output_is_normalised() {
    let cfg = parse(json!({
        "name": "n",
        "attributes": {"snapshots": "True", "clones": "0", "IOPS": "+0100", "media": "ssd"},
        "storagePools": {"b": ["z", "a", "m"]},
        "requiredStorage": {"sf": ["y", "x"]},
        "excludeStoragePools": {},
    }));
    let out = serde_json::to_string(&cfg).unwrap();
    assert_eq!(
        out,
        concat!(
            r#"{"version":"1","name":"n","#,
            r#""attributes":{"IOPS":"100","clones":"false","media":"ssd","snapshots":"true"},"#,
            r#""storagePools":{"b":["a","m","z"]},"#,
            r#""additionalStoragePools":{"sf":["x","y"]}}"#
        )
    );
    // An empty class writes only version and name.
    assert_eq!(
        serde_json::to_string(&parse(json!({"name": "e"}))).unwrap(),
        r#"{"version":"1","name":"e"}"#
    );
    // Hand-built configs are normalised on the way out too.
    let mut raw = StorageClassConfig {
        name: "h".into(),
        ..Default::default()
    };
    raw.exclude_storage_pools
        .insert("b".into(), vec!["2".into(), "1".into()]);
    assert_eq!(
        serde_json::to_string(&raw).unwrap(),
        r#"{"version":"1","name":"h","excludeStoragePools":{"b":["1","2"]}}"#
    );
}

#[test]
fn round_trips() {
    let cfg = parse(json!({
        "name": "rt",
        "attributes": {"encryption": "t", "provisioningType": "thin", "IOPS": "-3"},
        "storagePools": {"a": ["1"]},
        "additionalStoragePools": {"b": ["2", "1"]},
        "excludeStoragePools": {"c": []},
    }));
    let text = serde_json::to_vec(&cfg).unwrap();
    assert_eq!(StorageClassConfig::from_json(&text).unwrap(), cfg);
    assert_eq!(
        serde_json::from_slice::<StorageClassConfig>(&text).unwrap(),
        cfg
    );
    let bc = bincode::config::standard();
    let bytes = bincode::encode_to_vec(&cfg, bc).unwrap();
    let (back, _): (StorageClassConfig, _) = bincode::decode_from_slice(&bytes, bc).unwrap();
    assert_eq!(back, cfg);
}

fn pool(name: &str, offers: &[(&str, Offer)]) -> PoolInfo {
    PoolInfo {
        name: name.to_string(),
        offers: offers
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        total_bytes: None,
    }
}

fn mismatch(attribute: &str, requested: &str, offered: Option<&str>) -> PoolVerdict {
    PoolVerdict::AttributeMismatch {
        attribute: attribute.into(),
        requested: requested.into(),
        offered: offered.map(Into::into),
    }
}

#[test]
fn pool_matching_order() {
    use PoolVerdict::*;
    let rich = pool(
        "aggr1",
        &[
            ("snapshots", Offer::Bool(true)),
            ("clones", Offer::Bool(false)),
            (
                "IOPS",
                Offer::Int {
                    min: 100,
                    max: 5000,
                },
            ),
            ("media", Offer::strings(["ssd"])),
            ("provisioningType", Offer::strings(["thin", "thick"])),
            ("backendType", Offer::strings(["ontap-nas"])),
        ],
    );
    let bare = pool("p1", &[]);
    let aggr10 = pool("aggr10", &[]);
    let cases: Vec<(&str, Value, &str, &PoolInfo, PoolVerdict)> = vec![
        // An empty class matches every pool.
        ("empty", json!({}), "any", &rich, Match),
        ("empty, no offers", json!({}), "any", &bare, Match),
        // Attributes only (docs/trident-contract.md#matching-one-offer per type).
        (
            "bool true/true",
            json!({"attributes": {"snapshots": "true"}}),
            "b",
            &rich,
            Match,
        ),
        (
            "bool true/false",
            json!({"attributes": {"snapshots": "false"}}),
            "b",
            &rich,
            Match,
        ),
        (
            "bool false/false",
            json!({"attributes": {"clones": "false"}}),
            "b",
            &rich,
            Match,
        ),
        (
            "bool false/true",
            json!({"attributes": {"clones": "true"}}),
            "b",
            &rich,
            mismatch("clones", "true", Some("false")),
        ),
        (
            "int inside",
            json!({"attributes": {"IOPS": "5000"}}),
            "b",
            &rich,
            Match,
        ),
        (
            "int above",
            json!({"attributes": {"IOPS": "5001"}}),
            "b",
            &rich,
            mismatch("IOPS", "5001", Some("[100, 5000]")),
        ),
        (
            "string in set",
            json!({"attributes": {"provisioningType": "thick"}}),
            "b",
            &rich,
            Match,
        ),
        (
            "string not in the offered set",
            json!({"attributes": {"media": "hdd"}}),
            "b",
            &rich,
            mismatch("media", "hdd", Some("{ssd}")),
        ),
        (
            "not offered",
            json!({"attributes": {"encryption": "false"}}),
            "b",
            &rich,
            mismatch("encryption", "false", None),
        ),
        (
            "first failure in name order",
            json!({"attributes": {"media": "hdd", "snapshots": "true", "IOPS": "1"}}),
            "b",
            &rich,
            mismatch("IOPS", "1", Some("[100, 5000]")),
        ),
        (
            "all attributes match",
            json!({"attributes": {"media": "ssd", "snapshots": "1", "IOPS": "100",
                                      "backendType": "ontap-nas"}}),
            "b",
            &rich,
            Match,
        ),
        // storagePools only.
        (
            "pools hit",
            json!({"storagePools": {"fast.*": ["aggr1"]}}),
            "fast-ontap",
            &rich,
            Match,
        ),
        (
            "pools miss pool",
            json!({"storagePools": {"fast.*": ["aggr2"]}}),
            "fast-ontap",
            &rich,
            NotInStoragePools,
        ),
        (
            "pools miss backend",
            json!({"storagePools": {"fast.*": ["aggr1"]}}),
            "slow",
            &rich,
            NotInStoragePools,
        ),
        (
            "pools unanchored",
            json!({"storagePools": {"slow": ["aggr"]}}),
            "myslower",
            &aggr10,
            Match,
        ),
        (
            "pools anchored",
            json!({"storagePools": {"^slow$": ["aggr"]}}),
            "myslower",
            &aggr10,
            NotInStoragePools,
        ),
        (
            "pools entry with no pool patterns",
            json!({"storagePools": {".*": []}}),
            "b",
            &bare,
            NotInStoragePools,
        ),
        (
            "pools second entry",
            json!({"storagePools": {"x": [".*"], "b": ["p"]}}),
            "b",
            &bare,
            Match,
        ),
        // Attributes and storagePools: both must hold; the attribute reason comes first.
        (
            "attrs and pools both fail",
            json!({"attributes": {"media": "hdd"}, "storagePools": {"x": ["y"]}}),
            "b",
            &rich,
            mismatch("media", "hdd", Some("{ssd}")),
        ),
        (
            "attrs pass, pools fail",
            json!({"attributes": {"media": "ssd"}, "storagePools": {"x": ["y"]}}),
            "b",
            &rich,
            NotInStoragePools,
        ),
        (
            "attrs and pools pass",
            json!({"attributes": {"media": "ssd"}, "storagePools": {"b": ["aggr"]}}),
            "b",
            &rich,
            Match,
        ),
        // additionalStoragePools only.
        (
            "additional hit",
            json!({"additionalStoragePools": {"b1": ["p1"]}}),
            "b1",
            &bare,
            MatchAdditional,
        ),
        (
            "additional miss",
            json!({"additionalStoragePools": {"b1": ["p1"]}}),
            "b2",
            &bare,
            NotInAdditional,
        ),
        (
            "requiredStorage hit",
            json!({"requiredStorage": {"b1": ["p1"]}}),
            "b1",
            &bare,
            MatchAdditional,
        ),
        // Additional with attributes: additional wins, otherwise attributes decide.
        (
            "additional beats failing attributes",
            json!({"attributes": {"media": "hdd"}, "additionalStoragePools": {"b1": ["p1"]}}),
            "b1",
            &bare,
            MatchAdditional,
        ),
        (
            "additional miss, attributes match",
            json!({"attributes": {"media": "ssd"}, "additionalStoragePools": {"other": ["x"]}}),
            "b",
            &rich,
            Match,
        ),
        (
            "additional miss, attributes fail",
            json!({"attributes": {"media": "hdd"}, "additionalStoragePools": {"other": ["x"]}}),
            "b",
            &rich,
            mismatch("media", "hdd", Some("{ssd}")),
        ),
        (
            "additional miss, storagePools hit",
            json!({"storagePools": {"b": ["aggr1"]}, "additionalStoragePools": {"o": ["x"]}}),
            "b",
            &rich,
            Match,
        ),
        (
            "additional miss, storagePools miss",
            json!({"storagePools": {"b": ["zzz"]}, "additionalStoragePools": {"o": ["x"]}}),
            "b",
            &rich,
            NotInStoragePools,
        ),
        // excludeStoragePools beats everything.
        (
            "exclude beats additional",
            json!({"additionalStoragePools": {"b1": ["p1"]}, "excludeStoragePools": {"b": ["p"]}}),
            "b1",
            &bare,
            Excluded,
        ),
        (
            "exclude beats matching attributes",
            json!({"attributes": {"snapshots": "true"}, "excludeStoragePools": {".*": ["aggr1"]}}),
            "b",
            &rich,
            Excluded,
        ),
        (
            "exclude only, hit",
            json!({"excludeStoragePools": {"b": ["p1"]}}),
            "b",
            &bare,
            Excluded,
        ),
        (
            "exclude only, miss",
            json!({"excludeStoragePools": {"b": ["p2"]}}),
            "b",
            &bare,
            Match,
        ),
        (
            "exclude backend hit but pool miss",
            json!({"excludeStoragePools": {"b": ["zzz"]}, "additionalStoragePools": {"b": ["p1"]}}),
            "b",
            &bare,
            MatchAdditional,
        ),
    ];
    for (what, wire, backend, pool, want) in cases {
        let class = class(wire);
        let got = class.check(backend, pool);
        assert_eq!(got, want, "{what}");
        assert_eq!(class.matches(backend, pool), want.is_match(), "{what}");
    }
}

#[test]
fn type_mismatch_never_matches() {
    // Only a hand-built config can hold a request of the wrong type.
    let mut cfg = StorageClassConfig::default();
    cfg.attributes
        .insert("snapshots".into(), Request::String("true".into()));
    let class = CompiledClass::compile(cfg).unwrap();
    let p = pool("p", &[("snapshots", Offer::Bool(true))]);
    assert_eq!(
        class.check("b", &p),
        mismatch("snapshots", "true", Some("true"))
    );
    assert_eq!(req("IOPS", "7"), Request::Int(7));
}

#[test]
fn compile_refuses_bad_patterns() {
    let long = "a".repeat(MAX_PATTERN_LEN + 1);
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"storagePools": {"b(": ["p"]}}),
            "storagePools: backend pattern \"b(\" is not a valid regular expression: unclosed group",
        ),
        (
            json!({"storagePools": {"b": ["[z-a]"]}}),
            "storagePools: pool pattern \"[z-a]\" is not a valid regular expression",
        ),
        (
            json!({"additionalStoragePools": {"b": ["*"]}}),
            "additionalStoragePools: pool pattern \"*\" is not a valid regular expression",
        ),
        (
            json!({"excludeStoragePools": {"b": ["p", "\\"]}}),
            "excludeStoragePools: pool pattern \"\\\\\" is not a valid regular expression",
        ),
        (
            json!({"storagePools": {long.clone(): ["p"]}}),
            "is longer than 1024 bytes",
        ),
        (
            json!({"storagePools": {"b": [long]}}),
            "storagePools: pool pattern \"aaaa",
        ),
        (
            json!({"storagePools": {"b": ["\\w{1,63}"]}}),
            "is too expensive",
        ),
        (
            json!({"excludeStoragePools": {"b": ["((a{100}){100}){100}"]}}),
            "is too expensive",
        ),
        (
            json!({"storagePools": {"b": ["(".repeat(100) + &")".repeat(100)]}}),
            "storagePools: pool pattern",
        ),
    ];
    // requiredStorage patterns are checked when the class is parsed, naming that key.
    let err =
        StorageClassConfig::from_value(json!({"requiredStorage": {"(?<": ["p"]}})).unwrap_err();
    assert!(
        err.contains("requiredStorage: backend pattern \"(?<\" is not a valid"),
        "{err}"
    );
    for (wire, want) in cases {
        let err = CompiledClass::compile(parse(wire.clone())).unwrap_err();
        assert!(err.contains(want), "{wire}: {err}");
        assert!(!err.contains('\n'), "{wire}: one line please: {err}");
        assert!(err.len() < 400, "{wire}: {err}");
    }
    // Reasonable patterns compile.
    for p in [
        ".*",
        "\\w+",
        "(?i)^aggr[0-9]{1,3}$",
        "ontap-(nas|san)",
        "[A-Za-z0-9_]{1,63}",
    ] {
        assert!(
            CompiledClass::compile(parse(json!({"storagePools": {p: [p]}}))).is_ok(),
            "{p}"
        );
    }
}

#[test]
fn compile_caps_the_number_of_patterns() {
    let pools: Vec<String> = (0..MAX_PATTERNS_PER_CLASS)
        .map(|i| format!("p{i}"))
        .collect();
    // One backend pattern plus MAX pool patterns is one too many.
    let err = CompiledClass::compile(parse(json!({"storagePools": {"b": pools}}))).unwrap_err();
    assert!(err.contains("more than 256"), "{err}");
    let ok: Vec<String> = pools_upto(MAX_PATTERNS_PER_CLASS - 1);
    assert!(CompiledClass::compile(parse(json!({"storagePools": {"b": ok}}))).is_ok());
}

fn pools_upto(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("p{i}")).collect()
}

#[test]
fn verdict_display() {
    let cases = [
        (
            mismatch("IOPS", "6000", Some("[100, 5000]")),
            "IOPS: requested 6000, the pool offers [100, 5000]",
        ),
        (
            mismatch("media", "ssd", None),
            "media: requested ssd, the pool does not offer it",
        ),
        (PoolVerdict::Excluded, "listed in excludeStoragePools"),
        (PoolVerdict::NotInStoragePools, "not listed in storagePools"),
    ];
    for (verdict, want) in cases {
        assert_eq!(verdict.to_string(), want);
    }
    assert!(PoolVerdict::Match.is_match() && PoolVerdict::MatchAdditional.is_match());
    for v in [
        PoolVerdict::Excluded,
        PoolVerdict::NotInAdditional,
        PoolVerdict::NotInStoragePools,
    ] {
        assert!(!v.is_match());
    }
}

proptest::proptest! {
    #[test]
    fn from_json_never_panics(body in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
        let _ = StorageClassConfig::from_json(&body);
    }

    #[test]
    fn compile_never_panics(pattern in "\\PC{0,30}") {
        let mut cfg = StorageClassConfig::default();
        cfg.storage_pools.insert(pattern.clone(), vec![pattern]);
        if let Ok(class) = CompiledClass::compile(cfg) {
            let _ = class.check("backend", &pool("pool", &[]));
        }
    }
}

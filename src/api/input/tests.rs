use super::*;
use serde_json::json;

fn msg<T: std::fmt::Debug>(r: Result<T, InputError>) -> String {
    r.unwrap_err().to_string()
}

// ---- names ----

#[test]
fn path_names() {
    assert_eq!(path_name("backend name", "nas-1".into()).unwrap(), "nas-1");
    assert_eq!(
        msg(path_name("backend name", "a/b".into())),
        "backend name must not contain '/'"
    );
    assert_eq!(
        msg(path_name("volume name", "..".into())),
        "volume name must not be \".\" or \"..\""
    );
    assert_eq!(
        msg(path_name("volume name", "a\0b".into())),
        "volume name must not contain NUL"
    );
    assert_eq!(
        msg(path_name("storage class name", "x".repeat(254))),
        "storage class name is longer than 253 bytes"
    );
    assert_eq!(
        msg(path_name("volume name", String::new())),
        "volume name must not be empty"
    );
}

#[test]
fn quoting_cuts_long_values() {
    assert_eq!(quote("1G"), "\"1G\"");
    let q = quote(&"9".repeat(10_000));
    assert!(q.len() < 80, "{q}");
    assert!(q.ends_with('…'));
    assert_eq!(quote("a\0b"), "\"a\\0b\"");
}

// ---- backends ----

#[test]
fn backend_json() {
    let doc = parse_backend_doc(
        br#"{"version":1,"storageDriverName":"fake","backendName":"b1","password":"p"}"#,
    )
    .unwrap();
    assert_eq!(doc["storageDriverName"], "fake");
    assert_eq!(doc["version"], 1);
}

#[test]
fn backend_yaml() {
    let yaml = b"version: 1\nstorageDriverName: fake\nbackendName: b1\nprotocol: file\n\
pools:\n  p1:\n    sizeBytes: 1073741824\n    attributes:\n      snapshots:\n        offer: true\n";
    let doc = parse_backend_doc(yaml).unwrap();
    assert_eq!(
        doc,
        json!({
            "version": 1,
            "storageDriverName": "fake",
            "backendName": "b1",
            "protocol": "file",
            "pools": {"p1": {"sizeBytes": 1073741824u64, "attributes": {"snapshots": {"offer": true}}}}
        })
    );
}

#[test]
fn backend_yaml_flow_style_and_bom() {
    let doc =
        parse_backend_doc("\u{feff}{storageDriverName: fake, version: 1}".as_bytes()).unwrap();
    assert_eq!(doc["storageDriverName"], "fake");
}

#[test]
fn backend_malformed_json_names_the_position() {
    // Unclosed: neither JSON nor YAML; reported as JSON since it looks like JSON.
    let m = msg(parse_backend_doc(
        b"{\"version\":1,\n\"storageDriverName\":\"fake\"",
    ));
    assert!(m.starts_with("invalid config format: "), "{m}");
    assert!(m.contains("line 2"), "{m}");
}

#[test]
fn backend_malformed_yaml_names_the_position() {
    let m = msg(parse_backend_doc(
        b"version: 1\nstorageDriverName: fake\n  bad: [indent\n",
    ));
    assert!(m.starts_with("invalid config format: "), "{m}");
    assert!(m.contains("line"), "{m}");
}

#[test]
fn backend_yaml_errors_do_not_echo_the_document() {
    let m = msg(parse_backend_doc(
        b"username: admin\npassword: hunter2-canary\nsvm: [unclosed\n",
    ));
    assert!(!m.contains("hunter2-canary"), "{m}");
    assert!(m.starts_with("invalid config format: "), "{m}");
}

#[test]
fn backend_json_like_yaml_is_accepted_as_trident_does() {
    // Invalid JSON but valid YAML flow: Trident converts YAML to JSON first, so do we.
    let doc = parse_backend_doc(b"{\"version\":1, \"storageDriverName\": fake, x: }").unwrap();
    assert_eq!(
        doc,
        json!({"version": 1, "storageDriverName": "fake", "x": null})
    );
}

#[test]
fn backend_must_be_a_mapping() {
    assert_eq!(
        msg(parse_backend_doc(b"[1,2]")),
        "invalid config format: expected a mapping of config keys, found a list"
    );
    assert_eq!(
        msg(parse_backend_doc(b"just a string")),
        "invalid config format: expected a mapping of config keys, found a string"
    );
    assert_eq!(
        msg(parse_backend_doc(b"42")),
        "invalid config format: expected a mapping of config keys, found a number"
    );
    assert_eq!(
        msg(parse_backend_doc(b"  \n ")),
        "invalid config format: the document is empty"
    );
    assert_eq!(
        msg(parse_backend_doc(b"")),
        "invalid config format: the document is empty"
    );
}

#[test]
fn backend_yaml_messages_are_for_users() {
    assert_eq!(
        msg(parse_backend_doc(b"a: 1\na: 2\n")),
        "invalid config format: duplicate mapping key: a at line 2, column 1"
    );
    assert_eq!(
        msg(parse_backend_doc(b"a: 1\n---\nb: 2\n")),
        "invalid config format: multiple YAML documents detected at line 3, column 1"
    );
}

#[test]
fn backend_not_utf8() {
    let m = msg(parse_backend_doc(b"{\"a\":\"\xff\"}"));
    assert!(m.contains("not valid UTF-8"), "{m}");
}

#[test]
fn backend_name_is_checked() {
    assert_eq!(
        msg(parse_backend_doc(
            br#"{"storageDriverName":"fake","backendName":"../x"}"#
        )),
        "backendName must not contain '/'"
    );
    assert_eq!(
        msg(parse_backend_doc(
            b"storageDriverName: fake\nbackendName: \"..\"\n"
        )),
        "backendName must not be \".\" or \"..\""
    );
    // Absent or empty: the driver picks the name.
    assert!(parse_backend_doc(br#"{"storageDriverName":"fake","backendName":""}"#).is_ok());
}

#[test]
fn deeply_nested_documents_are_refused_not_overflowing() {
    let depth = 100_000;
    let json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let m = msg(parse_backend_doc(json.as_bytes()));
    assert!(m.contains("deeper than 64 levels"), "{m}");
    let json = format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    assert!(parse_backend_doc(json.as_bytes()).is_err());
    // YAML flow and block nesting.
    let yaml = format!("a: {}1{}", "[".repeat(depth), "]".repeat(depth));
    assert!(parse_backend_doc(yaml.as_bytes()).is_err());
    let mut yaml = String::new();
    for i in 0..1000 {
        yaml.push_str(&" ".repeat(i));
        yaml.push_str("a:\n");
    }
    assert!(parse_backend_doc(yaml.as_bytes()).is_err());
    // Volumes: an unknown deep field is skipped without recursion (serde_json ignores
    // values iteratively), so it is harmless; the point is that nothing overflows.
    let json = format!(
        "{{\"name\":\"v\",\"size\":\"1G\",\"x\":{}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let _ = parse_volume(json.as_bytes());
    let json = format!("{}{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    assert!(parse_volume(json.as_bytes()).is_err());
}

#[test]
fn yaml_alias_bombs_are_refused() {
    let mut yaml = String::from("a: &a [x,x,x,x,x,x,x,x,x,x]\n");
    let mut prev = 'a';
    for c in 'b'..='k' {
        yaml.push_str(&format!(
                "{c}: &{c} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        prev = c;
    }
    // Expanded, this document would hold 10^11 scalars: refused, it never gets built.
    assert!(parse_backend_doc(yaml.as_bytes()).is_err());
}

// ---- volumes ----

#[test]
fn volume_ok() {
    let v = parse_volume(
        br#"{"name":"vol-1","size":"1GiB","protocol":"file","storageClass":"gold",
                 "accessMode":"ReadWriteMany","unknownKey":true}"#,
    )
    .unwrap();
    assert_eq!(v.name(), "vol-1");
    assert_eq!(v.config().size, "1Gi", "stored canonical");
    assert_eq!(v.size_bytes(), Some(1 << 30));
    assert_eq!(v.protocol(), Protocol::File);
    assert_eq!(v.storage_class(), Some("gold"));
}

#[test]
fn volume_mandatory_fields() {
    let want = "the following fields for \"Volume\" are mandatory: name and size";
    assert_eq!(msg(parse_volume(br#"{"size":"1G"}"#)), want);
    assert_eq!(msg(parse_volume(br#"{"name":"v"}"#)), want);
    assert_eq!(msg(parse_volume(br#"{"name":"","size":"1G"}"#)), want);
    assert_eq!(msg(parse_volume(b"{}")), want);
}

#[test]
fn volume_malformed_json() {
    let m = msg(parse_volume(b"{\"name\":"));
    assert!(m.starts_with("invalid JSON: "), "{m}");
    assert!(m.contains("line 1"), "{m}");
    let m = msg(parse_volume(b""));
    assert!(m.starts_with("invalid JSON: "), "{m}");
    let m = msg(parse_volume(br#"{"name":"v","size":"1G"} trailing"#));
    assert!(m.starts_with("invalid JSON: trailing characters"), "{m}");
    let m = msg(parse_volume(br#" ["name","v","","1G"]"#));
    assert_eq!(
        m,
        "invalid JSON: invalid type: list, expected a JSON object"
    );
    let m = msg(parse_volume(br#""v""#));
    assert!(m.starts_with("invalid JSON: invalid type: string"), "{m}");
    let m = msg(parse_volume(b"name: v\nsize: 1G\n"));
    assert!(m.starts_with("invalid JSON: "), "{m}");
}

#[test]
fn volume_wrong_types_name_the_field() {
    let m = msg(parse_volume(br#"{"name":"v","size":5}"#));
    assert!(
        m.starts_with("invalid JSON: size: invalid type: integer `5`"),
        "{m}"
    );
    let m = msg(parse_volume(br#"{"name":["v"],"size":"1G"}"#));
    assert!(m.starts_with("invalid JSON: name: invalid type"), "{m}");
    let m = msg(parse_volume(
        br#"{"name":"v","size":"1G","snapshotDirectory":false}"#,
    ));
    assert!(m.starts_with("invalid JSON: snapshotDirectory: "), "{m}");
    let m = msg(parse_volume(
        br#"{"name":"v","size":"1G","accessInformation":{"iscsiLunNumber":"x"}}"#,
    ));
    assert!(
        m.starts_with("invalid JSON: accessInformation.iscsiLunNumber: "),
        "{m}"
    );
}

#[test]
fn volume_protocol() {
    let m = msg(parse_volume(
        br#"{"name":"v","size":"1G","protocol":"nfs"}"#,
    ));
    assert!(m.starts_with("invalid JSON: protocol: "), "{m}");
    assert!(m.contains("nfs is an unsupported protocol"), "{m}");
    for p in ["file", "block", ""] {
        let body = format!(r#"{{"name":"v","size":"1G","protocol":"{p}"}}"#);
        assert!(parse_volume(body.as_bytes()).is_ok(), "{p}");
    }
}

#[test]
fn volume_access_mode() {
    let m = msg(parse_volume(
        br#"{"name":"v","size":"1G","accessMode":"ReadWriteSometimes"}"#,
    ));
    assert_eq!(
        m,
        "invalid accessMode \"ReadWriteSometimes\"; acceptable values: ReadWriteOnce, \
             ReadOnlyMany, ReadWriteMany, \"\""
    );
    assert_eq!(
        msg(parse_volume(
            br#"{"name":"v","size":"1G","accessMode":"ReadWriteMany","protocol":"block"}"#,
        )),
        "incompatible access mode (ReadWriteMany) and protocol (block)"
    );
    for mode in ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", ""] {
        let body = format!(r#"{{"name":"v","size":"1G","accessMode":"{mode}"}}"#);
        assert!(parse_volume(body.as_bytes()).is_ok(), "{mode}");
    }
}

#[test]
fn volume_names() {
    assert_eq!(
        msg(parse_volume(br#"{"name":"a/b","size":"1G"}"#)),
        "name must not contain '/'"
    );
    assert_eq!(
        msg(parse_volume(br#"{"name":"..","size":"1G"}"#)),
        "name must not be \".\" or \"..\""
    );
    assert_eq!(
        msg(parse_volume(br#"{"name":"a\u0000b","size":"1G"}"#)),
        "name must not contain NUL"
    );
    let long = format!(r#"{{"name":"{}","size":"1G"}}"#, "v".repeat(254));
    assert_eq!(
        msg(parse_volume(long.as_bytes())),
        "name is longer than 253 bytes"
    );
    let ok = format!(r#"{{"name":"{}","size":"1G"}}"#, "v".repeat(253));
    assert!(parse_volume(ok.as_bytes()).is_ok());
    assert_eq!(
        msg(parse_volume(
            br#"{"name":"v","size":"1G","storageClass":"../gold"}"#
        )),
        "storageClass must not contain '/'"
    );
    assert_eq!(
        msg(parse_volume(
            br#"{"name":"v","size":"1G","cloneSourceVolume":"x\\y"}"#
        )),
        "cloneSourceVolume must not contain '\\'"
    );
}

#[test]
fn volume_sizes() {
    for ok in ["1", "1G", "1Gi", "1GiB", "1GB", "20Mi", "1073741824"] {
        let body = format!(r#"{{"name":"v","size":"{ok}"}}"#);
        assert!(parse_volume(body.as_bytes()).is_ok(), "{ok}");
    }
    let m = msg(parse_volume(br#"{"name":"v","size":"0"}"#));
    assert_eq!(m, "invalid size \"0\": size must be greater than zero");
    let m = msg(parse_volume(br#"{"name":"v","size":"1.5Gi"}"#));
    assert_eq!(m, "invalid size \"1.5Gi\": only whole numbers are allowed");
    let m = msg(parse_volume(br#"{"name":"v","size":"0Gi"}"#));
    assert_eq!(m, "invalid size \"0Gi\": size must be greater than zero");
    for bad in [
        " 20Mi",
        "20 Mi",
        "20mi",
        "-1",
        "-1G",
        "1.5Gi",
        "lots",
        "1Q",
        "99999999999999999999999",
        "20000000000Yi",
        "18446744073709551616",
    ] {
        let body = format!(r#"{{"name":"v","size":"{bad}"}}"#);
        let m = msg(parse_volume(body.as_bytes()));
        assert!(m.starts_with("invalid size \""), "{bad}: {m}");
        assert!(m.len() < 300, "{m}");
    }
    let huge = format!(r#"{{"name":"v","size":"{}"}}"#, "9".repeat(100_000));
    let m = msg(parse_volume(huge.as_bytes()));
    assert!(m.starts_with("invalid size \""), "{m}");
    assert!(m.len() < 400, "the message must not echo the whole value");
}

// ---- storage classes ----

#[test]
fn storage_class_ok() {
    let sc = parse_storage_class(
        br#"{"version":"1","name":"gold","attributes":{"snapshots":"true"},
                 "storagePools":{"nas.*":["aggr1"]}}"#,
    )
    .unwrap();
    assert_eq!(sc.name, "gold");
    assert_eq!(sc.storage_pools["nas.*"], vec!["aggr1".to_string()]);
}

#[test]
fn storage_class_errors() {
    let m = msg(parse_storage_class(b"{\"name\":"));
    assert!(m.starts_with("invalid JSON: "), "{m}");
    assert!(!m.starts_with("invalid JSON: invalid JSON"), "{m}");
    let m = msg(parse_storage_class(
        br#"{"name":"gold","attributes":{"snapshots":true}}"#,
    ));
    assert!(m.starts_with("invalid JSON: "), "{m}");
    let m = msg(parse_storage_class(
        br#"{"name":"gold","attributes":{"colour":"blue"}}"#,
    ));
    assert!(m.contains("unrecognized storage attribute: colour"), "{m}");
    assert_eq!(
        msg(parse_storage_class(br#"{"name":"a/b"}"#)),
        "name must not contain '/'"
    );
    assert_eq!(
        msg(parse_storage_class(br#"{"name":""}"#)),
        "name must not be empty"
    );
    let m = msg(parse_storage_class(
        br#"{"name":"gold","storagePools":{"(":["aggr1"]}}"#,
    ));
    assert!(m.contains("storagePools"), "{m}");
    let depth = 100_000;
    let json = format!(
        "{{\"name\":\"x\",\"attributes\":{}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    assert!(parse_storage_class(json.as_bytes()).is_err());
}

// ---- storch's routes ----

fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn snapshot_and_resize_bodies() {
    let snap = parse_snapshot("v", br#"{"name":"s1"}"#).unwrap();
    assert_eq!((snap.volume.as_str(), snap.snapshot.as_str()), ("v", "s1"));
    assert_eq!(msg(parse_snapshot("v", b"{}")), "name is mandatory");
    assert_eq!(
        msg(parse_snapshot("v", br#"{"name":".."}"#)),
        "name must not be \".\" or \"..\""
    );
    assert!(msg(parse_snapshot("v", b"")).starts_with("invalid JSON: "));
    let resize = parse_resize("v", br#"{"size":"2Gi"}"#).unwrap();
    assert_eq!(
        (resize.size.as_str(), resize.size.bytes()),
        ("2Gi", 2 << 30)
    );
    assert_eq!(msg(parse_resize("v", b"{}")), "size is mandatory");
    assert!(msg(parse_resize("v", br#"{"size":"x"}"#)).starts_with("invalid size \"x\""));
    assert!(msg(parse_resize("v", br#"{"size":2}"#)).starts_with("invalid JSON: size: "));
}

#[test]
fn backend_state_bodies_name_the_field() {
    use crate::model::UserState;
    let ok = |b: &[u8]| parse_backend_state(b).unwrap();
    assert_eq!(ok(br#"{"state":"suspended"}"#), UserState::Suspended);
    assert_eq!(ok(br#"{"state":"normal"}"#), UserState::Normal);
    assert_eq!(msg(parse_backend_state(b"{}")), "state is mandatory");
    assert_eq!(
        msg(parse_backend_state(br#"{"state":""}"#)),
        "state is mandatory"
    );
    assert_eq!(
        msg(parse_backend_state(br#"{"state":"offline"}"#)),
        "invalid state \"offline\"; acceptable values: normal, suspended"
    );
    assert!(msg(parse_backend_state(br#"{"state":true}"#)).starts_with("invalid JSON: state: "));
    assert!(
        msg(parse_backend_state(
            br#"{"state":"normal","userState":"x"}"#
        ))
        .contains("unknown field `userState`")
    );
    assert!(msg(parse_backend_state(b"")).starts_with("invalid JSON: "));
    assert!(msg(parse_backend_state(br#"["suspended"]"#)).starts_with("invalid JSON: "));
}

#[test]
fn explain_queries() {
    let e = parse_explain_query(&q(&[])).unwrap().explain;
    assert_eq!((e.protocol, e.size_bytes), (Protocol::Any, None));
    let e = parse_explain_query(&q(&[("protocol", "block"), ("size", "1Ki")]))
        .unwrap()
        .explain;
    assert_eq!((e.protocol, e.size_bytes), (Protocol::Block, Some(1024)));
    assert_eq!(
        parse_explain_query(&q(&[("protocol", "any")]))
            .unwrap()
            .explain
            .protocol,
        Protocol::Any
    );
    assert_eq!(
        msg(parse_explain_query(&q(&[("protocol", "nfs")]))),
        "invalid query parameter protocol: \"nfs\" is not file, block or any"
    );
    assert!(
        msg(parse_explain_query(&q(&[("size", "0")])))
            .starts_with("invalid query parameter size: invalid size \"0\"")
    );
    assert_eq!(
        msg(parse_explain_query(&q(&[("x", "1")]))),
        "invalid query parameter \"x\": unknown parameter; accepted: protocol, size, topology, \
         limit, continue"
    );
    let t = parse_explain_query(&q(&[("topology", "topology.kubernetes.io/zone=z1,a=b")]))
        .unwrap()
        .explain
        .topology
        .unwrap();
    assert_eq!(t.requisite[0]["topology.kubernetes.io/zone"], "z1");
    assert_eq!(t.requisite[0]["a"], "b");
    for bad in ["zone", "zone=-z", "Bad Key=z"] {
        let m = msg(parse_explain_query(&q(&[("topology", bad)])));
        assert!(m.starts_with("invalid query parameter topology:"), "{m}");
    }
}

#[test]
fn events_queries() {
    let e = parse_events_query(&q(&[])).unwrap();
    assert_eq!(e.filter.object, None);
    assert_eq!(e.filter.since, 0);
    assert_eq!(e.filter.limit, Some(DEFAULT_EVENTS_LIMIT));
    assert!(!e.follow);
    let e = parse_events_query(&q(&[("follow", "true")])).unwrap();
    assert!(e.follow);
    assert_eq!(
        e.filter.limit, None,
        "a follow stream is endless by default"
    );
    let e = parse_events_query(&q(&[
        ("object", "storageclass/gold"),
        ("since", "7"),
        ("limit", "3"),
        ("follow", "0"),
    ]))
    .unwrap();
    assert_eq!(e.filter.object.as_deref(), Some("storageclass/gold"));
    assert_eq!(
        (e.filter.since, e.filter.limit, e.follow),
        (7, Some(3), false)
    );
    for (pairs, start) in [
        (
            q(&[("object", "pool/x")]),
            "invalid query parameter object: unknown kind",
        ),
        (
            q(&[("object", "volume/a\u{0}b")]),
            "invalid query parameter object: name",
        ),
        (q(&[("since", "1.5")]), "invalid query parameter since: "),
        (q(&[("limit", "-1")]), "invalid query parameter limit: "),
        (
            q(&[("since", "1"), ("since", "2")]),
            "invalid query parameter since: given more",
        ),
    ] {
        let m = msg(parse_events_query(&pairs));
        assert!(m.starts_with(start), "{pairs:?}: {m}");
    }
}

#[test]
fn page_queries() {
    assert_eq!(parse_page_query(&q(&[])).unwrap(), PageQuery::default());
    let p = parse_page_query(&q(&[("limit", "2"), ("continue", "vol-b")])).unwrap();
    assert_eq!((p.limit, p.after.as_deref()), (Some(2), Some("vol-b")));
    for bad in ["0", "10001", "x", "-1"] {
        let m = msg(parse_page_query(&q(&[("limit", bad)])));
        assert!(m.starts_with("invalid query parameter limit:"), "{m}");
        assert!(m.contains("from 1 to 10000"), "{m}");
    }
    let long = "x".repeat(600);
    let m = msg(parse_page_query(&q(&[("continue", &long)])));
    assert!(m.starts_with("invalid query parameter continue:"), "{m}");
    let m = msg(parse_page_query(&q(&[("size", "1")])));
    assert!(m.contains("accepted: limit, continue"), "{m}");
    let p = parse_explain_query(&q(&[("limit", "5"), ("continue", "b/p")])).unwrap();
    assert_eq!(p.page.limit, Some(5));
    let e = parse_events_query(&q(&[("continue", "7")])).unwrap();
    assert_eq!(e.filter.since, 7);
    let m = msg(parse_events_query(&q(&[("continue", "7"), ("since", "1")])));
    assert!(m.starts_with("invalid query parameter continue:"), "{m}");
}

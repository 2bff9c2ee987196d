use super::*;
use crate::model::AccessInfo;

/// A commit time.
const AT: u64 = 1_700_000_000_000;

fn volume(name: &str, pool: &str) -> [Event; 3] {
    let config = VolumeConfig {
        name: name.into(),
        size: "1Gi".into(),
        ..Default::default()
    };
    let pool = PoolRef::new("b1", pool);
    [
        Event::volume(
            name,
            VolumeEvent::Requested {
                config: Box::new(config),
                size_bytes: 1 << 30,
            },
        ),
        Event::volume(
            name,
            VolumeEvent::PlacementPlanned {
                candidates: vec![pool.clone()],
                seed: 1,
            },
        ),
        Event::volume(
            name,
            VolumeEvent::Created {
                pool,
                internal_name: format!("trident-{name}"),
                protocol: Protocol::File,
                access: Box::new(AccessInfo {
                    nfs_path: format!("/trident-{name}"),
                    ..Default::default()
                }),
                secrets: None,
                adopted: false,
            },
        ),
    ]
}

fn folded() -> State {
    let mut state = State::default();
    let events = [volume("v1", "p1"), volume("v2", "p1"), volume("v3", "p2")];
    for (seq, ev) in events.iter().flatten().enumerate() {
        state.apply(seq as u64 + 1, AT, ev);
    }
    state.apply(
        10,
        AT,
        &Event::volume(
            "v2",
            VolumeEvent::Resized {
                size: "2Gi".into(),
                size_bytes: 2 << 30,
            },
        ),
    );
    state
}

#[test]
fn a_record_keeps_its_config_encoded_and_its_plan_only_while_creating() {
    let mut state = State::default();
    let [requested, planned, created] = volume("v1", "p1");
    state.apply(1, AT, &requested);
    state.apply(2, AT, &planned);
    let v = &state.volumes["v1"];
    assert_eq!(v.candidates(), [PoolRef::new("b1", "p1")]);
    assert_eq!((v.backend(), v.pool()), ("", ""));
    assert_eq!(v.config().size, "1Gi");
    state.apply(3, AT, &created);
    let v = &state.volumes["v1"];
    assert!(v.extra.is_none(), "an online volume has no extras");
    assert_eq!(std::mem::size_of::<VolumeRecord>(), 72);
    assert_eq!((v.backend(), v.pool()), ("b1", "p1"));
    let config = v.config();
    assert_eq!(config.internal_name, "trident-v1");
    assert_eq!(config.access_information.nfs_path, "/trident-v1");

    let state = folded();
    assert_eq!(state.volumes["v2"].config().size, "2Gi");
    assert_eq!(state.volumes["v2"].size_bytes, 2 << 30);
    let (a, b) = (&state.volumes["v1"].placed, &state.volumes["v2"].placed);
    assert!(Arc::ptr_eq(a.as_ref().unwrap(), b.as_ref().unwrap()));
}

#[test]
fn a_checkpoint_round_trips_and_shares_placements_again() {
    let state = folded();
    let back = State::decode(&state.encode()).unwrap();
    assert_eq!(back, state);
    assert_eq!(back.volumes["v3"].pool(), "p2");
    let (a, b) = (&back.volumes["v1"].placed, &back.volumes["v2"].placed);
    assert!(Arc::ptr_eq(a.as_ref().unwrap(), b.as_ref().unwrap()));
    assert_eq!(back.interned.pools.len(), 2);
}

#[test]
fn a_volume_name_is_stored_once_and_shared_again_after_a_checkpoint() {
    let mut state = State::default();
    state.apply(
        1,
        AT,
        &Event::backend(
            "b1",
            BackendEvent::Added {
                driver: "fake".into(),
                config: "{}".into(),
                secrets: None,
            },
        ),
    );
    for (seq, ev) in [volume("v1", "p1"), volume("v2", "p2")]
        .iter()
        .flatten()
        .enumerate()
    {
        state.apply(seq as u64 + 2, AT, ev);
    }
    state.apply(
        9,
        AT,
        &Event::volume(
            "v2",
            VolumeEvent::SnapshotRequested {
                snapshot: "s1".into(),
            },
        ),
    );
    let shared = |s: &State| {
        let b = &s.backends["b1"];
        assert_eq!(b.volumes.iter().collect::<Vec<_>>(), ["v1", "v2"]);
        for key in s.volumes.0.keys() {
            let in_set = b.volumes.0.get(&**key).unwrap();
            assert!(Arc::ptr_eq(key, in_set), "{key} is stored once");
        }
    };
    shared(&state);
    assert_eq!(state.volumes["v2"].snapshots().len(), 1);
    assert!(state.volumes["v1"].snapshots().is_empty());
    assert!(state.volumes["v1"].extra.is_none());
    let back = State::decode(&state.encode()).unwrap();
    assert_eq!(back, state);
    shared(&back);
    assert_eq!(
        serde_json::to_value(&back.backends["b1"].volumes).unwrap(),
        serde_json::json!(["v1", "v2"])
    );
    state.apply(10, AT, &Event::volume("v1", VolumeEvent::Deleted));
    assert_eq!(
        state.backends["b1"].volumes.iter().collect::<Vec<_>>(),
        ["v2"]
    );
}

/// The layout before format 2, as its checkpoints hold it: plain bincode of the state.
#[derive(bincode::Encode)]
struct OldVolumeRecord {
    config: VolumeConfig,
    size_bytes: u64,
    state: VolumeState,
    backend: String,
    pool: String,
    access_secrets: Option<Sealed>,
    candidates: Vec<PoolRef>,
    failed: Vec<(PoolRef, String)>,
    orphaned: bool,
    last_error: Option<String>,
    delete_attempts: u32,
    snapshots: BTreeMap<String, SnapshotRecord>,
}

#[derive(bincode::Encode)]
struct OldState {
    head: u64,
    backends: BTreeMap<String, BackendRecord>,
    classes: BTreeMap<String, StorageClassConfig>,
    declared_classes: BTreeMap<String, String>,
    volumes: HashMap<String, OldVolumeRecord>,
}

#[test]
fn an_old_format_checkpoint_is_refused() {
    let state = folded();
    for head in [0, 7, 250, 251, 70_000, 1 << 40, u64::MAX] {
        let old = OldState {
            head,
            backends: BTreeMap::new(),
            classes: BTreeMap::new(),
            declared_classes: BTreeMap::new(),
            volumes: state
                .volumes
                .iter()
                .map(|(n, v)| {
                    let old = OldVolumeRecord {
                        config: v.config(),
                        size_bytes: v.size_bytes,
                        state: v.state,
                        backend: v.backend().into(),
                        pool: v.pool().into(),
                        access_secrets: None,
                        candidates: Vec::new(),
                        failed: Vec::new(),
                        orphaned: false,
                        last_error: None,
                        delete_attempts: 0,
                        snapshots: BTreeMap::new(),
                    };
                    (n.to_string(), old)
                })
                .collect(),
        };
        let bytes = bincode::encode_to_vec(&old, bincode::config::standard()).unwrap();
        let err = State::decode(&bytes).unwrap_err();
        assert!(err.contains("older checkpoint"), "head {head}: {err}");
    }
    // Another format of this prefix, or trailing bytes, are refused too.
    let mut bytes = state.encode();
    bytes[1] = STATE_FORMAT + 1;
    assert!(State::decode(&bytes).unwrap_err().contains("state format"));
    // Formats 2 and 3 (one bincode stream, placements as strings), 4 (extras without the
    // managed flag), 5 (backends without the suspended flag) and 6 (volumes without class,
    // protocol and creation time) are refused as well.
    for format in [2, 3, 4, 5, 6] {
        bytes[1] = format;
        assert!(
            State::decode(&bytes)
                .unwrap_err()
                .contains(&format!("state format {format}"))
        );
    }
    let mut bytes = state.encode();
    bytes.push(0);
    assert!(State::decode(&bytes).is_err());
}

#[test]
fn suspension_is_folded_and_survives_a_checkpoint_and_a_rename() {
    let mut state = State::default();
    let added = BackendEvent::Added {
        driver: "fake".into(),
        config: "{}".into(),
        secrets: None,
    };
    state.apply(1, AT, &Event::backend("b1", added));
    assert!(!state.backends["b1"].suspended, "a new backend is normal");
    state.apply(2, AT, &Event::backend("b1", BackendEvent::Suspended));
    assert!(state.backends["b1"].suspended);
    // A config update or taking it offline does not lift the operator's suspension.
    let updated = BackendEvent::Updated {
        driver: "fake".into(),
        config: "{\"x\":1}".into(),
        secrets: None,
    };
    state.apply(3, AT, &Event::backend("b1", updated));
    state.apply(4, AT, &Event::backend("b1", BackendEvent::Offlined));
    assert!(state.backends["b1"].suspended);
    let decoded = State::decode(&state.encode()).unwrap();
    assert_eq!(decoded, state);
    assert!(decoded.backends["b1"].suspended, "kept by the checkpoint");
    let renamed = BackendEvent::Renamed { to: "b2".into() };
    state.apply(5, AT, &Event::backend("b1", renamed));
    assert!(state.backends["b2"].suspended, "moved with the rename");
    state.apply(6, AT, &Event::backend("b2", BackendEvent::Resumed));
    assert!(!state.backends["b2"].suspended);
    // About a backend the state does not know: ignored.
    state.apply(7, AT, &Event::backend("nope", BackendEvent::Suspended));
    assert!(!state.backends.contains_key("nope"));
}

#[test]
fn class_protocol_and_creation_time_are_kept_in_the_record_and_survive_a_checkpoint() {
    let mut state = State::default();
    let requested = |name: &str, class: &str, protocol| {
        Event::volume(
            name,
            VolumeEvent::Requested {
                config: Box::new(VolumeConfig {
                    name: name.into(),
                    size: "1Gi".into(),
                    storage_class: class.into(),
                    protocol,
                    ..Default::default()
                }),
                size_bytes: 1 << 30,
            },
        )
    };
    let created = |name: &str, protocol| {
        Event::volume(
            name,
            VolumeEvent::Created {
                pool: PoolRef::new("b1", "p1"),
                internal_name: format!("trident-{name}"),
                protocol,
                access: Box::new(AccessInfo::default()),
                secrets: None,
                adopted: false,
            },
        )
    };
    state.apply(1, AT, &requested("v1", "gold", Protocol::Any));
    state.apply(2, AT + 1, &requested("v2", "gold", Protocol::Block));
    state.apply(3, AT + 2, &requested("v3", "", Protocol::File));
    let v1 = &state.volumes["v1"];
    assert_eq!(
        (v1.class(), v1.protocol, v1.created_ms()),
        ("gold", Protocol::Any, None)
    );
    // Created: the commit time of `VolumeCreated`, not of the request; the protocol chosen.
    state.apply(4, AT + 10, &created("v1", Protocol::File));
    state.apply(5, AT + 11, &created("v2", Protocol::Block));
    let v1 = &state.volumes["v1"];
    assert_eq!(v1.created_ms(), Some(AT + 10));
    assert_eq!(v1.protocol, Protocol::File);
    assert_eq!(v1.protocol, v1.config().protocol);
    assert_eq!(v1.class(), v1.config().storage_class);
    // An adoption recorded later keeps the first creation time.
    state.apply(6, AT + 20, &created("v1", Protocol::File));
    assert_eq!(state.volumes["v1"].created_ms(), Some(AT + 10));
    // One class name shared by its volumes; none for an empty class.
    let (a, b) = (&state.volumes["v1"].class, &state.volumes["v2"].class);
    assert!(Arc::ptr_eq(a.as_ref().unwrap(), b.as_ref().unwrap()));
    assert!(state.volumes["v3"].class.is_none());
    assert_eq!(state.volumes["v3"].class(), "");

    let back = State::decode(&state.encode()).unwrap();
    assert_eq!(back, state);
    assert_eq!(back.volumes["v1"].created_ms(), Some(AT + 10));
    assert_eq!(back.volumes["v2"].created_ms(), Some(AT + 11));
    assert_eq!(back.volumes["v3"].created_ms(), None);
    assert_eq!(back.volumes["v2"].protocol, Protocol::Block);
    let (a, b) = (&back.volumes["v1"].class, &back.volumes["v2"].class);
    assert!(Arc::ptr_eq(a.as_ref().unwrap(), b.as_ref().unwrap()));
    assert_eq!(back.interned.classes.len(), 1);

    // A class whose volumes are gone is forgotten when the class goes.
    let mut state = back;
    for (seq, v) in [(7, "v1"), (8, "v2")] {
        state.apply(seq, AT + 30, &Event::volume(v, VolumeEvent::Deleted));
    }
    state.apply(
        9,
        AT + 31,
        &Event::class("gold", StorageClassEvent::Deleted),
    );
    assert!(state.interned.classes.is_empty());
}

use super::*;
use crate::model::AccessInfo;

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
        state.apply(seq as u64 + 1, ev);
    }
    state.apply(
        10,
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
    state.apply(1, &requested);
    state.apply(2, &planned);
    let v = &state.volumes["v1"];
    assert_eq!(v.candidates(), [PoolRef::new("b1", "p1")]);
    assert_eq!((v.backend(), v.pool()), ("", ""));
    assert_eq!(v.config().size, "1Gi");
    state.apply(3, &created);
    let v = &state.volumes["v1"];
    assert!(v.extra.is_none(), "an online volume has no extras");
    assert_eq!(std::mem::size_of::<VolumeRecord>(), 48);
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
        state.apply(seq as u64 + 2, ev);
    }
    state.apply(
        9,
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
    state.apply(10, &Event::volume("v1", VolumeEvent::Deleted));
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
    // managed flag), 5 (backends without the suspended flag) and 6 (volumes without the bound
    // flag) are refused as well.
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
    state.apply(1, &Event::backend("b1", added));
    assert!(!state.backends["b1"].suspended, "a new backend is normal");
    state.apply(2, &Event::backend("b1", BackendEvent::Suspended));
    assert!(state.backends["b1"].suspended);
    // A config update or taking it offline does not lift the operator's suspension.
    let updated = BackendEvent::Updated {
        driver: "fake".into(),
        config: "{\"x\":1}".into(),
        secrets: None,
    };
    state.apply(3, &Event::backend("b1", updated));
    state.apply(4, &Event::backend("b1", BackendEvent::Offlined));
    assert!(state.backends["b1"].suspended);
    let decoded = State::decode(&state.encode()).unwrap();
    assert_eq!(decoded, state);
    assert!(decoded.backends["b1"].suspended, "kept by the checkpoint");
    let renamed = BackendEvent::Renamed { to: "b2".into() };
    state.apply(5, &Event::backend("b1", renamed));
    assert!(state.backends["b2"].suspended, "moved with the rename");
    state.apply(6, &Event::backend("b2", BackendEvent::Resumed));
    assert!(!state.backends["b2"].suspended);
    // About a backend the state does not know: ignored.
    state.apply(7, &Event::backend("nope", BackendEvent::Suspended));
    assert!(!state.backends.contains_key("nope"));
}

#[test]
fn a_binding_is_a_flag_that_survives_a_checkpoint_without_an_extra() {
    let mut state = folded();
    assert!(!state.volumes["v1"].bound(), "a new volume is not bound");
    let bound = |seq| {
        (
            seq,
            Event::volume(
                "v1",
                VolumeEvent::Bound {
                    to: "k8s:pv/v1".into(),
                },
            ),
        )
    };
    let (seq, ev) = bound(11);
    state.apply(seq, &ev);
    let v = &state.volumes["v1"];
    assert!(v.bound());
    assert!(v.extra.is_none(), "the flag needs no extras");
    assert!(!state.volumes["v2"].bound(), "only that volume");
    assert!(state.volume_view("v1").unwrap().bound);
    // A second binding changes nothing more.
    let once = state.clone();
    let (seq, ev) = bound(12);
    state.apply(seq, &ev);
    state.head = once.head;
    assert_eq!(state, once);
    let back = State::decode(&state.encode()).unwrap();
    assert_eq!(back, state);
    assert!(back.volumes["v1"].bound(), "kept by the checkpoint");
    assert!(!back.volumes["v2"].bound());
    // About a volume the state does not know: ignored.
    state.apply(
        13,
        &Event::volume(
            "nope",
            VolumeEvent::Bound {
                to: "k8s:pv/nope".into(),
            },
        ),
    );
    assert!(!state.volumes.contains_key("nope"));
}

use super::*;
use crate::events::Health;
use crate::model::AccessInfo;
use views::NOT_RECORDED;

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
    // managed flag), 5 (backends without the suspended flag) and 6 (volumes without the bound
    // flag, class, protocol and creation time; backends without what the leader observed) are
    // refused as well.
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
    state.apply(seq, AT, &ev);
    let v = &state.volumes["v1"];
    assert!(v.bound());
    assert!(v.extra.is_none(), "the flag needs no extras");
    assert!(!state.volumes["v2"].bound(), "only that volume");
    assert!(state.volume_view("v1").unwrap().bound);
    // A second binding changes nothing more.
    let once = state.clone();
    let (seq, ev) = bound(12);
    state.apply(seq, AT, &ev);
    state.head = once.head;
    assert_eq!(state, once);
    let back = State::decode(&state.encode()).unwrap();
    assert_eq!(back, state);
    assert!(back.volumes["v1"].bound(), "kept by the checkpoint");
    assert!(!back.volumes["v2"].bound());
    // About a volume the state does not know: ignored.
    state.apply(
        13,
        AT,
        &Event::volume(
            "nope",
            VolumeEvent::Bound {
                to: "k8s:pv/nope".into(),
            },
        ),
    );
    assert!(!state.volumes.contains_key("nope"));
}

/// A backend `b1` with pools `p1` and `p2`, observed online with 10 GiB free on `p1` and
/// 5 GiB on `p2`.
fn observed_backend(state: &mut State) {
    let added = BackendEvent::Added {
        driver: "fake".into(),
        config: r#"{"storageDriverName":"fake","password":"<redacted>"}"#.into(),
        secrets: None,
    };
    state.apply(1, AT, &Event::backend("b1", added));
    let pool = |name: &str| PoolInfo {
        name: name.into(),
        offers: BTreeMap::new(),
        total_bytes: Some(20 << 30),
    };
    let discovered = BackendEvent::PoolsDiscovered {
        protocol: Protocol::File,
        pools: vec![pool("p1"), pool("p2")],
    };
    state.apply(2, AT, &Event::backend("b1", discovered));
    state.apply(
        3,
        AT,
        &observed(Health::Online, &[("p1", 10 << 30), ("p2", 5 << 30)]),
    );
}

fn observed(health: Health, free: &[(&str, u64)]) -> Event {
    let observation = Observation {
        health,
        observed_ms: 1_767_323_045_678,
        free_bytes: free.iter().map(|(p, b)| (p.to_string(), *b)).collect(),
        config: Some(r#"{"storageDriverName":"fake","storagePrefix":"x"}"#.into()),
        min_bytes: 1,
        max_bytes: None,
    };
    Event::backend("b1", BackendEvent::Observed(Box::new(observation)))
}

fn free(state: &State) -> Vec<(String, u64)> {
    let observed = state.backends["b1"].observed.as_ref().expect("observed");
    observed.free_bytes.clone().into_iter().collect()
}

fn gib(p1: u64, p2: u64) -> Vec<(String, u64)> {
    vec![("p1".into(), p1 << 30), ("p2".into(), p2 << 30)]
}

#[test]
fn recorded_free_bytes_follow_the_volumes_created_resized_and_deleted_since() {
    let mut state = State::default();
    observed_backend(&mut state);
    let mut seq = 3;
    let mut apply = |state: &mut State, event: &Event| {
        seq += 1;
        state.apply(seq, AT, event);
    };
    for event in volume("v1", "p1").iter().chain(&volume("v2", "p2")) {
        apply(&mut state, event);
    }
    assert_eq!(
        free(&state),
        gib(9, 4),
        "a create takes its size from its pool"
    );
    let resized = VolumeEvent::Resized {
        size: "3Gi".into(),
        size_bytes: 3 << 30,
    };
    apply(&mut state, &Event::volume("v1", resized));
    assert_eq!(free(&state), gib(7, 4), "a resize takes its growth");
    // A volume found on the array (adopted, imported) was there when it was discovered.
    let [requested, planned, Event::Volume { event: created, .. }] = volume("v3", "p1") else {
        unreachable!()
    };
    apply(&mut state, &requested);
    apply(&mut state, &planned);
    let VolumeEvent::Created {
        pool,
        internal_name,
        protocol,
        access,
        secrets,
        ..
    } = created
    else {
        unreachable!()
    };
    let adopted = VolumeEvent::Created {
        pool,
        internal_name,
        protocol,
        access,
        secrets,
        adopted: true,
    };
    apply(&mut state, &Event::volume("v3", adopted));
    assert_eq!(free(&state), gib(7, 4), "an adopted volume takes nothing");
    for name in ["v1", "v3"] {
        apply(
            &mut state,
            &Event::volume(name, VolumeEvent::DeleteRequested),
        );
        apply(&mut state, &Event::volume(name, VolumeEvent::Deleted));
    }
    assert_eq!(free(&state), gib(11, 4), "a delete gives its size back");
    // A volume on a pool whose free bytes were not recorded leaves them unknown.
    for event in volume("v4", "p9") {
        apply(&mut state, &event);
    }
    assert_eq!(free(&state), gib(11, 4));
    // Kept by a checkpoint, and the fold goes on from it as it would have.
    let mut decoded = State::decode(&state.encode()).unwrap();
    assert_eq!(decoded, state);
    apply(&mut state, &Event::volume("v2", VolumeEvent::Deleted));
    decoded.apply(seq, AT, &Event::volume("v2", VolumeEvent::Deleted));
    assert_eq!(decoded, state);
    assert_eq!(free(&state), gib(11, 5));
    // A new recording replaces the adjusted figures; an update forgets them.
    state.apply(seq + 1, AT, &observed(Health::Online, &[("p1", 1 << 30)]));
    assert_eq!(free(&state), vec![("p1".to_string(), 1 << 30)]);
    let updated = BackendEvent::Updated {
        driver: "fake".into(),
        config: "{}".into(),
        secrets: None,
    };
    state.apply(seq + 2, AT, &Event::backend("b1", updated));
    assert_eq!(state.backends["b1"].observed, None);
}

#[test]
fn an_unmanaged_volume_deleted_gives_no_bytes_back() {
    let mut state = State::default();
    observed_backend(&mut state);
    let import = |managed| crate::events::DriftEvent::Imported {
        config: Box::new(VolumeConfig {
            name: "v1".into(),
            size: "1Gi".into(),
            ..Default::default()
        }),
        size_bytes: 1 << 30,
        pool: PoolRef::new("b1", "p1"),
        protocol: Protocol::File,
        access: Box::default(),
        secrets: None,
        managed,
    };
    for (managed, after) in [(false, gib(10, 5)), (true, gib(11, 5))] {
        let mut state = state.clone();
        state.apply(
            4,
            AT,
            &Event::volume("v1", VolumeEvent::Drift(import(managed))),
        );
        assert_eq!(free(&state), gib(10, 5), "an import takes nothing");
        state.apply(5, AT, &Event::volume("v1", VolumeEvent::DeleteRequested));
        state.apply(6, AT, &Event::volume("v1", VolumeEvent::Deleted));
        assert_eq!(free(&state), after, "managed: {managed}");
    }
}

#[test]
fn a_backend_view_shows_what_the_leader_recorded_where_it_does_not_run() {
    let mut state = State::default();
    let added = BackendEvent::Added {
        driver: "fake".into(),
        config: r#"{"storageDriverName":"fake"}"#.into(),
        secrets: None,
    };
    state.apply(1, AT, &Event::backend("b1", added));
    let view = state.backend_view("b1", None).unwrap();
    assert_eq!(view.state, BackendState::Unrecorded);
    assert_eq!(view.state.reason(), Some(NOT_RECORDED));
    assert_eq!((view.state.as_str(), view.observed_ms), ("unknown", None));
    assert_eq!(
        view.config,
        serde_json::json!({"storageDriverName": "fake"})
    );
    let mut state = State::default();
    observed_backend(&mut state);
    let view = state.backend_view("b1", None).unwrap();
    assert_eq!(view.state, BackendState::Online);
    assert_eq!(view.observed_ms, Some(1_767_323_045_678));
    assert_eq!(
        view.config["storagePrefix"], "x",
        "the driver's external config"
    );
    let free: Vec<_> = view.pools.iter().map(|p| p.free_bytes).collect();
    assert_eq!(free, [Some(10 << 30), Some(5 << 30)]);
    // Where it runs, its actor's view of its health wins.
    let live = state.backend_view("b1", Some(BackendState::Initializing));
    assert_eq!(live.unwrap().state, BackendState::Initializing);
    let failed = Health::Failed {
        reason: "array unreachable".into(),
    };
    state.apply(4, AT, &observed(failed, &[]));
    let view = state.backend_view("b1", None).unwrap();
    assert_eq!(view.state, BackendState::Failed("array unreachable".into()));
    assert_eq!(view.pools[0].free_bytes, None);
    state.apply(5, AT, &Event::backend("b1", BackendEvent::Offlined));
    state.apply(6, AT, &observed(Health::Online, &[]));
    let view = state.backend_view("b1", None).unwrap();
    assert_eq!(
        view.state,
        BackendState::Offline,
        "deleted while it has volumes"
    );
}

#[test]
fn classes_match_pools_from_the_state_alone() {
    let mut state = State::default();
    observed_backend(&mut state);
    for (seq, (name, pools)) in [("gold", r#"["p1"]"#), ("all", r#"["p1","p2"]"#)]
        .into_iter()
        .enumerate()
    {
        let body = format!(r#"{{"name":"{name}","storagePools":{{"b1":{pools}}}}}"#);
        let config = StorageClassConfig::from_json(body.as_bytes()).unwrap();
        let added = StorageClassEvent::Added { config };
        state.apply(4 + seq as u64, AT, &Event::class(name, added));
    }
    let view = state.backend_view("b1", None).unwrap();
    let classes: Vec<_> = view
        .pools
        .iter()
        .map(|p| p.storage_classes.clone())
        .collect();
    assert_eq!(classes, [vec!["all", "gold"], vec!["all"]]);
    let gold = state.class_view("gold").unwrap();
    assert_eq!(
        gold.pools,
        BTreeMap::from([("b1".into(), vec!["p1".into()])])
    );
    // An offline backend's pools leave every class.
    state.apply(6, AT, &Event::backend("b1", BackendEvent::Offlined));
    assert!(state.class_view("all").unwrap().pools.is_empty());
    assert!(state.classes_of_pools().is_empty());
}

#[test]
fn only_an_observation_that_says_something_new_is_to_be_recorded() {
    let mut state = State::default();
    observed_backend(&mut state);
    let Event::Backend {
        event: BackendEvent::Observed(last),
        ..
    } = observed(Health::Online, &[("p1", 10 << 30), ("p2", 5 << 30)])
    else {
        unreachable!()
    };
    let rec = &state.backends["b1"];
    let later = Observation {
        observed_ms: last.observed_ms + 60_000,
        ..(*last).clone()
    };
    assert!(!rec.observation_differs(&later), "only the time differs");
    let failed = |reason: &str| Observation {
        health: Health::Failed {
            reason: reason.into(),
        },
        ..(*last).clone()
    };
    assert!(rec.observation_differs(&failed("array unreachable")));
    let mut state = state.clone();
    let ev = BackendEvent::Observed(Box::new(failed("array unreachable")));
    state.apply(4, AT, &Event::backend("b1", ev));
    let rec = &state.backends["b1"];
    assert!(
        !rec.observation_differs(&failed("array unreachable")),
        "a retry failing alike"
    );
    assert!(
        rec.observation_differs(&failed("login refused")),
        "another reason"
    );
    assert!(rec.observation_differs(&later), "back online");
    let other_config = Observation {
        config: Some("{}".into()),
        ..later.clone()
    };
    let mut fresh = State::default();
    observed_backend(&mut fresh);
    let rec = &fresh.backends["b1"];
    assert!(rec.observation_differs(&other_config));
    let less_free = Observation {
        free_bytes: BTreeMap::from([("p1".into(), 1 << 30)]),
        ..later
    };
    assert!(rec.observation_differs(&less_free));
    let mut unrecorded = fresh.clone();
    unrecorded.backends.get_mut("b1").unwrap().observed = None;
    assert!(unrecorded.backends["b1"].observation_differs(&less_free));
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

//! Property test: random command sequences against the core. The state the core shows equals a
//! naive fold of the commands' outcomes; after a restart (checkpoint + tail) it is the same;
//! and two full replays of the log agree with each other and with the checkpointed state.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::*;
use proptest::prelude::*;
use serde_json::json;
use storch::actors::{Core, RequestCtx};
use storch::log::{Durability, EventLog};
use storch::model::{StorageClassConfig, VolumeConfig};
use storch::projections::State;

#[derive(Debug, Clone)]
enum Cmd {
    AddBackend(u8),
    DeleteBackend(u8),
    AddClass(u8),
    DeleteClass(u8),
    CreateVolume(u8, u8),
    CloneVolume(u8, u8),
    DeleteVolume(u8),
}

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        2 => (0u8..3).prop_map(Cmd::AddBackend),
        1 => (0u8..3).prop_map(Cmd::DeleteBackend),
        2 => (0u8..3).prop_map(Cmd::AddClass),
        1 => (0u8..3).prop_map(Cmd::DeleteClass),
        5 => (0u8..12, 0u8..3).prop_map(|(v, c)| Cmd::CreateVolume(v, c)),
        1 => (0u8..12, 0u8..12).prop_map(|(v, s)| Cmd::CloneVolume(v, s)),
        3 => (0u8..12).prop_map(Cmd::DeleteVolume),
    ]
}

/// What the commands' outcomes say the state must be.
#[derive(Debug, Default, PartialEq)]
struct Naive {
    /// backend → online
    backends: BTreeMap<String, bool>,
    classes: BTreeSet<String>,
    /// volume → backend
    volumes: BTreeMap<String, String>,
}

fn backend_doc(i: u8) -> serde_json::Value {
    let media = ["ssd", "hdd", "hybrid"][i as usize];
    fake_backend(
        &format!("b{i}"),
        if i == 2 { "block" } else { "file" },
        &[
            ("p1", json!({"media": {"offer": [media]}})),
            ("p2", json!({})),
        ],
    )
}

fn class_doc(i: u8) -> StorageClassConfig {
    let body = match i {
        0 => json!({"name": "c0"}),
        1 => json!({"name": "c1", "attributes": {"media": "ssd"}}),
        _ => json!({"name": "c2", "storagePools": {"b[12]": ["p2"]}}),
    };
    StorageClassConfig::from_json(body.to_string().as_bytes()).unwrap()
}

async fn run(core: &Core, cmds: &[Cmd], naive: &mut Naive) {
    let ctx = RequestCtx::random;
    for c in cmds {
        match c {
            Cmd::AddBackend(i) => {
                let name = core.add_backend(&ctx(), backend_doc(*i)).await.unwrap();
                naive.backends.insert(name, true);
            }
            Cmd::DeleteBackend(i) => {
                let name = format!("b{i}");
                if core.delete_backend(&ctx(), &name).await.is_ok() {
                    if naive.volumes.values().any(|b| *b == name) {
                        naive.backends.insert(name, false);
                    } else {
                        naive.backends.remove(&name);
                    }
                }
            }
            Cmd::AddClass(i) => {
                if let Ok(name) = core.add_storage_class(&ctx(), class_doc(*i)).await {
                    naive.classes.insert(name);
                }
            }
            Cmd::DeleteClass(i) => {
                if core
                    .delete_storage_class(&ctx(), &format!("c{i}"))
                    .await
                    .is_ok()
                {
                    naive.classes.remove(&format!("c{i}"));
                }
            }
            Cmd::CreateVolume(v, c) => {
                let cfg = VolumeConfig {
                    name: format!("v{v}"),
                    size: "1Gi".into(),
                    storage_class: format!("c{c}"),
                    ..Default::default()
                };
                if let Ok(view) = add_volume(core, &ctx(), cfg).await {
                    naive.volumes.insert(view.config.name, view.backend);
                }
            }
            Cmd::CloneVolume(v, s) => {
                let cfg = VolumeConfig {
                    name: format!("v{v}"),
                    clone_source_volume: format!("v{s}"),
                    ..Default::default()
                };
                if let Ok(view) = add_volume(core, &ctx(), cfg).await {
                    assert_eq!(Some(&view.backend), naive.volumes.get(&format!("v{s}")));
                    naive.volumes.insert(view.config.name, view.backend);
                }
            }
            Cmd::DeleteVolume(v) => {
                let name = format!("v{v}");
                if core.delete_volume(&ctx(), &name).await.is_ok() {
                    let backend = naive.volumes.remove(&name).unwrap();
                    if naive.backends.get(&backend) == Some(&false)
                        && !naive.volumes.values().any(|b| *b == backend)
                    {
                        naive.backends.remove(&backend);
                    }
                }
            }
        }
    }
}

fn observe(core: &Core) -> Naive {
    let mut n = Naive::default();
    for name in core.list_backends().unwrap() {
        n.backends.insert(name, true);
    }
    for name in core.list_volumes().unwrap() {
        let v = core.get_volume(&name).unwrap();
        if !n.backends.contains_key(&v.backend) {
            let b = core.get_backend(&v.backend).unwrap();
            n.backends.insert(v.backend.clone(), b.online);
        }
        n.volumes.insert(name, v.backend);
    }
    n.classes = core.list_storage_classes().unwrap().into_iter().collect();
    n
}

fn full_replay(dir: &std::path::Path) -> State {
    replay_until(dir, u64::MAX)
}

/// The fold of the log's events up to `last` (inclusive).
fn replay_until(dir: &std::path::Path, last: u64) -> State {
    let log = EventLog::open(&dir.join("log"), Durability::Flush).unwrap();
    let mut state = State::default();
    for env in log.read_from(1) {
        let env = env.unwrap();
        if env.seq > last {
            break;
        }
        let ev = storch::events::decode(env.schema, &env.payload).unwrap();
        state.apply(env.seq, env.time_ms, &ev);
    }
    state
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn replay_equals_naive_fold(cmds in proptest::collection::vec(cmd(), 1..40)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut naive = Naive::default();
            let core_rt = start(dir.path()).await;
            run(&core_rt.core(), &cmds, &mut naive).await;
            assert_eq!(observe(&core_rt.core()), naive, "live state after {cmds:?}");
            core_rt.shutdown().await;

            let core_rt = start(dir.path()).await;
            assert_eq!(observe(&core_rt.core()), naive, "state after restart");
            core_rt.shutdown().await;

            let a = full_replay(dir.path());
            let b = full_replay(dir.path());
            assert_eq!(a, b, "two replays agree");
            // A checkpoint is the fold of the events up to it (events the background work
            // recorded while the core stopped may follow it: a restart replays them on top).
            if let Some((seq, bytes)) = {
                let log = EventLog::open(&dir.path().join("log"), Durability::Flush).unwrap();
                log.latest_checkpoint().unwrap()
            } {
                let ckpt = State::decode(&bytes).unwrap();
                assert_eq!(ckpt.head, seq);
                assert_eq!(ckpt, replay_until(dir.path(), seq), "the checkpoint equals a replay up to it");
            }
            let log = EventLog::open(&dir.path().join("log"), Durability::Flush).unwrap();
            assert_eq!(log.verify().first_bad, None);
        });
    }
}

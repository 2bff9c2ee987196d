//! Every past event schema has a frozen log under `migrations/fixtures/NNNN/`; each is
//! replayed here through the current decoder (and its upcasters) and must give the recorded
//! state. A fixture is written once by the `#[ignore]`d generator and never changed after.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use storch::events::{BackendEvent, Event, StorageClassEvent, VolumeEvent};
use storch::log::{DiscardSink, Durability, EventLog, NewEvent};
use storch::model::{
    AccessInfo, Offer, PoolInfo, PoolRef, Protocol, StorageClassConfig, VolumeConfig,
};
use storch::projections::State;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/fixtures")
}

/// A readable summary of a state, stored beside each fixture.
fn summary(state: &State) -> Value {
    let mut volumes: Vec<_> = state.volumes.iter().collect();
    volumes.sort_by(|a, b| a.0.cmp(b.0));
    json!({
        "head": state.head,
        "backends": state.backends.iter().map(|(n, b)| json!({
            "name": n, "driver": b.driver, "online": b.online, "protocol": b.protocol.as_str(),
            "pools": b.pools.iter().map(|p| p.name.clone()).collect::<Vec<_>>(),
            "volumes": b.volumes,
        })).collect::<Vec<_>>(),
        "classes": state.classes.keys().collect::<Vec<_>>(),
        "volumes": volumes.iter().map(|(n, v)| json!({
            "name": n, "state": v.state.as_str(), "backend": v.backend(), "pool": v.pool(),
            "internalName": v.config().internal_name, "size": v.config().size,
            "sizeBytes": v.size_bytes, "orphaned": v.orphaned, "lastError": v.last_error(),
            "candidates": v.candidates().iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// Reads `events.bin`: records of (u64 BE sequence, u32 BE length, stored bytes).
fn read_frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let seq = u64::from_be_bytes(rest[..8].try_into().unwrap());
        let len = u32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize;
        out.push((seq, rest[12..12 + len].to_vec()));
        rest = &rest[12 + len..];
    }
    out
}

fn load_fixture(dir: &Path, data_dir: &Path) {
    let log = EventLog::open(&data_dir.join("log"), Durability::Flush).unwrap();
    for (seq, raw) in read_frames(&dir.join("events.bin")) {
        log.put_raw_for_tests(seq, Some(raw));
    }
}

#[test]
fn every_frozen_log_replays_to_its_recorded_state() {
    let mut seen = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let dir = entry.unwrap().path();
        let data = tempfile::tempdir().unwrap();
        load_fixture(&dir, data.path());
        let log = EventLog::open(&data.path().join("log"), Durability::Flush).unwrap();
        let report = log.verify();
        assert_eq!(report.first_bad, None, "{}: chain verifies", dir.display());
        let mut state = State::default();
        for env in log.read_from(1) {
            let env = env.unwrap();
            let event = storch::events::decode(env.schema, &env.payload)
                .unwrap_or_else(|e| panic!("{}: seq {}: {e}", dir.display(), env.seq));
            state.apply(env.seq, env.time_ms, &event);
        }
        let expected: Value =
            serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
        assert_eq!(summary(&state), expected, "{}", dir.display());
        seen += 1;
    }
    assert!(seen >= 1, "no fixtures found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_boots_on_the_schema_1_log() {
    let data = tempfile::tempdir().unwrap();
    load_fixture(&fixtures().join("0001"), data.path());
    let rt = crate::support::start(data.path()).await;
    let core = rt.core();
    assert_eq!(core.list_storage_classes().unwrap(), vec!["gold"]);
    let v = core.get_volume("vol-a").unwrap();
    assert_eq!(v.backend, "lab2");
    assert_eq!(v.config.internal_name, "trident-vol-a");
    rt.shutdown().await;
}

/// Writes `migrations/fixtures/0001`. Run once with
/// `cargo test --test integration migrations::generate_fixture_0001 -- --ignored`; never regenerate a
/// committed fixture (that would defeat its purpose).
#[tokio::test]
#[ignore]
async fn generate_fixture_0001() {
    let out = fixtures().join("0001");
    let data = tempfile::tempdir().unwrap();
    let log = EventLog::open(&data.path().join("log"), Durability::Flush).unwrap();
    let appender = log.start_writer(Arc::new(DiscardSink));
    let pool = |name: &str, media: &str| PoolInfo {
        name: name.into(),
        offers: [
            (
                "backendType".to_string(),
                Offer::Strings(["fake".to_string()].into()),
            ),
            (
                "media".to_string(),
                Offer::Strings([media.to_string()].into()),
            ),
            ("snapshots".to_string(), Offer::Bool(true)),
            (
                "IOPS".to_string(),
                Offer::Int {
                    min: 100,
                    max: 5000,
                },
            ),
        ]
        .into(),
        total_bytes: Some(100 << 30),
    };
    let config = r#"{"version":1,"storageDriverName":"fake","backendName":"lab","instanceName":"lab","protocol":"file","pools":{"p1":{"attributes":{"media":{"offer":["ssd"]}},"sizeBytes":107374182400},"p2":{"attributes":{"media":{"offer":["hdd"]}},"sizeBytes":107374182400}}}"#;
    let class = StorageClassConfig::from_json(
        br#"{"name":"gold","attributes":{"media":"ssd","snapshots":"true"},"storagePools":{"lab.*":["p.*"]}}"#,
    )
    .unwrap();
    let vol = |name: &str| VolumeConfig {
        version: "1".into(),
        name: name.into(),
        size: "1Gi".into(),
        storage_class: "gold".into(),
        ..Default::default()
    };
    let created = |p: &str| VolumeEvent::Created {
        pool: PoolRef::new("lab", p),
        internal_name: "x".into(),
        protocol: Protocol::File,
        access: Box::new(AccessInfo {
            nfs_server_ip: "192.0.2.1".into(),
            ..Default::default()
        }),
        secrets: None,
        adopted: false,
    };
    let mut created_a = created("p1");
    if let VolumeEvent::Created {
        internal_name,
        access,
        ..
    } = &mut created_a
    {
        *internal_name = "trident-vol-a".into();
        access.nfs_path = "/trident-vol-a".into();
    }
    let history = vec![
        vec![
            Event::backend(
                "lab",
                BackendEvent::Added {
                    driver: "fake".into(),
                    config: config.into(),
                    secrets: None,
                },
            ),
            Event::backend(
                "lab",
                BackendEvent::PoolsDiscovered {
                    protocol: Protocol::File,
                    pools: vec![pool("p1", "ssd"), pool("p2", "hdd")],
                },
            ),
        ],
        vec![Event::class(
            "gold",
            StorageClassEvent::Added {
                config: class.clone(),
            },
        )],
        vec![Event::class(
            "silver",
            StorageClassEvent::Added {
                config: StorageClassConfig {
                    name: "silver".into(),
                    version: "1".into(),
                    ..Default::default()
                },
            },
        )],
        vec![Event::class("silver", StorageClassEvent::Deleted)],
        vec![
            Event::volume(
                "vol-a",
                VolumeEvent::Requested {
                    config: Box::new(vol("vol-a")),
                    size_bytes: 1 << 30,
                },
            ),
            Event::volume(
                "vol-a",
                VolumeEvent::PlacementPlanned {
                    candidates: vec![PoolRef::new("lab", "p2"), PoolRef::new("lab", "p1")],
                    seed: 42,
                },
            ),
        ],
        vec![Event::volume(
            "vol-a",
            VolumeEvent::PlacementAttemptFailed {
                pool: PoolRef::new("lab", "p2"),
                error: "injected".into(),
            },
        )],
        vec![Event::volume("vol-a", created_a)],
        vec![
            Event::volume(
                "vol-b",
                VolumeEvent::Requested {
                    config: Box::new(vol("vol-b")),
                    size_bytes: 1 << 30,
                },
            ),
            Event::volume(
                "vol-b",
                VolumeEvent::PlacementPlanned {
                    candidates: vec![PoolRef::new("lab", "p1")],
                    seed: 7,
                },
            ),
        ],
        vec![Event::volume(
            "vol-b",
            VolumeEvent::CreationFailed {
                errors: vec![
                    "[Failed to create volume vol-b on storage pool p1 from backend lab: full]"
                        .into(),
                ],
            },
        )],
        vec![
            Event::volume(
                "vol-c",
                VolumeEvent::Requested {
                    config: Box::new(vol("vol-c")),
                    size_bytes: 2 << 30,
                },
            ),
            Event::volume(
                "vol-c",
                VolumeEvent::PlacementPlanned {
                    candidates: vec![PoolRef::new("lab", "p1")],
                    seed: 8,
                },
            ),
        ],
        vec![Event::volume("vol-c", created("p1"))],
        vec![Event::volume("vol-c", VolumeEvent::DeleteRequested)],
        vec![Event::volume(
            "vol-c",
            VolumeEvent::DeleteFailed {
                error: "array busy".into(),
                attempt: 1,
            },
        )],
        vec![Event::volume("vol-c", VolumeEvent::Deleted)],
        vec![Event::backend(
            "lab",
            BackendEvent::Updated {
                driver: "fake".into(),
                config: config.into(),
                secrets: None,
            },
        )],
        vec![Event::volume(
            "vol-a",
            VolumeEvent::OrphanedChanged { orphaned: true },
        )],
        vec![Event::volume(
            "vol-a",
            VolumeEvent::OrphanedChanged { orphaned: false },
        )],
        vec![
            Event::backend("lab", BackendEvent::Renamed { to: "lab2".into() }),
            Event::backend(
                "lab2",
                BackendEvent::Updated {
                    driver: "fake".into(),
                    config: config.replace("\"lab\"", "\"lab2\""),
                    secrets: None,
                },
            ),
        ],
        vec![Event::backend("lab2", BackendEvent::Offlined)],
        vec![Event::backend(
            "tmp",
            BackendEvent::Added {
                driver: "fake".into(),
                config: config.replace("\"lab\"", "\"tmp\""),
                secrets: None,
            },
        )],
        vec![Event::backend("tmp", BackendEvent::Purged)],
        vec![
            Event::volume(
                "vol-d",
                VolumeEvent::Requested {
                    config: Box::new(vol("vol-d")),
                    size_bytes: 1 << 30,
                },
            ),
            Event::volume(
                "vol-d",
                VolumeEvent::PlacementPlanned {
                    candidates: vec![PoolRef::new("lab2", "p1")],
                    seed: 9,
                },
            ),
        ],
    ];
    for (i, batch) in history.into_iter().enumerate() {
        let batch: Vec<NewEvent> = batch.iter().map(NewEvent::from).collect();
        appender
            .append(&format!("fixture-{i}"), batch)
            .await
            .unwrap();
    }
    drop(appender);
    log.shutdown().await.unwrap();
    let mut frames = Vec::new();
    let mut state = State::default();
    for env in log.read_from(1) {
        let env = env.unwrap();
        let raw = log.raw_frame(env.seq).unwrap();
        frames.extend_from_slice(&env.seq.to_be_bytes());
        frames.extend_from_slice(&(raw.len() as u32).to_be_bytes());
        frames.extend_from_slice(&raw);
        state.apply(
            env.seq,
            env.time_ms,
            &storch::events::decode(env.schema, &env.payload).unwrap(),
        );
    }
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("events.bin"), frames).unwrap();
    let mut text = serde_json::to_string_pretty(&summary(&state)).unwrap();
    text.push('\n');
    std::fs::write(out.join("expected.json"), text).unwrap();
}

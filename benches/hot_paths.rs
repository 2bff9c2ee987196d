//! Micro-benchmarks of storch's hot paths: storage-class matching over many pools, event
//! encoding and decoding, a group-commit append, and replay of a fixed log.
//! `cargo bench --bench hot_paths`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use storch::events::{Event, VolumeEvent};
use storch::log::{DiscardSink, Durability, EventLog, NewEvent};
use storch::model::{CompiledClass, Offer, PoolInfo, PoolRef, StorageClassConfig, VolumeConfig};
use storch::projections::State;

fn pools(n: usize) -> Vec<(String, PoolInfo)> {
    (0..n)
        .map(|i| {
            let media = ["ssd", "hdd", "hybrid"][i % 3];
            let offers = [
                (
                    "backendType".to_string(),
                    Offer::Strings(["fake".to_string()].into()),
                ),
                (
                    "media".to_string(),
                    Offer::Strings([media.to_string()].into()),
                ),
                ("snapshots".to_string(), Offer::Bool(i % 2 == 0)),
                (
                    "IOPS".to_string(),
                    Offer::Int {
                        min: 100,
                        max: 1000 * (i as i64 % 10 + 1),
                    },
                ),
            ]
            .into();
            (
                format!("backend{}", i / 8),
                PoolInfo {
                    name: format!("pool{i}"),
                    offers,
                    total_bytes: None,
                },
            )
        })
        .collect()
}

fn matching(c: &mut Criterion) {
    let pools = pools(1024);
    let class = |body: &str| {
        CompiledClass::compile(StorageClassConfig::from_json(body.as_bytes()).unwrap()).unwrap()
    };
    let attrs =
        class(r#"{"name":"gold","attributes":{"media":"ssd","snapshots":"true","IOPS":"2000"}}"#);
    let regex = class(
        r#"{"name":"r","storagePools":{"backend1.*":["pool[0-9]+"]},"excludeStoragePools":{"backend12":[".*"]}}"#,
    );
    c.bench_function("match 1024 pools, 3 attributes", |b| {
        b.iter(|| pools.iter().filter(|(be, p)| attrs.matches(be, p)).count())
    });
    c.bench_function("match 1024 pools, regex lists", |b| {
        b.iter(|| pools.iter().filter(|(be, p)| regex.matches(be, p)).count())
    });
}

fn created(i: u64) -> Event {
    Event::volume(
        format!("pvc-{i:08}"),
        VolumeEvent::Created {
            pool: PoolRef::new("backend1", "pool1"),
            internal_name: format!("trident_pvc_{i:08}"),
            protocol: storch::model::Protocol::File,
            access: Box::default(),
            secrets: None,
            adopted: false,
        },
    )
}

fn codec(c: &mut Criterion) {
    let requested = Event::volume(
        "pvc-1",
        VolumeEvent::Requested {
            config: Box::new(VolumeConfig {
                name: "pvc-1".into(),
                size: "1Gi".into(),
                storage_class: "gold".into(),
                ..Default::default()
            }),
            size_bytes: 1 << 30,
        },
    );
    let bytes = storch::events::encode(&requested);
    c.bench_function("encode VolumeRequested", |b| {
        b.iter(|| storch::events::encode(black_box(&requested)))
    });
    c.bench_function("decode VolumeRequested", |b| {
        b.iter(|| {
            storch::events::decode(storch::events::SCHEMA_VERSION, black_box(&bytes)).unwrap()
        })
    });
}

fn append(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(&dir.path().join("log"), Durability::Flush).unwrap();
    let appender = rt.block_on(async { log.start_writer(Arc::new(DiscardSink)) });
    let batch: Vec<NewEvent> = (0..64).map(|i| NewEvent::from(&created(i))).collect();
    c.bench_function("durable group-commit append of 64 events", |b| {
        b.iter_batched(
            || batch.clone(),
            |batch| rt.block_on(appender.append("bench", batch)).unwrap(),
            BatchSize::SmallInput,
        )
    });
}

fn replay(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(&dir.path().join("log"), Durability::Write).unwrap();
    rt.block_on(async {
        let appender = log.start_writer(Arc::new(DiscardSink));
        for chunk in 0..10u64 {
            let batch = (0..1000)
                .map(|i| NewEvent::from(&created(chunk * 1000 + i)))
                .collect();
            appender.append("bench", batch).await.unwrap();
        }
    });
    c.bench_function("replay 10k events into the projection", |b| {
        b.iter(|| {
            storch::projections::replay(&log, State::default())
                .unwrap()
                .head
        })
    });
}

fn zapi(c: &mut Criterion) {
    use storch::wire::zapi::{self as xml, Node};
    let create = Node::new("volume-create")
        .with_leaf("volume", "trident_pvc_0001")
        .with_leaf("containing-aggr-name", "aggr1")
        .with_leaf("size", "1073741824")
        .with_leaf("space-reserve", "none")
        .with_leaf("snapshot-policy", "none")
        .with_leaf("junction-path", "/trident_pvc_0001");
    c.bench_function("ZAPI build volume-create request", |b| {
        b.iter(|| xml::request(black_box(&create), Some("svm1")))
    });
    let attrs: Vec<Node> = (0..50)
        .map(|i| {
            Node::new("volume-attributes").with(
                Node::new("volume-id-attributes")
                    .with_leaf("name", format!("trident_pvc_{i:04}"))
                    .with_leaf("containing-aggregate-name", "aggr1"),
            )
        })
        .collect();
    let page = xml::response(
        "NetApp Release 9.5",
        &xml::passed(vec![
            attrs
                .into_iter()
                .fold(Node::new("attributes-list"), Node::with),
            Node::leaf("num-records", "50"),
            Node::leaf("next-tag", "tag-2"),
        ]),
    );
    c.bench_function("ZAPI parse a 50-volume volume-get-iter page", |b| {
        b.iter(|| xml::parse_response(black_box(&page)).unwrap())
    });
}

criterion_group!(benches, matching, codec, append, replay, zapi);
criterion_main!(benches);

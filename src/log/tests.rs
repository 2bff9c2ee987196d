use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize};

use proptest::prelude::*;

use super::*;

fn ev(kind: &str, stream: &str, payload: &[u8]) -> NewEvent {
    NewEvent {
        kind: kind.to_string(),
        stream: stream.to_string(),
        schema: 1,
        payload: payload.to_vec(),
    }
}

/// Records every committed envelope and counts batches.
#[derive(Default)]
struct RecordingSink {
    envelopes: Mutex<Vec<Envelope>>,
    batches: AtomicUsize,
}

impl CommitSink for RecordingSink {
    fn committed(&self, batch: &[Envelope]) {
        assert!(!batch.is_empty(), "the sink got an empty batch");
        self.batches.fetch_add(1, Ordering::SeqCst);
        self.envelopes.lock().unwrap().extend_from_slice(batch);
    }
}

impl RecordingSink {
    fn seqs(&self) -> Vec<u64> {
        self.envelopes
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect()
    }
}

struct NullSink;

impl CommitSink for NullSink {
    fn committed(&self, _: &[Envelope]) {}
}

fn read_all(log: &EventLog, from: u64) -> Vec<Envelope> {
    log.read_from(from).collect::<Result<_, _>>().unwrap()
}

fn assert_corrupt_at(log: &EventLog, seq: u64, reason_part: &str) {
    let report = log.verify();
    let (bad, reason) = report.first_bad.clone().expect("verify found nothing");
    assert_eq!(bad, seq, "reason: {reason}");
    assert!(
        reason.contains(reason_part),
        "reason {reason:?} lacks {reason_part:?}"
    );
    assert_eq!(report.events, seq - 1);
}

/// A log in a fresh directory holding `n` events (one append each), writer stopped.
async fn filled(n: u64) -> (tempfile::TempDir, EventLog) {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    let appender = log.start_writer(Arc::new(NullSink));
    for i in 1..=n {
        let seqs = appender
            .append(
                &format!("req-{i}"),
                vec![ev("Thing", "thing/1", format!("payload {i}").as_bytes())],
            )
            .await
            .unwrap();
        assert_eq!(seqs, vec![i]);
    }
    drop(appender);
    log.shutdown().await.unwrap();
    (dir, log)
}

#[tokio::test]
async fn append_and_read_round_trip() {
    for durability in [Durability::Flush, Durability::Write, Durability::Memory] {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), durability).unwrap();
        assert_eq!(log.head(), (0, GENESIS_HASH));
        assert!(read_all(&log, 1).is_empty());
        let sink = Arc::new(RecordingSink::default());
        let appender = log.start_writer(sink.clone());

        let first = vec![
            ev("VolumeRequested", "volume/a", b"one"),
            ev("PlacementPlanned", "volume/a", b""),
            ev("VolumeCreated", "volume/a", &[0, 1, 2, 255]),
        ];
        assert_eq!(
            appender.append("req-a", first.clone()).await.unwrap(),
            vec![1, 2, 3]
        );
        let second = vec![NewEvent {
            kind: "BackendAdded".into(),
            stream: "backend/ü".into(),
            schema: 7,
            payload: vec![9; 1000],
        }];
        assert_eq!(
            appender.append("config", second.clone()).await.unwrap(),
            vec![4]
        );
        assert!(appender.append("nothing", vec![]).await.unwrap().is_empty());

        let all = read_all(&log, 1);
        assert_eq!(all.len(), 4);
        assert_eq!(*sink.envelopes.lock().unwrap(), all);
        assert_eq!(sink.batches.load(Ordering::SeqCst), 2);
        let mut prev = GENESIS_HASH;
        let mut ids = HashSet::new();
        for (env, (req, new)) in all.iter().zip(
            std::iter::repeat_n("req-a", 3)
                .chain(["config"])
                .zip(first.iter().chain(&second)),
        ) {
            assert_eq!(env.request_id, req);
            assert_eq!(env.kind, new.kind);
            assert_eq!(env.stream, new.stream);
            assert_eq!(env.schema, new.schema);
            assert_eq!(env.payload, new.payload);
            assert_eq!(env.id.get_version_num(), 7);
            assert!(ids.insert(env.id));
            assert_eq!(env.compute_hash(&prev), env.hash);
            prev = env.hash;
        }
        // One commit time per batch, never going backwards.
        assert!(all[..3].iter().all(|e| e.time_ms == all[0].time_ms));
        assert!(all[3].time_ms >= all[0].time_ms);
        assert_eq!(log.head(), (4, all[3].hash));

        assert_eq!(read_all(&log, 0), all);
        assert_eq!(read_all(&log, 3), all[2..]);
        assert_eq!(read_all(&log, 4), all[3..]);
        assert!(read_all(&log, 5).is_empty());
        assert!(read_all(&log, 99).is_empty());
        assert_eq!(
            log.verify(),
            VerifyReport {
                events: 4,
                head_seq: 4,
                first_bad: None,
                anchor: None,
                acknowledged: (durability != Durability::Memory).then_some(4),
                missing: None,
            }
        );
        drop(appender);
        log.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appenders_share_flushes_and_keep_a_gap_free_chain() {
    const TASKS: usize = 64;
    const APPENDS: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    let sink = Arc::new(RecordingSink::default());
    let appender = log.start_writer(sink.clone());

    let started = std::time::Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let appender = appender.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for j in 0..APPENDS {
                // 1 to 3 events per call: each call's events must stay contiguous.
                let events: Vec<NewEvent> = (0..(j % 3) + 1)
                    .map(|k| {
                        ev(
                            "Tick",
                            &format!("task/{t}"),
                            format!("{t}:{j}:{k}").as_bytes(),
                        )
                    })
                    .collect();
                let seqs = appender
                    .append(&format!("req-{t}-{j}"), events)
                    .await
                    .unwrap();
                got.push((t, j, seqs));
            }
            got
        }));
    }
    let mut results = Vec::new();
    for task in tasks {
        results.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    drop(appender);
    log.shutdown().await.unwrap();

    let total: usize = results.iter().map(|(_, _, s)| s.len()).sum();
    let all = read_all(&log, 1);
    assert_eq!(all.len(), total);
    assert_eq!(log.head().0, total as u64);

    // Every caller's sequences are contiguous and hold exactly its events.
    let mut seen = HashSet::new();
    for (t, j, seqs) in &results {
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        for (k, seq) in seqs.iter().enumerate() {
            assert!(seen.insert(*seq));
            let env = &all[*seq as usize - 1];
            assert_eq!(env.seq, *seq);
            assert_eq!(env.payload, format!("{t}:{j}:{k}").as_bytes());
            assert_eq!(env.request_id, format!("req-{t}-{j}"));
        }
    }
    // The sink saw every event exactly once, in order.
    assert_eq!(sink.seqs(), (1..=total as u64).collect::<Vec<_>>());
    assert_eq!(log.verify().first_bad, None);

    let appends = TASKS * APPENDS;
    let batches = sink.batches.load(Ordering::SeqCst);
    eprintln!(
        "group commit: {appends} appends ({total} events) in {batches} batches / flushes, \
         {elapsed:?}, ~{:.0} appends/s, ~{:.0} events/s",
        appends as f64 / elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64(),
    );
    assert!(
        batches * 4 <= appends,
        "{batches} batches for {appends} appends: group commit is not grouping"
    );
}

#[tokio::test]
async fn reopen_continues_the_chain() {
    let (dir, log) = filled(10).await;
    let head = log.head();
    let id = log.instance_id();
    let last_time = read_all(&log, 10)[0].time_ms;
    drop(log);

    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    assert_eq!(log.head(), head);
    assert_eq!(log.instance_id(), id);
    let appender = log.start_writer(Arc::new(NullSink));
    assert_eq!(
        appender
            .append("after", vec![ev("Later", "x", b"y")])
            .await
            .unwrap(),
        vec![11]
    );
    drop(appender);
    log.shutdown().await.unwrap();
    let eleventh = &read_all(&log, 11)[0];
    assert!(eleventh.time_ms >= last_time);
    assert_eq!(
        log.verify(),
        VerifyReport {
            events: 11,
            head_seq: 11,
            first_bad: None,
            anchor: None,
            acknowledged: Some(11),
            missing: None,
        }
    );
}

#[tokio::test]
async fn second_open_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    match EventLog::open(dir.path(), Durability::Flush) {
        Err(LogError::Locked { path }) => assert_eq!(path, dir.path().display().to_string()),
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("a second open of the same directory succeeded"),
    }
    drop(log);
    EventLog::open(dir.path(), Durability::Flush).unwrap();
}

#[tokio::test]
async fn an_unknown_format_version_is_refused() {
    let (dir, log) = filled(2).await;
    let meta = log.inner.db.open_tree(store::TREE_META).unwrap();
    meta.insert(store::META_FORMAT, &99u32.to_be_bytes())
        .unwrap();
    log.shutdown().await.unwrap();
    drop((meta, log));
    match EventLog::open(dir.path(), Durability::Flush) {
        Err(LogError::Storage(msg)) => {
            assert!(msg.contains("format version 99"), "{msg}");
            assert!(msg.contains("refusing"), "{msg}");
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened a log of an unknown format"),
    }
}

/// Re-encodes record `seq` after `edit`, recomputing its hash over the stored previous hash
/// (as a tamperer who knows the format would).
fn rewrite(log: &EventLog, seq: u64, edit: impl FnOnce(&mut Envelope, &mut [u8; 32])) {
    log.corrupt_for_tests(seq, |raw| {
        let codec::Decoded {
            mut env,
            mut prev_hash,
        } = codec::decode(raw).unwrap();
        edit(&mut env, &mut prev_hash);
        env.hash = env.compute_hash(&prev_hash);
        *raw = codec::encode(&env, &prev_hash);
    });
}

#[tokio::test]
async fn verify_reports_the_first_bad_sequence() {
    // A flipped byte in a payload.
    let (_d, log) = filled(10).await;
    log.corrupt_for_tests(5, |raw| {
        let i = raw.len() - 33; // the payload's last byte
        raw[i] ^= 0x01;
    });
    assert_corrupt_at(&log, 5, "hash does not match");

    // A wrong stored hash.
    let (_d, log) = filled(10).await;
    log.corrupt_for_tests(6, |raw| *raw.last_mut().unwrap() ^= 0x80);
    assert_corrupt_at(&log, 6, "hash does not match");

    // A broken link: a self-consistent record chained to something else.
    let (_d, log) = filled(10).await;
    rewrite(&log, 7, |_, prev| *prev = [9; 32]);
    assert_corrupt_at(&log, 7, "chain broken");

    // An edited record whose own hash was recomputed: the next one no longer links.
    let (_d, log) = filled(10).await;
    rewrite(&log, 4, |env, _| env.payload = b"forged".to_vec());
    assert_corrupt_at(&log, 5, "chain broken");

    // A sequence gap (a deleted middle record).
    let (_d, log) = filled(10).await;
    log.put_raw_for_tests(3, None);
    assert_corrupt_at(&log, 3, "missing");
    assert_eq!(log.verify().head_seq, 10);

    // A truncated middle record.
    let (_d, log) = filled(10).await;
    log.corrupt_for_tests(8, |raw| raw.truncate(raw.len() - 10));
    assert_corrupt_at(&log, 8, "truncated");

    // A duplicated record.
    let (_d, log) = filled(10).await;
    let five = log.raw_frame(5).unwrap();
    log.put_raw_for_tests(6, Some(five));
    assert_corrupt_at(&log, 6, "claims sequence 5");

    // An unknown envelope format.
    let (_d, log) = filled(10).await;
    log.corrupt_for_tests(2, |raw| raw[1] = 2);
    assert_corrupt_at(&log, 2, "unknown envelope format 2");

    // A zero-filled tail record.
    let (_d, log) = filled(10).await;
    log.corrupt_for_tests(10, |raw| raw.iter_mut().for_each(|b| *b = 0));
    assert_corrupt_at(&log, 10, "not an envelope");

    // A stray record after a gap at the end.
    let (_d, log) = filled(10).await;
    let ten = log.raw_frame(10).unwrap();
    log.put_raw_for_tests(12, Some(ten));
    assert_corrupt_at(&log, 11, "missing");
    assert_eq!(log.verify().head_seq, 12);
}

#[tokio::test]
async fn a_tail_truncated_at_every_byte_is_detected() {
    let (_d, log) = filled(10).await;
    let original = log.raw_frame(10).unwrap();
    for cut in 0..original.len() {
        log.put_raw_for_tests(10, Some(original[..cut].to_vec()));
        assert_corrupt_at(&log, 10, "");
        assert!(matches!(
            log.check_tail(),
            Err(LogError::Corrupt { seq: 10, .. })
        ));
    }
    log.put_raw_for_tests(10, Some(original));
    assert_eq!(log.verify().first_bad, None);
    log.check_tail().unwrap();
}

#[tokio::test]
async fn read_from_stops_at_the_first_bad_record() {
    let (_d, log) = filled(10).await;
    log.corrupt_for_tests(5, |raw| raw[40] ^= 0xff);

    let items: Vec<_> = log.read_from(1).collect();
    assert_eq!(items.len(), 5);
    for (i, item) in items[..4].iter().enumerate() {
        assert_eq!(item.as_ref().unwrap().seq, i as u64 + 1);
    }
    assert!(matches!(items[4], Err(LogError::Corrupt { seq: 5, .. })));

    let items: Vec<_> = log.read_from(3).collect();
    assert_eq!(items.len(), 3);
    assert!(matches!(items[2], Err(LogError::Corrupt { seq: 5, .. })));

    // Starting right after the bad record: its hash is needed to link, so it is reported.
    let items: Vec<_> = log.read_from(6).collect();
    assert_eq!(items.len(), 1);
    assert!(matches!(items[0], Err(LogError::Corrupt { seq: 5, .. })));

    // Past it, the chain checks out again.
    let seqs: Vec<u64> = read_all(&log, 7).iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![7, 8, 9, 10]);

    // A deleted record before the start point is a gap too.
    log.put_raw_for_tests(8, None);
    let items: Vec<_> = log.read_from(9).collect();
    assert_eq!(items.len(), 1);
    assert!(matches!(items[0], Err(LogError::Corrupt { seq: 8, .. })));
}

/// Records as (seq, schema, payload).
type Flat = Vec<(u64, u16, Vec<u8>)>;

/// `read_batches` flattened; panics on an error.
fn read_batched(log: &EventLog, from: u64) -> Flat {
    read_batches_until_error(log, from).0
}

/// `read_batches` flattened, and the error that ended it, if any. Checks that nothing follows
/// an error.
fn read_batches_until_error(log: &EventLog, from: u64) -> (Flat, Option<LogError>) {
    let mut records = Vec::new();
    let mut batches = log.read_batches(from).unwrap();
    for batch in batches.by_ref() {
        match batch {
            Ok(batch) => {
                assert!(!batch.is_empty(), "an empty batch");
                assert!(batch.len() <= store::BATCH_RECORDS);
                records.extend(
                    batch
                        .iter()
                        .map(|r| (r.seq(), r.schema(), r.payload().to_vec())),
                );
            }
            Err(e) => {
                assert!(batches.next().is_none(), "something after the error");
                return (records, Some(e));
            }
        }
    }
    (records, None)
}

/// A log of `n` events appended in batches of 500 (several read batches' worth, quickly).
async fn filled_in_batches(n: u64) -> (tempfile::TempDir, EventLog) {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    let appender = log.start_writer(Arc::new(NullSink));
    let mut i = 0;
    while i < n {
        let batch: Vec<NewEvent> = (i..n.min(i + 500))
            .map(|j| ev("Thing", "thing/1", format!("payload {}", j + 1).as_bytes()))
            .collect();
        i += batch.len() as u64;
        appender.append("req", batch).await.unwrap();
    }
    drop(appender);
    log.shutdown().await.unwrap();
    (dir, log)
}

#[tokio::test]
async fn read_batches_yields_what_read_from_yields() {
    let n = 2 * store::BATCH_RECORDS as u64 + 300;
    let (_d, log) = filled_in_batches(n).await;
    for from in [0, 1, 2, 1024, 1025, n, n + 1, n + 10] {
        let expected: Vec<_> = read_all(&log, from)
            .into_iter()
            .map(|e| (e.seq, e.schema, e.payload))
            .collect();
        assert_eq!(read_batched(&log, from), expected, "from {from}");
    }
    assert_eq!(read_batched(&log, 1).len() as u64, n);
    // Dropping the iterator part-way stops its reader thread (the drop joins it).
    let mut batches = log.read_batches(1).unwrap();
    assert!(batches.next().unwrap().is_ok());
    drop(batches);
}

#[tokio::test]
async fn read_batches_stops_at_the_first_bad_record_inside_a_batch() {
    let n = 3 * store::BATCH_RECORDS as u64;
    // A flipped payload byte, a record re-encoded under the wrong sequence, a gap, a record
    // that does not link, each in the second batch: the good records before it come, then the
    // error with its sequence, then nothing.
    let bad = store::BATCH_RECORDS as u64 + 17;
    type Damage = fn(&EventLog, u64);
    let damages: [(Damage, &str); 4] = [
        (
            |log, seq| {
                log.corrupt_for_tests(seq, |raw| {
                    let at = raw.len() - 40;
                    raw[at] ^= 0xff;
                })
            },
            "hash does not match",
        ),
        (
            |log, seq| rewrite(log, seq, |env, _| env.seq += 1),
            "claims sequence",
        ),
        (
            |log, seq| log.put_raw_for_tests(seq, None),
            "record missing",
        ),
        (
            |log, seq| rewrite(log, seq, |_, prev| prev[0] ^= 1),
            "chain broken",
        ),
    ];
    for (damage, reason) in damages {
        let (_d, log) = filled_in_batches(n).await;
        damage(&log, bad);
        let (records, err) = read_batches_until_error(&log, 1);
        assert_eq!(records.len() as u64, bad - 1, "{reason}");
        assert!(records.iter().enumerate().all(|(i, r)| r.0 == i as u64 + 1));
        match err {
            Some(LogError::Corrupt { seq, reason: r }) => {
                assert_eq!(seq, bad);
                assert!(r.contains(reason), "{r:?} lacks {reason:?}");
            }
            other => panic!("expected Corrupt at {bad}, got {other:?}"),
        }
        // From anywhere, the batches end exactly where `read_from` ends (starting right after
        // a record that fails on its own reports it at once: its hash is needed to link).
        for from in [2, bad - 1, bad, bad + 1, bad + 2] {
            let mut expected = Vec::new();
            let mut expected_err = None;
            for item in log.read_from(from) {
                match item {
                    Ok(e) => expected.push((e.seq, e.schema, e.payload)),
                    Err(LogError::Corrupt { seq, .. }) => expected_err = Some(seq),
                    Err(e) => panic!("{e}"),
                }
            }
            let (records, err) = read_batches_until_error(&log, from);
            assert_eq!(records, expected, "{reason}, from {from}");
            let err = err.map(|e| match e {
                LogError::Corrupt { seq, .. } => seq,
                other => panic!("{other}"),
            });
            assert_eq!(err, expected_err, "{reason}, from {from}");
        }
    }
}

#[tokio::test]
async fn replay_refuses_a_bad_record_and_an_undecodable_payload_at_their_sequence() {
    use crate::events::{Event, StorageClassEvent};
    use crate::projections::{State, replay};
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    let appender = log.start_writer(Arc::new(NullSink));
    let events: Vec<NewEvent> = (0..10)
        .map(|i| NewEvent::from(&Event::class(format!("c{i}"), StorageClassEvent::Deleted)))
        .collect();
    appender.append("req", events).await.unwrap();
    drop(appender);
    log.shutdown().await.unwrap();
    assert_eq!(replay(&log, State::default()).unwrap().head, 10);

    log.corrupt_for_tests(4, |raw| raw[40] ^= 0xff);
    match replay(&log, State::default()) {
        Err(LogError::Corrupt { seq: 4, .. }) => {}
        other => panic!("expected Corrupt at 4, got {other:?}"),
    }
    // From a state past the bad record the tail still checks out.
    let mut past = State::default();
    past.head = 5;
    assert_eq!(replay(&log, past).unwrap().head, 10);

    // A record that checks out but whose payload is no event.
    let (_d, log) = filled_in_batches(10).await;
    match replay(&log, State::default()) {
        Err(LogError::Corrupt { seq: 1, reason }) => {
            assert!(reason.contains("payload"), "{reason}")
        }
        other => panic!("expected Corrupt at 1, got {other:?}"),
    }
}

#[tokio::test]
async fn a_corrupt_tail_refuses_appends_until_truncated() {
    let (dir, log) = filled(10).await;
    let nine = read_all(&log, 9)[0].clone();
    log.corrupt_for_tests(10, |raw| raw.truncate(raw.len() / 2));
    log.shutdown().await.unwrap();
    drop(log);

    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    assert!(matches!(
        log.check_tail(),
        Err(LogError::Corrupt { seq: 10, .. })
    ));
    let appender = log.start_writer(Arc::new(NullSink));
    match appender.append("r", vec![ev("K", "s", b"p")]).await {
        Err(LogError::Corrupt { seq: 10, reason }) => assert!(reason.contains("truncated")),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Truncation is refused while the writer runs.
    assert!(matches!(
        log.truncate_after(9).await,
        Err(LogError::Storage(_))
    ));
    drop(appender);
    log.shutdown().await.unwrap();

    assert_eq!(log.truncate_after(9).await.unwrap(), 1);
    log.check_tail().unwrap();
    assert_eq!(log.head(), (9, nine.hash));
    let appender = log.start_writer(Arc::new(NullSink));
    assert_eq!(
        appender
            .append("r", vec![ev("K", "s", b"p")])
            .await
            .unwrap(),
        vec![10]
    );
    drop(appender);
    log.shutdown().await.unwrap();
    assert_eq!(log.verify().first_bad, None);
    assert_eq!(log.truncate_after(100).await.unwrap(), 0);
}

#[tokio::test]
async fn checkpoints_are_saved_loaded_and_pruned() {
    let (dir, log) = filled(10).await;
    assert_eq!(log.latest_checkpoint().unwrap(), None);
    log.save_checkpoint(3, b"three".to_vec()).await.unwrap();
    assert_eq!(
        log.latest_checkpoint().unwrap(),
        Some((3, b"three".to_vec()))
    );
    log.save_checkpoint(5, b"five".to_vec()).await.unwrap();
    log.save_checkpoint(8, b"eight".to_vec()).await.unwrap();
    assert_eq!(
        log.latest_checkpoint().unwrap(),
        Some((8, b"eight".to_vec()))
    );
    let kept: Vec<u64> = log
        .inner
        .checkpoints
        .iter()
        .keys()
        .map(|k| u64::from_be_bytes(k.unwrap().as_ref().try_into().unwrap()))
        .collect();
    assert_eq!(kept, vec![5, 8]);
    // Past the head: refused.
    assert!(matches!(
        log.save_checkpoint(11, vec![]).await,
        Err(LogError::Storage(_))
    ));

    // Durable across a reopen.
    drop(log);
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    assert_eq!(
        log.latest_checkpoint().unwrap(),
        Some((8, b"eight".to_vec()))
    );

    // A damaged newest checkpoint falls back to the one before.
    let k = store::key(8);
    let mut raw = log.inner.checkpoints.get(k).unwrap().unwrap().to_vec();
    *raw.last_mut().unwrap() ^= 1;
    log.inner.checkpoints.insert(k, raw).unwrap();
    assert_eq!(
        log.latest_checkpoint().unwrap(),
        Some((5, b"five".to_vec()))
    );

    // Truncating the log drops the checkpoints past the cut.
    log.save_checkpoint(8, b"eight again".to_vec())
        .await
        .unwrap();
    log.truncate_after(6).await.unwrap();
    assert_eq!(
        log.latest_checkpoint().unwrap(),
        Some((5, b"five".to_vec()))
    );
}

#[tokio::test]
async fn a_failed_flush_poisons_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    let sink = Arc::new(RecordingSink::default());
    let appender = log.start_writer(sink.clone());
    assert_eq!(
        appender
            .append("ok", vec![ev("K", "s", b"1")])
            .await
            .unwrap(),
        vec![1]
    );
    assert_eq!(log.poisoned(), None);

    log.fail_next_flush_for_tests();
    let failed = appender
        .append("doomed", vec![ev("K", "s", b"2"), ev("K", "s", b"3")])
        .await;
    assert!(matches!(failed, Err(LogError::Poisoned(_))), "{failed:?}");
    assert!(log.poisoned().unwrap().contains("injected"));
    // The sink never saw the failed batch, and the head did not move.
    assert_eq!(sink.seqs(), vec![1]);
    assert_eq!(log.head().0, 1);

    // Every later caller is refused too, by every handle.
    let other = appender.clone();
    assert!(matches!(
        other.append("later", vec![ev("K", "s", b"4")]).await,
        Err(LogError::Poisoned(_))
    ));
    assert!(matches!(
        log.save_checkpoint(1, vec![]).await,
        Err(LogError::Poisoned(_))
    ));
    drop((appender, other));
    assert!(matches!(log.shutdown().await, Err(LogError::Poisoned(_))));
    assert_eq!(sink.batches.load(Ordering::SeqCst), 1);
}

/// A free-space figure a test sets, as on a disk that fills up and is freed again.
fn injected_free(log: &EventLog, bytes: u64) -> Arc<AtomicU64> {
    let free = Arc::new(AtomicU64::new(bytes));
    let source = free.clone();
    log.set_free_bytes_for_tests(move || source.load(Ordering::SeqCst));
    free
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_the_reserve_a_batch_never_reaches_sled_and_writes_resume_by_themselves() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    log.set_min_free(64 << 20);
    let free = injected_free(&log, 1 << 30);
    let sink = Arc::new(RecordingSink::default());
    let appender = log.start_writer(sink.clone());
    assert_eq!(
        appender
            .append("ok", vec![ev("K", "s", b"1")])
            .await
            .unwrap(),
        vec![1]
    );
    assert!(log.disk_full().is_none());

    free.store(3 << 20, Ordering::SeqCst);
    for attempt in 0..3 {
        let refused = appender
            .append("full", vec![ev("K", "s", b"2"), ev("K", "s", b"3")])
            .await
            .unwrap_err();
        assert!(
            matches!(
                refused,
                LogError::DiskFull {
                    free: 3145728,
                    reserve: 67108864,
                    need: 0
                }
            ),
            "attempt {attempt}: {refused:?}"
        );
        assert_eq!(
            refused.public_reason(),
            "the event log's disk is full: 3 MiB free, 64 MiB reserved: writes resume by \
             themselves once space is freed; reads go on"
        );
    }
    // Nothing of the refused batches reached sled, the sink or the head; nothing is poisoned.
    assert_eq!(log.raw_frame(2), None);
    assert_eq!(log.head().0, 1);
    assert_eq!(sink.seqs(), vec![1]);
    assert_eq!(log.poisoned(), None);
    assert!(matches!(
        log.disk_full(),
        Some(LogError::DiskFull { free: 3145728, .. })
    ));

    // Space returns: the writer notices without a write, then takes the next batch.
    free.store(1 << 30, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while log.disk_full().is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer never looked again"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        appender
            .append("back", vec![ev("K", "s", b"2")])
            .await
            .unwrap(),
        vec![2]
    );
    drop(appender);
    log.shutdown().await.unwrap();
    let report = log.verify();
    assert_eq!((report.events, report.first_bad), (2, None));
    assert_eq!(report.acknowledged, Some(2));
}

#[tokio::test]
async fn a_checkpoint_needs_its_size_above_the_reserve() {
    let (_dir, log) = filled(2).await;
    log.set_min_free(1 << 20);
    injected_free(&log, (1 << 20) + 1000);
    let refused = log.save_checkpoint(2, vec![7; 2000]).await.unwrap_err();
    assert!(
        matches!(refused, LogError::DiskFull { need, .. } if need > 2000),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("needed"), "{refused}");
    assert_eq!(log.latest_checkpoint().unwrap(), None);
    assert!(log.disk_full().is_none(), "the log still takes batches");
    log.save_checkpoint(2, vec![7; 500]).await.unwrap();
    assert_eq!(log.latest_checkpoint().unwrap().unwrap().0, 2);
}

#[tokio::test]
async fn replicated_records_wait_for_space_too() {
    let (_leader_dir, leader) = filled(3).await;
    let frames = leader.frames_from(1, 10).unwrap();
    let frames: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    let free = injected_free(&log, 0);
    let refused = log.append_replicated(&frames).await.unwrap_err();
    assert!(
        matches!(refused, LogError::DiskFull { free: 0, .. }),
        "{refused:?}"
    );
    assert_eq!(log.head().0, 0);
    assert_eq!(log.poisoned(), None);
    free.store(u64::MAX, Ordering::SeqCst);
    assert_eq!(log.append_replicated(&frames).await.unwrap().len(), 3);
    assert_eq!(log.head(), leader.head());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_finishes_queued_work_when_appenders_go() {
    let dir = tempfile::tempdir().unwrap();
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    let sink = Arc::new(RecordingSink::default());
    let appender = log.start_writer(sink.clone());
    let mut tasks = Vec::new();
    for t in 0..8 {
        let appender = appender.clone();
        tasks.push(tokio::spawn(async move {
            for j in 0..20 {
                appender
                    .append(
                        "r",
                        vec![ev("K", &format!("{t}"), format!("{j}").as_bytes())],
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    drop(appender);
    // Returns once every task's handle is gone and the writer drained its queue.
    log.shutdown().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(log.head().0, 160);
    assert_eq!(sink.seqs().len(), 160);
    // A new writer can be started afterwards.
    let appender = log.start_writer(Arc::new(NullSink));
    assert_eq!(
        appender
            .append("r", vec![ev("K", "s", b"p")])
            .await
            .unwrap(),
        vec![161]
    );
}

#[tokio::test]
#[should_panic(expected = "already running")]
async fn only_one_writer_at_a_time() {
    let log = EventLog::open(Path::new("unused"), Durability::Memory).unwrap();
    let _a = log.start_writer(Arc::new(NullSink));
    let _b = log.start_writer(Arc::new(NullSink));
}

fn arb_event() -> impl Strategy<Value = NewEvent> {
    (
        "[A-Za-z]{1,24}",
        ".{0,40}",
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(|(kind, stream, schema, payload)| NewEvent {
            kind,
            stream,
            schema,
            payload,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_batches_round_trip(
        batches in proptest::collection::vec(
            (".{0,20}", proptest::collection::vec(arb_event(), 1..8)),
            1..12,
        )
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let log = EventLog::open(Path::new("unused"), Durability::Memory).unwrap();
            let sink = Arc::new(RecordingSink::default());
            let appender = log.start_writer(sink.clone());
            // Concurrently, so that several calls share a batch.
            let acks = futures::future::join_all(
                batches.iter().map(|(rid, events)| appender.append(rid, events.clone())),
            )
            .await;
            drop(appender);
            log.shutdown().await.unwrap();

            let all = read_all(&log, 1);
            let total: usize = batches.iter().map(|(_, e)| e.len()).sum();
            prop_assert_eq!(all.len(), total);
            prop_assert_eq!(&*sink.envelopes.lock().unwrap(), &all);
            let mut seen = HashSet::new();
            for ((rid, events), ack) in batches.iter().zip(acks) {
                let seqs = ack.unwrap();
                prop_assert_eq!(seqs.len(), events.len());
                for (seq, new) in seqs.iter().zip(events) {
                    prop_assert!(seen.insert(*seq));
                    let env = &all[*seq as usize - 1];
                    prop_assert_eq!(&env.request_id, rid);
                    prop_assert_eq!(&env.kind, &new.kind);
                    prop_assert_eq!(&env.stream, &new.stream);
                    prop_assert_eq!(env.schema, new.schema);
                    prop_assert_eq!(&env.payload, &new.payload);
                }
                prop_assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
            }
            prop_assert_eq!(log.verify().first_bad, None);
            let batched = read_batched(&log, 1);
            prop_assert_eq!(batched.len(), all.len());
            for (r, env) in batched.iter().zip(&all) {
                prop_assert_eq!(r, &(env.seq, env.schema, env.payload.clone()));
            }
            Ok(())
        })?;
    }
}

/// A stopped log of `n` events (one append each), its sled data file and where the last
/// record's bytes lie in it.
async fn stopped_on_disk(n: u64) -> (tempfile::TempDir, Vec<u8>, std::ops::Range<usize>) {
    let (dir, log) = filled(n).await;
    let last = log.raw_frame(n).unwrap();
    drop(log);
    let db = std::fs::read(dir.path().join("db")).unwrap();
    let at = db
        .windows(last.len())
        .position(|w| w == &last[..])
        .expect("the last record is stored as written");
    (dir, db, at..at + last.len())
}

/// A copy of the log in `from` whose sled data file is `db`, opened.
fn reopened_with(from: &std::path::Path, db: &[u8]) -> (tempfile::TempDir, EventLog) {
    let (copy, log) = try_reopened_with(from, db);
    (copy, log.unwrap())
}

fn try_reopened_with(
    from: &std::path::Path,
    db: &[u8],
) -> (tempfile::TempDir, Result<EventLog, LogError>) {
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, copy.path().join(p.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(copy.path().join("db"), db).unwrap();
    let log = EventLog::open(copy.path(), Durability::Flush);
    (copy, log)
}

/// sled drops a torn tail without a word; the watermark beside it says what went missing,
/// and the log refuses appends until the operator accepts the shorter log.
#[tokio::test]
async fn a_store_torn_at_every_byte_of_its_last_record_is_shorter_than_its_watermark() {
    let (dir, db, last) = stopped_on_disk(20).await;
    for cut in last.clone() {
        let (_copy, log) = reopened_with(dir.path(), &db[..cut]);
        assert_eq!(log.head().0, 19, "cut at {cut}");
        match log.check_acknowledged() {
            Err(LogError::Missing {
                head: 19,
                acked: 20,
                reason,
            }) => assert!(reason.contains("store ends at sequence 19"), "{reason}"),
            other => panic!("cut at {cut}: expected Missing, got {other:?}"),
        }
        let report = log.verify();
        assert_eq!((report.events, report.first_bad), (19, None));
        assert_eq!(report.acknowledged, Some(20));
        let missing = report.missing.unwrap();
        assert!(missing.contains("sequences 20..=20"), "{missing}");
    }

    // The operator accepts the shorter log: appends go on from 19, and a reopen is clean.
    let (copy, log) = reopened_with(dir.path(), &db[..last.start]);
    let appender = log.start_writer(Arc::new(NullSink));
    let refused = appender.append("r", vec![ev("K", "s", b"p")]).await;
    assert!(
        matches!(&refused, Err(LogError::Missing { acked: 20, .. })),
        "{refused:?}"
    );
    drop(appender);
    log.shutdown().await.unwrap();
    assert_eq!(log.accept_shorter().await.unwrap(), Some((20, 19)));
    assert_eq!(log.accept_shorter().await.unwrap(), None);
    let appender = log.start_writer(Arc::new(NullSink));
    let seqs = appender.append("r", vec![ev("K", "s", b"p")]).await;
    assert_eq!(seqs.unwrap(), vec![20]);
    drop(appender);
    log.shutdown().await.unwrap();
    drop(log);
    let log = EventLog::open(copy.path(), Durability::Flush).unwrap();
    log.check_acknowledged().unwrap();
    assert_eq!(log.verify().acknowledged, Some(20));
}

/// One flipped bit, at every byte of the last record and in the middle of the file: either
/// every record reads back as written, or the log knows it lacks acknowledged records.
#[tokio::test]
async fn a_flipped_bit_anywhere_never_goes_unnoticed() {
    let (dir, db, last) = stopped_on_disk(20).await;
    let original = {
        let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
        read_all(&log, 1)
    };
    let mut offsets: Vec<usize> = last.collect();
    offsets.extend([db.len() / 3, db.len() / 2, offsets[0].saturating_sub(300)]);
    let mut noticed = 0;
    for (i, at) in offsets.into_iter().enumerate() {
        let mut damaged = db.clone();
        damaged[at] ^= 1 << (i % 8);
        let (_copy, log) = try_reopened_with(dir.path(), &damaged);
        // sled refusing to open its file is noticed too.
        let Ok(log) = log else {
            noticed += 1;
            continue;
        };
        let report = log.verify();
        if report.missing.is_some() || report.first_bad.is_some() {
            noticed += 1;
            continue;
        }
        assert_eq!(read_all(&log, 1), original, "flip at {at} went unnoticed");
    }
    assert!(noticed > 0, "no flip was noticed at all");
}

/// A watermark whose record the store holds with another hash: not the acknowledged log.
#[tokio::test]
async fn a_record_other_than_the_acknowledged_one_is_refused() {
    let (dir, log) = filled(5).await;
    drop(log);
    let (w, _) = super::watermark::Watermark::open(dir.path()).unwrap();
    w.reset(super::watermark::Mark {
        seq: 5,
        hash: [7; 32],
    })
    .unwrap();
    drop(w);
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    match log.check_acknowledged() {
        Err(LogError::Missing {
            head: 4,
            acked: 5,
            reason,
        }) => assert!(reason.contains("hash differs"), "{reason}"),
        other => panic!("expected Missing, got {other:?}"),
    }
}

/// Truncation is the operator's cut: the watermark follows the log down.
#[tokio::test]
async fn truncation_lowers_the_watermark() {
    let (dir, log) = filled(10).await;
    assert_eq!(log.verify().acknowledged, Some(10));
    assert_eq!(log.truncate_after(6).await.unwrap(), 4);
    drop(log);
    let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
    log.check_acknowledged().unwrap();
    let report = log.verify();
    assert_eq!(
        (report.events, report.acknowledged, report.missing),
        (6, Some(6), None)
    );
}

/// What clients see of a log that takes no writes: the cause in the system's words, no path.
#[test]
fn the_public_reason_names_the_cause_and_no_path() {
    let full = LogError::Poisoned(
        "committing sequences 3..=4 failed: flush: IO error: /var/lib/storch/log/db: No space \
         left on device (os error 28)"
            .into(),
    );
    let text = full.public_reason();
    assert!(
        text.contains("disk is full (No space left on device (os error 28))"),
        "{text}"
    );
    let eio = LogError::Poisoned("flush: Input/output error (os error 5)".into());
    let text = eio.public_reason();
    assert!(
        text.contains("disk failed (Input/output error (os error 5))"),
        "{text}"
    );
    let missing = LogError::Missing {
        head: 7,
        acked: 9,
        reason: "/secret/path".into(),
    };
    for e in [full, eio, missing] {
        let text = e.public_reason();
        assert!(
            !text.contains("/var") && !text.contains("/secret"),
            "{text}"
        );
    }
}

//! Reading history: events by object and sequence, live following, health and statistics.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, mpsc};

use super::core::Core;
use super::error::CoreError;
use super::shared::{Readiness, Shared, read};
use crate::events::Event;
use crate::log::{CommitSink, Envelope, EventLog, LogError};
use crate::projections::{BackendState, Projection, VolumeState};

/// Events a follower reads from the log per batch while it catches up.
const FOLLOW_BATCH: usize = 10_000;

/// A committed event, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub seq: u64,
    /// Unix milliseconds of the commit.
    pub time_ms: u64,
    pub id: uuid::Uuid,
    pub request_id: String,
    pub schema: u16,
    pub kind: String,
    /// `volume/NAME`, `backend/NAME`, `storageclass/NAME`.
    pub stream: String,
    /// Hex SHA-256 of the envelope (chained to the previous one).
    pub hash: String,
    pub event: Event,
}

impl EventRecord {
    pub(crate) fn from_envelope(env: &Envelope) -> Result<EventRecord, CoreError> {
        let event = crate::events::decode(env.schema, &env.payload)
            .map_err(|e| CoreError::Internal(format!("event {} does not decode: {e}", env.seq)))?;
        Ok(EventRecord {
            seq: env.seq,
            time_ms: env.time_ms,
            id: env.id,
            request_id: env.request_id.clone(),
            schema: env.schema,
            kind: env.kind.clone(),
            stream: env.stream.clone(),
            hash: hex::encode(env.hash),
            event,
        })
    }

    pub fn summary(&self) -> String {
        self.event.summary()
    }
}

/// Which events to read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Only this stream (`volume/NAME`, `backend/NAME`, `storageclass/NAME`).
    pub object: Option<String>,
    /// Only events with a sequence ≥ this (0 and 1 both mean from the start).
    pub since: u64,
    /// At most this many (oldest first).
    pub limit: Option<usize>,
}

impl EventFilter {
    /// Checks `object` has the `KIND/NAME` form with a known kind.
    pub fn validate(&self) -> Result<(), CoreError> {
        if let Some(object) = &self.object {
            let ok = object.split_once('/').is_some_and(|(kind, name)| {
                matches!(kind, "volume" | "backend" | "storageclass") && !name.is_empty()
            });
            if !ok {
                return Err(CoreError::Invalid(format!(
                    "object: {object:?} is not volume/NAME, backend/NAME or storageclass/NAME"
                )));
            }
        }
        Ok(())
    }

    fn matches(&self, seq: u64, stream: &str) -> bool {
        seq >= self.since && self.object.as_deref().is_none_or(|o| o == stream)
    }
}

/// Which sequences each stream (`volume/NAME`, …) has in the log: built from the log on
/// first use, then brought up to date from the records appended since, on each use. Eight
/// bytes per event; one per core ([`Shared`]), behind [`Core::events`] by object (the
/// dashboard's volume pages, `GET /trident/v1/events?object=`, follow streams by object).
#[derive(Debug, Default)]
pub struct StreamIndex(Mutex<IndexState>);

#[derive(Debug, Default)]
struct IndexState {
    /// The last sequence indexed, and its record's hash.
    through: (u64, [u8; 32]),
    streams: HashMap<Box<str>, Vec<u64>>,
}

impl StreamIndex {
    /// The sequences of `stream`'s records, oldest first, as of the log's head now.
    fn sequences(&self, log: &EventLog, stream: &str) -> Result<Vec<u64>, LogError> {
        let mut st = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // A log cut back (a standby's divergence, `--truncate-corrupt-tail`), even one that
        // has grown past the indexed sequence since, no longer holds the indexed record.
        let (seq, hash) = st.through;
        if seq > 0 && log.hash_at(seq) != Some(hash) {
            *st = IndexState::default();
        }
        for env in log.read_from(st.through.0 + 1) {
            let env = env?;
            st.through = (env.seq, env.hash);
            match st.streams.get_mut(env.stream.as_str()) {
                Some(seqs) => seqs.push(env.seq),
                None => {
                    st.streams
                        .insert(env.stream.into_boxed_str(), vec![env.seq]);
                }
            }
        }
        Ok(st.streams.get(stream).cloned().unwrap_or_default())
    }
}

/// [`Core::events`] on a blocking thread.
fn read_events(
    log: &EventLog,
    index: &StreamIndex,
    filter: &EventFilter,
) -> Result<Vec<EventRecord>, CoreError> {
    let internal = |e: LogError| CoreError::Internal(e.to_string());
    let limit = filter.limit.unwrap_or(usize::MAX);
    let mut out = Vec::new();
    match &filter.object {
        Some(object) => {
            let seqs = index.sequences(log, object).map_err(internal)?;
            let from = seqs.partition_point(|s| *s < filter.since);
            for seq in &seqs[from..] {
                if out.len() >= limit {
                    break;
                }
                match log.read_from(*seq).next() {
                    Some(Ok(env)) if env.seq == *seq && env.stream == *object => {
                        out.push(EventRecord::from_envelope(&env)?)
                    }
                    Some(Err(e)) => return Err(internal(e)),
                    // cut back meanwhile
                    _ => {}
                }
            }
        }
        None => {
            for env in log.read_from(filter.since.max(1)) {
                if out.len() >= limit {
                    break;
                }
                out.push(EventRecord::from_envelope(&env.map_err(internal)?)?);
            }
        }
    }
    Ok(out)
}

/// The log's commit sink: applies to the projection, then tells followers.
pub(crate) struct Sink {
    projection: Arc<Projection>,
    followers: broadcast::Sender<Arc<Envelope>>,
}

impl Sink {
    /// The sink that feeds this core's projection and followers.
    pub fn for_shared(shared: &Shared) -> Sink {
        Sink {
            projection: shared.projection.clone(),
            followers: shared.followers.clone(),
        }
    }
}

impl CommitSink for Sink {
    fn committed(&self, batch: &[Envelope]) {
        let started = std::time::Instant::now();
        self.projection.apply_envelopes(batch);
        metrics::histogram!("storch_projection_apply_seconds")
            .record(started.elapsed().as_secs_f64());
        if self.followers.receiver_count() > 0 {
            for env in batch {
                let _ = self.followers.send(Arc::new(env.clone()));
            }
        }
        metrics::counter!("storch_events_appended_total").increment(batch.len() as u64);
    }
}

/// How the core is doing, for `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub log_open: bool,
    pub replay_done: bool,
    /// Why the core cannot take writes, if it cannot.
    pub degraded: Option<String>,
    /// The leader's identity while this instance is an etcd standby (reads only).
    pub standby_of: Option<String>,
    /// What a leader still waits for before it can serve: the config file, backends that
    /// are initialising (a backend that failed for good does not hold readiness back).
    pub starting: Vec<String>,
}

impl Health {
    pub fn ready(&self) -> bool {
        self.log_open
            && self.replay_done
            && self.degraded.is_none()
            && self.standby_of.is_none()
            && self.starting.is_empty()
    }
}

/// Numbers for `/metrics`, read from the projection and the backend actors' status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// state name → count
    pub backends_by_state: BTreeMap<&'static str, u64>,
    pub volumes_by_state: BTreeMap<&'static str, u64>,
    pub pools: Vec<PoolStats>,
    pub backends: Vec<BackendStats>,
    /// Every recorded backend → its volumes missing from its array.
    pub missing_by_backend: BTreeMap<String, u64>,
    /// Every recorded backend → whether an operator suspended it.
    pub suspended_by_backend: BTreeMap<String, bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PoolStats {
    pub backend: String,
    pub pool: String,
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    /// Bytes of the volumes storch placed there.
    pub used_bytes: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BackendStats {
    pub backend: String,
    pub queue_depth: u64,
    pub in_flight: u64,
}

impl Core {
    /// Events matching `filter`, oldest first. An object's events are found through the
    /// core's [`StreamIndex`] (only that object's records are read); the others by a walk of
    /// the log from `since`.
    pub async fn events(&self, filter: EventFilter) -> Result<Vec<EventRecord>, CoreError> {
        filter.validate()?;
        let log = self.shared.log().ok_or(CoreError::NotReady)?;
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || read_events(&log, &shared.streams, &filter))
            .await
            .map_err(|e| CoreError::Internal(e.to_string()))?
    }

    /// Events matching `filter` from the log, then live as they are committed, until the
    /// receiver is dropped. A follower that falls behind catches up from the log, so it never
    /// misses an event.
    pub fn follow(
        &self,
        filter: EventFilter,
    ) -> Result<mpsc::Receiver<Result<EventRecord, CoreError>>, CoreError> {
        filter.validate()?;
        self.shared.ensure_readable()?;
        let (tx, rx) = mpsc::channel(256);
        let mut live = self.shared.followers.subscribe();
        let core = self.clone();
        tokio::spawn(async move {
            let mut next = filter.since.max(1);
            'outer: loop {
                // Catch up from the log, up to the head read before it: an event committed
                // while the log is read has a sequence above that head, so it either is in
                // the backlog or arrives live (the subscription is older). Reading the head
                // after the backlog skipped such an event.
                let head = core.shared.projection.read(|s| s.head);
                let backlog = core
                    .events(EventFilter {
                        since: next,
                        limit: Some(FOLLOW_BATCH),
                        ..filter.clone()
                    })
                    .await;
                match backlog {
                    Ok(events) => {
                        let full = events.len() == FOLLOW_BATCH;
                        for e in events {
                            next = e.seq + 1;
                            if tx.send(Ok(e)).await.is_err() {
                                return;
                            }
                        }
                        // A full batch may have stopped short of the head: read on.
                        if full {
                            continue 'outer;
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                }
                next = next.max(head + 1);
                // Then live.
                loop {
                    let received = tokio::select! {
                        r = live.recv() => r,
                        // The reader went away: stop now, not at the next commit.
                        () = tx.closed() => return,
                    };
                    match received {
                        Ok(env) if env.seq < next => {}
                        Ok(env) if env.seq > next => continue 'outer, // a gap: read the log
                        Ok(env) => {
                            next = env.seq + 1;
                            if !filter.matches(env.seq, &env.stream) {
                                continue;
                            }
                            let rec = EventRecord::from_envelope(&env);
                            if tx.send(rec).await.is_err() {
                                return;
                            }
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => continue 'outer,
                        Err(broadcast::error::RecvError::Closed) => return,
                    }
                }
            }
        });
        Ok(rx)
    }

    /// Test support (failpoint): the log's next group commit is written but its flush fails,
    /// as on a disk that fails; the log then takes no writes.
    #[doc(hidden)]
    pub fn fail_next_log_flush_for_tests(&self) {
        if let Some(log) = self.shared.log() {
            log.fail_next_flush_for_tests();
        }
    }

    /// Test support: the free bytes of the log's disk are what `free` says from now on
    /// (instead of `statvfs`), as on a disk that fills up and is freed again.
    #[doc(hidden)]
    pub fn set_log_free_bytes_for_tests(&self, free: impl Fn() -> u64 + Send + Sync + 'static) {
        if let Some(log) = self.shared.log() {
            log.set_free_bytes_for_tests(free);
        }
    }

    /// The event log is open and takes writes (not poisoned by a failed write or flush, not
    /// short of acknowledged records, its disk not below the reserve of free space).
    pub fn log_writable(&self) -> bool {
        self.shared.log().is_some_and(|l| {
            l.poisoned().is_none() && l.check_acknowledged().is_ok() && l.disk_full().is_none()
        })
    }

    /// Log open, replay done, not degraded.
    pub fn health(&self) -> Health {
        let readiness = read(&self.shared.readiness).clone();
        let log = self.shared.log();
        let degraded = match (&readiness, &log) {
            (Readiness::Failed(why), _) => Some(why.clone()),
            (_, Some(log)) => log
                .poisoned()
                .map(|p| format!("event log poisoned: {p}"))
                .or_else(|| log.disk_full().map(|e| e.public_reason())),
            (_, None) => Some("event log closed".into()),
        };
        let starting = match readiness {
            Readiness::Ready => self.starting(),
            _ => Vec::new(),
        };
        Health {
            log_open: log.is_some(),
            replay_done: matches!(readiness, Readiness::Ready | Readiness::Standby { .. }),
            degraded,
            standby_of: self.shared.standby_leader(),
            starting,
        }
    }

    /// What a ready leader still waits for: the config file, and backends initialising.
    fn starting(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.shared.config_pending.load(Ordering::Acquire) {
            out.push("the config file is not applied yet".to_string());
        }
        let mut initialising: Vec<String> = read(&self.shared.backends)
            .iter()
            .filter(|(_, slot)| slot.status.state() == BackendState::Initializing)
            .map(|(name, _)| name.clone())
            .collect();
        if !initialising.is_empty() {
            initialising.sort();
            out.push(format!(
                "backends still initialising: {}",
                initialising.join(", ")
            ));
        }
        out
    }

    /// Holds readiness back until [`Core::config_applied`]: `serve --config` calls it before
    /// the core is ready, so `/readyz` never says ready with the file not yet applied.
    pub fn expect_config(&self) {
        self.shared.config_pending.store(true, Ordering::Release);
    }

    /// The config file was applied (or refused): readiness no longer waits for it.
    pub fn config_applied(&self) {
        self.shared.config_pending.store(false, Ordering::Release);
    }

    /// Counts for metrics.
    pub fn stats(&self) -> Stats {
        let mut stats = Stats::default();
        let backends = read(&self.shared.backends).clone();
        self.shared.projection.read(|s| {
            let mut used: BTreeMap<(&str, &str), u64> = BTreeMap::new();
            let mut missing: BTreeMap<&str, u64> = BTreeMap::new();
            for v in s.volumes.values() {
                *stats.volumes_by_state.entry(v.state.as_str()).or_default() += 1;
                if v.state == VolumeState::Missing {
                    *missing.entry(v.backend()).or_default() += 1;
                }
                if v.state != VolumeState::Creating {
                    *used.entry((v.backend(), v.pool())).or_default() += v.size_bytes;
                }
            }
            for (name, rec) in &s.backends {
                let n = missing.get(name.as_str()).copied().unwrap_or(0);
                stats.missing_by_backend.insert(name.clone(), n);
                stats
                    .suspended_by_backend
                    .insert(name.clone(), rec.suspended);
                let slot = backends.get(name);
                let state = match slot.map(|s| s.status.state()) {
                    _ if !rec.online => BackendState::Offline,
                    Some(st) => st,
                    // Not run here (a standby): as the leader recorded it.
                    None => BackendState::recorded(rec.observed.as_ref()),
                };
                *stats.backends_by_state.entry(state.as_str()).or_default() += 1;
                let free = rec.observed.as_ref().map(|o| &o.free_bytes);
                for p in &rec.pools {
                    stats.pools.push(PoolStats {
                        backend: name.clone(),
                        pool: p.name.clone(),
                        total_bytes: p.total_bytes,
                        free_bytes: free.and_then(|f| f.get(&p.name).copied()),
                        used_bytes: used
                            .get(&(name.as_str(), p.name.as_str()))
                            .copied()
                            .unwrap_or(0),
                    });
                }
                if let Some(slot) = slot {
                    let driver = slot.status.driver();
                    stats.backends.push(BackendStats {
                        backend: name.clone(),
                        queue_depth: driver.as_ref().map_or(0, |d| d.queued()) as u64,
                        in_flight: driver.as_ref().map_or(0, |d| d.in_flight()) as u64,
                    });
                }
            }
        });
        stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{BackendEvent, VolumeEvent};
    use crate::log::{DiscardSink, Durability, NewEvent};

    /// Event `i` of a round, on one of three streams: `volume/a`, `volume/b`, `backend/x`.
    fn event(round: &str, i: usize) -> Event {
        match i % 3 {
            0 => Event::volume("a", VolumeEvent::DeleteRequested),
            1 => Event::volume(
                "b",
                VolumeEvent::SnapshotRequested {
                    snapshot: format!("{round}-{i}"),
                },
            ),
            _ => Event::backend("x", BackendEvent::Offlined),
        }
    }

    /// Appends `events` one batch each, the writer stopped afterwards.
    async fn append(log: &EventLog, events: impl IntoIterator<Item = Event>) {
        let appender = log.start_writer(Arc::new(DiscardSink));
        for (i, e) in events.into_iter().enumerate() {
            appender
                .append(&format!("req-{i}"), vec![NewEvent::from(&e)])
                .await
                .unwrap();
        }
        drop(appender);
        log.shutdown().await.unwrap();
    }

    /// What a query by object answered before the index: the whole log walked, the object's
    /// records kept.
    fn walked(log: &EventLog, filter: &EventFilter) -> Vec<EventRecord> {
        let all = EventFilter {
            object: None,
            since: filter.since,
            limit: None,
        };
        read_events(log, &StreamIndex::default(), &all)
            .unwrap()
            .into_iter()
            .filter(|r| filter.object.as_deref() == Some(r.stream.as_str()))
            .take(filter.limit.unwrap_or(usize::MAX))
            .collect()
    }

    /// Every query by object through `index` answers as the walk does.
    fn check(log: &EventLog, index: &StreamIndex, what: &str) {
        for object in ["volume/a", "volume/b", "backend/x", "volume/none"] {
            for since in [0, 1, 4, 11, 1000] {
                for limit in [None, Some(1), Some(3)] {
                    let filter = EventFilter {
                        object: Some(object.to_string()),
                        since,
                        limit,
                    };
                    assert_eq!(
                        read_events(log, index, &filter).unwrap(),
                        walked(log, &filter),
                        "{what}: {filter:?}"
                    );
                }
            }
        }
    }

    #[tokio::test]
    async fn a_query_by_object_through_the_index_answers_as_a_walk_of_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), Durability::Flush).unwrap();
        let index = StreamIndex::default();
        append(&log, (0..12).map(|i| event("first", i))).await;
        check(&log, &index, "first use");
        let head = log.head();
        assert_eq!(
            index.0.lock().unwrap().through,
            head,
            "indexed through the head"
        );
        assert_eq!(log.hash_at(head.0), Some(head.1), "so it is not rebuilt");

        // Records appended since are indexed on the next use.
        append(&log, (0..5).map(|i| event("more", i))).await;
        check(&log, &index, "after appends");

        // Cut back (as a standby that diverged) and grown past the indexed head again, with
        // other events at the sequences the index knew: it starts over.
        log.truncate_after(6).await.unwrap();
        append(&log, (1..20).map(|i| event("after cut", i))).await;
        assert!(log.head().0 > 17);
        check(&log, &index, "after a cut-back");
        let a = read_events(
            &log,
            &index,
            &EventFilter {
                object: Some("volume/b".into()),
                ..EventFilter::default()
            },
        )
        .unwrap();
        assert!(
            a.iter().any(|r| r.seq == 7),
            "the new record at 7 is volume/b's"
        );
    }
}

//! The append-only event log: the only module that imports sled.
//!
//! The log stores opaque payloads (the `events` module encodes them) in envelopes chained by
//! SHA-256: each envelope's hash covers the previous envelope's hash and all of its own fields.
//! Appends go through one writer task that batches concurrent callers into one sled batch and
//! one `flush_async` (group commit), hands the committed envelopes to a [`CommitSink`] (the
//! projection writer) and only then acks each caller with its sequence numbers.
//!
//! sled trees: `events` (big-endian u64 sequence → encoded envelope), `meta` (log format
//! version, instance id, creation time), `checkpoints` (big-endian sequence → projection
//! snapshot with a checksum; the newest two are kept).
//!
//! Files: `codec.rs` (the envelope frame and the chain hash), `store.rs` (sled: open, format
//! check, checked reads, checkpoints, truncation), `writer.rs` (group commit), `files.rs` (the
//! modes of the data dir and the log: 0700 and 0600), `space.rs` (the reserve of free space
//! kept on the log's disk, so that sled never meets a full one).
//!
//! Integrity: every read ([`EventLog::read_from`], [`EventLog::verify`]) checks that each
//! record decodes, is stored under its own sequence, follows its predecessor without a gap,
//! recomputes to its hash and links to its predecessor's hash. The first bad record is
//! reported as [`LogError::Corrupt`] with its sequence and nothing after it is yielded; the
//! only way past it is the explicit operator action [`EventLog::truncate_after`].

mod anchor;
pub mod baseline;
mod codec;
pub mod files;
mod replica;
mod space;
mod store;
mod watermark;
mod writer;

pub use anchor::Anchor;
pub use replica::{ReplicateFuture, Replicator, frame_hash, frame_seq};
pub use space::DEFAULT_MIN_FREE;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use store::Inner;
pub use store::Record;

/// Hash of the envelope before sequence 1.
pub const GENESIS_HASH: [u8; 32] = [0u8; 32];

/// An event as a caller hands it to the log.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// Event kind, e.g. `VolumeCreated` (kept outside the payload for listings and audits).
    pub kind: String,
    /// The stream (object) the event belongs to, e.g. `volume/pvc-1`.
    pub stream: String,
    /// Schema version of the payload encoding.
    pub schema: u16,
    pub payload: Vec<u8>,
}

impl From<&crate::events::Event> for NewEvent {
    /// The one way an event becomes a log record: current schema, kind and stream outside
    /// the payload.
    fn from(e: &crate::events::Event) -> NewEvent {
        NewEvent {
            kind: e.kind().to_string(),
            stream: e.stream(),
            schema: crate::events::SCHEMA_VERSION,
            payload: crate::events::encode(e),
        }
    }
}

/// A sink that ignores committed batches (tools that write a log nobody reads live).
#[derive(Debug, Default, Clone, Copy)]
pub struct DiscardSink;

impl CommitSink for DiscardSink {
    fn committed(&self, _batch: &[Envelope]) {}
}

/// A committed event.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub seq: u64,
    /// Unix milliseconds when the batch was committed.
    pub time_ms: u64,
    /// A unique id for the event.
    pub id: uuid::Uuid,
    /// The request that caused it (a uuid string, or a source such as `config`/`boot`).
    pub request_id: String,
    pub schema: u16,
    pub kind: String,
    pub stream: String,
    pub payload: Vec<u8>,
    /// SHA-256 over the previous envelope's hash and this envelope's fields.
    pub hash: [u8; 32],
}

/// How durable an acknowledged append is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Acked after `flush_async` (the default).
    #[default]
    Flush,
    /// Acked after the write reached sled's page cache; sled flushes on its own schedule.
    Write,
    /// A temporary sled (benchmarks only).
    Memory,
}

/// Receives committed envelopes in sequence order, on the writer task, before callers are
/// acked. Implementations must be quick and must not block on I/O.
pub trait CommitSink: Send + Sync + 'static {
    fn committed(&self, batch: &[Envelope]);
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("the data directory {path} is in use by another storch process")]
    Locked { path: String },
    #[error("event log storage error: {0}")]
    Storage(String),
    /// A record that fails its hash, its decoding or the chain: boot refuses to apply it.
    #[error("event log is corrupt at sequence {seq}: {reason}")]
    Corrupt { seq: u64, reason: String },
    /// A flush failed: the log refuses all further writes (never retry an fsync and carry on).
    #[error("event log is poisoned after a failed flush: {0}")]
    Poisoned(String),
    #[error("event log writer has stopped")]
    Closed,
    /// The store lacks records that were acknowledged (the watermark is ahead of it), or holds
    /// another record than the acknowledged one: the log refuses appends, boot refuses to
    /// start, until the operator accepts the shorter log.
    #[error(
        "event log is missing acknowledged records: sequences {}..={acked} were acknowledged \
         but cannot be read back ({reason})", head + 1
    )]
    Missing {
        head: u64,
        acked: u64,
        reason: String,
    },
    /// Less than the reserve of free space is left on the log's disk (`need`: what a
    /// checkpoint needs on top of it): refused before sled saw anything, and writes resume by
    /// themselves once space is freed.
    #[error("{}", disk_full(*.free, *.reserve, *.need))]
    DiskFull { free: u64, reserve: u64, need: u64 },
}

fn disk_full(free: u64, reserve: u64, need: u64) -> String {
    use crate::model::format_size;
    let need = match need {
        0 => String::new(),
        n => format!(" (and {} needed)", format_size(n)),
    };
    format!(
        "the event log's disk is full: {} free, {} reserved{need}",
        format_size(free),
        format_size(reserve)
    )
}

impl LogError {
    /// Why the log takes no writes, for clients: no paths, the operating system's words for
    /// a failed write or flush, and what brings writes back.
    pub fn public_reason(&self) -> String {
        match self {
            LogError::Poisoned(reason) => {
                let os = os_error(reason)
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default();
                if reason.starts_with("replicating") {
                    "the event log could not be replicated to etcd: this instance takes no \
                     more writes; a standby takes over"
                        .to_string()
                } else if reason.contains("os error 28") {
                    format!(
                        "the event log's disk is full{os}: writes are refused until space is \
                         freed and storch is restarted; reads go on"
                    )
                } else {
                    format!(
                        "the event log's disk failed{os}: writes are refused until storch is \
                         restarted; reads go on"
                    )
                }
            }
            LogError::Missing { head, acked, .. } => format!(
                "the event log lacks acknowledged records (sequences {}..={acked}): writes are \
                 refused; see `storch events verify`",
                head + 1
            ),
            LogError::Corrupt { seq, .. } => format!(
                "the event log is corrupt at sequence {seq}: writes are refused; see `storch \
                 events verify`"
            ),
            LogError::DiskFull { .. } => {
                format!("{self}: writes resume by themselves once space is freed; reads go on")
            }
            LogError::Closed => "the event log is closed: storch is stopping".to_string(),
            LogError::Locked { .. } | LogError::Storage(_) => {
                "the event log could not be written; see the server log".to_string()
            }
        }
    }
}

/// The operating system's words in an I/O error's text, e.g. `No space left on device (os
/// error 28)`, without the path before them.
fn os_error(reason: &str) -> Option<&str> {
    let end = reason.find("(os error ")?;
    let close = end + reason[end..].find(')')? + 1;
    let start = reason[..end].rfind(": ").map_or(0, |i| i + 2);
    Some(reason[start..close].trim())
}

/// Result of walking the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyReport {
    /// Envelopes that checked out (all of them before `first_bad`).
    pub events: u64,
    /// The highest sequence stored, whether or not it checks out.
    pub head_seq: u64,
    /// The first bad sequence and why, if any.
    pub first_bad: Option<(u64, String)>,
    /// Where the chain starts when the log starts from a checkpoint (see [`Anchor`]): the
    /// records checked are those after it, the first linking to its recorded hash.
    pub anchor: Option<Anchor>,
    /// The last acknowledged sequence, from the watermark kept beside the store (`None`
    /// without one: a log in memory).
    pub acknowledged: Option<u64>,
    /// Acknowledged records the store lacks ([`LogError::Missing`]), if any.
    pub missing: Option<String>,
}

/// The open log.
pub struct EventLog {
    inner: Arc<Inner>,
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The iterator of [`EventLog::read_batches`].
pub struct Batches {
    rx: Option<std::sync::mpsc::Receiver<store::BatchResult>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Iterator for Batches {
    type Item = Result<Vec<Record>, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Ok(item) = self.rx.as_ref()?.recv() {
            return Some(item);
        }
        // The reader is done; a reader that died must not look like the end of the log.
        self.rx = None;
        match self.thread.take()?.join() {
            Ok(()) => None,
            Err(_) => Some(Err(LogError::Storage(
                "the log reader thread panicked".to_string(),
            ))),
        }
    }
}

impl Drop for Batches {
    fn drop(&mut self) {
        // Dropping the receiver makes the reader's next send fail, so it stops.
        self.rx = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A cheap, cloneable handle for appending. The writer runs while any clone exists (and
/// keeps the database open).
#[derive(Clone)]
pub struct Appender {
    tx: mpsc::Sender<writer::Request>,
    inner: Arc<Inner>,
}

impl EventLog {
    /// Opens (or creates) the log in `dir`, refusing if another process holds it.
    ///
    /// Errors: [`LogError::Locked`] when the directory's sled database is locked (by another
    /// process, or by another open `EventLog` in this one); [`LogError::Storage`] when the log
    /// has a format version this build does not know, or sled fails. A corrupt last record
    /// does not fail the open (so that it can be inspected and truncated), but appends are
    /// refused until it is truncated. [`Durability::Memory`] ignores `dir` and opens a
    /// temporary sled that is deleted when the log is dropped.
    pub fn open(dir: &Path, durability: Durability) -> Result<EventLog, LogError> {
        let inner = store::open(dir, durability)?;
        Ok(EventLog {
            inner: Arc::new(inner),
            writer: Mutex::new(None),
        })
    }

    /// Head sequence (0 when empty) and head hash. If the last record is corrupt (see
    /// [`EventLog::check_tail`]) its hash is unknown and `GENESIS_HASH` is returned with its
    /// sequence.
    pub fn head(&self) -> (u64, [u8; 32]) {
        let head = self.inner.head();
        (head.seq, head.hash)
    }

    /// `Err(LogError::Corrupt)` when the last stored record does not decode or check out on
    /// its own; the writer refuses appends in that state.
    pub fn check_tail(&self) -> Result<(), LogError> {
        match &self.inner.head().tail_error {
            Some((seq, reason)) => Err(LogError::Corrupt {
                seq: *seq,
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// `Err(LogError::Missing)` when the store lacks acknowledged records (found at open by
    /// comparing it with the watermark); the writer refuses appends in that state.
    pub fn check_acknowledged(&self) -> Result<(), LogError> {
        match self.inner.shortfall() {
            Some(s) => Err(s.error()),
            None => Ok(()),
        }
    }

    /// Operator action (`serve --truncate-corrupt-tail`): accepts the store as it is, setting
    /// the watermark to its head. Returns the acknowledged sequence that was given up and the
    /// head it was cut back to, when the store was short. Refused while the writer runs, and
    /// while the last record is corrupt (truncate it first).
    pub async fn accept_shorter(&self) -> Result<Option<(u64, u64)>, LogError> {
        {
            let slot = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            if slot.as_ref().is_some_and(|h| !h.is_finished()) {
                return Err(LogError::Storage(
                    "cannot cut the event log back while its writer is running".to_string(),
                ));
            }
            // No checkpoint may stay past the head it is cut back to.
            let head = self.inner.head().seq;
            store::remove_after(
                &self.inner,
                head,
                "by operator request (--truncate-corrupt-tail)",
            )?;
        }
        self.inner.flush().await?;
        let given_up = self.inner.accept_store()?;
        if let Some(s) = &given_up {
            tracing::warn!(
                acknowledged = s.acked,
                head = s.head,
                path = %self.inner.path.display(),
                "event log cut back to what its store holds, by operator request"
            );
        }
        Ok(given_up.map(|s| (s.acked, s.head)))
    }

    /// The id written when this log was created.
    pub fn instance_id(&self) -> uuid::Uuid {
        self.inner.instance_id
    }

    /// The reason, once a failed write or flush has poisoned the log (report not-ready).
    pub fn poisoned(&self) -> Option<String> {
        self.inner.poisoned().map(str::to_string)
    }

    /// The free space the log keeps on its disk (default [`DEFAULT_MIN_FREE`]; 0: none): a
    /// batch that finds less refused with [`LogError::DiskFull`] before sled sees it. No
    /// effect on a log in memory.
    pub fn set_min_free(&self, bytes: u64) {
        if let Some(space) = &self.inner.space {
            space.set_min_free(bytes);
        }
    }

    /// [`LogError::DiskFull`] while the last look at the log's disk found less than the
    /// reserve free (before a batch, and every second while short): writes are refused until
    /// space is freed (report not-ready).
    pub fn disk_full(&self) -> Option<LogError> {
        self.inner.disk_short().map(|s| s.error())
    }

    /// Looks at the log's disk now (as the writer does before a batch), for a standby, which
    /// runs no writer: [`LogError::DiskFull`] below the reserve; `disk_full` follows.
    pub fn look_at_disk(&self) -> Option<LogError> {
        self.inner.check_space().map(|s| s.error())
    }

    /// Envelopes from `from_seq` (inclusive) in order, each checked against its hash and the
    /// chain; the first bad one yields `LogError::Corrupt` and ends the iteration.
    ///
    /// For `from_seq > 1` the record at `from_seq - 1` is read (and checked on its own) first,
    /// to link the chain; reading past the head yields nothing.
    pub fn read_from(
        &self,
        from_seq: u64,
    ) -> impl Iterator<Item = Result<Envelope, LogError>> + '_ {
        store::ReadIter::new(&self.inner.events, from_seq)
    }

    /// The records from `from_seq` (inclusive) in order, checked exactly as [`read_from`]
    /// checks them, in batches read ahead on a thread of their own (`storch-log-read`): the
    /// caller decodes and folds one batch while the next is read and checked. The first bad
    /// record yields `LogError::Corrupt` after the batch of the good ones before it, and ends
    /// the iteration. Dropping the iterator stops the thread.
    ///
    /// [`read_from`]: EventLog::read_from
    pub fn read_batches(&self, from_seq: u64) -> Result<Batches, LogError> {
        let (rx, thread) = store::spawn_batches(&self.inner.events, from_seq)?;
        Ok(Batches {
            rx: Some(rx),
            thread: Some(thread),
        })
    }

    /// Walks the whole chain.
    pub fn verify(&self) -> VerifyReport {
        let mut events = 0;
        let mut first_bad = None;
        for item in self.read_from(1) {
            match item {
                Ok(_) => events += 1,
                Err(LogError::Corrupt { seq, reason }) => {
                    first_bad = Some((seq, reason));
                    break;
                }
                Err(other) => {
                    first_bad = Some((events + 1, other.to_string()));
                    break;
                }
            }
        }
        let shortfall = self.inner.shortfall();
        VerifyReport {
            events,
            head_seq: store::last_key(&self.inner.events),
            first_bad,
            anchor: self.anchor(),
            acknowledged: self.inner.watermark.as_ref().map(|_| {
                shortfall
                    .as_ref()
                    .map_or_else(|| self.inner.head().seq, |s| s.acked)
            }),
            missing: shortfall.map(|s| s.error().to_string()),
        }
    }

    /// Starts the group-commit writer task on the current tokio runtime. `sink` sees every
    /// committed batch before its callers are acked.
    ///
    /// The writer runs until every [`Appender`] is dropped, then finishes the queued work and
    /// exits; [`EventLog::shutdown`] awaits that.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or if a writer for this log is still running (two writers
    /// would fork the chain).
    pub fn start_writer(&self, sink: Arc<dyn CommitSink>) -> Appender {
        self.start_writer_with(sink, None)
    }

    /// [`EventLog::start_writer`], with every batch also made durable by `replicator` before
    /// the sink and the callers see it.
    pub fn start_writer_with(
        &self,
        sink: Arc<dyn CommitSink>,
        replicator: Option<Arc<dyn Replicator>>,
    ) -> Appender {
        let mut slot = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|h| !h.is_finished()) {
            panic!("the event log writer is already running");
        }
        let (tx, rx) = mpsc::channel(writer::QUEUE_CAPACITY);
        *slot = Some(tokio::spawn(writer::run(
            self.inner.clone(),
            sink,
            replicator,
            rx,
        )));
        Appender {
            tx,
            inner: self.inner.clone(),
        }
    }

    /// Waits for the writer to finish (drop every [`Appender`] first, or this waits for
    /// ever), then flushes. Call it last when shutting down. Fails with
    /// [`LogError::Poisoned`] on a poisoned log (nothing is flushed then).
    pub async fn shutdown(&self) -> Result<(), LogError> {
        let handle = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle
            && let Err(e) = handle.await
        {
            return Err(LogError::Storage(format!(
                "the event log writer failed: {e}"
            )));
        }
        self.inner.flush().await
    }

    /// Appends records another instance committed (a standby following its leader), verbatim
    /// and checked like a read; returns their envelopes. Refused while the writer runs.
    pub async fn append_replicated(&self, frames: &[&[u8]]) -> Result<Vec<Envelope>, LogError> {
        if self.writer_running() {
            return Err(LogError::Storage(
                "cannot append replicated records while this log's writer is running".into(),
            ));
        }
        replica::append_frames(&self.inner, frames).await
    }

    /// Up to `max` checked records from `from_seq` on, as the frames stored for them.
    pub fn frames_from(&self, from_seq: u64, max: usize) -> Result<Vec<Vec<u8>>, LogError> {
        replica::frames_from(&self.inner, from_seq, max)
    }

    fn writer_running(&self) -> bool {
        let slot = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().is_some_and(|h| !h.is_finished())
    }

    /// Stores a projection snapshot taken at `seq` (durably); older ones are pruned.
    ///
    /// The two newest checkpoints are kept. `seq` must not be past the head.
    pub async fn save_checkpoint(&self, seq: u64, snapshot: Vec<u8>) -> Result<(), LogError> {
        store::save_checkpoint(&self.inner, seq, &snapshot).await
    }

    /// The newest checkpoint, if any. A damaged checkpoint is skipped (with a warning) in
    /// favour of the one before it.
    pub fn latest_checkpoint(&self) -> Result<Option<(u64, Vec<u8>)>, LogError> {
        store::latest_checkpoint(&self.inner)
    }

    /// Operator action: drops every event after `seq` (and every checkpoint after it),
    /// durably, and returns how many events were removed. Use it to cut off a corrupt tail
    /// after [`EventLog::verify`] reported it. Refused while the writer runs.
    pub async fn truncate_after(&self, seq: u64) -> Result<u64, LogError> {
        self.cut_back_after(seq, "by operator request").await
    }

    /// [`EventLog::truncate_after`] done by storch itself; `why` is logged with the warning
    /// (e.g. "cut back to etcd's history").
    pub async fn cut_back_after(&self, seq: u64, why: &str) -> Result<u64, LogError> {
        let removed = {
            // Held so that no writer starts while records are removed.
            let slot = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            if slot.as_ref().is_some_and(|h| !h.is_finished()) {
                return Err(LogError::Storage(
                    "cannot truncate the event log while its writer is running".to_string(),
                ));
            }
            store::remove_after(&self.inner, seq, why)?
        };
        self.inner.flush().await?;
        // What is left is the log now: the watermark follows it down.
        if self.check_tail().is_ok() {
            self.inner.accept_store()?;
        }
        Ok(removed)
    }

    /// The hash of record `seq` (checked on its own), or the recorded hash of the checkpoint
    /// the log starts from when `seq` is its sequence; `None` when the log holds neither.
    pub fn hash_at(&self, seq: u64) -> Option<[u8; 32]> {
        if seq == 0 {
            return Some(GENESIS_HASH);
        }
        store::previous_hash(&self.inner.events, seq).ok().flatten()
    }

    /// Where the log starts, when it starts from a checkpoint rather than sequence 1.
    pub fn anchor(&self) -> Option<Anchor> {
        anchor::of(&self.inner.events)
    }

    /// Replaces the whole log by a start from a checkpoint another instance recorded: every
    /// record and checkpoint is removed, `snapshot` is stored as the checkpoint at
    /// `anchor.seq`, and the next record appended or copied must be `anchor.seq + 1`, linking
    /// to `anchor.hash`. For a standby whose records etcd no longer holds; refused while the
    /// writer runs.
    pub async fn start_from_checkpoint(
        &self,
        anchor: Anchor,
        snapshot: Vec<u8>,
    ) -> Result<(), LogError> {
        let removed = {
            // Held so that no writer starts while the log is replaced.
            let slot = self.writer.lock().unwrap_or_else(|e| e.into_inner());
            if slot.as_ref().is_some_and(|h| !h.is_finished()) {
                return Err(LogError::Storage(
                    "cannot reset the event log while its writer is running".to_string(),
                ));
            }
            store::start_from(&self.inner, anchor, &snapshot)?
        };
        self.inner.flush().await?;
        // The log is what etcd's checkpoint says now: the watermark follows it.
        self.inner.accept_store()?;
        tracing::warn!(
            seq = anchor.seq,
            hash = %hex::encode(anchor.hash),
            removed,
            "event log now starts from a checkpoint: the records before it are not held here"
        );
        Ok(())
    }

    /// Test support: rewrites the raw stored bytes of record `seq` (which must exist), so that
    /// tests can simulate corruption. Do not use while the writer runs.
    #[doc(hidden)]
    pub fn corrupt_for_tests(&self, seq: u64, f: impl FnOnce(&mut Vec<u8>)) {
        let mut raw = self
            .raw_frame(seq)
            .unwrap_or_else(|| panic!("no record at sequence {seq}"));
        f(&mut raw);
        self.put_raw_for_tests(seq, Some(raw));
    }

    /// The stored frame of record `seq` (unchecked; `None` when absent or unreadable).
    pub fn raw_frame(&self, seq: u64) -> Option<Vec<u8>> {
        self.inner
            .events
            .get(store::key(seq))
            .ok()
            .flatten()
            .map(|v| v.to_vec())
    }

    /// Test support: stores (or with `None` deletes) raw bytes under sequence `seq`.
    #[doc(hidden)]
    pub fn put_raw_for_tests(&self, seq: u64, raw: Option<Vec<u8>>) {
        let k = store::key(seq);
        match raw {
            Some(raw) => self.inner.events.insert(k, raw).map(|_| ()),
            None => self.inner.events.remove(k).map(|_| ()),
        }
        .expect("writing the event log");
        self.inner
            .refresh_head()
            .expect("reading the event log head");
    }

    /// Test support: the free bytes of the log's disk are what `free` says from now on,
    /// instead of `statvfs`. No effect on a log in memory.
    #[doc(hidden)]
    pub fn set_free_bytes_for_tests(&self, free: impl Fn() -> u64 + Send + Sync + 'static) {
        if let Some(space) = &self.inner.space {
            space.set_source(Arc::new(move || Ok(free())));
        }
    }

    /// Test support (failpoint): the next batch the writer commits is written but its flush
    /// fails, which poisons the log.
    #[doc(hidden)]
    pub fn fail_next_flush_for_tests(&self) {
        self.inner.fail_next_commit.store(true, Ordering::SeqCst);
    }
}

impl Appender {
    /// Appends events atomically (one batch, contiguous sequences) and returns the sequence of
    /// each after the batch is durable (per [`Durability`]) and the sink has seen it.
    ///
    /// If the caller stops waiting, the events may still be committed. An empty `events`
    /// returns at once.
    pub async fn append(
        &self,
        request_id: &str,
        events: Vec<NewEvent>,
    ) -> Result<Vec<u64>, LogError> {
        if let Some(e) = self.inner.poisoned_error() {
            return Err(e);
        }
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(writer::Request {
                request_id: request_id.to_string(),
                events,
                reply,
            })
            .await
            .map_err(|_| LogError::Closed)?;
        rx.await.map_err(|_| LogError::Closed)?
    }
}

#[cfg(test)]
mod tests;

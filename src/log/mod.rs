//! The append-only event log: the only module that imports sled.
//!
//! The log stores opaque payloads (the `events` module encodes them) in envelopes chained by
//! SHA-256: each envelope's hash covers the previous envelope's hash and all of its own fields.
//! Appends go through one writer task that batches concurrent callers into one sled batch and
//! one `flush_async` (group commit), hands the committed envelopes to a [`CommitSink`] (the
//! projection writer) and only then acks each caller with its sequence numbers.
//!
//! sled trees: `events` (big-endian u64 sequence → encoded envelope), `meta` (schema version,
//! instance id), `checkpoints` (big-endian sequence → projection snapshot).

use std::path::Path;
use std::sync::Arc;

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
}

/// Result of walking the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyReport {
    pub events: u64,
    pub head_seq: u64,
    /// The first bad sequence and why, if any.
    pub first_bad: Option<(u64, String)>,
}

/// The open log.
pub struct EventLog {
    _private: (),
}

/// A cheap, cloneable handle for appending.
#[derive(Clone)]
pub struct Appender {
    _private: Arc<()>,
}

impl EventLog {
    /// Opens (or creates) the log in `dir`, refusing if another process holds it.
    pub fn open(dir: &Path, durability: Durability) -> Result<EventLog, LogError> {
        let _ = (dir, durability);
        todo!()
    }

    /// Head sequence (0 when empty) and head hash.
    pub fn head(&self) -> (u64, [u8; 32]) {
        todo!()
    }

    /// Envelopes from `from_seq` (inclusive) in order, each checked against its hash and the
    /// chain; the first bad one yields `LogError::Corrupt` and ends the iteration.
    pub fn read_from(
        &self,
        from_seq: u64,
    ) -> impl Iterator<Item = Result<Envelope, LogError>> + '_ {
        let _ = from_seq;
        std::iter::empty()
    }

    /// Walks the whole chain.
    pub fn verify(&self) -> VerifyReport {
        todo!()
    }

    /// Starts the group-commit writer task on the current tokio runtime. `sink` sees every
    /// committed batch before its callers are acked.
    pub fn start_writer(&self, sink: Arc<dyn CommitSink>) -> Appender {
        let _ = sink;
        todo!()
    }

    /// Stores a projection snapshot taken at `seq` (durably); older ones are pruned.
    pub async fn save_checkpoint(&self, seq: u64, snapshot: Vec<u8>) -> Result<(), LogError> {
        let _ = (seq, snapshot);
        todo!()
    }

    /// The newest checkpoint, if any.
    pub fn latest_checkpoint(&self) -> Result<Option<(u64, Vec<u8>)>, LogError> {
        todo!()
    }
}

impl Appender {
    /// Appends events atomically (one batch, contiguous sequences) and returns the sequence of
    /// each after the batch is durable (per [`Durability`]) and the sink has seen it.
    pub async fn append(
        &self,
        request_id: &str,
        events: Vec<NewEvent>,
    ) -> Result<Vec<u64>, LogError> {
        let _ = (request_id, events);
        todo!()
    }
}

impl EventLog {
    /// Waits for the writer to finish queued appends (after every `Appender` is dropped or
    /// the owner asks) and flushes. Idempotent.
    pub async fn close(&self) {
        todo!()
    }
}

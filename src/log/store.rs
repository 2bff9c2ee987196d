//! The sled side of the log: opening, the format check, the tail check, the checked reader,
//! checkpoints and truncation.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard, OnceLock};

use sha2::{Digest, Sha256};

use super::space::{Reserve, Short};
use super::watermark::{Found, Mark, Watermark};
use super::{Durability, Envelope, GENESIS_HASH, LogError};
use super::{anchor, codec};

/// Version of the log as a whole (tree layout, key encoding, frame formats it may contain).
pub(crate) const LOG_FORMAT: u32 = 1;

const TREE_EVENTS: &str = "events";
pub(crate) const TREE_META: &str = "meta";
const TREE_CHECKPOINTS: &str = "checkpoints";

pub(crate) const META_FORMAT: &[u8] = b"format";
const META_INSTANCE: &[u8] = b"instance_id";
const META_CREATED: &[u8] = b"created_ms";

const CHECKPOINT_MAGIC: u8 = 0xC7;
const CHECKPOINT_FORMAT: u8 = 1;
/// How many checkpoints survive a prune (the new one and its predecessor).
pub(crate) const CHECKPOINTS_KEPT: usize = 2;

/// What the writer needs to know about the end of the chain.
#[derive(Debug, Clone)]
pub(crate) struct HeadState {
    pub seq: u64,
    pub hash: [u8; 32],
    pub time_ms: u64,
    /// Set when the last stored record does not decode or check: appends are refused.
    pub tail_error: Option<(u64, String)>,
}

/// The store lacks records the watermark says were acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// The last sequence that can be trusted.
    pub head: u64,
    /// The acknowledged sequence.
    pub acked: u64,
    pub reason: String,
}

impl Shortfall {
    pub fn error(&self) -> LogError {
        LogError::Missing {
            head: self.head,
            acked: self.acked,
            reason: self.reason.clone(),
        }
    }
}

/// Shared by the `EventLog`, the writer task and every `Appender`.
pub(crate) struct Inner {
    pub db: sled::Db,
    pub events: sled::Tree,
    pub checkpoints: sled::Tree,
    pub durability: Durability,
    pub path: PathBuf,
    pub instance_id: uuid::Uuid,
    head: Mutex<HeadState>,
    poison: OnceLock<String>,
    /// Test failpoint: the next commit fails after its write, as a failed flush would.
    pub fail_next_commit: AtomicBool,
    /// The watermark file (`None` for a log in memory).
    pub watermark: Option<Watermark>,
    /// Set at open when the store is shorter than the watermark; appends are refused.
    shortfall: Mutex<Option<Shortfall>>,
    /// The reserve of free space on the log's disk (`None` for a log in memory).
    pub space: Option<Reserve>,
}

impl Inner {
    pub fn head(&self) -> MutexGuard<'_, HeadState> {
        self.head.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn poisoned(&self) -> Option<&str> {
        self.poison.get().map(String::as_str)
    }

    /// Marks the log poisoned (first reason wins) and returns the reason in force.
    pub fn poison(&self, reason: String) -> String {
        let _ = self.poison.set(reason);
        self.poison.get().cloned().unwrap_or_default()
    }

    pub fn poisoned_error(&self) -> Option<LogError> {
        self.poisoned().map(|r| LogError::Poisoned(r.to_string()))
    }

    /// Looks at the log's disk before records go to sled: `Some` below the reserve.
    pub fn check_space(&self) -> Option<Short> {
        self.space.as_ref().and_then(Reserve::check)
    }

    /// Whether the last look found the log's disk below the reserve.
    pub fn disk_short(&self) -> Option<Short> {
        self.space.as_ref().and_then(Reserve::short)
    }

    /// Flushes everything written so far, unless the log is in memory.
    pub async fn flush(&self) -> Result<(), LogError> {
        if let Some(e) = self.poisoned_error() {
            return Err(e);
        }
        if self.durability == Durability::Memory {
            return Ok(());
        }
        match self.db.flush_async().await {
            Ok(_) => Ok(()),
            Err(e) => {
                let reason = self.poison(format!("flush failed: {e}"));
                tracing::error!(error = %e, "event log flush failed; the log is now poisoned");
                Err(LogError::Poisoned(reason))
            }
        }
    }

    pub fn shortfall(&self) -> Option<Shortfall> {
        self.shortfall
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records `seq`/`hash` as acknowledged, durably (blocking), when the log keeps a
    /// watermark and acks after flushes; otherwise does nothing.
    pub fn mark(&self, seq: u64, hash: [u8; 32]) -> Result<(), String> {
        match &self.watermark {
            Some(w) if self.durability == Durability::Flush => w
                .write(Mark { seq, hash })
                .map_err(|e| format!("writing {}: {e}", w.path().display())),
            _ => Ok(()),
        }
    }

    /// The operator's decision: what the store holds now is the log. The watermark is set to
    /// the current head and the shortfall found at open, if any, is returned and forgotten.
    pub fn accept_store(&self) -> Result<Option<Shortfall>, LogError> {
        let head = self.head().clone();
        if let Some((seq, reason)) = head.tail_error {
            return Err(LogError::Corrupt { seq, reason });
        }
        if let Some(w) = &self.watermark {
            w.reset(Mark {
                seq: head.seq,
                hash: head.hash,
            })
            .map_err(|e| storage(&format!("writing {}", w.path().display()), e))?;
        }
        Ok(self
            .shortfall
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take())
    }

    /// A standby's log caught up from the replica: the shortfall is gone once the head
    /// reaches the acknowledged record.
    pub fn clear_shortfall_upto(&self, head: u64) {
        let mut slot = self.shortfall.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|s| head >= s.acked) {
            *slot = None;
        }
    }

    /// Re-reads the end of the chain from disk.
    pub fn refresh_head(&self) -> Result<(), LogError> {
        let state = read_head(&self.events)?;
        *self.head() = state;
        Ok(())
    }
}

pub(crate) fn storage(context: &str, e: impl std::fmt::Display) -> LogError {
    LogError::Storage(format!("{context}: {e}"))
}

pub(crate) fn key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

fn key_seq(key: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(key).ok().map(u64::from_be_bytes)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// sled reports a held lock as an `Io` error of kind `Other` whose message starts with
/// "could not acquire lock" (sled 0.34 `Config::try_lock`); that is the only signal it gives.
fn is_lock_error(e: &sled::Error) -> bool {
    match e {
        sled::Error::Io(io) => {
            io.kind() == ErrorKind::WouldBlock
                || (io.kind() == ErrorKind::Other
                    && io.to_string().starts_with("could not acquire lock"))
        }
        _ => false,
    }
}

/// How long `open` waits for a lock that is about to be released.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

pub(crate) fn open(dir: &Path, durability: Durability) -> Result<Inner, LogError> {
    let config = match durability {
        Durability::Memory => sled::Config::new().temporary(true),
        Durability::Flush | Durability::Write => {
            let warning = super::files::private_dir(dir)
                .map_err(|e| LogError::Storage(format!("creating {}: {e}", dir.display())))?;
            if let Some(warning) = warning {
                tracing::warn!("{warning}");
            }
            sled::Config::new().path(dir)
        }
    };
    // sled releases its file lock from its flusher thread a little after the last handle is
    // dropped, so a log closed a moment ago (a restart in the same process, a previous owner
    // exiting) can still look held: wait a bounded time before calling it locked.
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let db = loop {
        match config.open() {
            Ok(db) => break db,
            Err(e) if is_lock_error(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) if is_lock_error(&e) => {
                return Err(LogError::Locked {
                    path: dir.display().to_string(),
                });
            }
            Err(e) => {
                return Err(storage(
                    &format!("opening the event log in {}", dir.display()),
                    e,
                ));
            }
        }
    };
    let tree = |name: &str| {
        db.open_tree(name)
            .map_err(|e| storage(&format!("opening tree {name}"), e))
    };
    if durability != Durability::Memory {
        super::files::restrict_tree(dir)
            .map_err(|e| LogError::Storage(format!("setting modes in {}: {e}", dir.display())))?;
    }
    let events = tree(TREE_EVENTS)?;
    let meta = tree(TREE_META)?;
    let checkpoints = tree(TREE_CHECKPOINTS)?;

    let instance_id = check_or_init_meta(dir, &events, &meta, &checkpoints)?;
    let head = read_head(&events)?;
    if let Some((seq, reason)) = &head.tail_error {
        tracing::error!(seq, %reason, path = %dir.display(), "event log tail is corrupt");
    }
    let (watermark, shortfall) = if durability == Durability::Memory {
        (None, None)
    } else {
        open_watermark(dir, &events, &head)?
    };
    Ok(Inner {
        db,
        events,
        checkpoints,
        durability,
        path: dir.to_path_buf(),
        instance_id,
        head: Mutex::new(head),
        poison: OnceLock::new(),
        fail_next_commit: AtomicBool::new(false),
        watermark,
        shortfall: Mutex::new(shortfall),
        space: (durability != Durability::Memory).then(|| Reserve::of_dir(dir)),
    })
}

/// Opens the watermark and compares it with the store. A log without one (new, or written
/// before storch kept it) or with an unreadable one gets one at its current head.
fn open_watermark(
    dir: &Path,
    events: &sled::Tree,
    head: &HeadState,
) -> Result<(Option<Watermark>, Option<Shortfall>), LogError> {
    let (w, found) = Watermark::open(dir).map_err(|e| {
        LogError::Storage(format!("opening the watermark in {}: {e}", dir.display()))
    })?;
    let mark = match found {
        Found::Mark(mark) => mark,
        Found::Absent | Found::Unreadable(_) => {
            if let Found::Unreadable(why) = &found {
                tracing::warn!(%why, "the event log's watermark is unreadable; starting a new one at the log's head");
            } else if head.seq > 0 {
                tracing::info!(
                    head = head.seq,
                    "the event log has no watermark yet; starting one at its head"
                );
            }
            if head.tail_error.is_none() {
                w.reset(Mark {
                    seq: head.seq,
                    hash: head.hash,
                })
                .map_err(|e| storage(&format!("writing {}", w.path().display()), e))?;
            }
            return Ok((Some(w), None));
        }
    };
    let shortfall = compare(events, head, mark);
    if let Some(s) = &shortfall {
        tracing::error!(
            head = s.head,
            acknowledged = s.acked,
            reason = %s.reason,
            path = %dir.display(),
            "the event log lacks acknowledged records"
        );
    }
    Ok((Some(w), shortfall))
}

/// Whether the store holds the acknowledged record `mark`.
fn compare(events: &sled::Tree, head: &HeadState, mark: Mark) -> Option<Shortfall> {
    if mark.seq == 0 {
        return None;
    }
    if head.seq < mark.seq {
        return Some(Shortfall {
            head: head.seq,
            acked: mark.seq,
            reason: format!(
                "the store ends at sequence {}, the watermark says {} was acknowledged",
                head.seq, mark.seq
            ),
        });
    }
    // A record that does not parse or is missing is the chain check's to report.
    let stored = events.get(key(mark.seq)).ok().flatten()?;
    let frame = codec::parse(&stored).ok()?;
    (frame.hash != mark.hash).then(|| Shortfall {
        head: mark.seq - 1,
        acked: mark.seq,
        reason: format!(
            "the record stored as sequence {} is not the acknowledged one (its hash differs \
             from the watermark's)",
            mark.seq
        ),
    })
}

/// Refuses logs of an unknown format; writes the meta record of a new log. The meta record
/// is not flushed here: sled's log is ordered, so the first durable append carries it.
fn check_or_init_meta(
    dir: &Path,
    events: &sled::Tree,
    meta: &sled::Tree,
    checkpoints: &sled::Tree,
) -> Result<uuid::Uuid, LogError> {
    let read = |k: &[u8]| meta.get(k).map_err(|e| storage("reading log metadata", e));
    match read(META_FORMAT)? {
        Some(v) => {
            let format = <[u8; 4]>::try_from(v.as_ref())
                .map(u32::from_be_bytes)
                .map_err(|_| {
                    LogError::Storage(format!(
                        "the event log in {} has an unreadable format version ({} bytes); \
                         refusing to open it",
                        dir.display(),
                        v.len()
                    ))
                })?;
            if format != LOG_FORMAT {
                return Err(LogError::Storage(format!(
                    "the event log in {} has format version {format}, but this build of storch \
                     only reads format {LOG_FORMAT}; refusing to open it",
                    dir.display()
                )));
            }
            let id = read(META_INSTANCE)?
                .and_then(|v| uuid::Uuid::from_slice(&v).ok())
                .ok_or_else(|| {
                    LogError::Storage(format!(
                        "the event log in {} has no readable instance id",
                        dir.display()
                    ))
                })?;
            Ok(id)
        }
        None => {
            if !events.is_empty() || !checkpoints.is_empty() {
                return Err(LogError::Storage(format!(
                    "the event log in {} holds data but no format version; refusing to open it",
                    dir.display()
                )));
            }
            let id = uuid::Uuid::new_v4();
            let write = |k: &[u8], v: &[u8]| {
                meta.insert(k, v)
                    .map(|_| ())
                    .map_err(|e| storage("writing log metadata", e))
            };
            write(META_INSTANCE, id.as_bytes())?;
            write(META_CREATED, &now_ms().to_be_bytes())?;
            // The format goes last: a log with a format version has the rest.
            write(META_FORMAT, &LOG_FORMAT.to_be_bytes())?;
            Ok(id)
        }
    }
}

/// Reads and checks the last record (decodes, sequence matches its key, hash recomputes).
/// A bad tail is not an error here: it is recorded so that appends are refused while reads,
/// `verify` and `truncate_after` still work.
pub(crate) fn read_head(events: &sled::Tree) -> Result<HeadState, LogError> {
    let Some((k, v)) = events
        .last()
        .map_err(|e| storage("reading the log head", e))?
    else {
        return Ok(HeadState {
            seq: 0,
            hash: GENESIS_HASH,
            time_ms: 0,
            tail_error: None,
        });
    };
    let Some(seq) = key_seq(&k) else {
        return Ok(HeadState {
            seq: 0,
            hash: GENESIS_HASH,
            time_ms: 0,
            tail_error: Some((0, format!("malformed key of {} bytes", k.len()))),
        });
    };
    if let Some(a) = anchor::parse(seq, &v) {
        // A log that starts from a checkpoint and holds nothing after it yet.
        return Ok(HeadState {
            seq,
            hash: a.hash,
            time_ms: 0,
            tail_error: None,
        });
    }
    let bad = |reason: String| HeadState {
        seq,
        hash: GENESIS_HASH,
        time_ms: 0,
        tail_error: Some((seq, reason)),
    };
    let frame = match codec::parse(&v) {
        Ok(f) => f,
        Err(reason) => return Ok(bad(reason)),
    };
    if let Err(reason) = check_self(seq, &frame) {
        return Ok(bad(reason));
    }
    Ok(HeadState {
        seq,
        hash: frame.hash,
        time_ms: frame.time_ms,
        tail_error: None,
    })
}

/// Checks a parsed record on its own: the sequence it claims and its hash.
fn check_self(key_seq: u64, frame: &codec::Frame<'_>) -> Result<(), String> {
    if frame.seq != key_seq {
        return Err(format!(
            "record stored under sequence {key_seq} claims sequence {}",
            frame.seq
        ));
    }
    if frame.compute_hash() != frame.hash {
        return Err("hash does not match the record's contents".to_string());
    }
    Ok(())
}

/// Walks the events tree from a sequence and checks each record: it decodes, is stored under
/// its own sequence, follows its predecessor without a gap, recomputes to its hash and links
/// to its predecessor's hash. The first bad record ends the walk with `LogError::Corrupt`.
/// Both [`ReadIter`] and the batch reader ([`spawn_batches`]) read through it.
struct Checker {
    iter: sled::Iter,
    expected: u64,
    prev_hash: [u8; 32],
    pending: Option<LogError>,
    done: bool,
}

impl Checker {
    fn new(events: &sled::Tree, from_seq: u64) -> Checker {
        // A log that starts from a checkpoint starts after its anchor.
        let first = anchor::of(events).map_or(1, |a| a.seq + 1);
        let from_seq = from_seq.max(first);
        let mut it = Checker {
            iter: events.range(key(from_seq)..),
            expected: from_seq,
            prev_hash: GENESIS_HASH,
            pending: None,
            done: false,
        };
        if from_seq > 1 {
            match previous_hash(events, from_seq - 1) {
                Ok(Some(hash)) => it.prev_hash = hash,
                // Reading past the head: nothing before, nothing after.
                Ok(None) => it.done = true,
                Err(e) => it.pending = Some(e),
            }
        }
        it
    }

    /// The next record, checked, handed to `f` with its stored bytes; `None` at the end, and
    /// after the first error.
    fn next_with<R>(
        &mut self,
        f: impl FnOnce(&codec::Frame<'_>, &sled::IVec) -> R,
    ) -> Option<Result<R, LogError>> {
        if self.done {
            return None;
        }
        if let Some(e) = self.pending.take() {
            self.done = true;
            return Some(Err(e));
        }
        let item = self.iter.next()?;
        let checked = item
            .map_err(|e| storage("reading the event log", e))
            .and_then(|(k, v)| {
                let frame = self.check(&k, &v)?;
                self.expected = frame.seq + 1;
                self.prev_hash = frame.hash;
                Ok(f(&frame, &v))
            });
        if checked.is_err() {
            self.done = true;
        }
        Some(checked)
    }

    fn check<'v>(&self, k: &[u8], v: &'v [u8]) -> Result<codec::Frame<'v>, LogError> {
        let corrupt = |seq, reason: String| LogError::Corrupt { seq, reason };
        let Some(seq) = key_seq(k) else {
            return Err(corrupt(
                self.expected,
                format!(
                    "malformed key of {} bytes after sequence {}",
                    k.len(),
                    self.expected - 1
                ),
            ));
        };
        if seq != self.expected {
            return Err(corrupt(
                self.expected,
                format!("record missing (the next stored record is sequence {seq})"),
            ));
        }
        let frame = codec::parse(v).map_err(|r| corrupt(seq, r))?;
        check_self(seq, &frame).map_err(|r| corrupt(seq, r))?;
        if frame.prev_hash != self.prev_hash {
            return Err(corrupt(
                seq,
                format!(
                    "chain broken: the record does not link to the hash of sequence {}",
                    seq - 1
                ),
            ));
        }
        Ok(frame)
    }
}

/// The checked reader behind `EventLog::read_from`.
pub(crate) struct ReadIter(Checker);

impl ReadIter {
    pub fn new(events: &sled::Tree, from_seq: u64) -> ReadIter {
        ReadIter(Checker::new(events, from_seq))
    }
}

impl Iterator for ReadIter {
    type Item = Result<Envelope, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_with(|frame, _| frame.to_envelope())
    }
}

/// A checked record from [`EventLog::read_batches`](super::EventLog::read_batches): its
/// sequence, commit time, payload schema and payload. The payload is not copied out of the
/// stored bytes.
pub struct Record {
    seq: u64,
    time_ms: u64,
    schema: u16,
    bytes: sled::IVec,
    payload: std::ops::Range<usize>,
}

impl Record {
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Unix milliseconds when its batch was committed.
    pub fn time_ms(&self) -> u64 {
        self.time_ms
    }

    pub fn schema(&self) -> u16 {
        self.schema
    }

    pub fn payload(&self) -> &[u8] {
        &self.bytes[self.payload.clone()]
    }
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("seq", &self.seq)
            .field("time_ms", &self.time_ms)
            .field("schema", &self.schema)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

/// Records per batch handed from the reader thread to the caller.
pub(crate) const BATCH_RECORDS: usize = 1024;
/// Batches read ahead of the caller (bounds the memory the reader may run ahead by).
const BATCHES_AHEAD: usize = 8;

pub(crate) type BatchResult = Result<Vec<Record>, LogError>;

/// Starts a thread that reads and checks records from `from_seq` on (as [`ReadIter`] does)
/// and sends them in batches of [`BATCH_RECORDS`] over a bounded channel. The first bad
/// record is sent as the last item, after the batch of the good records before it. The thread
/// stops when the walk ends or the receiver is dropped.
pub(crate) fn spawn_batches(
    events: &sled::Tree,
    from_seq: u64,
) -> Result<
    (
        std::sync::mpsc::Receiver<BatchResult>,
        std::thread::JoinHandle<()>,
    ),
    LogError,
> {
    let (tx, rx) = std::sync::mpsc::sync_channel(BATCHES_AHEAD);
    let events = events.clone();
    let thread = std::thread::Builder::new()
        .name("storch-log-read".into())
        .spawn(move || {
            let mut checker = Checker::new(&events, from_seq);
            loop {
                let mut batch = Vec::with_capacity(BATCH_RECORDS);
                let mut failed = None;
                while batch.len() < BATCH_RECORDS {
                    let next = checker.next_with(|frame, bytes| Record {
                        seq: frame.seq,
                        time_ms: frame.time_ms,
                        schema: frame.schema,
                        bytes: bytes.clone(),
                        payload: frame.payload_at..frame.payload_at + frame.payload.len(),
                    });
                    match next {
                        Some(Ok(record)) => batch.push(record),
                        Some(Err(e)) => {
                            failed = Some(e);
                            break;
                        }
                        None => break,
                    }
                }
                let last = batch.len() < BATCH_RECORDS;
                if !batch.is_empty() && tx.send(Ok(batch)).is_err() {
                    return;
                }
                if let Some(e) = failed {
                    let _ = tx.send(Err(e));
                    return;
                }
                if last {
                    return;
                }
            }
        })
        .map_err(|e| LogError::Storage(format!("cannot start the log reader thread: {e}")))?;
    Ok((rx, thread))
}

/// The stored hash of record `seq` (checked on its own), `None` when neither it nor anything
/// after it exists.
pub(crate) fn previous_hash(events: &sled::Tree, seq: u64) -> Result<Option<[u8; 32]>, LogError> {
    let corrupt = |reason: String| LogError::Corrupt { seq, reason };
    match events
        .get(key(seq))
        .map_err(|e| storage("reading the event log", e))?
    {
        Some(v) => {
            if let Some(a) = anchor::parse(seq, &v) {
                return Ok(Some(a.hash));
            }
            let frame = codec::parse(&v).map_err(corrupt)?;
            check_self(seq, &frame).map_err(corrupt)?;
            Ok(Some(frame.hash))
        }
        None => {
            let later = events
                .get_gt(key(seq))
                .map_err(|e| storage("reading the event log", e))?;
            match later.and_then(|(k, _)| key_seq(&k)) {
                Some(next) => Err(corrupt(format!(
                    "record missing (the next stored record is sequence {next})"
                ))),
                None => Ok(None),
            }
        }
    }
}

/// The highest stored sequence (whatever its state), 0 when empty.
pub(crate) fn last_key(events: &sled::Tree) -> u64 {
    events
        .last()
        .ok()
        .flatten()
        .and_then(|(k, _)| key_seq(&k))
        .unwrap_or(0)
}

fn checkpoint_frame(snapshot: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 32 + snapshot.len());
    out.push(CHECKPOINT_MAGIC);
    out.push(CHECKPOINT_FORMAT);
    out.extend_from_slice(&Sha256::digest(snapshot));
    out.extend_from_slice(snapshot);
    out
}

fn checkpoint_unframe(frame: &[u8]) -> Result<Vec<u8>, String> {
    if frame.len() < 34 {
        return Err(format!("checkpoint truncated ({} bytes)", frame.len()));
    }
    if frame[0] != CHECKPOINT_MAGIC || frame[1] != CHECKPOINT_FORMAT {
        return Err(format!(
            "unknown checkpoint format (magic {:#04x}, format {})",
            frame[0], frame[1]
        ));
    }
    let body = &frame[34..];
    if Sha256::digest(body).as_slice() != &frame[2..34] {
        return Err("checkpoint checksum mismatch".to_string());
    }
    Ok(body.to_vec())
}

pub(crate) async fn save_checkpoint(
    inner: &Inner,
    seq: u64,
    snapshot: &[u8],
) -> Result<(), LogError> {
    if let Some(e) = inner.poisoned_error() {
        return Err(e);
    }
    let head = inner.head().seq;
    if seq > head {
        return Err(LogError::Storage(format!(
            "refusing a checkpoint at sequence {seq}: the log head is {head}"
        )));
    }
    let frame = checkpoint_frame(snapshot);
    if let Some(space) = &inner.space {
        space.fits(frame.len() as u64)?;
    }
    inner
        .checkpoints
        .insert(key(seq), frame)
        .map_err(|e| storage("writing a checkpoint", e))?;
    inner.flush().await?;
    // The new checkpoint is durable: drop all but the newest few.
    let keys: Vec<sled::IVec> = inner
        .checkpoints
        .iter()
        .keys()
        .rev()
        .skip(CHECKPOINTS_KEPT)
        .collect::<Result<_, _>>()
        .map_err(|e| storage("listing checkpoints", e))?;
    for k in keys {
        inner
            .checkpoints
            .remove(k)
            .map_err(|e| storage("pruning checkpoints", e))?;
    }
    Ok(())
}

/// The newest checkpoint that checks out. A damaged one is skipped with a warning (the log,
/// not the checkpoint, is the truth: an older checkpoint only means a longer replay).
pub(crate) fn latest_checkpoint(inner: &Inner) -> Result<Option<(u64, Vec<u8>)>, LogError> {
    for item in inner.checkpoints.iter().rev() {
        let (k, v) = item.map_err(|e| storage("reading checkpoints", e))?;
        let Some(seq) = key_seq(&k) else {
            tracing::warn!(
                key_len = k.len(),
                "skipping a checkpoint with a malformed key"
            );
            continue;
        };
        match checkpoint_unframe(&v) {
            Ok(snapshot) => return Ok(Some((seq, snapshot))),
            Err(reason) => {
                tracing::warn!(seq, %reason, "skipping a damaged checkpoint");
            }
        }
    }
    Ok(None)
}

/// Removes every event after `seq` and every checkpoint after it (not yet durably: flush
/// afterwards) and re-reads the head. Returns how many events were removed. `why` says in
/// the warning logged who asked and why.
pub(crate) fn remove_after(inner: &Inner, seq: u64, why: &str) -> Result<u64, LogError> {
    if let Some(e) = inner.poisoned_error() {
        return Err(e);
    }
    if let Some(a) = anchor::of(&inner.events)
        && seq < a.seq
    {
        return Err(LogError::Storage(format!(
            "cannot cut the event log back to sequence {seq}: it starts from the checkpoint at \
             sequence {}",
            a.seq
        )));
    }
    let Some(from) = seq.checked_add(1) else {
        return Ok(0);
    };
    let mut removed = 0u64;
    let mut batch = sled::Batch::default();
    for k in inner.events.range(key(from)..).keys() {
        batch.remove(k.map_err(|e| storage("listing events to truncate", e))?);
        removed += 1;
    }
    inner
        .events
        .apply_batch(batch)
        .map_err(|e| storage("truncating the event log", e))?;
    let mut batch = sled::Batch::default();
    for k in inner.checkpoints.range(key(from)..).keys() {
        batch.remove(k.map_err(|e| storage("listing checkpoints to truncate", e))?);
    }
    inner
        .checkpoints
        .apply_batch(batch)
        .map_err(|e| storage("truncating checkpoints", e))?;
    inner.refresh_head()?;
    if removed > 0 {
        tracing::warn!(
            after = seq,
            removed,
            path = %inner.path.display(),
            "event log truncated: {why}"
        );
    }
    Ok(removed)
}

/// Replaces every record by `anchor` and every checkpoint by `snapshot` at its sequence (not
/// yet durably: flush afterwards). The checkpoint is written first, so that a crash in between
/// leaves a log whose checkpoint is ahead of its records, which replication resets again,
/// never records without the state they continue. Returns how many records were removed.
pub(crate) fn start_from(
    inner: &Inner,
    a: anchor::Anchor,
    snapshot: &[u8],
) -> Result<u64, LogError> {
    if let Some(e) = inner.poisoned_error() {
        return Err(e);
    }
    let mut batch = sled::Batch::default();
    for k in inner.checkpoints.iter().keys() {
        batch.remove(k.map_err(|e| storage("listing checkpoints", e))?);
    }
    batch.insert(&key(a.seq), checkpoint_frame(snapshot));
    inner
        .checkpoints
        .apply_batch(batch)
        .map_err(|e| storage("writing the checkpoint the log starts from", e))?;
    let mut removed = 0u64;
    let mut batch = sled::Batch::default();
    for k in inner.events.iter().keys() {
        batch.remove(k.map_err(|e| storage("listing events to replace", e))?);
        removed += 1;
    }
    batch.insert(&key(a.seq), anchor::encode(&a));
    inner
        .events
        .apply_batch(batch)
        .map_err(|e| storage("starting the event log from a checkpoint", e))?;
    inner.refresh_head()?;
    Ok(removed)
}

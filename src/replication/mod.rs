//! Optional replication of the event log through etcd, for high availability: the only module
//! that talks to etcd (through [`etcd::Etcd`], a client for its JSON gateway).
//!
//! Instances sharing a prefix elect a leader: the holder of `<prefix>/leader`, a key bound to
//! the holder's etcd lease. Only the leader appends. Each batch it commits locally is written
//! to etcd as one or more chunks `<prefix>/log/<first sequence, 20 digits>` (the records'
//! frames, each behind a 4-byte big-endian length) in a transaction fenced by the leadership:
//! it holds only if the leader key still has the create revision it had when this instance
//! won, and only if the chunk's key is new. The batch is acked after both the local flush and
//! that transaction (the log's [`Replicator`] hook), so an acknowledged event is in etcd.
//!
//! Standbys copy the chunks into their own log verbatim (same sequences, ids and chain,
//! checked record by record) and apply them to their projection, so they are warm when the
//! leader's lease expires and one of them wins. A winner first copies whatever is left, then
//! uploads what its own log holds beyond etcd (records it committed locally whose replication
//! was never confirmed, so never acked), and only then starts writing. A log that contradicts
//! etcd (a former leader's unacknowledged tail) is cut back to the last record they share.
//!
//! etcd's history is bounded (`checkpoint`): every `checkpoint_every` records the leader
//! stores its state in etcd, deletes the chunks the previous checkpoint covered and compacts
//! etcd. A standby whose next record etcd no longer holds starts its log from the checkpoint
//! ([`ReplicationError::BehindCheckpoint`], [`crate::log::Anchor`]).
//!
//! A leader that cannot renew its lease within its TTL, or whose transaction is fenced out,
//! stops writing for good (the log is poisoned) and reports it through [`Node::lost`]; `storch
//! serve` then exits so that its restart rejoins as a standby.

mod checkpoint;
pub mod etcd;

pub use checkpoint::{Checkpoint, Pointer};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::log::{
    Envelope, EventLog, LogError, ReplicateFuture, Replicator, frame_hash, frame_seq,
};
use etcd::{Compare, Etcd, EtcdError, Op, prefix_end};

/// A chunk holds at most this many bytes of frames, so that a transaction of
/// [`CHUNKS_PER_TXN`] stays under etcd's 1.5 MiB request limit and a read of
/// [`CHUNKS_PER_READ`] under the gateway's 4 MiB answer limit.
const CHUNK_BYTES: usize = 64 * 1024;
/// Chunks per transaction (etcd allows 128 operations per transaction by default).
const CHUNKS_PER_TXN: usize = 16;
/// Chunks read per range while following.
const CHUNKS_PER_READ: i64 = 32;

/// Records between two checkpoints in etcd, unless `--etcd-checkpoint-every` says otherwise.
pub const DEFAULT_CHECKPOINT_EVERY: u64 = 10_000;

/// How to reach etcd and how to behave there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationOptions {
    pub endpoints: Vec<String>,
    /// Key prefix shared by the instances of one storch cluster, e.g. `/storch`.
    pub prefix: String,
    /// TTL of the leader's lease: how long a dead leader blocks a takeover.
    pub lease_ttl: Duration,
    /// This instance's name, written into the leader key.
    pub identity: String,
    /// The leader stores a checkpoint in etcd (and deletes the records the previous one
    /// covered) every this many records.
    pub checkpoint_every: u64,
}

impl ReplicationOptions {
    /// Checks every field; errors name the flag.
    pub fn validate(&self) -> Result<(), String> {
        etcd::parse_endpoints(&self.endpoints).map_err(|e| format!("--etcd-endpoints: {e}"))?;
        if self.lease_ttl < Duration::from_secs(2) {
            return Err(format!(
                "--etcd-lease-ttl must be at least 2s (got {})",
                humantime::format_duration(self.lease_ttl)
            ));
        }
        if !self.prefix.starts_with('/') || self.prefix.trim_end_matches('/').is_empty() {
            return Err(format!(
                "--etcd-prefix must start with `/` and name something (got `{}`)",
                self.prefix
            ));
        }
        if self.identity.trim().is_empty() {
            return Err("--etcd-identity must not be empty".into());
        }
        if self.checkpoint_every == 0 {
            return Err("--etcd-checkpoint-every must be at least 1".into());
        }
        Ok(())
    }
}

/// Why following or leading failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicationError {
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    /// The local log contradicts etcd after sequence `keep`, the last record both hold.
    #[error("the local event log differs from etcd's after sequence {keep}")]
    Diverged { keep: u64 },
    #[error("{0}")]
    Log(String),
    /// The local log's disk is below its reserve of free space: nothing was written, and the
    /// same pull succeeds once space is freed.
    #[error("{0}")]
    DiskFull(String),
    /// etcd no longer holds the records after the local log's head (or contradicts it where
    /// it could only be checked against the checkpoint at `seq`): start from that checkpoint.
    #[error("etcd's history starts from its checkpoint at sequence {seq}, after this log")]
    BehindCheckpoint { seq: u64 },
    /// etcd holds something that is not a chunk of records.
    #[error("etcd holds a malformed record chunk at {key}: {reason}")]
    Malformed { key: String, reason: String },
}

impl From<LogError> for ReplicationError {
    fn from(e: LogError) -> Self {
        if let LogError::DiskFull { .. } = e {
            return ReplicationError::DiskFull(e.to_string());
        }
        ReplicationError::Log(e.to_string())
    }
}

/// What one [`Node::pull`] did.
#[derive(Debug, Default)]
pub struct Pull {
    /// Records copied into the local log, to apply.
    pub appended: Vec<Envelope>,
    /// etcd holds more than was copied: pull again.
    pub more: bool,
    /// The local log holds records beyond etcd's last one (and agrees with etcd up to it).
    pub local_ahead: bool,
}

/// The keys of one storch cluster.
#[derive(Debug, Clone)]
struct Keys {
    /// Every key of the cluster starts with this.
    all: Vec<u8>,
    leader: Vec<u8>,
    log: Vec<u8>,
    /// The leader's newest checkpoint: what it covers and where its parts are.
    checkpoint: Vec<u8>,
    parts: Vec<u8>,
}

impl Keys {
    fn new(prefix: &str) -> Keys {
        let p = prefix.trim_end_matches('/');
        Keys {
            all: format!("{p}/").into_bytes(),
            leader: format!("{p}/leader").into_bytes(),
            log: format!("{p}/log/").into_bytes(),
            checkpoint: format!("{p}/checkpoint").into_bytes(),
            parts: format!("{p}/checkpoint-parts/").into_bytes(),
        }
    }

    fn chunk(&self, first_seq: u64) -> Vec<u8> {
        let mut k = self.log.clone();
        k.extend_from_slice(format!("{first_seq:020}").as_bytes());
        k
    }
}

/// Whether the local record `seq` is the one `frame` holds (same hash; the log's own record,
/// or the checkpoint it starts from).
fn same_record(log: &EventLog, seq: u64, frame: &[u8]) -> bool {
    frame_hash(frame).is_some_and(|h| log.hash_at(seq) == Some(h))
}

/// Packs frames into one chunk value.
fn pack(frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frames.iter().map(|f| f.len() + 4).sum());
    for f in frames {
        out.extend_from_slice(&(f.len() as u32).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// Splits a chunk value into its frames.
fn unpack(value: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        if rest.len() < 4 {
            return Err(format!("{} stray bytes at the end", rest.len()));
        }
        let n = u32::from_be_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        if rest.len() - 4 < n {
            return Err(format!("a frame of {n} bytes is cut short"));
        }
        out.push(&rest[4..4 + n]);
        rest = &rest[4 + n..];
    }
    if out.is_empty() {
        return Err("the chunk is empty".into());
    }
    Ok(out)
}

/// Groups frames into chunks of at most [`CHUNK_BYTES`] (a larger frame is a chunk of its own).
fn chunks<'a>(frames: &'a [&'a [u8]]) -> Vec<&'a [&'a [u8]]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut size = 0;
    for (i, f) in frames.iter().enumerate() {
        if i > start && size + f.len() + 4 > CHUNK_BYTES {
            out.push(&frames[start..i]);
            start = i;
            size = 0;
        }
        size += f.len() + 4;
    }
    if start < frames.len() {
        out.push(&frames[start..]);
    }
    out
}

/// The leadership this instance holds.
#[derive(Debug)]
struct Leadership {
    /// Create revision of our leader key: the fence of every write.
    revision: i64,
}

#[derive(Debug)]
struct Lease {
    id: i64,
    /// Until when the lease is surely alive: the send time of the last renewal etcd
    /// confirmed, plus the TTL it granted.
    valid_until: Instant,
}

/// This instance's membership of a replicated storch cluster.
#[derive(Debug)]
pub struct Node {
    etcd: Etcd,
    opts: ReplicationOptions,
    keys: Keys,
    lease: Mutex<Option<Lease>>,
    leadership: Mutex<Option<Leadership>>,
    /// Highest local sequence known to match etcd.
    verified: Mutex<u64>,
    /// The newest etcd revision a pull read at.
    seen: Mutex<i64>,
    lost: watch::Sender<Option<String>>,
    stopped: std::sync::atomic::AtomicBool,
}

impl Node {
    /// Checks the options and builds the client (nothing is sent yet).
    pub fn new(opts: ReplicationOptions) -> Result<Arc<Node>, String> {
        opts.validate()?;
        let etcd = Etcd::new(&opts.endpoints)?;
        Ok(Arc::new(Node {
            etcd,
            keys: Keys::new(&opts.prefix),
            opts,
            lease: Mutex::new(None),
            leadership: Mutex::new(None),
            verified: Mutex::new(0),
            seen: Mutex::new(0),
            lost: watch::channel(None).0,
            stopped: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    pub fn identity(&self) -> &str {
        &self.opts.identity
    }

    pub fn lease_ttl(&self) -> Duration {
        self.opts.lease_ttl
    }

    pub fn checkpoint_every(&self) -> u64 {
        self.opts.checkpoint_every
    }

    /// Forgets which local records were checked against etcd (after the log was replaced).
    pub fn reset_verified(&self) {
        *self.verified.lock().unwrap_or_else(|e| e.into_inner()) = 0;
    }

    /// The create revision of our leader key, while we lead: the fence of every write.
    fn fence(&self) -> Option<i64> {
        self.leadership
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|l| l.revision)
    }

    pub fn endpoints(&self) -> &[String] {
        self.etcd.endpoints()
    }

    /// Resolves with the reason once this instance, as leader, has lost its leadership.
    pub fn lost(&self) -> watch::Receiver<Option<String>> {
        self.lost.subscribe()
    }

    pub fn is_leader(&self) -> bool {
        self.leadership
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn lose(&self, reason: String) {
        let was_leader = self
            .leadership
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .is_some();
        if was_leader {
            tracing::error!(%reason, "lost the etcd leadership; writes stop here");
            self.lost.send_replace(Some(reason));
        }
    }

    fn ttl_secs(&self) -> i64 {
        self.opts.lease_ttl.as_secs().max(2) as i64
    }

    /// The current lease, granting a new one when there is none or it has expired.
    async fn lease(&self) -> Result<i64, EtcdError> {
        if let Some(l) = &*self.lease.lock().unwrap_or_else(|e| e.into_inner())
            && Instant::now() < l.valid_until
        {
            return Ok(l.id);
        }
        let sent = Instant::now();
        let id = self.etcd.grant(self.ttl_secs()).await?;
        *self.lease.lock().unwrap_or_else(|e| e.into_inner()) = Some(Lease {
            id,
            valid_until: sent + self.opts.lease_ttl,
        });
        Ok(id)
    }

    /// Renews the lease every third of its TTL until the process ends. A leader whose lease
    /// cannot be confirmed alive any more loses its leadership.
    pub async fn keep_alive(self: Arc<Self>) {
        let period = self.opts.lease_ttl / 3;
        let mut pause = period;
        loop {
            tokio::time::sleep(pause).await;
            pause = period;
            if self.stopped.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            let current = self
                .lease
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|l| (l.id, l.valid_until));
            let Some((id, valid_until)) = current else {
                continue;
            };
            let sent = Instant::now();
            // No answer by the time the lease may have expired counts as no renewal: a leader
            // must stop before a standby can take over, not when a request times out.
            let answer = tokio::time::timeout_at(
                tokio::time::Instant::from_std(valid_until.max(sent)),
                self.etcd.keepalive(id),
            )
            .await;
            match answer {
                Ok(Ok(ttl)) if ttl > 0 => {
                    let mut lease = self.lease.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(l) = lease.as_mut().filter(|l| l.id == id) {
                        l.valid_until = sent + Duration::from_secs(ttl as u64);
                    }
                }
                Ok(Ok(_)) => {
                    self.lease.lock().unwrap_or_else(|e| e.into_inner()).take();
                    self.lose("the etcd lease expired".into());
                }
                Ok(Err(e)) if Instant::now() < valid_until => {
                    tracing::warn!(error = %e, "etcd lease renewal failed; retrying");
                    pause = Duration::from_millis(250).min(period);
                }
                failed => {
                    self.lease.lock().unwrap_or_else(|e| e.into_inner()).take();
                    let why = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => "no answer from etcd".to_string(),
                    };
                    self.lose(format!(
                        "the etcd lease could not be renewed within its TTL: {why}"
                    ));
                }
            }
        }
    }

    /// Tries once to become the leader. `Ok(Err(holder))` names the current leader.
    pub async fn try_lead(&self) -> Result<Result<(), String>, EtcdError> {
        if self.is_leader() {
            return Ok(Ok(()));
        }
        let lease = self.lease().await?;
        let r = self
            .etcd
            .txn(
                &[Compare::CreateRevision(self.keys.leader.clone(), 0)],
                &[Op::Put {
                    key: self.keys.leader.clone(),
                    value: self.opts.identity.clone().into_bytes(),
                    lease: Some(lease),
                }],
                &[Op::Get(self.keys.leader.clone())],
            )
            .await?;
        if r.succeeded {
            *self.leadership.lock().unwrap_or_else(|e| e.into_inner()) = Some(Leadership {
                revision: r.revision,
            });
            tracing::info!(identity = %self.opts.identity, revision = r.revision, "won the etcd leadership");
            return Ok(Ok(()));
        }
        let holder = r
            .responses
            .first()
            .map(Etcd::txn_kvs)
            .transpose()?
            .and_then(|kvs| kvs.into_iter().next())
            .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
            .unwrap_or_else(|| "unknown".into());
        Ok(Err(holder))
    }

    /// Stops renewing and resigns: the end of this instance's membership (a clean stop).
    pub async fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.resign().await;
    }

    /// The current leader's identity, if any instance leads.
    pub async fn leader(&self) -> Result<Option<String>, EtcdError> {
        Ok(self
            .etcd
            .get(&self.keys.leader)
            .await?
            .map(|kv| String::from_utf8_lossy(&kv.value).into_owned()))
    }

    /// Gives the leadership up because this instance can no longer write (its log failed):
    /// reported through [`Node::lost`] like a lost lease, then the lease is revoked so a
    /// standby takes over at once.
    pub async fn step_down(&self, reason: String) {
        self.lose(reason);
        self.resign().await;
    }

    /// Gives up the leadership and the lease (a standby takes over at once).
    pub async fn resign(&self) {
        self.leadership
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let lease = self.lease.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(l) = lease
            && let Err(e) = self.etcd.revoke(l.id).await
        {
            tracing::warn!(error = %e, "could not revoke the etcd lease");
        }
    }

    /// Copies into `log` what etcd holds beyond it (up to a few reads' worth; call again
    /// while it returns records). Fails with [`ReplicationError::Diverged`] when the local log
    /// contradicts etcd, naming the last record both share.
    pub async fn pull(&self, log: &EventLog) -> Result<Pull, ReplicationError> {
        let mut out = Pull::default();
        let head = log.head().0;
        let verified = *self.verified.lock().unwrap_or_else(|e| e.into_inner());
        if head > 0 && verified != head {
            // Our head against etcd: the same record, a different one, or one etcd lacks.
            match self.chunk_at_or_before(head).await? {
                None => {
                    // etcd holds no record up to our head: none yet (we are ahead), or its
                    // history up to a checkpoint was deleted.
                    match self.checkpoint_pointer().await? {
                        None => {
                            out.local_ahead = true;
                            return Ok(out);
                        }
                        Some(p) if head < p.anchor.seq => {
                            return Err(ReplicationError::BehindCheckpoint { seq: p.anchor.seq });
                        }
                        Some(p) => {
                            if log.hash_at(p.anchor.seq) != Some(p.anchor.hash) {
                                return Err(ReplicationError::BehindCheckpoint {
                                    seq: p.anchor.seq,
                                });
                            }
                            if head > p.anchor.seq {
                                out.local_ahead = true;
                                return Ok(out);
                            }
                        }
                    }
                }
                Some((key, value)) => {
                    let frames = self.frames_of(&key, &value)?;
                    let mut fresh = Vec::new();
                    let mut matched = false;
                    let mut last: (u64, &[u8]) = (0, &[]);
                    for (seq, f) in frames {
                        last = (seq, f);
                        if seq == head {
                            if !same_record(log, seq, f) {
                                return Err(self.diverged(log, head).await?);
                            }
                            matched = true;
                        } else if seq > head {
                            fresh.push(f);
                        }
                    }
                    if !matched {
                        // etcd ends at `last` < head: we are ahead if we agree there.
                        if !same_record(log, last.0, last.1) {
                            return Err(self.diverged(log, head).await?);
                        }
                        out.local_ahead = true;
                        return Ok(out);
                    }
                    if !fresh.is_empty() {
                        out.appended.extend(self.append(log, &fresh, &key).await?);
                    }
                }
            }
        }
        let from = self.keys.chunk(log.head().0 + 1);
        let end = prefix_end(&self.keys.log);
        let r = self.etcd.range(&from, &end, CHUNKS_PER_READ, false).await?;
        for kv in &r.kvs {
            let frames: Vec<&[u8]> = self
                .frames_of(&kv.key, &kv.value)?
                .into_iter()
                .map(|(_, f)| f)
                .collect();
            let local = log.head().0;
            let first = frame_seq(frames[0]).unwrap_or(0);
            if first > local + 1
                && let Some(p) = self.checkpoint_pointer().await?
                && p.anchor.seq > local
            {
                // The records in between were deleted behind a checkpoint.
                return Err(ReplicationError::BehindCheckpoint { seq: p.anchor.seq });
            }
            if first != local + 1 {
                // A chunk that does not start where we end: we hold records etcd does not.
                return Err(self.diverged(log, local).await?);
            }
            out.appended
                .extend(self.append(log, &frames, &kv.key).await?);
        }
        if r.kvs.is_empty()
            && log.head().0 == 0
            && let Some(p) = self.checkpoint_pointer().await?
        {
            // An empty log, and etcd holds nothing after its checkpoint.
            return Err(ReplicationError::BehindCheckpoint { seq: p.anchor.seq });
        }
        out.more = r.more;
        self.saw(r.revision);
        *self.verified.lock().unwrap_or_else(|e| e.into_inner()) = log.head().0;
        Ok(out)
    }

    /// Records the revision a pull read at, for [`Node::wait`].
    fn saw(&self, revision: i64) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        *seen = (*seen).max(revision);
    }

    /// The chunk with the highest first sequence at or before `seq`.
    async fn chunk_at_or_before(&self, seq: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>, EtcdError> {
        let r = self
            .etcd
            .range(&self.keys.log, &self.keys.chunk(seq + 1), 1, true)
            .await?;
        self.saw(r.revision);
        Ok(r.kvs.into_iter().next().map(|kv| (kv.key, kv.value)))
    }

    /// A chunk's frames with their sequences.
    fn frames_of<'v>(
        &self,
        key: &[u8],
        value: &'v [u8],
    ) -> Result<Vec<(u64, &'v [u8])>, ReplicationError> {
        let frames = unpack(value).map_err(|reason| self.malformed(key, reason))?;
        frames
            .into_iter()
            .map(|f| {
                frame_seq(f)
                    .map(|seq| (seq, f))
                    .ok_or_else(|| self.malformed(key, "a frame without a sequence".into()))
            })
            .collect()
    }

    /// The divergence error for a local log that disagrees with etcd at or before `from`:
    /// finds the last record both hold. Records are chained by hash, so the highest sequence
    /// where the two agree is where they part.
    async fn diverged(
        &self,
        log: &EventLog,
        from: u64,
    ) -> Result<ReplicationError, ReplicationError> {
        // Whatever is cut back must be checked against etcd again.
        *self.verified.lock().unwrap_or_else(|e| e.into_inner()) = u64::MAX;
        let mut upto = from;
        while upto > 0 {
            let Some((key, value)) = self.chunk_at_or_before(upto).await? else {
                break;
            };
            let frames = self.frames_of(&key, &value)?;
            for (seq, f) in frames.iter().rev() {
                if *seq <= upto && same_record(log, *seq, f) {
                    return Ok(ReplicationError::Diverged { keep: *seq });
                }
            }
            upto = frames[0].0.saturating_sub(1);
        }
        // No record etcd still holds is ours: unless etcd's history starts at sequence 1,
        // only its checkpoint can say where we part.
        if let Some(p) = self.checkpoint_pointer().await? {
            if log.hash_at(p.anchor.seq) == Some(p.anchor.hash) && p.anchor.seq <= from {
                return Ok(ReplicationError::Diverged { keep: p.anchor.seq });
            }
            return Ok(ReplicationError::BehindCheckpoint { seq: p.anchor.seq });
        }
        Ok(ReplicationError::Diverged { keep: 0 })
    }

    async fn append(
        &self,
        log: &EventLog,
        frames: &[&[u8]],
        key: &[u8],
    ) -> Result<Vec<Envelope>, ReplicationError> {
        log.append_replicated(frames).await.map_err(|e| match e {
            LogError::Corrupt { seq, reason } => ReplicationError::Malformed {
                key: String::from_utf8_lossy(key).into_owned(),
                reason: format!("sequence {seq}: {reason}"),
            },
            other => other.into(),
        })
    }

    fn malformed(&self, key: &[u8], reason: String) -> ReplicationError {
        ReplicationError::Malformed {
            key: String::from_utf8_lossy(key).into_owned(),
            reason,
        }
    }

    /// As the new leader, after a [`Node::pull`] that reported `local_ahead`: writes to etcd
    /// what the local log holds beyond it.
    pub async fn upload(&self, log: &EventLog) -> Result<u64, ReplicationError> {
        let first = self.etcd_head().await? + 1;
        let mut next = first;
        loop {
            let frames = log.frames_from(next, 1024)?;
            if frames.is_empty() {
                *self.verified.lock().unwrap_or_else(|e| e.into_inner()) = log.head().0;
                return Ok(next - first);
            }
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            self.replicate_frames(next, &refs)
                .await
                .map_err(ReplicationError::Log)?;
            next += refs.len() as u64;
        }
    }

    /// Deletes every key of this storch cluster from etcd (benchmarks clean up with it).
    pub async fn remove_all(&self) -> Result<i64, EtcdError> {
        let all = &self.keys.all;
        self.etcd.delete_range(all, &prefix_end(all)).await
    }

    /// Waits until something under the prefix changes after the revision the last
    /// [`Node::pull`] read at (so that nothing committed since is missed), or `timeout` passes.
    pub async fn wait(&self, timeout: Duration) {
        let seen = *self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let all = &self.keys.all;
        if self
            .etcd
            .wait_for_change(all, &prefix_end(all), seen, timeout)
            .await
            .is_err()
        {
            tokio::time::sleep(timeout.min(Duration::from_millis(500))).await;
        }
    }

    /// Writes frames `first_seq..` to etcd, fenced by the leadership, retrying transport
    /// failures while the lease is surely alive.
    async fn replicate_frames(&self, first_seq: u64, frames: &[&[u8]]) -> Result<(), String> {
        let Some(fence) = self.fence() else {
            return Err("this instance is not the leader".into());
        };
        let all = chunks(frames);
        let mut seq = first_seq;
        for group in all.chunks(CHUNKS_PER_TXN) {
            let mut compare = vec![Compare::CreateRevision(self.keys.leader.clone(), fence)];
            let mut puts = Vec::new();
            let first_key = self.keys.chunk(seq);
            for c in group {
                let key = self.keys.chunk(seq);
                compare.push(Compare::CreateRevision(key.clone(), 0));
                puts.push(Op::Put {
                    key,
                    value: pack(c),
                    lease: None,
                });
                seq += c.len() as u64;
            }
            self.commit_fenced(&compare, &puts, &first_key).await?;
        }
        Ok(())
    }

    /// One fenced transaction of `puts` (the first a put of `first_key`), retried while the
    /// lease is surely alive; returns the revision it committed at.
    async fn commit_fenced(
        &self,
        compare: &[Compare],
        puts: &[Op],
        first_key: &[u8],
    ) -> Result<i64, String> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let valid_until = self
                .lease
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|l| l.valid_until);
            if valid_until.is_none_or(|t| Instant::now() >= t) {
                let why = "the leader's etcd lease is no longer surely alive".to_string();
                self.lose(why.clone());
                return Err(why);
            }
            let started = Instant::now();
            match self
                .etcd
                .txn(compare, puts, &[Op::Get(self.keys.leader.clone())])
                .await
            {
                Ok(r) if r.succeeded => {
                    metrics::counter!("storch_replication_txns_total").increment(1);
                    metrics::histogram!("storch_replication_txn_seconds")
                        .record(started.elapsed().as_secs_f64());
                    return Ok(r.revision);
                }
                Ok(_) => {
                    // Either an earlier attempt of ours went through (its answer was lost) or
                    // another instance leads now.
                    let ours = match &puts[0] {
                        Op::Put { value, .. } => value,
                        _ => unreachable!("a fenced write starts with a put"),
                    };
                    match self.etcd.get(first_key).await {
                        Ok(Some(kv)) if &kv.value == ours => return Ok(kv.mod_revision),
                        Ok(_) => {
                            let why = "fenced out: another instance holds the etcd leadership \
                                       or wrote these sequences"
                                .to_string();
                            self.lose(why.clone());
                            return Err(why);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "etcd read after a refused write failed; retrying")
                        }
                    }
                }
                Err(EtcdError::Unreachable(e)) => {
                    tracing::warn!(error = %e, "replicating to etcd failed; retrying");
                }
                Err(e @ EtcdError::Refused(_)) => {
                    let why = e.to_string();
                    self.lose(why.clone());
                    return Err(why);
                }
            }
            let pause = crate::net::backoff(
                attempt,
                Duration::from_millis(20),
                Duration::from_millis(500),
            );
            tokio::time::sleep(pause).await;
        }
    }
}

/// The log's replication hook, backed by this node's leadership.
#[derive(Debug, Clone)]
pub struct EtcdReplicator(pub Arc<Node>);

impl Replicator for EtcdReplicator {
    fn replicate<'a>(&'a self, first_seq: u64, frames: &'a [&'a [u8]]) -> ReplicateFuture<'a> {
        Box::pin(self.0.replicate_frames(first_seq, frames))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_pack_and_unpack() {
        let a = vec![1u8; 10];
        let b = vec![2u8; 3];
        let frames: Vec<&[u8]> = vec![&a, &b];
        let packed = pack(&frames);
        assert_eq!(unpack(&packed).unwrap(), frames);
        assert!(
            unpack(&packed[..packed.len() - 1])
                .unwrap_err()
                .contains("cut short")
        );
        assert!(unpack(&[]).is_err());
        assert!(unpack(&[0, 0]).unwrap_err().contains("stray"));
    }

    #[test]
    fn frames_are_grouped_by_size() {
        let big = vec![0u8; CHUNK_BYTES];
        let small = vec![0u8; 100];
        let frames: Vec<&[u8]> = vec![&small, &small, &big, &small];
        let groups = chunks(&frames);
        assert_eq!(
            groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
            vec![2, 1, 1]
        );
        assert_eq!(groups.concat(), frames);
    }

    #[test]
    fn chunk_keys_sort_by_sequence() {
        let k = Keys::new("/storch/");
        assert_eq!(k.leader, b"/storch/leader");
        assert!(k.chunk(9) < k.chunk(10));
        assert_eq!(k.chunk(1), b"/storch/log/00000000000000000001");
    }
}

//! The group-commit writer: one task owns sequence assignment and the chain head.
//!
//! It takes one request, drains whatever else is already queued (up to
//! [`MAX_BATCH_EVENTS`]), writes the lot as one sled batch and flushes once (for
//! [`Durability::Flush`]). A second task, the applier, then hands the envelopes to the sink and
//! acks every caller, in commit order, while the writer already writes and flushes the next
//! batch: applying a batch to the projection never delays the next fsync. With a
//! [`Replicator`], the applier first has the batches replicated (every batch that queued during
//! the previous round trip, in one call), so a batch is acked only once it is durable both here
//! and on the replica, and the replica's round trip overlaps the next local flushes. A failed write, flush or replication poisons the log for good.
//! A batch that finds less than the reserve free on the log's disk (`space`) is refused before
//! sled sees it; while the disk is short the writer looks again every `space::RECHECK`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{mpsc, oneshot};

use super::store::{Inner, key};
use super::{CommitSink, Durability, Envelope, LogError, NewEvent, Replicator, codec, space};

/// A batch stops growing once it holds this many events (a single larger `append` still goes
/// through whole, as its own batch).
pub(crate) const MAX_BATCH_EVENTS: usize = 4096;
/// Requests that may wait for the writer before `append` applies backpressure.
pub(crate) const QUEUE_CAPACITY: usize = 4096;

pub(crate) struct Request {
    pub request_id: String,
    pub events: Vec<NewEvent>,
    pub reply: oneshot::Sender<Result<Vec<u64>, LogError>>,
}

/// A durable batch on its way to the sink and its callers.
struct Durable {
    first_seq: u64,
    envelopes: Vec<Envelope>,
    /// The stored frames, kept only when a replicator needs them.
    frames: Vec<sled::IVec>,
    requests: Vec<Request>,
    counts: Vec<usize>,
}

impl Durable {
    fn apply(self, sink: &dyn CommitSink) {
        sink.committed(&self.envelopes);
        let mut next = self.first_seq;
        for (req, n) in self.requests.into_iter().zip(self.counts) {
            let seqs = (next..next + n as u64).collect();
            next += n as u64;
            // A caller that went away still had its events committed.
            let _ = req.reply.send(Ok(seqs));
        }
    }

    fn refuse(self, err: impl Fn() -> LogError) {
        for r in self.requests {
            let _ = r.reply.send(Err(err()));
        }
    }
}

/// Has the durable batches replicated, in one go, then applies them in order; a failed
/// replication poisons the log and refuses them all.
async fn replicate_and_apply(
    batches: Vec<Durable>,
    inner: &Inner,
    sink: &dyn CommitSink,
    replicator: &dyn Replicator,
) {
    let refuse_all = |batches: Vec<Durable>, reason: String| {
        for b in batches {
            b.refuse(|| LogError::Poisoned(reason.clone()));
        }
    };
    if let Some(reason) = inner.poisoned().map(str::to_string) {
        return refuse_all(batches, reason);
    }
    let first_seq = batches[0].first_seq;
    let frames: Vec<&[u8]> = batches
        .iter()
        .flat_map(|b| b.frames.iter().map(|f| &f[..]))
        .collect();
    if let Err(why) = replicator.replicate(first_seq, &frames).await {
        let last = first_seq + frames.len() as u64 - 1;
        let reason = inner.poison(format!(
            "replicating sequences {first_seq}..={last} failed: {why}"
        ));
        tracing::error!(%reason, "replication failed; the log is now poisoned");
        drop(frames);
        return refuse_all(batches, reason);
    }
    drop(frames);
    for b in batches {
        b.apply(sink);
    }
}

/// Batches written ahead of the applier (backpressure beyond that).
const APPLY_AHEAD: usize = 2;
/// With a replicator: the writer keeps flushing while a replication round trip is under way,
/// and the applier replicates every batch that queued meanwhile in one go.
const REPLICATE_AHEAD: usize = 32;

struct Writer {
    inner: Arc<Inner>,
    applier: mpsc::Sender<Durable>,
    keep_frames: bool,
    frames: Vec<sled::IVec>,
    head_seq: u64,
    head_hash: [u8; 32],
    last_time_ms: u64,
    tail_error: Option<(u64, String)>,
    // Reused between batches.
    requests: Vec<Request>,
    counts: Vec<usize>,
    envelopes: Vec<Envelope>,
}

pub(crate) async fn run(
    inner: Arc<Inner>,
    sink: Arc<dyn CommitSink>,
    replicator: Option<Arc<dyn Replicator>>,
    mut rx: mpsc::Receiver<Request>,
) {
    let head = inner.head().clone();
    let keep_frames = replicator.is_some();
    let ahead = if keep_frames {
        REPLICATE_AHEAD
    } else {
        APPLY_AHEAD
    };
    let (applier, mut durable) = mpsc::channel::<Durable>(ahead);
    let applier_inner = inner.clone();
    let applying = tokio::spawn(async move {
        while let Some(batch) = durable.recv().await {
            let Some(replicator) = replicator.as_deref() else {
                batch.apply(&*sink);
                continue;
            };
            let mut batches = vec![batch];
            while let Ok(more) = durable.try_recv() {
                batches.push(more);
            }
            replicate_and_apply(batches, &applier_inner, &*sink, replicator).await;
        }
    });
    let mut w = Writer {
        inner,
        applier,
        keep_frames,
        frames: Vec::new(),
        head_seq: head.seq,
        head_hash: head.hash,
        last_time_ms: head.time_ms,
        tail_error: head.tail_error,
        requests: Vec::new(),
        counts: Vec::new(),
        envelopes: Vec::new(),
    };
    // A disk already short at start shows at once (readiness, the gauge) and is watched.
    w.inner.check_space();
    let mut carry: Option<Request> = None;
    loop {
        let first = match carry.take() {
            Some(r) => r,
            None => {
                let next = if w.inner.disk_short().is_some() {
                    // Below the reserve: look at the disk again while nothing comes, so that
                    // writes and readiness come back once space is freed.
                    match tokio::time::timeout(space::RECHECK, rx.recv()).await {
                        Ok(next) => next,
                        Err(_) => {
                            w.inner.check_space();
                            continue;
                        }
                    }
                } else {
                    rx.recv().await
                };
                match next {
                    Some(r) => r,
                    // Every Appender is gone and the queue is empty.
                    None => break,
                }
            }
        };
        let mut events = first.events.len();
        w.requests.push(first);
        while events < MAX_BATCH_EVENTS {
            match rx.try_recv() {
                Ok(r) if events + r.events.len() > MAX_BATCH_EVENTS => {
                    carry = Some(r);
                    break;
                }
                Ok(r) => {
                    events += r.events.len();
                    w.requests.push(r);
                }
                Err(_) => break,
            }
        }
        w.commit(events).await;
    }
    let head = w.head_seq;
    drop(w);
    // Every durable batch reaches the sink and its callers before the writer is done.
    let _ = applying.await;
    tracing::debug!(head, "event log writer stopped");
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Writer {
    fn fail_all(&mut self, err: impl Fn() -> LogError) {
        for r in self.requests.drain(..) {
            let _ = r.reply.send(Err(err()));
        }
    }

    async fn commit(&mut self, events: usize) {
        if let Some(reason) = self.inner.poisoned().map(str::to_string) {
            self.fail_all(|| LogError::Poisoned(reason.clone()));
            return;
        }
        if let Some(shortfall) = self.inner.shortfall() {
            let reason = format!(
                "{}; appends are refused until the operator accepts the shorter log",
                shortfall.error()
            );
            self.fail_all(|| LogError::Missing {
                head: shortfall.head,
                acked: shortfall.acked,
                reason: reason.clone(),
            });
            return;
        }
        if let Some((seq, reason)) = self.tail_error.clone() {
            self.fail_all(|| LogError::Corrupt {
                seq,
                reason: format!(
                    "{reason}; appends are refused until the corrupt tail is truncated"
                ),
            });
            return;
        }
        // Below the reserve of free space the batch never reaches sled, which would fail
        // every later write after one that met a full disk.
        if let Some(short) = self.inner.check_space() {
            self.fail_all(|| short.error());
            return;
        }

        let time_ms = now_ms().max(self.last_time_ms);
        let first_seq = self.head_seq + 1;
        let mut seq = self.head_seq;
        let mut prev = self.head_hash;
        let mut batch = sled::Batch::default();
        self.envelopes.clear();
        self.envelopes.reserve(events);
        self.counts.clear();
        self.frames.clear();
        for req in &mut self.requests {
            self.counts.push(req.events.len());
            for ev in req.events.drain(..) {
                seq += 1;
                let mut env = Envelope {
                    seq,
                    time_ms,
                    id: uuid::Uuid::now_v7(),
                    request_id: req.request_id.clone(),
                    schema: ev.schema,
                    kind: ev.kind,
                    stream: ev.stream,
                    payload: ev.payload,
                    hash: [0; 32],
                };
                env.hash = env.compute_hash(&prev);
                let frame = sled::IVec::from(codec::encode(&env, &prev));
                if self.keep_frames {
                    self.frames.push(frame.clone());
                }
                batch.insert(&key(seq), frame);
                prev = env.hash;
                self.envelopes.push(env);
            }
        }

        if let Err(reason) = self.write(batch, (seq, prev)).await {
            let reason = self.inner.poison(format!(
                "committing sequences {first_seq}..={seq} failed: {reason}"
            ));
            tracing::error!(%reason, "event log write failed; the log is now poisoned");
            self.envelopes.clear();
            self.frames.clear();
            self.fail_all(|| LogError::Poisoned(reason.clone()));
            return;
        }

        self.head_seq = seq;
        self.head_hash = prev;
        self.last_time_ms = time_ms;
        {
            let mut head = self.inner.head();
            head.seq = seq;
            head.hash = prev;
            head.time_ms = time_ms;
        }
        let durable = Durable {
            first_seq,
            envelopes: std::mem::take(&mut self.envelopes),
            frames: std::mem::take(&mut self.frames),
            requests: std::mem::take(&mut self.requests),
            counts: std::mem::take(&mut self.counts),
        };
        if let Err(mpsc::error::SendError(lost)) = self.applier.send(durable).await {
            // The applier only stops after the writer; should it be gone, answer here.
            lost.refuse(|| LogError::Closed);
        }
    }

    async fn write(&self, batch: sled::Batch, head: (u64, [u8; 32])) -> Result<(), String> {
        self.inner
            .events
            .apply_batch(batch)
            .map_err(|e| format!("write: {e}"))?;
        if self.inner.fail_next_commit.swap(false, Ordering::SeqCst) {
            return Err("flush: injected I/O failure (test failpoint)".to_string());
        }
        if self.inner.durability == Durability::Flush {
            let started = std::time::Instant::now();
            self.inner
                .db
                .flush_async()
                .await
                .map_err(|e| format!("flush: {e}"))?;
            metrics::histogram!("storch_log_flush_seconds").record(started.elapsed().as_secs_f64());
            // The batch is durable in sled: record how far the log went, beside it, before
            // anyone hears of the batch.
            if self.inner.watermark.is_some() {
                let inner = self.inner.clone();
                tokio::task::spawn_blocking(move || inner.mark(head.0, head.1))
                    .await
                    .map_err(|e| format!("watermark: {e}"))??;
            }
        }
        Ok(())
    }
}

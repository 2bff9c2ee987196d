//! The log's side of replication: the hook the writer calls before it acks a batch, and the
//! follower's verbatim appends of records another instance committed.
//!
//! A replicated record travels as its frame (the bytes stored under its sequence), so a
//! standby's log is byte-for-byte the leader's: same sequences, same ids, same chain.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::store::{Inner, key, storage};
use super::{Durability, Envelope, LogError, codec};

/// A future returned by [`Replicator::replicate`].
pub type ReplicateFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// Makes committed batches durable somewhere else before their callers are acked.
///
/// The writer calls it once per batch, in sequence order, after the local flush and before
/// the sink and the callers see the batch. `Err` means the batch is not known to be
/// replicated: the log poisons itself, the batch and everything after it is refused, and the
/// records stay in the local log unacknowledged (a restart reconciles them with the replica).
pub trait Replicator: Send + Sync + 'static {
    /// `frames` are the encoded records `first_seq`, `first_seq + 1`, ….
    fn replicate<'a>(&'a self, first_seq: u64, frames: &'a [&'a [u8]]) -> ReplicateFuture<'a>;
}

/// The sequence a frame claims, read from its fixed header (`None` if it is not a frame).
pub fn frame_seq(frame: &[u8]) -> Option<u64> {
    if frame.len() < 10 || frame[0] != codec::FRAME_MAGIC || frame[1] != codec::FRAME_FORMAT {
        return None;
    }
    Some(u64::from_be_bytes(frame[2..10].try_into().ok()?))
}

/// The hash a frame records for itself (`None` if it is not a frame). Two frames with the
/// same sequence and hash are the same record: the hash covers every field and the chain.
pub fn frame_hash(frame: &[u8]) -> Option<[u8; 32]> {
    codec::parse(frame).ok().map(|f| f.hash)
}

/// Appends records committed elsewhere, verbatim, after checking each one exactly as a read
/// does: it decodes, it is the next sequence, its hash recomputes and it links to the head.
/// The first bad record fails the whole call with [`LogError::Corrupt`] and nothing is written.
pub(crate) async fn append_frames(
    inner: &Arc<Inner>,
    frames: &[&[u8]],
) -> Result<Vec<Envelope>, LogError> {
    if let Some(e) = inner.poisoned_error() {
        return Err(e);
    }
    let (mut seq, mut hash) = {
        let head = inner.head();
        if let Some((seq, reason)) = &head.tail_error {
            return Err(LogError::Corrupt {
                seq: *seq,
                reason: reason.clone(),
            });
        }
        (head.seq, head.hash)
    };
    let mut batch = sled::Batch::default();
    let mut envelopes = Vec::with_capacity(frames.len());
    for frame in frames {
        let expected = seq + 1;
        let corrupt = |reason: String| LogError::Corrupt {
            seq: expected,
            reason: format!("replicated record: {reason}"),
        };
        let f = codec::parse(frame).map_err(corrupt)?;
        if f.seq != expected {
            return Err(corrupt(format!(
                "claims sequence {} where {expected} comes next",
                f.seq
            )));
        }
        if f.compute_hash() != f.hash {
            return Err(corrupt("hash does not match the record's contents".into()));
        }
        if f.prev_hash != hash {
            return Err(corrupt(format!(
                "chain broken: the record does not link to the hash of sequence {seq}"
            )));
        }
        batch.insert(&key(expected), *frame);
        seq = expected;
        hash = f.hash;
        envelopes.push(f.to_envelope());
    }
    if envelopes.is_empty() {
        return Ok(envelopes);
    }
    // As the writer does: sled never meets a full disk.
    if let Some(short) = inner.check_space() {
        return Err(short.error());
    }
    inner
        .events
        .apply_batch(batch)
        .map_err(|e| storage("writing replicated records", e))?;
    if inner.durability == Durability::Flush {
        inner.flush().await?;
        // As the writer does: how far the log went, beside it. One small write per received
        // chunk, on this task (a standby's follower, not the request path).
        let marking = inner.clone();
        let marked = tokio::task::spawn_blocking(move || marking.mark(seq, hash))
            .await
            .unwrap_or_else(|e| Err(format!("watermark: {e}")));
        if let Err(reason) = marked {
            return Err(LogError::Poisoned(inner.poison(reason)));
        }
        inner.clear_shortfall_upto(seq);
    }
    let mut head = inner.head();
    head.seq = seq;
    head.hash = hash;
    head.time_ms = envelopes.last().map_or(head.time_ms, |e| e.time_ms);
    Ok(envelopes)
}

/// Up to `max` checked records from `from_seq` on, as frames (what a leader uploads when its
/// replica is behind its own log).
pub(crate) fn frames_from(
    inner: &Inner,
    from_seq: u64,
    max: usize,
) -> Result<Vec<Vec<u8>>, LogError> {
    let mut out = Vec::new();
    let mut prev = None;
    for env in super::store::ReadIter::new(&inner.events, from_seq) {
        let env = env?;
        let prev_hash = match prev {
            Some(h) => h,
            None => {
                let raw = inner
                    .events
                    .get(key(env.seq))
                    .map_err(|e| storage("reading the event log", e))?
                    .ok_or(LogError::Corrupt {
                        seq: env.seq,
                        reason: "record vanished while being read".into(),
                    })?;
                codec::parse(&raw)
                    .map_err(|reason| LogError::Corrupt {
                        seq: env.seq,
                        reason,
                    })?
                    .prev_hash
            }
        };
        out.push(codec::encode(&env, &prev_hash));
        prev = Some(env.hash);
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

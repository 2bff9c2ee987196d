//! Replay and checkpoints, for boot with and without replication (`runtime`, `standby`).

use std::sync::Arc;

use super::shared::{Readiness, Shared, write};
use crate::events::LogEvent;
use crate::log::{EventLog, LogError};
use crate::projections::State;

/// What stops a start, and how to look at it.
fn refuse(shared: &Shared, e: &LogError) {
    let hint = match e {
        LogError::Corrupt { .. } | LogError::Missing { .. } => {
            "; run `storch events verify --data-dir DIR` to inspect the log, and start with              --truncate-corrupt-tail to cut it back to the last good record"
        }
        _ => "; run `storch events verify --data-dir DIR` to inspect the log",
    };
    let why = format!("{e}{hint}");
    tracing::error!(error = %why, "the event log cannot be replayed; refusing to start");
    *write(&shared.readiness) = Readiness::Failed(why);
}

/// Notes a cut-back for the event appended once the writer runs (several cut-backs in one
/// start make one event: from the first's start to the last's end).
fn cut_back(shared: &Shared, from: u64, to: u64, reason: String) {
    tracing::warn!(from, to, %reason, "event log cut back by operator request (--truncate-corrupt-tail)");
    let mut slot = shared.cut_back.lock().unwrap_or_else(|e| e.into_inner());
    let from = match slot.take() {
        Some(LogEvent::TailCutBack { from: earlier, .. }) => earlier.max(from),
        None => from,
    };
    *slot = Some(LogEvent::TailCutBack { from, to, reason });
}

/// Replays the log into a state on a blocking thread; a failure is recorded as the readiness.
/// A log that lacks acknowledged records or holds a corrupt one stops the start, unless
/// `truncate_corrupt_tail` is set: then it is cut back to the last good record first.
pub(super) async fn replay_log(shared: &Shared, log: &Arc<EventLog>) -> Option<State> {
    let started = std::time::Instant::now();
    if let Err(e) = log.check_acknowledged() {
        if !shared.opts.truncate_corrupt_tail {
            refuse(shared, &e);
            return None;
        }
        match log.accept_shorter().await {
            Ok(Some((acked, head))) => cut_back(shared, acked, head, e.to_string()),
            Ok(None) => {}
            Err(e) => {
                refuse(shared, &e);
                return None;
            }
        }
    }
    let state = loop {
        let replay_log = log.clone();
        match tokio::task::spawn_blocking(move || crate::projections::restore(&replay_log)).await {
            Ok(Ok(state)) => break state,
            Ok(Err(LogError::Corrupt { seq, reason })) if shared.opts.truncate_corrupt_tail => {
                let head = log.head().0.max(seq);
                let keep = seq.saturating_sub(1);
                let e = LogError::Corrupt { seq, reason };
                if let Err(failed) = log.truncate_after(keep).await {
                    refuse(shared, &failed);
                    return None;
                }
                cut_back(shared, head, keep, e.to_string());
            }
            Ok(Err(e)) => {
                refuse(shared, &e);
                return None;
            }
            Err(e) => {
                *write(&shared.readiness) = Readiness::Failed(format!("replay panicked: {e}"));
                return None;
            }
        }
    };
    tracing::info!(
        head = state.head,
        backends = state.backends.len(),
        classes = state.classes.len(),
        volumes = state.volumes.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "event log replayed"
    );
    Some(state)
}

/// As the etcd leader: stores the projection as etcd's checkpoint (see
/// `replication::checkpoint`), so that etcd can drop the records before it.
pub(super) async fn publish_checkpoint(shared: &Shared, node: &crate::replication::Node) {
    let (seq, bytes) = shared.projection.read(|s| (s.head, s.encode()));
    let Some(log) = shared.log() else { return };
    let Some(hash) = log.hash_at(seq) else {
        tracing::warn!(
            seq,
            "no record at the projection's head; no checkpoint in etcd"
        );
        return;
    };
    let anchor = crate::log::Anchor { seq, hash };
    if let Err(e) = node.publish_checkpoint(anchor, &bytes).await {
        tracing::warn!(seq, error = %e, "could not store a checkpoint in etcd");
    }
}

pub(super) async fn checkpoint(shared: &Shared) {
    let (seq, bytes) = shared.projection.read(|s| (s.head, s.encode()));
    if seq == 0 {
        return;
    }
    let Some(log) = shared.log() else { return };
    match log.save_checkpoint(seq, bytes).await {
        Ok(()) => tracing::debug!(seq, "checkpoint written"),
        Err(e) => tracing::warn!(seq, error = %e, "checkpoint failed"),
    }
}

//! Replay and checkpoints, for boot with and without replication (`runtime`, `standby`).

use std::sync::Arc;

use super::shared::{Readiness, Shared, write};
use crate::log::EventLog;
use crate::projections::State;

/// Replays the log into a state on a blocking thread; a failure is recorded as the readiness.
pub(super) async fn replay_log(shared: &Shared, log: &Arc<EventLog>) -> Option<State> {
    let started = std::time::Instant::now();
    let replay_log = log.clone();
    let state =
        match tokio::task::spawn_blocking(move || crate::projections::restore(&replay_log)).await {
            Ok(Ok(state)) => state,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "event log replay failed; refusing to start");
                *write(&shared.readiness) = Readiness::Failed(format!(
                    "{e}; run `storch events verify --data-dir DIR` to inspect the log"
                ));
                return None;
            }
            Err(e) => {
                *write(&shared.readiness) = Readiness::Failed(format!("replay panicked: {e}"));
                return None;
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

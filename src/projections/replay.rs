//! Rebuilding the state from the log: the newest usable checkpoint, then every record after
//! it. Boot and `storch bench replay` both go through [`restore`] / [`replay`].

use super::State;
use crate::log::{EventLog, LogError};

/// The state as of the log's head: the newest checkpoint this build reads, then the records
/// after it. A checkpoint that does not decode (another state format, damage) or whose head is
/// not its sequence is ignored with a warning, and the whole log is replayed.
pub fn restore(log: &EventLog) -> Result<State, LogError> {
    let state = match log.latest_checkpoint()? {
        Some((seq, bytes)) => match State::decode(&bytes) {
            Ok(s) if s.head == seq => s,
            Ok(_) | Err(_) => {
                tracing::warn!(
                    seq,
                    "ignoring an unreadable checkpoint; replaying the whole log"
                );
                State::default()
            }
        },
        None => State::default(),
    };
    // A log that starts from a checkpoint has nothing to replay before it.
    if let Some(anchor) = log.anchor()
        && state.head < anchor.seq
    {
        return Err(LogError::Corrupt {
            seq: anchor.seq,
            reason: format!(
                "the log starts from the checkpoint at sequence {} but that checkpoint is \
                 missing or unreadable",
                anchor.seq
            ),
        });
    }
    replay(log, state)
}

/// Folds every record after `state.head` into `state`, in order. Records are read and checked
/// on the log's reader thread ([`EventLog::read_batches`]) while the previous batch is decoded
/// and folded here. The first bad record (a broken chain, or a payload that does not decode)
/// is returned as [`LogError::Corrupt`]; nothing after it is applied.
pub fn replay(log: &EventLog, mut state: State) -> Result<State, LogError> {
    for batch in log.read_batches(state.head + 1)? {
        for record in batch? {
            let event = crate::events::decode(record.schema(), record.payload()).map_err(|e| {
                LogError::Corrupt {
                    seq: record.seq(),
                    reason: e.to_string(),
                }
            })?;
            state.apply(record.seq(), record.time_ms(), &event);
        }
    }
    Ok(state)
}

//! Boot with etcd replication: reconcile the local log with etcd, replay, then follow the
//! leader as a standby (serving reads) until this instance wins the leadership.

use std::sync::Arc;
use std::time::Duration;

use super::audit::Sink;
use super::replay::{checkpoint, replay_log};
use super::shared::{Readiness, Shared, read, write};
use crate::log::{CommitSink, EventLog};
use crate::projections::State;
use crate::replication::{Node, ReplicationError};

/// How long a standby waits for a change in etcd before it looks again anyway.
const POLL: Duration = Duration::from_secs(1);

fn set_standby(shared: &Shared, leader: &str) {
    let mut r = write(&shared.readiness);
    if !matches!(&*r, Readiness::Standby { leader: l } if l == leader) {
        tracing::info!(%leader, "standby: following the leader");
        *r = Readiness::Standby {
            leader: leader.to_string(),
        };
    }
}

/// Cuts the local log back to `keep`, the last record it shares with etcd; once the
/// projection holds the log (`replayed`), it is rebuilt too. The records removed were never
/// acknowledged: an acknowledged record is in etcd.
async fn cut_back(shared: &Shared, log: &Arc<EventLog>, keep: u64, replayed: bool) -> bool {
    tracing::warn!(
        keep,
        head = log.head().0,
        "the local event log holds records etcd does not (unacknowledged writes of an earlier \
         leadership); removing them"
    );
    let why = "cut back to etcd's history on rejoining: these records were written by an \
               earlier leadership and never acknowledged";
    if let Err(e) = log.cut_back_after(keep, why).await {
        *write(&shared.readiness) = Readiness::Failed(format!(
            "cannot cut the event log back to sequence {keep} to match etcd: {e}"
        ));
        return false;
    }
    if !replayed {
        return true;
    }
    match replay_log(shared, log).await {
        Some(state) => {
            shared.projection.replace(state);
            true
        }
        None => false,
    }
}

/// Replaces the local log by a start from etcd's checkpoint, because etcd no longer holds the
/// records after this log's head; once the projection holds the log (`replayed`) it is
/// replaced by the checkpoint's state. `Err(Some(_))` for failures worth retrying.
async fn start_from_checkpoint(
    shared: &Shared,
    log: &Arc<EventLog>,
    node: &Node,
    replayed: bool,
) -> Result<(), Option<ReplicationError>> {
    let fail = |why: String| {
        *write(&shared.readiness) = Readiness::Failed(why);
        None
    };
    let Some(cp) = node.fetch_checkpoint().await.map_err(|e| match e {
        e @ ReplicationError::Etcd(_) => Some(e),
        other => fail(format!("cannot read etcd's checkpoint: {other}")),
    })?
    else {
        // Deleted between the pull and this read: the next pull looks again.
        return Ok(());
    };
    let state = match State::decode(&cp.state) {
        Ok(s) if s.head == cp.anchor.seq => s,
        Ok(s) => {
            return Err(fail(format!(
                "etcd's checkpoint at sequence {} holds the state as of sequence {}",
                cp.anchor.seq, s.head
            )));
        }
        Err(e) => {
            return Err(fail(format!(
                "etcd's checkpoint at sequence {} does not decode: {e}",
                cp.anchor.seq
            )));
        }
    };
    tracing::warn!(
        seq = cp.anchor.seq,
        head = log.head().0,
        "etcd no longer holds the records after this log's head: starting the log from etcd's \
         checkpoint"
    );
    if let Err(e) = log.start_from_checkpoint(cp.anchor, cp.state).await {
        return Err(fail(format!(
            "cannot start the event log from etcd's checkpoint at sequence {}: {e}",
            cp.anchor.seq
        )));
    }
    node.reset_verified();
    if replayed {
        shared.projection.replace(state);
    }
    Ok(())
}

/// Copies everything etcd holds beyond the local log (applying it once `replayed`).
///
/// Records this log holds beyond etcd's last one are kept only while this instance may still
/// become the leader and upload them. While another instance leads they can never be
/// committed (that leader writes its own records after etcd's last), so they are dropped at
/// once rather than served as if they were history. An etcd that holds no record at all is
/// the exception: a log that existed before replication was turned on waits to seed it.
/// `Ok(local_ahead)`; `Err(Some(_))` for failures worth retrying (etcd unreachable).
async fn catch_up(
    shared: &Shared,
    log: &Arc<EventLog>,
    node: &Node,
    replayed: bool,
) -> Result<bool, Option<ReplicationError>> {
    loop {
        match node.pull(log).await {
            Ok(pull) => {
                if replayed && !pull.appended.is_empty() {
                    Sink::for_shared(shared).committed(&pull.appended);
                }
                if pull.more {
                    continue;
                }
                if !pull.local_ahead || node.is_leader() {
                    return Ok(pull.local_ahead);
                }
                let leader = node.leader().await.map_err(|e| Some(e.into()))?;
                let other_leads = leader.is_some_and(|l| l != node.identity());
                let etcd_head = node.etcd_head().await.map_err(Some)?;
                if !other_leads || etcd_head == 0 {
                    return Ok(true);
                }
                if !cut_back(shared, log, etcd_head, replayed).await {
                    return Err(None);
                }
            }
            Err(ReplicationError::Diverged { keep }) => {
                if !cut_back(shared, log, keep, replayed).await {
                    return Err(None);
                }
            }
            Err(ReplicationError::BehindCheckpoint { .. }) => {
                start_from_checkpoint(shared, log, node, replayed).await?;
            }
            Err(e @ ReplicationError::Etcd(_)) => return Err(Some(e)),
            // Nothing was written: not a standby until space is freed, then it goes on.
            Err(e @ ReplicationError::DiskFull(_)) => {
                *write(&shared.readiness) = Readiness::Failed(e.to_string());
                return Err(Some(e));
            }
            Err(e) => {
                *write(&shared.readiness) =
                    Readiness::Failed(format!("event log replication from etcd failed: {e}"));
                return Err(None);
            }
        }
    }
}

/// Runs until this instance leads (`true`, with the projection current and etcd holding the
/// whole local log) or start-up fails for good (`false`, readiness says why).
pub(super) async fn follow_until_elected(
    shared: &Arc<Shared>,
    log: &Arc<EventLog>,
    node: &Arc<Node>,
) -> bool {
    tokio::spawn(node.clone().keep_alive());
    // Before the replay, so that a log etcd contradicts is cut back first.
    loop {
        match catch_up(shared, log, node, false).await {
            Ok(_) => break,
            Err(None) => return false,
            Err(Some(e)) => {
                tracing::warn!(error = %e, "waiting for etcd");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    let Some(state) = replay_log(shared, log).await else {
        return false;
    };
    shared.projection.replace(state);
    set_standby(shared, "unknown");
    let mut last_checkpoint = log.head().0;
    // Campaign at most this often (the leader key's deletion also wakes `wait`).
    let campaign_every = POLL.min(node.lease_ttl() / 4);
    let mut next_campaign = std::time::Instant::now();
    loop {
        // Short of space: copy nothing and do not campaign (a leader that cannot write would
        // step down at once); look at the disk again each round, as no writer does it here.
        if let Some(e) = log.disk_full().and_then(|_| log.look_at_disk()) {
            *write(&shared.readiness) = Readiness::Failed(e.to_string());
            node.wait(POLL).await;
            continue;
        }
        let now = std::time::Instant::now();
        if now >= next_campaign {
            next_campaign = now + campaign_every;
            match node.try_lead().await {
                Ok(Ok(())) => match lead(shared, log, node).await {
                    Ok(()) => return true,
                    Err(None) => return false,
                    Err(Some(e)) => {
                        tracing::warn!(error = %e, "could not take over; standing by");
                        node.resign().await;
                    }
                },
                Ok(Err(holder)) => set_standby(shared, &holder),
                Err(e) => tracing::warn!(error = %e, "cannot reach etcd to campaign"),
            }
        }
        match catch_up(shared, log, node, true).await {
            Ok(_) => {
                if matches!(*read(&shared.readiness), Readiness::Failed(_)) {
                    // Caught up again after its disk was freed.
                    let holder = node.leader().await.ok().flatten();
                    set_standby(shared, holder.as_deref().unwrap_or("unknown"));
                }
            }
            Err(None) => return false,
            Err(Some(e)) => tracing::warn!(error = %e, "cannot follow the leader through etcd"),
        }
        let head = log.head().0;
        if head.saturating_sub(last_checkpoint) >= shared.opts.checkpoint_every {
            checkpoint(shared).await;
            last_checkpoint = head;
        }
        node.wait(POLL).await;
    }
}

/// Just elected: take in what the old leader left, then give etcd what only we hold.
async fn lead(
    shared: &Shared,
    log: &Arc<EventLog>,
    node: &Node,
) -> Result<(), Option<ReplicationError>> {
    let ahead = catch_up(shared, log, node, true).await?;
    if ahead {
        let n = node.upload(log).await.map_err(Some)?;
        tracing::info!(
            records = n,
            "uploaded to etcd the records only this log held"
        );
    }
    tracing::info!(head = log.head().0, identity = %node.identity(), "leading");
    Ok(())
}

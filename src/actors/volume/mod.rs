//! Virtual volume actors: one per volume while it has work, activated on demand through the
//! directory in `Shared::volumes` and stopped when idle. A volume's state lives in the
//! projection, so an actor can be dropped and re-created at any time; the actor exists to
//! serialise every operation on one volume (create, delete, snapshots, resize, reconcile).
//! Each operation calls its backend's driver directly: the backend's concurrency limit is
//! inside that driver ([`crate::drivers::LimitedDriver`]).
//!
//! - `create`: create and clone (intent, plan, attempts, adoption) and interrupted creates.
//! - `delete`: delete with retries.
//! - `snapshot`: snapshot create and delete.
//! - `resize`: growing a volume.
//! - `publish`: granting a host access to a volume and taking it away.
//! - `bind`: recording, once, that a consumer (a Kubernetes PV) took the volume.
//! - `lookup`: the volume's record, its backend's driver, pool offers, error mapping.

mod bind;
mod create;
mod delete;
mod drift;
mod lookup;
mod publish;
mod resize;
mod snapshot;

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tracing::Instrument;

use super::drift::{CheckOnArray, ImportVolume};
use super::error::CoreError;
use super::messages::{
    BindVolume, CreateSnapshot, CreateVolume, DeleteSnapshot, DeleteVolume, PublishVolume,
    Reconcile, ResizeVolume, UnpublishVolume,
};
use super::shared::{Shared, VolumeMessage, VolumeRecipients, retry_delay};
use crate::projections::VolumeState;
use bind::bind;
use create::{create_volume, reconcile_create};
use delete::{DeleteError, delete};
use lookup::record;
use publish::{publish, unpublish};
use resize::resize;
use snapshot::{create_snapshot, delete_snapshot, reconcile_snapshots};

pub(crate) struct VolumeActor {
    name: String,
    shared: Arc<Shared>,
    last_active: Instant,
    /// A retry (delete or reconcile) is scheduled: stay alive.
    retry_pending: bool,
    attempts: u32,
}

impl VolumeActor {
    fn touch(&mut self) {
        self.last_active = Instant::now();
    }

    fn schedule_retry(&mut self, ctx: &mut Context<Self>) {
        self.attempts += 1;
        self.retry_pending = true;
        let delay = retry_delay(self.attempts);
        ctx.run_later(delay, |act, ctx| {
            act.retry_pending = false;
            ctx.notify(Reconcile);
        });
    }
}

impl Actor for VolumeActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let idle = self.shared.opts.volume_idle;
        ctx.run_interval(idle.max(Duration::from_millis(10)) / 2, move |act, ctx| {
            if act.retry_pending || act.last_active.elapsed() < idle {
                return;
            }
            let me = recipients(ctx.address());
            let mut dir = act.shared.volumes.lock().unwrap_or_else(|e| e.into_inner());
            if dir.get(&act.name).is_some_and(|a| a.same(&me)) {
                dir.remove(&act.name);
            }
            drop(dir);
            ctx.stop();
        });
    }
}

fn recipients(addr: Addr<VolumeActor>) -> VolumeRecipients {
    VolumeRecipients {
        create: addr.clone().recipient(),
        delete: addr.clone().recipient(),
        reconcile: addr.clone().recipient(),
        create_snapshot: addr.clone().recipient(),
        delete_snapshot: addr.clone().recipient(),
        resize: addr.clone().recipient(),
        publish: addr.clone().recipient(),
        unpublish: addr.clone().recipient(),
        bind: addr.clone().recipient(),
        check_on_array: addr.clone().recipient(),
        import: addr.recipient(),
    }
}

/// Sends a message to the volume's actor, activating it if needed; retries once per stale
/// address (an actor that stopped between lookup and send).
pub(crate) async fn send<M: VolumeMessage>(
    shared: &Arc<Shared>,
    name: &str,
    make: impl Fn() -> M,
) -> Result<M::Result, CoreError> {
    for _ in 0..8 {
        let to = activate(shared, name, |r| M::recipient(r).clone());
        match to.send(make()).await {
            Ok(r) => return Ok(r),
            Err(_) => {
                let mut dir = shared.volumes.lock().unwrap_or_else(|e| e.into_inner());
                if dir.get(name).is_some_and(|a| *M::recipient(a) == to) {
                    dir.remove(name);
                }
            }
        }
    }
    Err(CoreError::Unavailable(format!(
        "volume {name} is busy; try again"
    )))
}

/// Hands `pick` the live actor for `name`, started in the actor arbiter if there is none.
pub(crate) fn activate<R>(
    shared: &Arc<Shared>,
    name: &str,
    pick: impl FnOnce(&VolumeRecipients) -> R,
) -> R {
    let mut dir = shared.volumes.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(a) = dir.get(name)
        && a.connected()
    {
        return pick(a);
    }
    let actor = VolumeActor {
        name: name.to_string(),
        shared: shared.clone(),
        last_active: Instant::now(),
        retry_pending: false,
        attempts: 0,
    };
    let to = recipients(VolumeActor::start_in_arbiter(&shared.arbiter, move |_| {
        actor
    }));
    let picked = pick(&to);
    dir.insert(name.to_string(), to);
    picked
}

impl Handler<DeleteVolume> for VolumeActor {
    type Result = AtomicResponse<Self, Result<(), CoreError>>;

    fn handle(&mut self, msg: DeleteVolume, _ctx: &mut Self::Context) -> Self::Result {
        self.touch();
        let shared = self.shared.clone();
        let name = self.name.clone();
        AtomicResponse::new(Box::pin(
            {
                let span = tracing::info_span!("volume", volume = %name, request_id = %msg.ctx.request_id, op = "delete");
                async move { delete(&shared, &name, &msg.ctx.request_id).await }.instrument(span)
            }
                .into_actor(self)
                .map(|res, act, ctx| {
                    act.touch();
                    match res {
                        Ok(()) => act.attempts = 0,
                        Err(DeleteError::Retry(e)) => {
                            if !act.retry_pending {
                                act.schedule_retry(ctx);
                            }
                            return Err(e);
                        }
                        Err(DeleteError::Final(e)) => return Err(e),
                    }
                    Ok(())
                }),
        ))
    }
}

impl Handler<Reconcile> for VolumeActor {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, _msg: Reconcile, _ctx: &mut Self::Context) -> Self::Result {
        self.touch();
        let shared = self.shared.clone();
        let name = self.name.clone();
        AtomicResponse::new(Box::pin(
            {
                let span = tracing::info_span!("volume", volume = %name, request_id = "reconcile", op = "reconcile");
                async move { reconcile(&shared, &name).await }.instrument(span)
            }
                .into_actor(self)
                .map(|retry, act, ctx| {
                    act.touch();
                    if retry {
                        if !act.retry_pending {
                            act.schedule_retry(ctx);
                        }
                    } else {
                        act.attempts = 0;
                    }
                }),
        ))
    }
}

/// Completes an interrupted create or delete. Returns true when it must be retried later
/// (a backend is not available yet).
async fn reconcile(shared: &Arc<Shared>, name: &str) -> bool {
    let Some(rec) = record(shared, name) else {
        return false;
    };
    match rec.state {
        VolumeState::Online => reconcile_snapshots(shared, name, &rec).await,
        // Drift reconciliation brings it back when its array holds it again.
        VolumeState::Missing => false,
        VolumeState::Deleting => delete(shared, name, "reconcile").await.is_err(),
        VolumeState::Creating => match reconcile_create(shared, name, &rec).await {
            Ok(()) => false,
            Err(e) => {
                tracing::info!(volume = %name, error = %e, "reconciling an interrupted create; will retry");
                true
            }
        },
    }
}

/// Runs a one-shot operation atomically on the actor (no retries of its own).
macro_rules! atomic_op {
    ($msg:ty, $run:expr) => {
        impl Handler<$msg> for VolumeActor {
            type Result = AtomicResponse<Self, <$msg as Message>::Result>;

            fn handle(&mut self, msg: $msg, _ctx: &mut Self::Context) -> Self::Result {
                self.touch();
                let shared = self.shared.clone();
                let name = self.name.clone();
                AtomicResponse::new(Box::pin(
                    {
                        let span = tracing::info_span!("volume", volume = %name,
                            request_id = %msg.ctx.request_id, op = stringify!($run));
                        async move { $run(&shared, &name, msg).await }.instrument(span)
                    }
                        .into_actor(self)
                        .map(|res, act, _| {
                            act.touch();
                            res
                        }),
                ))
            }
        }
    };
}

atomic_op!(CreateVolume, create_volume);
atomic_op!(CreateSnapshot, create_snapshot);
atomic_op!(DeleteSnapshot, delete_snapshot);
atomic_op!(ResizeVolume, resize);
atomic_op!(PublishVolume, publish);
atomic_op!(UnpublishVolume, unpublish);
atomic_op!(BindVolume, bind);
atomic_op!(CheckOnArray, drift::check);
atomic_op!(ImportVolume, drift::import);

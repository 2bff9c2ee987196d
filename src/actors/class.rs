//! One actor per storage class: owns the compiled class and keeps its matched pool set
//! current as backends and pools change.

use std::collections::BTreeSet;
use std::sync::Arc;

use actix::prelude::*;

use super::messages::Rematch;
use super::shared::{ClassSlot, Shared, read, write};
use crate::model::{CompiledClass, PoolRef};

pub(crate) struct StorageClassActor {
    name: String,
    compiled: Arc<CompiledClass>,
    shared: Arc<Shared>,
}

impl Actor for StorageClassActor {
    type Context = Context<Self>;
}

impl Handler<Rematch> for StorageClassActor {
    type Result = ();

    fn handle(&mut self, _msg: Rematch, _ctx: &mut Self::Context) {
        let matched = matching_pools(&self.shared, &self.compiled);
        if let Some(slot) = write(&self.shared.classes).get_mut(&self.name) {
            slot.matched = Arc::new(matched);
        }
    }
}

/// Starts a storage class actor with its matched pools computed, and registers it (replacing
/// the class's previous actor, if any).
pub(crate) fn start(shared: &Arc<Shared>, name: &str, compiled: Arc<CompiledClass>) {
    let matched = Arc::new(matching_pools(shared, &compiled));
    let actor = StorageClassActor {
        name: name.to_string(),
        compiled,
        shared: shared.clone(),
    };
    let addr = actix::Actor::start_in_arbiter(&shared.arbiter, move |_| actor);
    let slot = ClassSlot {
        rematch: addr.recipient(),
        matched,
    };
    write(&shared.classes).insert(name.to_string(), slot);
}

/// Pools of online backends that the class matches (`State::matching_pools`).
fn matching_pools(shared: &Shared, class: &CompiledClass) -> BTreeSet<PoolRef> {
    shared.projection.read(|state| state.matching_pools(class))
}

/// Asks every class actor to rematch and waits for all of them.
pub(crate) async fn rematch_all(shared: &Shared) {
    let recipients: Vec<_> = read(&shared.classes)
        .values()
        .map(|s| s.rematch.clone())
        .collect();
    let waits = recipients.iter().map(|r| r.send(Rematch));
    for r in futures::future::join_all(waits).await {
        if let Err(e) = r {
            tracing::warn!(error = %e, "storage class actor did not answer a rematch");
        }
    }
}

//! One actor per storage class: owns the compiled class and keeps its matched pool set
//! current as backends and pools change.

use std::collections::BTreeSet;
use std::sync::Arc;

use actix::prelude::*;

use super::shared::{Shared, read, write};
use crate::model::{CompiledClass, PoolRef};

/// Recompute the matched pools from the projection.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Rematch;

pub(crate) struct StorageClassActor {
    pub name: String,
    pub compiled: Arc<CompiledClass>,
    pub shared: Arc<Shared>,
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

/// Pools of online backends that the class matches (Trident §3.4; offline backends' pools
/// leave every class).
pub(crate) fn matching_pools(shared: &Shared, class: &CompiledClass) -> BTreeSet<PoolRef> {
    shared.projection.read(|state| {
        state
            .backends
            .iter()
            .filter(|(_, b)| b.online)
            .flat_map(|(name, b)| {
                b.pools
                    .iter()
                    .filter(|p| class.matches(name, p))
                    .map(|p| PoolRef::new(name.clone(), p.name.clone()))
            })
            .collect()
    })
}

/// Asks every class actor to rematch and waits for all of them.
pub(crate) async fn rematch_all(shared: &Shared) {
    let addrs: Vec<_> = read(&shared.classes)
        .values()
        .map(|s| s.addr.clone())
        .collect();
    let waits = addrs.iter().map(|a| a.send(Rematch));
    for r in futures::future::join_all(waits).await {
        if let Err(e) = r {
            tracing::warn!(error = %e, "storage class actor did not answer a rematch");
        }
    }
}

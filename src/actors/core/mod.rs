//! `Core`: the handle every frontend (REST, CLI server side, Kubernetes, benchmarks) uses.
//! It hides the actors: commands go to them, reads come from the projection's views.
//!
//! - `backends`, `classes`, `volumes`, `snapshots`: commands and reads, one file per resource.
//! - `publish`: volumes made available to hosts and taken away.
//! - `drift`: reconcile a backend with its array, orphans, import.
//! - `explain`: why each pool would or would not take a volume of a class.
//! - `dashboard`: one read per page of the web dashboard (`/ui/`).

mod backends;
mod classes;
pub mod dashboard;
mod drift;
mod explain;
mod publish;
mod snapshots;
mod volumes;

use std::sync::Arc;

pub use drift::Orphans;
pub use publish::{PublishRequest, UnpublishNode};

use super::shared::{Readiness, Shared, read};

/// The handle to the running core. Cheap to clone.
#[derive(Clone)]
pub struct Core {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").finish_non_exhaustive()
    }
}

impl Core {
    pub fn readiness(&self) -> Readiness {
        read(&self.shared.readiness).clone()
    }

    /// Waits until the core takes commands (replay done and, with etcd replication, this
    /// instance leads): `Ok` when ready, `Err(why)` when start-up failed for good.
    pub async fn wait_ready(&self) -> Result<(), String> {
        loop {
            match self.readiness() {
                Readiness::Ready => return Ok(()),
                Readiness::Failed(why) => return Err(why),
                Readiness::Replaying => {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await
                }
                // A standby may wait for days: look less often.
                Readiness::Standby { .. } => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await
                }
            }
        }
    }
}

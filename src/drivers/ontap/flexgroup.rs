//! ontap-nas-flexgroup: one FlexGroup per volume, spread over the SVM's aggregates (or the
//! configured one), created mounted at `/<name>` through `volume-create-async` and its job.
//! The backend has one pool, named after the SVM. Clones are not supported; get, destroy,
//! resize are ontap-nas's (`nas.rs`), snapshots the shared ones (`flexvol.rs`).

use super::flexvol::{flexvol_create, nas_mounted, rollback};
use super::nas::get;
use super::{Discovered, OntapDriver, VolumeOptions};
use crate::drivers::{CreateRequest, DriverError, DriverResult, VolumeInfo};

pub(super) async fn create(
    drv: &OntapDriver,
    d: &Discovered,
    req: &CreateRequest,
    o: &VolumeOptions,
) -> DriverResult<VolumeInfo> {
    if req.pool != d.svm {
        return Err(DriverError::Invalid(format!(
            "pool {} does not exist: the only pool of this backend is {}",
            req.pool, d.svm
        )));
    }
    let name = &req.internal_name;
    let aggregates = d.aggregates.iter().map(|a| a.name.clone()).collect();
    let spec = nas_mounted(flexvol_create(name, aggregates, req.size_bytes, o), o);
    drv.api().volume_create(&d.svm, &spec, true).await?;
    if let Err(e) = drv.api().volume_create_finish(&d.svm, &spec, true).await {
        rollback(drv, d, name, true).await;
        return Err(e.into());
    }
    get(drv, d, name)
        .await?
        .ok_or_else(|| DriverError::Other(format!("FlexGroup {name} vanished after its create")))
}

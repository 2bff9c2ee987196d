//! The seam between the driver logic and the array: [`OntapApi`], the operations the four
//! variants need, implemented once over ZAPI (`calls.rs` on [`ZapiClient`](super::client::ZapiClient))
//! and once over REST (`rest_calls.rs` on [`RestClient`](super::rest::RestClient)). Both return
//! the driver's own records (`wire.rs`) and one error type, [`OntapError`], classified the same
//! way whichever API answered. Also the per-LIF cap on requests in flight that both clients share.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use tokio::sync::Semaphore;

pub use super::client::OntapError;
use super::discovery::Aggregate;
use super::wire::{QtreeRecord, SnapshotRecord, VolumeCreate, VolumeRecord};

pub type ApiResult<T> = Result<T, OntapError>;

/// What an aggregate's media and encryption capability are, as the array reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregateKind {
    pub name: String,
    /// The raw media type (`hdd`, `hybrid`, `ssd`, `vmdisk`, …).
    pub media: String,
    pub nve_capable: bool,
}

/// The ONTAP operations the drivers use. Names are the driver's (`pattern` is an exact name or
/// `prefix*`); "already gone" on a delete is success in every implementation.
#[async_trait]
pub trait OntapApi: Send + Sync + std::fmt::Debug {
    /// `"zapi"` or `"rest"`.
    fn api_name(&self) -> &'static str;

    // ---- discovery ----
    /// The ONTAPI version (major, minor); REST reports the equivalent of its ONTAP release.
    async fn ontapi_version(&self) -> ApiResult<(u32, u32)>;
    /// Names of the data SVMs these credentials see.
    async fn data_svms(&self) -> ApiResult<Vec<String>>;
    /// The aggregates assigned to `svm` (media unknown, NVE assumed); `None`: no such SVM.
    async fn svm_aggregates(&self, svm: &str) -> ApiResult<Option<Vec<Aggregate>>>;
    /// Media and NVE capability per aggregate; an empty list when this user may not read them.
    async fn aggregate_kinds(&self, svm: &str) -> ApiResult<Vec<AggregateKind>>;
    /// Addresses of the SVM's data LIFs that are up and serve `protocol` (`nfs`, `iscsi`).
    async fn data_lifs(&self, svm: &str, protocol: &str) -> ApiResult<Vec<String>>;
    /// The SVM's iSCSI target name.
    async fn iscsi_target_name(&self, svm: &str) -> ApiResult<String>;

    // ---- volumes ----
    async fn volumes(
        &self,
        svm: &str,
        pattern: &str,
        style: Option<&str>,
    ) -> ApiResult<Vec<VolumeRecord>>;
    async fn volume(
        &self,
        svm: &str,
        name: &str,
        style: Option<&str>,
    ) -> ApiResult<Option<VolumeRecord>> {
        let mut v = self.volumes(svm, name, style).await?;
        v.retain(|r| r.name == name);
        Ok(v.into_iter().next())
    }
    /// Creates the volume with what this API's create call takes of `v`.
    async fn volume_create(&self, svm: &str, v: &VolumeCreate, flexgroup: bool) -> ApiResult<()>;
    /// Sets what [`Self::volume_create`] could not send in its create call: over ZAPI the
    /// junction of a FlexVol (`volume-mount`) and the snapshot directory (a modify); REST's
    /// `POST` takes both, so nothing is left. A failure leaves the new volume to the caller.
    async fn volume_create_finish(
        &self,
        svm: &str,
        v: &VolumeCreate,
        flexgroup: bool,
    ) -> ApiResult<()>;
    async fn volume_mount(&self, svm: &str, name: &str, junction: &str) -> ApiResult<()>;
    async fn volume_set_comment(&self, svm: &str, name: &str, comment: &str) -> ApiResult<()>;
    async fn volume_set_size(
        &self,
        svm: &str,
        name: &str,
        bytes: u64,
        flexgroup: bool,
    ) -> ApiResult<()>;
    /// Destroys in one step (a refusal changes nothing); a volume with clones is refused. The
    /// volume does not stay in ONTAP's recovery queue: its space is free at once.
    async fn volume_destroy(&self, svm: &str, name: &str, flexgroup: bool) -> ApiResult<()>;

    // ---- snapshots and clones ----
    async fn snapshot_create(&self, svm: &str, volume: &str, snapshot: &str) -> ApiResult<()>;
    async fn snapshots(&self, svm: &str, volume: &str) -> ApiResult<Vec<SnapshotRecord>>;
    async fn snapshot_delete(&self, svm: &str, volume: &str, snapshot: &str) -> ApiResult<()>;
    async fn clone_create(
        &self,
        svm: &str,
        name: &str,
        parent: &str,
        snapshot: &str,
        space_reserve: &str,
    ) -> ApiResult<()>;
    async fn clone_split_start(&self, svm: &str, name: &str) -> ApiResult<()>;

    // ---- qtrees and quotas ----
    async fn qtrees(
        &self,
        svm: &str,
        volume_pattern: &str,
        qtree_pattern: Option<&str>,
    ) -> ApiResult<Vec<QtreeRecord>>;
    async fn qtree_create(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
        mode: &str,
        security_style: &str,
        export_policy: &str,
    ) -> ApiResult<()>;
    async fn qtree_delete(&self, svm: &str, volume: &str, qtree: &str) -> ApiResult<()>;
    /// Tree quota limits (bytes) by `/vol/<volume>/<qtree>`.
    async fn tree_quotas(
        &self,
        svm: &str,
        volume_pattern: &str,
    ) -> ApiResult<BTreeMap<String, u64>>;
    async fn tree_quota_set(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
        bytes: u64,
    ) -> ApiResult<()>;
    async fn tree_quota_delete(&self, svm: &str, volume: &str, qtree: &str) -> ApiResult<()>;
    async fn quota_on(&self, svm: &str, volume: &str) -> ApiResult<()>;

    // ---- export policies ----
    /// Creates the policy with one rule for `client_match` unless both exist.
    async fn ensure_export_policy(
        &self,
        svm: &str,
        policy: &str,
        client_match: &str,
    ) -> ApiResult<()>;

    // ---- LUNs and igroups ----
    /// Creates a thin LUN; returns its actual size.
    async fn lun_create(&self, svm: &str, path: &str, size: u64) -> ApiResult<u64>;
    /// LUN path → size, for LUNs whose path matches `pattern`.
    async fn luns(&self, svm: &str, pattern: &str) -> ApiResult<BTreeMap<String, u64>>;
    async fn lun_resize(&self, svm: &str, path: &str, size: u64) -> ApiResult<()>;
    /// Creates an iSCSI igroup of OS type linux unless it exists.
    async fn ensure_igroup(&self, svm: &str, igroup: &str) -> ApiResult<()>;
    /// Adds an initiator to an igroup; one already a member is success.
    async fn igroup_add(&self, svm: &str, igroup: &str, initiator: &str) -> ApiResult<()>;
    /// Destroys an igroup that holds no LUN maps: `true` when it is gone (also when it was
    /// already), `false` when it still has maps and was left in place.
    async fn igroup_destroy_unmapped(&self, svm: &str, igroup: &str) -> ApiResult<bool>;
    /// The LUN id of `path` in `igroup`, mapping it first when it is not mapped yet.
    async fn lun_map(&self, svm: &str, path: &str, igroup: &str) -> ApiResult<i32>;
    /// Every map of `path`: igroup → LUN id; empty when the LUN does not exist.
    async fn lun_maps(&self, svm: &str, path: &str) -> ApiResult<BTreeMap<String, i32>>;
    /// The LUN id of `path` in `igroup`, if mapped.
    async fn lun_id(&self, svm: &str, path: &str, igroup: &str) -> ApiResult<Option<i32>> {
        Ok(self.lun_maps(svm, path).await?.get(igroup).copied())
    }
    /// Unmaps `path` from `igroup`; no such map, LUN or igroup is success.
    async fn lun_unmap(&self, svm: &str, path: &str, igroup: &str) -> ApiResult<()>;
    /// Unmaps a LUN from every igroup and destroys it; "already gone" is success. Returns the
    /// igroups it was mapped to.
    async fn lun_destroy(&self, svm: &str, path: &str) -> ApiResult<Vec<String>>;
}

/// The semaphore capping requests in flight to one management LIF, shared by every client
/// (REST and ZAPI, every backend) of that LIF in this process. The first client of a LIF sets
/// its size; it lives while any client holds it.
pub fn lif_limit(lif: &str, limit: usize) -> Arc<Semaphore> {
    static LIMITS: Mutex<Option<HashMap<String, Weak<Semaphore>>>> = Mutex::new(None);
    let mut guard = LIMITS.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    map.retain(|_, w| w.strong_count() > 0);
    if let Some(s) = map.get(lif).and_then(Weak::upgrade) {
        return s;
    }
    let s = Arc::new(Semaphore::new(limit.max(1)));
    map.insert(lif.to_string(), Arc::downgrade(&s));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_semaphore_per_lif() {
        let a = lif_limit("10.9.9.9:443", 20);
        let b = lif_limit("10.9.9.9:443", 5);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(b.available_permits(), 20);
        let c = lif_limit("10.9.9.8:443", 5);
        assert_eq!(c.available_permits(), 5);
        drop((a, b));
        assert_eq!(lif_limit("10.9.9.9:443", 3).available_permits(), 3);
    }
}

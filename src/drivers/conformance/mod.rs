//! The shared driver conformance suite.
//!
//! Every driver (the fake now; local, ONTAP, SolidFire, … later, each against its simulator)
//! runs the same checks through the [`StorageDriver`] trait only, so the actors can rely on one
//! behaviour whatever the array:
//!
//! ```ignore
//! conformance::run(&driver, "pool1", &ConformanceOptions::default()).await;
//! ```
//!
//! The suite panics with a message naming the check on the first failure (it runs inside
//! tests). It assumes it has the pool to itself while it runs: capacity checks compare free
//! bytes before and after. Every volume it makes is named `<name_prefix>-…` through
//! `driver.internal_name`; it destroys them at the start (left over from an earlier, failed
//! run) and at the end.
//!
//! What is checked:
//! - discovery: the pool exists, offers `backendType`, pool names are unique, a backend name;
//! - internal names are deterministic and distinct;
//! - operations on a missing volume: `get` is `None`, `destroy` succeeds, the rest `NotFound`;
//! - create / get / list / access info / destroy, with `create` twice → `AlreadyExists`,
//!   `destroy` twice → success, `get` after destroy → `None`;
//! - the minimum size (`Invalid` below it) and an unknown pool (`Invalid` or `NotFound`);
//! - capacity: free bytes shrink on create and come back on destroy; a create that does not
//!   fit → `Conflict`;
//! - snapshots: create, duplicate → `AlreadyExists`, list, delete twice, gone with their volume;
//! - clones from a volume and from a snapshot, with missing sources → `NotFound`;
//! - resize: grow, shrink refused (`Invalid`), missing volume → `NotFound`, over capacity →
//!   `Conflict`;
//! - concurrent creates and destroys;
//! - no error seen along the way is classified retryable;
//! - per-host access, for drivers that need it ([`check_publish`], run by the caller with an
//!   [`AccessProbe`] that looks at the array).
//!
//! Where a feature is [`Support::Optional`], an `Unsupported` answer skips that part; where
//! it is [`Support::Skip`] the part is not run.
//!
//! Files:
//! - `mod.rs`: the options, [`run`], the names and the assertion helpers.
//! - `volumes.rs`: discovery, names, the volume lifecycle, bad requests, capacity, concurrency.
//! - `copies.rs`: snapshots, clones and resize.
//! - `publish.rs`: publish and unpublish to hosts.

mod copies;
mod publish;
mod volumes;

pub use self::publish::{AccessProbe, PublishOptions, check_publish, iscsi_host};

use self::copies::{check_clones, check_resize, check_snapshots};
use self::volumes::{
    check_bad_requests, check_capacity, check_concurrency, check_lifecycle, check_missing_volume,
};
pub use self::volumes::{check_discovery, check_internal_names};
use super::{
    CloneRequest, CreateRequest, DriverError, DriverResult, StorageDriver, VolumeInfo, testing,
};

/// Whether the driver under test is expected to support a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// The feature must work; `Unsupported` fails the suite.
    Required,
    /// `Unsupported` skips the feature's checks; anything else must work.
    Optional,
    /// Do not run the feature's checks.
    Skip,
}

/// What the suite may expect from the driver under test.
#[derive(Debug, Clone)]
pub struct ConformanceOptions {
    /// Prefix of the volume names the suite creates.
    pub name_prefix: String,
    /// Size of the test volumes; at least the driver's minimum.
    pub size_bytes: u64,
    /// The driver's minimum volume size: when set and above 1, a create one byte smaller must
    /// fail with `Invalid`.
    pub min_size_bytes: Option<u64>,
    pub snapshots: Support,
    pub clones: Support,
    pub resize: Support,
    /// A shrinking resize fails with `Invalid`.
    pub shrink_refused: bool,
    /// The driver reports free bytes for the pool, deducts creates from them exactly, and
    /// refuses what does not fit with `Conflict`.
    pub capacity: bool,
    /// The bytes a volume of N bytes takes from its pool, when that is not N (ontap-san
    /// keeps its LUN in a FlexVol with headroom and the snapshot reserve). Must grow with N.
    pub footprint: Option<fn(u64) -> u64>,
    /// How many volumes the concurrency check creates at once (0 skips it).
    pub concurrency: usize,
}

impl Default for ConformanceOptions {
    fn default() -> Self {
        ConformanceOptions {
            name_prefix: "conformance".to_string(),
            size_bytes: 1 << 30,
            min_size_bytes: None,
            snapshots: Support::Required,
            clones: Support::Required,
            resize: Support::Required,
            shrink_refused: true,
            capacity: true,
            footprint: None,
            concurrency: 16,
        }
    }
}

impl ConformanceOptions {
    /// The bytes a volume of `n` bytes takes from its pool.
    pub fn footprint(&self, n: u64) -> u64 {
        self.footprint.map_or(n, |f| f(n))
    }

    /// The largest volume whose footprint fits in `free` bytes (0 when none does).
    pub fn largest_fitting(&self, free: u64) -> u64 {
        let (mut lo, mut hi) = (0u64, free);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.footprint(mid) <= free {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }
}

/// Runs the whole suite against `driver`, creating volumes in `pool`. Panics on the first
/// failure with a message naming the check.
pub async fn run(driver: &dyn StorageDriver, pool: &str, opts: &ConformanceOptions) {
    let names = Names::new(driver, opts);
    cleanup(driver, &names).await;

    check_discovery(driver, pool).await;
    check_internal_names(driver, opts);
    check_missing_volume(driver, &names).await;
    check_lifecycle(driver, pool, opts, &names).await;
    check_bad_requests(driver, pool, opts, &names).await;
    if opts.capacity {
        check_capacity(driver, pool, opts, &names).await;
    }
    if opts.snapshots != Support::Skip {
        check_snapshots(driver, pool, opts, &names).await;
    }
    if opts.clones != Support::Skip {
        check_clones(driver, pool, opts, &names).await;
    }
    if opts.resize != Support::Skip {
        check_resize(driver, pool, opts, &names).await;
    }
    if opts.concurrency > 0 {
        check_concurrency(driver, pool, opts, &names).await;
    }

    cleanup(driver, &names).await;
}

/// The internal names the suite uses.
struct Names {
    a: String,
    b: String,
    clone_vol: String,
    clone_snap: String,
    missing: String,
    small: String,
    big: String,
    concurrent: Vec<String>,
}

impl Names {
    fn new(driver: &dyn StorageDriver, opts: &ConformanceOptions) -> Names {
        let n = |suffix: &str| driver.internal_name(&format!("{}-{suffix}", opts.name_prefix));
        Names {
            a: n("a"),
            b: n("b"),
            clone_vol: n("clone-of-volume"),
            clone_snap: n("clone-of-snapshot"),
            missing: n("missing"),
            small: n("too-small"),
            big: n("too-big"),
            concurrent: (0..opts.concurrency)
                .map(|i| n(&format!("concurrent-{i}")))
                .collect(),
        }
    }

    fn all(&self) -> impl Iterator<Item = &String> {
        [
            &self.clone_vol,
            &self.clone_snap,
            &self.a,
            &self.b,
            &self.missing,
            &self.small,
            &self.big,
        ]
        .into_iter()
        .chain(self.concurrent.iter())
    }
}

async fn cleanup(driver: &dyn StorageDriver, names: &Names) {
    for name in names.all() {
        ok(
            driver.destroy(name).await,
            &format!("cleanup: destroy {name} (destroy of a missing volume must succeed)"),
        );
    }
}

// ---- helpers ----

async fn free_bytes(driver: &dyn StorageDriver, pool: &str, ctx: &str) -> u64 {
    let d = ok(driver.discover().await, ctx);
    *d.free_bytes.get(pool).unwrap_or_else(|| {
        panic!("{ctx}: capacity is on but discover reports no free bytes for {pool}")
    })
}

/// `Some(value)` when supported, `None` when `Optional` and the driver said `Unsupported`.
fn supported<T>(r: DriverResult<T>, support: Support, ctx: &str) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(DriverError::Unsupported(_)) if support == Support::Optional => None,
        Err(e) => panic!("{ctx}: unexpected error {e:?}"),
    }
}

fn create_req(internal_name: &str, pool: &str, size_bytes: u64) -> CreateRequest {
    let mut r = testing::req(internal_name, pool, size_bytes);
    r.config.internal_name = internal_name.to_string();
    r.config.size = size_bytes.to_string();
    r
}

fn clone_req(internal_name: &str, source: &str, snapshot: Option<&str>) -> CloneRequest {
    let mut r = testing::clone_req(internal_name, source, snapshot);
    r.config.internal_name = internal_name.to_string();
    r.config.clone_source_volume_internal = source.to_string();
    r.config.clone_source_snapshot = snapshot.unwrap_or_default().to_string();
    r
}

fn check_info(info: &VolumeInfo, name: &str, pool: &str, min_size: u64, ctx: &str) {
    assert_eq!(info.internal_name, name, "{ctx}: internal name");
    assert_eq!(info.pool, pool, "{ctx}: pool of {name}");
    assert!(
        info.size_bytes >= min_size,
        "{ctx}: {name} has {} bytes, asked for {min_size}",
        info.size_bytes
    );
}

fn has_access(a: &crate::model::AccessInfo) -> bool {
    !a.nfs_path.is_empty() || !a.iscsi_target_iqn.is_empty() || !a.local_path.is_empty()
}

/// Error classes, for expectations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    NotFound,
    AlreadyExists,
    Conflict,
    Unsupported,
    Invalid,
}

fn class_of(e: &DriverError) -> Option<Class> {
    match e {
        DriverError::NotFound(_) => Some(Class::NotFound),
        DriverError::AlreadyExists(_) => Some(Class::AlreadyExists),
        DriverError::Conflict(_) => Some(Class::Conflict),
        DriverError::Unsupported(_) => Some(Class::Unsupported),
        DriverError::Invalid(_) => Some(Class::Invalid),
        DriverError::Unavailable(_) | DriverError::Other(_) => None,
    }
}

fn ok<T>(r: DriverResult<T>, ctx: &str) -> T {
    r.unwrap_or_else(|e| panic!("{ctx}: unexpected error {e:?}"))
}

fn expect_class<T: std::fmt::Debug>(r: DriverResult<T>, want: Class, ctx: &str) {
    expect_one_of(r, &[want], ctx)
}

fn expect_one_of<T: std::fmt::Debug>(r: DriverResult<T>, want: &[Class], ctx: &str) {
    match r {
        Ok(v) => panic!("{ctx}: expected an error of class {want:?}, got Ok({v:?})"),
        Err(e) => {
            assert!(
                class_of(&e).is_some_and(|c| want.contains(&c)),
                "{ctx}: expected an error of class {want:?}, got {e:?}"
            );
            assert!(!e.is_retryable(), "{ctx}: {e:?} is classified retryable");
            assert!(
                !e.to_string().is_empty(),
                "{ctx}: {e:?} has an empty message"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    //! The suite must catch broken drivers: a wrapper around the fake injects one bug at a time.

    use async_trait::async_trait;
    use serde_json::json;

    use super::*;
    use crate::drivers::fake::FakeDriver;
    use crate::drivers::{Discovery, HostAccess, PublishContext, SnapshotInfo};
    use crate::model::AccessInfo;

    #[derive(Debug, Clone, Copy, PartialEq)]
    pub(super) enum Bug {
        None,
        DestroyMissingIsNotFound,
        DuplicateCreateSucceeds,
        DeleteSnapshotTwiceFails,
        NotFoundIsUnavailable,
        ClonesUnsupported,
        ShrinkAllowed,
        DestroyKeepsCapacity,
        /// Each publish answers another context.
        PublishContextChanges,
        /// A destroy leaves the volume's grants to hosts.
        DestroyKeepsGrants,
        /// Unpublish of what is not published is `NotFound`.
        UnpublishTwiceFails,
    }

    /// Grants to hosts, by (volume, node): the LUN a publish answered.
    pub(super) type Grants =
        std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<(String, String), u32>>>;

    /// The fake with one bug, and grants to hosts kept in memory (it needs publish).
    #[derive(Debug)]
    pub(super) struct Broken {
        inner: FakeDriver,
        bug: Bug,
        leaks: std::sync::atomic::AtomicUsize,
        pub(super) grants: Grants,
        publishes: std::sync::atomic::AtomicU32,
    }

    pub(super) fn broken(bug: Bug) -> Broken {
        let inner = FakeDriver::new(&json!({
            "version": 1, "storageDriverName": "fake", "instanceName": "broken",
            "pools": {"p": {"attributes": {}, "sizeBytes": 100u64 << 30}},
        }))
        .unwrap();
        Broken {
            inner,
            bug,
            leaks: Default::default(),
            grants: Default::default(),
            publishes: Default::default(),
        }
    }

    fn opts() -> ConformanceOptions {
        ConformanceOptions {
            size_bytes: 64 << 20,
            min_size_bytes: Some(1 << 20),
            ..Default::default()
        }
    }

    #[async_trait]
    impl StorageDriver for Broken {
        fn driver_name(&self) -> &'static str {
            "broken"
        }
        fn external_config(&self) -> serde_json::Value {
            self.inner.external_config()
        }
        fn internal_name(&self, volume_name: &str) -> String {
            self.inner.internal_name(volume_name)
        }
        async fn discover(&self) -> DriverResult<Discovery> {
            self.inner.discover().await
        }
        async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
            match self.inner.create(req).await {
                Err(DriverError::AlreadyExists(_)) if self.bug == Bug::DuplicateCreateSucceeds => {
                    Ok(self.inner.get(&req.internal_name).await?.unwrap())
                }
                r => r,
            }
        }
        async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
            if self.bug == Bug::ClonesUnsupported {
                return Err(DriverError::Unsupported("no clones here".into()));
            }
            self.inner.clone_volume(req).await
        }
        async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>> {
            self.inner.get(internal_name).await
        }
        async fn destroy(&self, internal_name: &str) -> DriverResult<()> {
            if self.bug != Bug::DestroyKeepsGrants {
                self.grants
                    .lock()
                    .unwrap()
                    .retain(|(v, _), _| v != internal_name);
            }
            let existed = self.inner.get(internal_name).await?;
            if existed.is_none() && self.bug == Bug::DestroyMissingIsNotFound {
                return Err(DriverError::NotFound("gone".into()));
            }
            self.inner.destroy(internal_name).await?;
            if let (Some(v), Bug::DestroyKeepsCapacity) = (&existed, self.bug) {
                // Leak the bytes: a hidden volume takes them back.
                let n = self
                    .leaks
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let leak = create_req(&format!("leak-{n}"), &v.pool, v.size_bytes);
                self.inner.create(&leak).await?;
            }
            Ok(())
        }
        async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()> {
            if self.bug == Bug::ShrinkAllowed
                && let Some(v) = self.inner.get(internal_name).await?
                && size_bytes < v.size_bytes
            {
                return Ok(());
            }
            self.inner.resize(internal_name, size_bytes).await
        }
        async fn create_snapshot(&self, v: &str, s: &str) -> DriverResult<SnapshotInfo> {
            self.inner.create_snapshot(v, s).await
        }
        async fn list_snapshots(&self, v: &str) -> DriverResult<Vec<SnapshotInfo>> {
            self.inner.list_snapshots(v).await
        }
        async fn delete_snapshot(&self, v: &str, s: &str) -> DriverResult<()> {
            if self.bug == Bug::DeleteSnapshotTwiceFails
                && !self
                    .inner
                    .list_snapshots(v)
                    .await?
                    .iter()
                    .any(|x| x.name == s)
            {
                return Err(DriverError::NotFound("no such snapshot".into()));
            }
            self.inner.delete_snapshot(v, s).await
        }
        async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
            self.inner.list_volumes().await
        }
        async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo> {
            match self.inner.access_info(internal_name).await {
                Err(DriverError::NotFound(m)) if self.bug == Bug::NotFoundIsUnavailable => {
                    Err(DriverError::Unavailable(m))
                }
                r => r,
            }
        }
        fn needs_publish(&self) -> bool {
            true
        }
        async fn publish(&self, name: &str, host: &HostAccess) -> DriverResult<PublishContext> {
            if self.inner.get(name).await?.is_none() {
                return Err(DriverError::NotFound(format!("volume {name} not found")));
            }
            if host.iscsi_initiator.is_none() {
                return Err(DriverError::Invalid("node_id has no initiator".into()));
            }
            let n = self
                .publishes
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut g = self.grants.lock().unwrap();
            let lun = *g.entry((name.into(), host.node.clone())).or_insert(n);
            let lun = if self.bug == Bug::PublishContextChanges {
                n
            } else {
                lun
            };
            Ok(PublishContext::from([("lun".into(), lun.to_string())]))
        }
        async fn unpublish(&self, name: &str, host: &HostAccess) -> DriverResult<()> {
            let key = (name.to_string(), host.node.clone());
            let removed = self.grants.lock().unwrap().remove(&key);
            if removed.is_none() && self.bug == Bug::UnpublishTwiceFails {
                return Err(DriverError::NotFound("not published".into()));
            }
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_correct_driver_passes() {
        run(&broken(Bug::None), "p", &opts()).await;
    }

    #[tokio::test]
    #[should_panic(expected = "destroy of a missing volume")]
    async fn catches_destroy_not_idempotent() {
        run(&broken(Bug::DestroyMissingIsNotFound), "p", &opts()).await;
    }

    #[tokio::test]
    #[should_panic(expected = "create of an existing name")]
    async fn catches_duplicate_create() {
        run(&broken(Bug::DuplicateCreateSucceeds), "p", &opts()).await;
    }

    #[tokio::test]
    #[should_panic(expected = "second delete_snapshot")]
    async fn catches_delete_snapshot_not_idempotent() {
        run(&broken(Bug::DeleteSnapshotTwiceFails), "p", &opts()).await;
    }

    #[tokio::test]
    #[should_panic(expected = "access_info of a missing volume")]
    async fn catches_misclassified_errors() {
        run(&broken(Bug::NotFoundIsUnavailable), "p", &opts()).await;
    }

    #[tokio::test]
    #[should_panic(expected = "resize shrink")]
    async fn catches_shrink() {
        run(&broken(Bug::ShrinkAllowed), "p", &opts()).await;
    }

    #[tokio::test]
    #[should_panic(expected = "capacity: destroy did not give the bytes back")]
    async fn catches_capacity_leak() {
        run(&broken(Bug::DestroyKeepsCapacity), "p", &opts()).await;
    }

    #[tokio::test]
    #[should_panic(expected = "clone_volume from a volume")]
    async fn required_clones_must_work() {
        run(&broken(Bug::ClonesUnsupported), "p", &opts()).await;
    }

    #[tokio::test]
    async fn optional_clones_may_be_unsupported() {
        let d = broken(Bug::ClonesUnsupported);
        run(
            &d,
            "p",
            &ConformanceOptions {
                clones: Support::Optional,
                ..opts()
            },
        )
        .await;
        assert!(d.list_volumes().await.unwrap().is_empty());
        run(
            &d,
            "p",
            &ConformanceOptions {
                clones: Support::Skip,
                ..opts()
            },
        )
        .await;
    }

    #[tokio::test]
    async fn leftovers_of_a_failed_run_are_cleaned_first() {
        let d = broken(Bug::None);
        let leftover = d.internal_name("conformance-a");
        d.create(&create_req(&leftover, "p", 1 << 30))
            .await
            .unwrap();
        run(&d, "p", &opts()).await;
        assert!(d.list_volumes().await.unwrap().is_empty());
    }
}

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
//! - no error seen along the way is classified retryable.
//!
//! Where a feature is [`Support::Optional`], an `Unsupported` answer skips that part; where
//! it is [`Support::Skip`] the part is not run.

use std::collections::BTreeMap;

use super::{CloneRequest, CreateRequest, DriverError, DriverResult, StorageDriver, VolumeInfo};
use crate::model::VolumeConfig;

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
            concurrency: 16,
        }
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

/// Discovery reports the pool, with a `backendType` offer, and a backend name.
pub async fn check_discovery(driver: &dyn StorageDriver, pool: &str) {
    let d = ok(driver.discover().await, "discover");
    assert!(!d.backend_name.is_empty(), "discover: empty backend name");
    let mut seen = std::collections::BTreeSet::new();
    for p in &d.pools {
        assert!(
            seen.insert(p.name.as_str()),
            "discover: pool {} listed twice",
            p.name
        );
    }
    let p = d
        .pools
        .iter()
        .find(|p| p.name == pool)
        .unwrap_or_else(|| panic!("discover: pool {pool} not reported (pools: {seen:?})"));
    assert!(
        p.offers.contains_key("backendType"),
        "discover: pool {pool} does not offer backendType"
    );
    for name in d.free_bytes.keys() {
        assert!(
            seen.contains(name.as_str()),
            "discover: free bytes reported for unknown pool {name}"
        );
    }
}

/// `internal_name` is a pure function that keeps distinct names distinct.
pub fn check_internal_names(driver: &dyn StorageDriver, opts: &ConformanceOptions) {
    let a = driver.internal_name(&format!("{}-x", opts.name_prefix));
    let b = driver.internal_name(&format!("{}-y", opts.name_prefix));
    assert!(!a.is_empty(), "internal_name: empty");
    assert_eq!(
        a,
        driver.internal_name(&format!("{}-x", opts.name_prefix)),
        "internal_name: not deterministic"
    );
    assert_ne!(
        a, b,
        "internal_name: two volume names map to one internal name"
    );
}

async fn check_missing_volume(driver: &dyn StorageDriver, names: &Names) {
    let m = &names.missing;
    assert_eq!(
        ok(driver.get(m).await, "get missing"),
        None,
        "get of a missing volume"
    );
    ok(driver.destroy(m).await, "destroy of a missing volume");
    ok(
        driver.destroy(m).await,
        "second destroy of a missing volume",
    );
    expect_class(
        driver.access_info(m).await,
        Class::NotFound,
        "access_info of a missing volume",
    );
    expect_class(
        driver.resize(m, 1 << 30).await,
        Class::NotFound,
        "resize of a missing volume",
    );
    expect_one_of(
        driver.create_snapshot(m, "s").await,
        &[Class::NotFound, Class::Unsupported],
        "create_snapshot on a missing volume",
    );
    expect_one_of(
        driver.list_snapshots(m).await,
        &[Class::NotFound, Class::Unsupported],
        "list_snapshots on a missing volume",
    );
    match driver.delete_snapshot(m, "s").await {
        Ok(()) | Err(DriverError::NotFound(_)) | Err(DriverError::Unsupported(_)) => {}
        Err(e) => panic!("delete_snapshot on a missing volume: unexpected {e:?}"),
    }
    let listed = ok(driver.list_volumes().await, "list_volumes");
    assert!(
        !listed.iter().any(|v| &v.internal_name == m),
        "list_volumes reports a volume that was never created"
    );
}

/// Create, get, list, access info, duplicate create, destroy twice.
async fn check_lifecycle(
    driver: &dyn StorageDriver,
    pool: &str,
    opts: &ConformanceOptions,
    names: &Names,
) {
    let a = &names.a;
    let created = ok(
        driver.create(&create_req(a, pool, opts.size_bytes)).await,
        "create",
    );
    check_info(&created, a, pool, opts.size_bytes, "create");
    assert!(
        has_access(&created.access),
        "create: no access information for {a}: {:?}",
        created.access
    );

    let got = ok(driver.get(a).await, "get after create")
        .unwrap_or_else(|| panic!("get after create: {a} not found"));
    check_info(&got, a, pool, opts.size_bytes, "get after create");

    let access = ok(driver.access_info(a).await, "access_info");
    assert_eq!(
        access, created.access,
        "access_info differs from what create returned"
    );

    let listed = ok(driver.list_volumes().await, "list_volumes after create");
    let entry = listed
        .iter()
        .find(|v| &v.internal_name == a)
        .unwrap_or_else(|| panic!("list_volumes after create: {a} missing"));
    check_info(entry, a, pool, opts.size_bytes, "list_volumes after create");

    expect_class(
        driver.create(&create_req(a, pool, opts.size_bytes)).await,
        Class::AlreadyExists,
        "create of an existing name",
    );
    // The failed duplicate changed nothing.
    let got = ok(driver.get(a).await, "get after duplicate create")
        .unwrap_or_else(|| panic!("get after duplicate create: {a} is gone"));
    check_info(&got, a, pool, opts.size_bytes, "get after duplicate create");

    ok(driver.destroy(a).await, "destroy");
    ok(driver.destroy(a).await, "second destroy");
    assert_eq!(
        ok(driver.get(a).await, "get after destroy"),
        None,
        "get after destroy"
    );
    let listed = ok(driver.list_volumes().await, "list_volumes after destroy");
    assert!(
        !listed.iter().any(|v| &v.internal_name == a),
        "list_volumes after destroy still reports {a}"
    );
    expect_class(
        driver.access_info(a).await,
        Class::NotFound,
        "access_info after destroy",
    );

    // The name is free again.
    ok(
        driver.create(&create_req(a, pool, opts.size_bytes)).await,
        "create after destroy",
    );
    ok(driver.destroy(a).await, "destroy of the re-created volume");
}

async fn check_bad_requests(
    driver: &dyn StorageDriver,
    pool: &str,
    opts: &ConformanceOptions,
    names: &Names,
) {
    if let Some(min) = opts.min_size_bytes.filter(|m| *m > 1) {
        expect_class(
            driver
                .create(&create_req(&names.small, pool, min - 1))
                .await,
            Class::Invalid,
            "create below the minimum size",
        );
        assert_eq!(
            ok(driver.get(&names.small).await, "get after a refused create"),
            None,
            "a create refused as too small left a volume behind"
        );
        let made = ok(
            driver.create(&create_req(&names.small, pool, min)).await,
            "create at exactly the minimum size",
        );
        check_info(&made, &names.small, pool, min, "create at the minimum size");
        ok(
            driver.destroy(&names.small).await,
            "destroy of the minimum-size volume",
        );
    }
    let no_pool = format!("{pool}-conformance-no-such-pool");
    expect_one_of(
        driver
            .create(&create_req(&names.small, &no_pool, opts.size_bytes))
            .await,
        &[Class::Invalid, Class::NotFound],
        "create in an unknown pool",
    );
    assert_eq!(
        ok(
            driver.get(&names.small).await,
            "get after create in an unknown pool"
        ),
        None,
        "a create in an unknown pool left a volume behind"
    );
}

async fn free_bytes(driver: &dyn StorageDriver, pool: &str, ctx: &str) -> u64 {
    let d = ok(driver.discover().await, ctx);
    *d.free_bytes.get(pool).unwrap_or_else(|| {
        panic!("{ctx}: capacity is on but discover reports no free bytes for {pool}")
    })
}

async fn check_capacity(
    driver: &dyn StorageDriver,
    pool: &str,
    opts: &ConformanceOptions,
    names: &Names,
) {
    let before = free_bytes(driver, pool, "capacity: discover before create").await;
    if let Some(too_big) = before.checked_add(1) {
        expect_class(
            driver.create(&create_req(&names.big, pool, too_big)).await,
            Class::Conflict,
            "create larger than the pool's free bytes",
        );
        assert_eq!(
            ok(driver.get(&names.big).await, "get after a refused create"),
            None,
            "a create refused for capacity left a volume behind"
        );
    }
    assert_eq!(
        free_bytes(driver, pool, "capacity: discover after a refused create").await,
        before,
        "a refused create changed the pool's free bytes"
    );
    if before < opts.size_bytes {
        panic!(
            "capacity: pool {pool} has {before} bytes free, the suite needs {}",
            opts.size_bytes
        );
    }
    ok(
        driver
            .create(&create_req(&names.a, pool, opts.size_bytes))
            .await,
        "capacity: create",
    );
    let after = free_bytes(driver, pool, "capacity: discover after create").await;
    assert_eq!(
        after,
        before - opts.size_bytes,
        "capacity: free bytes after creating {} bytes",
        opts.size_bytes
    );
    // Exactly what is left fits.
    if after >= opts.min_size_bytes.unwrap_or(1).max(1) && after > 0 {
        ok(
            driver.create(&create_req(&names.big, pool, after)).await,
            "capacity: create of exactly the free bytes",
        );
        assert_eq!(
            free_bytes(driver, pool, "capacity: discover when full").await,
            0,
            "capacity: pool not full after using all its free bytes"
        );
        expect_class(
            driver
                .create(&create_req(&names.b, pool, opts.size_bytes))
                .await,
            Class::Conflict,
            "capacity: create in a full pool",
        );
        ok(
            driver.destroy(&names.big).await,
            "capacity: destroy of the filling volume",
        );
    }
    ok(driver.destroy(&names.a).await, "capacity: destroy");
    assert_eq!(
        free_bytes(driver, pool, "capacity: discover after destroy").await,
        before,
        "capacity: destroy did not give the bytes back"
    );
    ok(driver.destroy(&names.a).await, "capacity: second destroy");
    assert_eq!(
        free_bytes(driver, pool, "capacity: discover after second destroy").await,
        before,
        "capacity: a second destroy changed the free bytes"
    );
}

/// `Some(value)` when supported, `None` when `Optional` and the driver said `Unsupported`.
fn supported<T>(r: DriverResult<T>, support: Support, ctx: &str) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(DriverError::Unsupported(_)) if support == Support::Optional => None,
        Err(e) => panic!("{ctx}: unexpected error {e:?}"),
    }
}

async fn check_snapshots(
    driver: &dyn StorageDriver,
    pool: &str,
    opts: &ConformanceOptions,
    names: &Names,
) {
    let a = &names.a;
    ok(
        driver.create(&create_req(a, pool, opts.size_bytes)).await,
        "snapshots: create volume",
    );
    let Some(snap) = supported(
        driver.create_snapshot(a, "snap1").await,
        opts.snapshots,
        "create_snapshot",
    ) else {
        ok(driver.destroy(a).await, "snapshots: destroy volume");
        return;
    };
    assert_eq!(snap.name, "snap1", "create_snapshot: name");
    assert_eq!(&snap.volume_internal_name, a, "create_snapshot: volume");
    assert!(snap.created_ms > 0, "create_snapshot: no creation time");

    expect_class(
        driver.create_snapshot(a, "snap1").await,
        Class::AlreadyExists,
        "create_snapshot twice",
    );
    ok(
        driver.create_snapshot(a, "snap2").await,
        "create_snapshot snap2",
    );

    let listed = ok(driver.list_snapshots(a).await, "list_snapshots");
    let mut listed_names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    listed_names.sort_unstable();
    assert_eq!(listed_names, ["snap1", "snap2"], "list_snapshots");
    for s in &listed {
        assert_eq!(
            &s.volume_internal_name, a,
            "list_snapshots: volume of {}",
            s.name
        );
    }

    ok(driver.delete_snapshot(a, "snap1").await, "delete_snapshot");
    ok(
        driver.delete_snapshot(a, "snap1").await,
        "second delete_snapshot",
    );
    ok(
        driver.delete_snapshot(a, "never-made").await,
        "delete_snapshot of a missing snapshot",
    );
    let listed = ok(
        driver.list_snapshots(a).await,
        "list_snapshots after delete",
    );
    let listed_names: Vec<&str> = listed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(listed_names, ["snap2"], "list_snapshots after delete");

    // Snapshots go with their volume: a new volume of the same name has none.
    ok(
        driver.destroy(a).await,
        "snapshots: destroy volume with a snapshot",
    );
    ok(
        driver.create(&create_req(a, pool, opts.size_bytes)).await,
        "snapshots: re-create volume",
    );
    let listed = ok(
        driver.list_snapshots(a).await,
        "list_snapshots of a re-created volume",
    );
    assert!(
        listed.is_empty(),
        "snapshots survived their volume's destroy: {listed:?}"
    );
    ok(
        driver.destroy(a).await,
        "snapshots: destroy re-created volume",
    );
}

async fn check_clones(
    driver: &dyn StorageDriver,
    pool: &str,
    opts: &ConformanceOptions,
    names: &Names,
) {
    let a = &names.a;
    let source = ok(
        driver.create(&create_req(a, pool, opts.size_bytes)).await,
        "clones: create source",
    );

    let Some(clone) = supported(
        driver
            .clone_volume(&clone_req(&names.clone_vol, a, None))
            .await,
        opts.clones,
        "clone_volume from a volume",
    ) else {
        ok(driver.destroy(a).await, "clones: destroy source");
        return;
    };
    check_info(
        &clone,
        &names.clone_vol,
        &source.pool,
        source.size_bytes,
        "clone_volume",
    );
    assert!(
        has_access(&clone.access),
        "clone_volume: no access information"
    );
    let got = ok(driver.get(&names.clone_vol).await, "get of a clone")
        .unwrap_or_else(|| panic!("get of a clone: {} not found", names.clone_vol));
    check_info(
        &got,
        &names.clone_vol,
        &source.pool,
        source.size_bytes,
        "get of a clone",
    );
    expect_class(
        driver
            .clone_volume(&clone_req(&names.clone_vol, a, None))
            .await,
        Class::AlreadyExists,
        "clone_volume onto an existing name",
    );
    expect_class(
        driver
            .clone_volume(&clone_req(&names.b, &names.missing, None))
            .await,
        Class::NotFound,
        "clone_volume of a missing source",
    );
    assert_eq!(
        ok(driver.get(&names.b).await, "get after a failed clone"),
        None,
        "a failed clone left a volume behind"
    );

    let snapshots_work = opts.snapshots != Support::Skip
        && supported(
            driver.create_snapshot(a, "clone-base").await,
            Support::Optional,
            "clones: create_snapshot",
        )
        .is_some();
    if snapshots_work {
        let c = ok(
            driver
                .clone_volume(&clone_req(&names.clone_snap, a, Some("clone-base")))
                .await,
            "clone_volume from a snapshot",
        );
        check_info(
            &c,
            &names.clone_snap,
            &source.pool,
            source.size_bytes,
            "clone from snapshot",
        );
        expect_class(
            driver
                .clone_volume(&clone_req(&names.b, a, Some("no-such-snapshot")))
                .await,
            Class::NotFound,
            "clone_volume from a missing snapshot",
        );
        assert_eq!(
            ok(driver.get(&names.b).await, "get after a failed clone"),
            None,
            "a failed clone from a missing snapshot left a volume behind"
        );
        ok(
            driver.destroy(&names.clone_snap).await,
            "destroy of a clone from a snapshot",
        );
        ok(
            driver.delete_snapshot(a, "clone-base").await,
            "clones: delete snapshot",
        );
    }

    ok(driver.destroy(&names.clone_vol).await, "destroy of a clone");
    assert_eq!(
        ok(
            driver.get(&names.clone_vol).await,
            "get of a destroyed clone"
        ),
        None
    );
    assert!(
        ok(
            driver.get(a).await,
            "get of the source after its clone's destroy"
        )
        .is_some(),
        "destroying a clone removed its source"
    );
    ok(driver.destroy(a).await, "clones: destroy source");
}

async fn check_resize(
    driver: &dyn StorageDriver,
    pool: &str,
    opts: &ConformanceOptions,
    names: &Names,
) {
    let a = &names.a;
    let size = opts.size_bytes;
    ok(
        driver.create(&create_req(a, pool, size)).await,
        "resize: create",
    );
    let before = if opts.capacity {
        Some(free_bytes(driver, pool, "resize: discover").await)
    } else {
        None
    };
    let Some(()) = supported(driver.resize(a, size * 2).await, opts.resize, "resize grow") else {
        ok(driver.destroy(a).await, "resize: destroy");
        return;
    };
    let got = ok(driver.get(a).await, "get after resize")
        .unwrap_or_else(|| panic!("get after resize: {a} not found"));
    assert!(
        got.size_bytes >= size * 2,
        "resize: size after growing to {} is {}",
        size * 2,
        got.size_bytes
    );
    ok(
        driver.resize(a, got.size_bytes).await,
        "resize to the current size",
    );
    if opts.shrink_refused {
        expect_class(
            driver.resize(a, size).await,
            Class::Invalid,
            "resize shrink",
        );
        let got = ok(driver.get(a).await, "get after refused shrink").expect("volume gone");
        assert!(
            got.size_bytes >= size * 2,
            "a refused shrink changed the size"
        );
    }
    if let Some(before) = before {
        let after = free_bytes(driver, pool, "resize: discover after grow").await;
        assert_eq!(
            after,
            before - size,
            "resize: free bytes after growing by {size}"
        );
        if let Some(too_big) = (size * 2).checked_add(after).and_then(|s| s.checked_add(1)) {
            expect_class(
                driver.resize(a, too_big).await,
                Class::Conflict,
                "resize beyond the pool's free bytes",
            );
            assert_eq!(
                free_bytes(driver, pool, "resize: discover after refused grow").await,
                after,
                "a refused resize changed the free bytes"
            );
        }
    }
    ok(driver.destroy(a).await, "resize: destroy");
    if let Some(before) = before {
        assert_eq!(
            free_bytes(driver, pool, "resize: discover after destroy").await,
            before + size,
            "resize: destroy of a grown volume did not give all its bytes back"
        );
    }
}

async fn check_concurrency(
    driver: &dyn StorageDriver,
    pool: &str,
    opts: &ConformanceOptions,
    names: &Names,
) {
    if opts.capacity {
        let free = free_bytes(driver, pool, "concurrency: discover").await;
        let needed = opts.size_bytes.saturating_mul(opts.concurrency as u64 + 1);
        assert!(
            free >= needed,
            "concurrency: pool {pool} has {free} bytes free, the check needs {needed} \
             ({} volumes of {} bytes); use a bigger pool or lower concurrency",
            opts.concurrency + 1,
            opts.size_bytes
        );
    }
    let reqs: Vec<CreateRequest> = names
        .concurrent
        .iter()
        .map(|n| create_req(n, pool, opts.size_bytes))
        .collect();
    let results = futures::future::join_all(reqs.iter().map(|r| driver.create(r))).await;
    for (r, name) in results.into_iter().zip(&names.concurrent) {
        ok(r, &format!("concurrent create of {name}"));
    }
    let listed: BTreeMap<String, VolumeInfo> = ok(driver.list_volumes().await, "list_volumes")
        .into_iter()
        .map(|v| (v.internal_name.clone(), v))
        .collect();
    for name in &names.concurrent {
        assert!(
            listed.contains_key(name),
            "concurrent create: {name} not listed"
        );
    }
    // The same name created concurrently: exactly one wins.
    let dup = create_req(&names.b, pool, opts.size_bytes);
    let results = futures::future::join_all((0..4).map(|_| driver.create(&dup))).await;
    let wins = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(wins, 1, "concurrent creates of one name: {wins} succeeded");
    for r in results.into_iter().filter(|r| r.is_err()) {
        expect_class(r, Class::AlreadyExists, "concurrent create of one name");
    }
    ok(
        driver.destroy(&names.b).await,
        "destroy after concurrent creates of one name",
    );

    let results =
        futures::future::join_all(names.concurrent.iter().map(|n| driver.destroy(n))).await;
    for (r, name) in results.into_iter().zip(&names.concurrent) {
        ok(r, &format!("concurrent destroy of {name}"));
    }
    for name in &names.concurrent {
        assert_eq!(
            ok(driver.get(name).await, "get after concurrent destroy"),
            None,
            "concurrent destroy: {name} still there"
        );
    }
}

// ---- helpers ----

fn create_req(internal_name: &str, pool: &str, size_bytes: u64) -> CreateRequest {
    CreateRequest {
        internal_name: internal_name.to_string(),
        pool: pool.to_string(),
        size_bytes,
        config: VolumeConfig {
            internal_name: internal_name.to_string(),
            size: size_bytes.to_string(),
            ..VolumeConfig::default()
        },
        requests: BTreeMap::new(),
    }
}

fn clone_req(internal_name: &str, source: &str, snapshot: Option<&str>) -> CloneRequest {
    CloneRequest {
        internal_name: internal_name.to_string(),
        source_internal_name: source.to_string(),
        source_snapshot: snapshot.map(str::to_string),
        config: VolumeConfig {
            internal_name: internal_name.to_string(),
            clone_source_volume_internal: source.to_string(),
            clone_source_snapshot: snapshot.unwrap_or_default().to_string(),
            ..VolumeConfig::default()
        },
    }
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
    use crate::drivers::{Discovery, SnapshotInfo};
    use crate::model::AccessInfo;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Bug {
        None,
        DestroyMissingIsNotFound,
        DuplicateCreateSucceeds,
        DeleteSnapshotTwiceFails,
        NotFoundIsUnavailable,
        ClonesUnsupported,
        ShrinkAllowed,
        DestroyKeepsCapacity,
    }

    #[derive(Debug)]
    struct Broken {
        inner: FakeDriver,
        bug: Bug,
        leaks: std::sync::atomic::AtomicUsize,
    }

    fn broken(bug: Bug) -> Broken {
        let inner = FakeDriver::new(&json!({
            "version": 1, "storageDriverName": "fake", "instanceName": "broken",
            "pools": {"p": {"attributes": {}, "sizeBytes": 100u64 << 30}},
        }))
        .unwrap();
        Broken {
            inner,
            bug,
            leaks: Default::default(),
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

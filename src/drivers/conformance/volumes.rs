//! Checks of discovery, names and the volume lifecycle: missing volumes, create / get / list /
//! destroy, bad requests, capacity and concurrency.

use super::{
    Class, ConformanceOptions, Names, check_info, create_req, expect_class, expect_one_of,
    free_bytes, has_access, ok,
};
use crate::drivers::{CreateRequest, DriverError, StorageDriver, VolumeInfo};
use std::collections::BTreeMap;

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

pub(super) async fn check_missing_volume(driver: &dyn StorageDriver, names: &Names) {
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
pub(super) async fn check_lifecycle(
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

pub(super) async fn check_bad_requests(
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

pub(super) async fn check_capacity(
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
        before - opts.footprint(opts.size_bytes),
        "capacity: free bytes after creating {} bytes",
        opts.size_bytes
    );
    // Exactly what is left fits.
    let fill = opts.largest_fitting(after);
    if fill >= opts.min_size_bytes.unwrap_or(1).max(1) && fill > 0 {
        ok(
            driver.create(&create_req(&names.big, pool, fill)).await,
            "capacity: create of exactly the free bytes",
        );
        assert_eq!(
            free_bytes(driver, pool, "capacity: discover when full").await,
            after - opts.footprint(fill),
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

pub(super) async fn check_concurrency(
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

//! Checks of what copies or changes a volume: snapshots, clones (of a volume and of a
//! snapshot) and resize.

use super::{
    Class, ConformanceOptions, Names, Support, check_info, clone_req, create_req, expect_class,
    free_bytes, has_access, ok, supported,
};
use crate::drivers::{StorageDriver, VolumeInfo};

pub(super) async fn check_snapshots(
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

pub(super) async fn check_clones(
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
        check_clone_of_snapshot(driver, names, &source).await;
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

pub(super) async fn check_resize(
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
        let grown_by = opts.footprint(size * 2) - opts.footprint(size);
        assert_eq!(
            after,
            before - grown_by,
            "resize: free bytes after growing by {size}"
        );
        let beyond = opts.largest_fitting(opts.footprint(size * 2) + after);
        if let Some(too_big) = beyond.checked_add(1) {
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
            before + opts.footprint(size),
            "resize: destroy of a grown volume did not give all its bytes back"
        );
    }
}

/// A clone from the snapshot `clone-base` of `names.a`; a missing snapshot is `NotFound` and
/// leaves nothing behind.
async fn check_clone_of_snapshot(driver: &dyn StorageDriver, names: &Names, source: &VolumeInfo) {
    let a = &names.a;
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

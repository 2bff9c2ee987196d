//! Per-host access: the checks for drivers whose `needs_publish()` is true (CSI
//! ControllerPublish / ControllerUnpublish).
//!
//! - publish of a missing volume → `NotFound`; unpublish of a missing volume succeeds;
//! - a host without an iSCSI initiator → `Invalid`, naming `node_id`;
//! - publish twice to one host → the same context; unpublish twice succeeds;
//! - two hosts, each with its own volume, and (where the array allows it) one volume on both
//!   hosts at once — else `Conflict`, changing nothing;
//! - publishes and unpublishes of several volumes to one host at once;
//! - after unpublish and destroy nothing the driver made for the hosts is left on the array
//!   (the caller's [`AccessProbe`] looks), nor after a destroy of a volume still published.

use async_trait::async_trait;

use super::{Class, ConformanceOptions, Support, create_req, expect_class, ok};
use crate::drivers::{DriverError, HostAccess, PublishContext, StorageDriver};

/// Looks at the array for what a driver made to grant hosts access.
#[async_trait]
pub trait AccessProbe: Send + Sync {
    /// The per-host access objects the driver made that are still on the array (a line
    /// each: groups, hosts, mappings to hosts, initiators), empty when none.
    async fn leftovers(&self) -> Vec<String>;
}

/// What the publish checks use.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// Two hosts with iSCSI initiators.
    pub hosts: [HostAccess; 2],
    /// One volume published to both hosts at once: `Required` must work, `Optional` may be
    /// refused with `Conflict` (arrays with one mapping per volume).
    pub shared: Support,
    /// How many volumes the concurrent check publishes to one host at once.
    pub concurrency: usize,
}

/// A host attaching over iSCSI with initiator `iqn`.
pub fn iscsi_host(node: &str, iqn: &str) -> HostAccess {
    HostAccess {
        node: node.to_string(),
        iscsi_initiator: Some(iqn.to_string()),
    }
}

impl PublishOptions {
    /// Two hosts `<prefix>-node-1` and `-2` with made-up initiators.
    pub fn new(prefix: &str, shared: Support) -> PublishOptions {
        let host = |i: u32| {
            iscsi_host(
                &format!("{prefix}-node-{i}"),
                &format!("iqn.1993-08.org.debian:01:{prefix}-{i}"),
            )
        };
        PublishOptions {
            hosts: [host(1), host(2)],
            shared,
            concurrency: 4,
        }
    }
}

/// Runs the publish checks with volumes `<name_prefix>-pub-…` in `pool`. Panics on the first
/// failure with a message naming the check.
pub async fn check_publish(
    driver: &dyn StorageDriver,
    pool: &str,
    opts: &ConformanceOptions,
    publish: &PublishOptions,
    probe: &dyn AccessProbe,
) {
    assert!(
        driver.needs_publish(),
        "publish: the checks are for drivers whose needs_publish() is true"
    );
    let n = |s: &str| driver.internal_name(&format!("{}-pub-{s}", opts.name_prefix));
    let (a, b, missing) = (n("a"), n("b"), n("missing"));
    let many: Vec<String> = (0..publish.concurrency)
        .map(|i| n(&format!("many-{i}")))
        .collect();
    let all: Vec<&String> = [&a, &b, &missing].into_iter().chain(&many).collect();
    for name in &all {
        ok(driver.destroy(name).await, "publish: cleanup before");
    }
    let [h1, h2] = &publish.hosts;

    check_missing(driver, &missing, h1).await;
    ok(
        driver.create(&create_req(&a, pool, opts.size_bytes)).await,
        "publish: create a",
    );
    ok(
        driver.create(&create_req(&b, pool, opts.size_bytes)).await,
        "publish: create b",
    );
    let no_initiator = HostAccess {
        node: h1.node.clone(),
        iscsi_initiator: None,
    };
    match driver.publish(&a, &no_initiator).await {
        Err(DriverError::Invalid(m)) => assert!(
            m.contains("node_id"),
            "publish: the refusal of a host without initiator names node_id: {m}"
        ),
        other => panic!("publish to a host without an initiator: expected Invalid, got {other:?}"),
    }

    let ctx_a = publish_twice(driver, &a, h1).await;
    publish_twice(driver, &b, h2).await;
    check_shared(driver, &a, h1, h2, &ctx_a, publish.shared).await;
    for (v, h) in [(&a, h1), (&b, h2), (&a, h2)] {
        unpublish_twice(driver, v, h).await;
    }
    check_clean(probe, "after every unpublish").await;

    check_concurrent(driver, pool, opts, &many, h1).await;

    // Published again, then destroyed while published: nothing left either.
    ok(driver.publish(&a, h2).await, "publish: publish a again");
    for name in &all {
        ok(driver.destroy(name).await, "publish: destroy");
    }
    check_clean(probe, "after a destroy of a published volume").await;
}

async fn check_missing(driver: &dyn StorageDriver, missing: &str, h: &HostAccess) {
    expect_class(
        driver.publish(missing, h).await,
        Class::NotFound,
        "publish of a missing volume",
    );
    ok(
        driver.unpublish(missing, h).await,
        "publish: unpublish of a missing volume must succeed",
    );
}

async fn publish_twice(driver: &dyn StorageDriver, v: &str, h: &HostAccess) -> PublishContext {
    let first = ok(
        driver.publish(v, h).await,
        &format!("publish {v} to {}", h.node),
    );
    let second = ok(
        driver.publish(v, h).await,
        &format!("second publish {v} to {}", h.node),
    );
    assert_eq!(
        first, second,
        "publish: a second publish of {v} to {} must return the same context",
        h.node
    );
    first
}

async fn unpublish_twice(driver: &dyn StorageDriver, v: &str, h: &HostAccess) {
    for round in ["first", "second"] {
        ok(
            driver.unpublish(v, h).await,
            &format!("publish: {round} unpublish of {v} from {}", h.node),
        );
    }
}

/// Volume `a` on host `h1`, then on `h2` as well.
async fn check_shared(
    driver: &dyn StorageDriver,
    a: &str,
    h1: &HostAccess,
    h2: &HostAccess,
    ctx_a: &PublishContext,
    shared: Support,
) {
    match (driver.publish(a, h2).await, shared) {
        (Ok(_), Support::Required | Support::Optional) => {
            publish_twice(driver, a, h2).await;
        }
        (Err(DriverError::Conflict(_)), Support::Optional) => {
            let again = ok(
                driver.publish(a, h1).await,
                "publish: a on h1 after a refusal",
            );
            assert_eq!(
                &again, ctx_a,
                "publish: a refused publish to a second host must change nothing"
            );
        }
        (_, Support::Skip) => {}
        (other, _) => panic!("publish of one volume to a second host: got {other:?}"),
    }
}

/// Several volumes published to one host at once, then unpublished at once.
async fn check_concurrent(
    driver: &dyn StorageDriver,
    pool: &str,
    opts: &ConformanceOptions,
    many: &[String],
    h: &HostAccess,
) {
    for v in many {
        ok(
            driver.create(&create_req(v, pool, opts.size_bytes)).await,
            "publish: create for the concurrent check",
        );
    }
    let published = futures::future::join_all(many.iter().map(|v| driver.publish(v, h))).await;
    for (v, r) in many.iter().zip(published) {
        ok(r, &format!("publish: concurrent publish of {v}"));
    }
    let unpublished = futures::future::join_all(many.iter().map(|v| driver.unpublish(v, h))).await;
    for (v, r) in many.iter().zip(unpublished) {
        ok(r, &format!("publish: concurrent unpublish of {v}"));
    }
}

async fn check_clean(probe: &dyn AccessProbe, when: &str) {
    let left = probe.leftovers().await;
    assert!(
        left.is_empty(),
        "publish: {when}, the array still holds per-host access objects: {left:?}"
    );
}

#[cfg(test)]
mod tests {
    //! The checks must catch broken drivers: the suite's fake with grants, one bug at a time.

    use super::*;
    use crate::drivers::conformance::tests::{Bug, Grants, broken};

    struct Probe(Grants);

    #[async_trait]
    impl AccessProbe for Probe {
        async fn leftovers(&self) -> Vec<String> {
            let g = self.0.lock().unwrap();
            g.keys().map(|(v, n)| format!("{v} on {n}")).collect()
        }
    }

    async fn run(bug: Bug) {
        let d = broken(bug);
        let opts = ConformanceOptions {
            size_bytes: 64 << 20,
            ..Default::default()
        };
        let probe = Probe(d.grants.clone());
        let p = PublishOptions::new("unit", Support::Required);
        check_publish(&d, "p", &opts, &p, &probe).await;
        assert!(d.list_volumes().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_correct_driver_passes() {
        run(Bug::None).await;
    }

    #[tokio::test]
    #[should_panic(expected = "must return the same context")]
    async fn catches_a_changing_context() {
        run(Bug::PublishContextChanges).await;
    }

    #[tokio::test]
    #[should_panic(expected = "after a destroy of a published volume")]
    async fn catches_grants_left_by_destroy() {
        run(Bug::DestroyKeepsGrants).await;
    }

    #[tokio::test]
    #[should_panic(expected = "unpublish of a missing volume must succeed")]
    async fn catches_unpublish_not_idempotent() {
        run(Bug::UnpublishTwiceFails).await;
    }
}

//! The placement policy: which pools a create tries, in which order.
//!
//! Candidates are the class's matched pools ∩ protocol ∩ backend online and not suspended by
//! an operator ∩ free capacity ∩ reachable from the request's topology (when it names one),
//! shuffled with a recorded seed,
//! then ordered by the topology's preferred segments and then by their backend's load (driver calls running
//! and queued per permit, plus creates planned onto it first whose intent is not yet durable;
//! a stable sort, so the shuffle decides among equals). An idle system places at random, as
//! Trident does; a busy one sends new work to the array with free permits instead of queueing
//! it behind another's. The order is recorded in `PlacementPlanned`, so replay and
//! reconciliation never recompute it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::error::CoreError;
use super::shared::{BackendStatus, Shared, read};
use crate::model::{PoolRef, Protocol, Segment, TopologyRequirement};
use crate::projections::BackendState;

/// The pools a create of `size_bytes` in `class` over `protocol` (reachable from `topology`)
/// tries, in order.
pub(crate) fn plan(
    shared: &Shared,
    class: &str,
    protocol: Protocol,
    size_bytes: u64,
    seed: u64,
    topology: Option<&TopologyRequirement>,
) -> Result<Vec<PoolRef>, CoreError> {
    let matched = match read(&shared.classes).get(class) {
        Some(slot) => slot.matched.clone(),
        None => {
            return Err(CoreError::Invalid(format!(
                "unknown storage class: {class}"
            )));
        }
    };
    let mut candidates = Vec::with_capacity(matched.len());
    let mut starting = std::collections::BTreeSet::new();
    let mut suspended = std::collections::BTreeSet::new();
    let mut outside = 0usize;
    // Pools whose driver refuses the size, with why; pools short of free space.
    let mut wrong_size: Vec<String> = Vec::new();
    let mut short = 0usize;
    let mut rank = std::collections::HashMap::new();
    shared.projection.read(|state| {
        let backends = read(&shared.backends);
        for pool in matched.iter() {
            let Some(rec) = state.backends.get(&pool.backend) else {
                continue;
            };
            if !rec.online || !serves(rec.protocol, protocol) {
                continue;
            }
            if let Some(t) = topology {
                if !t.admits(&rec.topology) {
                    outside += 1;
                    continue;
                }
                rank.insert(pool.backend.clone(), t.rank(&rec.topology));
            }
            // An operator's suspension holds whatever the backend's health: not a wait.
            if rec.suspended {
                suspended.insert(pool.backend.clone());
                continue;
            }
            let Some(slot) = backends.get(&pool.backend) else {
                continue;
            };
            match slot.status.state() {
                BackendState::Online => {}
                BackendState::Initializing => {
                    starting.insert(pool.backend.clone());
                    continue;
                }
                _ => continue,
            }
            let driver = slot.status.driver();
            if let Some(why) = driver.as_ref().and_then(|d| {
                crate::drivers::StorageDriver::size_limits(d.as_ref())
                    .check(size_bytes)
                    .err()
            }) {
                wrong_size.push(format!("{pool}: {why}"));
                continue;
            }
            // As the leader recorded them, adjusted by the volumes created and deleted since.
            let free = rec
                .observed
                .as_ref()
                .and_then(|o| o.free_bytes.get(&pool.pool));
            if free.is_some_and(|f| *f < size_bytes) {
                short += 1;
                continue;
            }
            candidates.push(pool.clone());
        }
    });
    if candidates.is_empty() && !starting.is_empty() {
        let names: Vec<String> = starting.into_iter().collect();
        return Err(CoreError::Starting(format!(
            "no available backends for storage class {class} yet: {} still initialising; \
             try again shortly",
            names.join(", ")
        )));
    }
    if candidates.is_empty() && !suspended.is_empty() {
        let names: Vec<String> = suspended.into_iter().collect();
        return Err(CoreError::Failed(format!(
            "no available backends for storage class {class}: {} {SUSPENDED}; {}",
            names.join(", "),
            explain_hint(class)
        )));
    }
    // Not a placement failure but bad input: no pool that was looked at could ever take
    // this size (a suspended one was not looked at: see above).
    if candidates.is_empty() && !wrong_size.is_empty() && short == 0 {
        return Err(CoreError::OutOfRange(format!(
            "size: no pool of storage class {class} takes a volume of {size_bytes} bytes ({}): {}; {}",
            crate::model::format_size(size_bytes),
            wrong_size.join("; "),
            explain_hint(class)
        )));
    }
    if candidates.is_empty() && outside > 0 {
        return Err(CoreError::Failed(format!(
            "{OUTSIDE_TOPOLOGY}: {outside} pool(s) of storage class {class} could take the volume, \
             but none is reachable from the requested topology; {}",
            explain_hint(class)
        )));
    }
    if candidates.is_empty() {
        return Err(CoreError::Failed(format!(
            "no available backends for storage class {class}; {}",
            explain_hint(class)
        )));
    }
    shuffle(&mut candidates, seed);
    let backends = read(&shared.backends);
    candidates.sort_by_cached_key(|p| {
        let load = backends.get(&p.backend).map_or(0, |b| load(&b.status));
        (rank.get(&p.backend).copied().unwrap_or(0), load)
    });
    Ok(candidates)
}

/// Why a suspended backend's pools are out: the one wording placement, explain and a create's
/// attempt use.
pub const SUSPENDED: &str = "suspended by the operator (no new volumes land there)";

/// How a plan that found pools, none reachable from the requested topology, starts its
/// error (a frontend tells it from other refusals by it: CSI answers RESOURCE_EXHAUSTED).
pub const OUTSIDE_TOPOLOGY: &str = "no pool in the requested topology";

/// Why a pool reachable from `pool` (its segments) is outside `topology`, if it is: the one
/// wording explain and clone placement use.
pub(crate) fn outside(pool: &[Segment], topology: Option<&TopologyRequirement>) -> Option<String> {
    let t = topology?;
    if t.admits(pool) {
        return None;
    }
    let text = |s: &[Segment]| {
        s.iter()
            .map(|seg| {
                let pairs: Vec<String> = seg.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("{{{}}}", pairs.join(", "))
            })
            .collect::<Vec<_>>()
            .join(" or ")
    };
    Some(format!(
        "outside the requested topology: the pool is reachable from {}, the volume must be \
         reachable from {}",
        text(pool),
        text(&t.requisite)
    ))
}

/// Driver calls running, waiting or planned, per permit, in 1/1024ths: how busy the array
/// is relative to what it may take at once.
fn load(status: &BackendStatus) -> usize {
    let planned = status.planned.load(Ordering::Relaxed);
    match status.driver() {
        Some(d) => (d.queued() + d.in_flight() + planned).saturating_mul(1024) / d.limit(),
        None => planned.saturating_mul(1024),
    }
}

/// A create planned onto a backend first, counted in its load until dropped (once its call
/// reaches the backend's driver, which counts it from then on).
pub(crate) struct Planned(Arc<BackendStatus>);

impl Planned {
    /// Counts a create planned onto `backend`, if it runs.
    pub fn onto(shared: &Shared, backend: &str) -> Option<Planned> {
        let status = read(&shared.backends).get(backend)?.status.clone();
        status.planned.fetch_add(1, Ordering::Relaxed);
        Some(Planned(status))
    }
}

impl Drop for Planned {
    fn drop(&mut self) {
        self.0.planned.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a backend serving `backend` can take a volume asking for `wanted`: either side
/// may be `Any` (a local or fake backend with no fixed protocol serves both).
pub(crate) fn serves(backend: Protocol, wanted: Protocol) -> bool {
    backend == Protocol::Any || wanted == Protocol::Any || backend == wanted
}

/// Where a failed create points the user.
pub(crate) fn explain_hint(class: &str) -> String {
    format!(
        "`storch explain storageclass {class}` (GET /trident/v1/storageclass/{class}/explain) \
         shows why each pool was or was not used"
    )
}

/// Fisher–Yates with splitmix64: reproducible from the seed recorded in `PlacementPlanned`,
/// whatever the version of the `rand` crate.
pub(crate) fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut x = seed;
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_a_reproducible_permutation() {
        let mut a: Vec<u32> = (0..50).collect();
        let mut b = a.clone();
        shuffle(&mut a, 42);
        shuffle(&mut b, 42);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        let mut c: Vec<u32> = (0..50).collect();
        shuffle(&mut c, 43);
        assert_ne!(a, c);
    }

    #[test]
    fn shuffle_is_roughly_uniform() {
        // Each of 4 items should land first about a quarter of the time.
        let mut first = [0u32; 4];
        for seed in 0..4000u64 {
            let mut v = [0usize, 1, 2, 3];
            shuffle(&mut v, seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
            first[v[0]] += 1;
        }
        for n in first {
            assert!((800..1200).contains(&n), "{first:?}");
        }
    }
}

//! Drift between the log and the arrays: each backend's volumes are compared with its array at
//! the backend's start, every `reconcile_interval` and on request. What is compared, and how
//! races with work in flight are avoided:
//!
//! 1. The backend's created volumes (`online` or `missing`) are read from the projection
//!    *before* the array is listed. A volume whose create is still under way is `creating`
//!    and is not among them, so a create racing the listing is never a suspect.
//! 2. The array is listed with `list_volumes`. Only a complete listing counts: a driver pages
//!    to the end or fails, and a failed listing changes nothing.
//! 3. [`compare`] (pure) picks the suspects: volumes the listing lacks, those it shows with
//!    another size or pool, and every `missing` one (it may be back). Nothing is decided on
//!    the listing alone.
//! 4. Each suspect is checked by its own volume actor ([`CheckOnArray`]), which serialises it
//!    with that volume's create, delete and resize: it reads the record again (a volume being
//!    deleted meanwhile is skipped), looks the volume up by name (`get`) and only then records
//!    `VolumeMissing`, `VolumeFound` or `VolumeChangedOnArray`. The fold also moves only an
//!    `online` volume to `missing`, so a delete recorded first always wins.
//! 5. Orphans (array volumes no storch volume claims) are computed from the projection read
//!    *after* the listing: an array volume exists only after its create intent is durable, so
//!    one the listing saw is then known, whether its create has finished or not.
//!
//! Nothing is ever deleted on the basis of a comparison.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use actix::Message;
use serde::Serialize;

use super::error::{CoreError, RequestCtx};
use super::shared::{BackendStatus, Shared};
use crate::drivers::{LimitedDriver, StorageDriver, VolumeInfo};
use crate::events::Noticed;
use crate::model::ImportRequest;
use crate::projections::VolumeState;

/// A difference in size below this, upwards, is the array's rounding, not a change: arrays
/// round a requested size up, never down (to a block, a KiB unit, or ONTAP's LUN geometry of
/// 255 × 63 sectors, about 8 MB).
pub(crate) const ROUNDING_ALLOWANCE: u64 = 16 << 20;

/// Checks one volume against its array and records what differs. Answers the event recorded.
#[derive(Message)]
#[rtype(result = "Result<Option<&'static str>, CoreError>")]
pub(crate) struct CheckOnArray {
    pub ctx: RequestCtx,
    pub how: Noticed,
}

/// Adopts an array volume under the actor's volume name. Answers whether it was recorded now
/// (`false`: the same import was recorded before).
#[derive(Message)]
#[rtype(result = "Result<bool, CoreError>")]
pub(crate) struct ImportVolume {
    pub ctx: RequestCtx,
    pub request: ImportRequest,
}

/// Compares a backend with its array now.
#[derive(Message)]
#[rtype(result = "Result<DriftReport, CoreError>")]
pub(crate) struct ReconcileBackend {
    pub how: Noticed,
}

/// A created volume of the backend, as the projection held it before the listing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Known {
    pub name: String,
    pub internal_name: String,
    pub pool: String,
    pub size_bytes: u64,
    pub state: VolumeState,
}

/// Whether the array's size differs from the recorded one by more than its rounding.
pub(crate) fn size_changed(recorded: u64, on_array: u64) -> bool {
    on_array < recorded || on_array - recorded >= ROUNDING_ALLOWANCE
}

/// What the array holds that differs from the record, if anything: (size, pool).
pub(crate) fn change(size_bytes: u64, pool: &str, on_array: &VolumeInfo) -> Option<(u64, String)> {
    let differs = size_changed(size_bytes, on_array.size_bytes)
        || (!on_array.pool.is_empty() && on_array.pool != pool);
    differs.then(|| {
        let pool = if on_array.pool.is_empty() {
            pool
        } else {
            &on_array.pool
        };
        (on_array.size_bytes, pool.to_string())
    })
}

/// The volumes to check one by one (sorted): those the listing lacks or shows changed, and
/// every missing one. Pure.
pub(crate) fn compare(known: &[Known], listed: &[VolumeInfo]) -> Vec<String> {
    let by_name: HashMap<&str, &VolumeInfo> = listed
        .iter()
        .map(|v| (v.internal_name.as_str(), v))
        .collect();
    let mut suspects: Vec<String> = known
        .iter()
        .filter(|k| match (k.state, by_name.get(k.internal_name.as_str())) {
            (VolumeState::Missing, _) => true,
            (VolumeState::Online, None) => true,
            (VolumeState::Online, Some(on_array)) => {
                change(k.size_bytes, &k.pool, on_array).is_some()
            }
            _ => false,
        })
        .map(|k| k.name.clone())
        .collect();
    suspects.sort();
    suspects
}

/// The listed volumes whose names are not in `claimed` (sorted by name). Pure.
pub(crate) fn orphans(listed: Vec<VolumeInfo>, claimed: &HashSet<String>) -> Vec<VolumeInfo> {
    let mut out: Vec<VolumeInfo> = listed
        .into_iter()
        .filter(|v| !claimed.contains(&v.internal_name))
        .collect();
    out.sort_by(|a, b| a.internal_name.cmp(&b.internal_name));
    out
}

/// An array volume no storch volume claims.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Orphan {
    pub backend: String,
    pub internal_name: String,
    pub pool: String,
    pub size_bytes: u64,
}

/// What one reconciliation of a backend found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftReport {
    pub backend: String,
    /// Volumes on the array (the complete listing).
    pub listed: usize,
    /// Volumes checked one by one.
    pub checked: usize,
    /// Volumes recorded missing, found again and changed on the array by this run.
    pub missing: Vec<String>,
    pub found: Vec<String>,
    pub changed: Vec<String>,
    pub orphans: Vec<Orphan>,
    /// Suspects whose check failed (their array did not answer, their actor was busy): the
    /// comparison at a backend's start is run again until none is left.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unchecked: Vec<String>,
}

/// The backend's created volumes, from the projection.
fn known(shared: &Shared, backend: &str) -> Vec<Known> {
    shared.projection.read(|s| {
        let Some(b) = s.backends.get(backend) else {
            return Vec::new();
        };
        b.volumes
            .iter()
            .filter_map(|name| {
                let v = s.volumes.get(name)?;
                matches!(v.state, VolumeState::Online | VolumeState::Missing).then(|| Known {
                    name: name.to_string(),
                    internal_name: v.config().internal_name,
                    pool: v.pool().to_string(),
                    size_bytes: v.size_bytes,
                    state: v.state,
                })
            })
            .collect()
    })
}

/// The array-side names storch volumes claim on `backend`: each placed volume's, and for a
/// create under way the name it would get there.
pub(crate) fn claimed(
    shared: &Shared,
    backend: &str,
    driver: &dyn StorageDriver,
) -> HashSet<String> {
    owners(shared, backend, driver).into_keys().collect()
}

/// Array-side name → the storch volume that claims it on `backend`.
pub(crate) fn owners(
    shared: &Shared,
    backend: &str,
    driver: &dyn StorageDriver,
) -> HashMap<String, String> {
    shared.projection.read(|s| {
        let mut out = HashMap::new();
        if let Some(b) = s.backends.get(backend) {
            for name in &b.volumes {
                if let Some(v) = s.volumes.get(name) {
                    out.insert(v.config().internal_name, name.to_string());
                }
            }
        }
        for (name, v) in s.volumes.iter() {
            let here = v.backend() == backend
                || (v.backend().is_empty() && v.candidates().iter().any(|p| p.backend == backend));
            if !here {
                continue;
            }
            let internal = match v.config().internal_name {
                i if i.is_empty() => driver.internal_name(name),
                i => i,
            };
            out.insert(internal, name.to_string());
        }
        out
    })
}

/// The orphans of one backend's listing.
pub(crate) fn orphans_of(
    shared: &Shared,
    backend: &str,
    driver: &dyn StorageDriver,
    listed: Vec<VolumeInfo>,
) -> Vec<Orphan> {
    let claimed = claimed(shared, backend, driver);
    orphans(listed, &claimed)
        .into_iter()
        .map(|v| Orphan {
            backend: backend.to_string(),
            internal_name: v.internal_name,
            pool: v.pool,
            size_bytes: v.size_bytes,
        })
        .collect()
}

/// One reconciliation of a backend at a time.
pub(crate) type DriftLock = Arc<tokio::sync::Mutex<()>>;

/// Reconciles a backend whose driver takes calls, one run at a time: `wait` waits for a run
/// under way to end (a request), otherwise one under way answers `Unavailable` (the timer).
pub(crate) async fn run(
    shared: &Arc<Shared>,
    backend: &str,
    status: &BackendStatus,
    lock: &DriftLock,
    how: Noticed,
    wait: bool,
) -> Result<DriftReport, CoreError> {
    let driver = status.usable_driver(backend).map_err(|e| {
        CoreError::Unavailable(format!("backend {backend} cannot be reconciled now: {e}"))
    })?;
    let _one = if wait {
        lock.lock().await
    } else {
        lock.try_lock()
            .map_err(|_| CoreError::Unavailable(format!("backend {backend} is being reconciled")))?
    };
    let result = reconcile(shared, backend, &driver, how).await;
    if let Err(e) = &result {
        tracing::warn!(%backend, error = %e, how = how.as_str(), "drift reconciliation skipped");
    }
    result
}

/// Compares one backend with its array (see the module's steps) and records what differs.
pub(crate) async fn reconcile(
    shared: &Arc<Shared>,
    backend: &str,
    driver: &LimitedDriver,
    how: Noticed,
) -> Result<DriftReport, CoreError> {
    let before = known(shared, backend);
    let listed = driver.list_volumes().await.map_err(|e| {
        CoreError::Unavailable(format!(
            "backend {backend} could not list its volumes; nothing was compared: {e}"
        ))
    })?;
    let suspects = compare(&before, &listed);
    let mut report = DriftReport {
        backend: backend.to_string(),
        listed: listed.len(),
        checked: suspects.len(),
        ..DriftReport::default()
    };
    report.orphans = orphans_of(shared, backend, driver, listed);
    let checks = suspects.iter().map(|name| async move {
        let answer = super::volume::send(shared, name, || CheckOnArray {
            ctx: RequestCtx::new(format!("reconcile:{}", how.as_str())),
            how,
        })
        .await;
        (name, answer)
    });
    for (name, answer) in futures::future::join_all(checks).await {
        match answer {
            Ok(Ok(Some("VolumeMissing"))) => report.missing.push(name.clone()),
            Ok(Ok(Some("VolumeFound"))) => report.found.push(name.clone()),
            Ok(Ok(Some(_))) => report.changed.push(name.clone()),
            Ok(Ok(None)) => {}
            Ok(Err(e)) | Err(e) => {
                tracing::warn!(volume = %name, %backend, error = %e, "could not check the volume on its array");
                report.unchecked.push(name.clone());
            }
        }
    }
    if !report.orphans.is_empty() {
        let names: Vec<&str> = report
            .orphans
            .iter()
            .map(|o| o.internal_name.as_str())
            .collect();
        tracing::warn!(%backend, count = names.len(), volumes = ?names,
            "the array holds volumes the event log does not know (see storch get orphans)");
    }
    if !report.missing.is_empty() {
        tracing::warn!(%backend, volumes = ?report.missing, "volumes missing from their array");
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AccessInfo;

    fn on_array(name: &str, pool: &str, size: u64) -> VolumeInfo {
        VolumeInfo {
            internal_name: name.into(),
            pool: pool.into(),
            size_bytes: size,
            access: AccessInfo::default(),
        }
    }

    fn known(name: &str, state: VolumeState, size: u64) -> Known {
        Known {
            name: name.into(),
            internal_name: format!("s_{name}"),
            pool: "p1".into(),
            size_bytes: size,
            state,
        }
    }

    const G: u64 = 1 << 30;

    #[test]
    fn volumes_the_listing_lacks_are_suspects() {
        let k = [
            known("a", VolumeState::Online, G),
            known("b", VolumeState::Online, G),
        ];
        let listed = [on_array("s_a", "p1", G)];
        assert_eq!(compare(&k, &listed), ["b"]);
        assert!(compare(&k[..1], &listed).is_empty());
    }

    #[test]
    fn missing_volumes_are_always_checked_again() {
        let k = [
            known("gone", VolumeState::Missing, G),
            known("back", VolumeState::Missing, G),
        ];
        let listed = [on_array("s_back", "p1", G)];
        assert_eq!(compare(&k, &listed), ["back", "gone"]);
    }

    #[test]
    fn a_change_of_size_or_pool_is_a_suspect_but_rounding_is_not() {
        let k = [known("a", VolumeState::Online, G)];
        assert!(compare(&k, &[on_array("s_a", "p1", G + 8192)]).is_empty());
        assert!(compare(&k, &[on_array("s_a", "p1", G + 255 * 63 * 512)]).is_empty());
        assert_eq!(compare(&k, &[on_array("s_a", "p1", G + (16 << 20))]), ["a"]);
        assert_eq!(compare(&k, &[on_array("s_a", "p1", 2 * G)]), ["a"]);
        assert_eq!(compare(&k, &[on_array("s_a", "p1", G - 4096)]), ["a"]);
        assert_eq!(compare(&k, &[on_array("s_a", "p2", G)]), ["a"]);
        // A driver that does not report pools does not move the volume.
        assert!(compare(&k, &[on_array("s_a", "", G)]).is_empty());
        assert_eq!(
            change(G, "p1", &on_array("s_a", "p2", 2 * G)),
            Some((2 * G, "p2".to_string()))
        );
        assert_eq!(
            change(G, "p1", &on_array("s_a", "", 2 * G)),
            Some((2 * G, "p1".into()))
        );
    }

    #[test]
    fn volumes_in_flight_are_never_suspects() {
        let k = [
            known("creating", VolumeState::Creating, G),
            known("deleting", VolumeState::Deleting, G),
        ];
        assert!(compare(&k, &[]).is_empty());
    }

    #[test]
    fn orphans_are_the_listed_volumes_nobody_claims() {
        let claimed: HashSet<String> = ["s_a".to_string()].into();
        let got = orphans(
            vec![
                on_array("s_z", "p1", G),
                on_array("s_a", "p1", G),
                on_array("s_b", "p2", G),
            ],
            &claimed,
        );
        let names: Vec<&str> = got.iter().map(|v| v.internal_name.as_str()).collect();
        assert_eq!(names, ["s_b", "s_z"]);
    }
}

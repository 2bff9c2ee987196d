//! Volume operations: create (in a pool, tagged, mapped to the host group), get, list,
//! destroy (unmap, then delete), resize (expand) and clone (a new volume filled by a volume
//! copy job), and the iSCSI access info.
//!
//! Labels are unique per array. A volume is storch's when its meta tags say storch made it;
//! volumes storch did not make are invisible to it: never returned, adopted, changed or
//! deleted (a create of their name is refused).
//!
//! The proxy sometimes answers 422 to a create (or a mapping) that the array carried out.
//! After a 422 the driver re-reads the volume by label and adopts it only when every tag it
//! sent is on it and it is in the planned pool; otherwise it reports the 422 and touches
//! nothing.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::config::{MAX_LABEL_LEN, MIN_VOLUME_BYTES};
use super::wire::{
    CopyJob, CreateCopyJob, CreateVolume, Expand, ExpandProgress, MapRequest, Mapping, Pool, Tag,
    Volume,
};
use super::{Discovered, EseriesDriver};
use crate::drivers::{CloneRequest, CreateRequest, DriverError, DriverResult, VolumeInfo};
use crate::model::AccessInfo;

/// The tag saying storch made a volume.
pub const CREATED_BY: (&str, &str) = ("createdBy", "storch");
/// The tag with storch's name for the volume.
pub const NAME_TAG: &str = "storchName";
/// The tag naming a clone's source volume.
pub const SOURCE_TAG: &str = "storchCloneSource";

/// The segment size Trident asks for, in KiB (valid in volume groups and disk pools).
const SEGMENT_KIB: u32 = 128;

/// A clone's copy: medium priority, the target writable once done, an offline copy (no
/// snapshot repository needed).
const COPY_PRIORITY: &str = "priority2";

/// Whether storch made this volume.
pub fn is_ours(v: &Volume) -> bool {
    v.tag(CREATED_BY.0) == Some(CREATED_BY.1)
}

/// What the array is asked for before any call: a label it accepts, the minimum size, a
/// filesystem Trident allows.
pub fn check_request(req: &CreateRequest) -> DriverResult<()> {
    check_label(&req.internal_name)?;
    crate::drivers::SizeLimits::at_least(MIN_VOLUME_BYTES)
        .check(req.size_bytes)
        .map_err(DriverError::Invalid)?;
    match req.config.file_system.as_str() {
        "" | "xfs" | "ext3" | "ext4" => Ok(()),
        other => Err(DriverError::Invalid(format!(
            "invalid value for fileSystem: {other} (eseries-iscsi volumes take xfs, ext3 or \
             ext4)"
        ))),
    }
}

fn check_label(name: &str) -> DriverResult<()> {
    if name.is_empty() || name.len() > MAX_LABEL_LEN {
        return Err(DriverError::Invalid(format!(
            "volume name {name} is not 1 to {MAX_LABEL_LEN} characters (the E-Series limit)"
        )));
    }
    Ok(())
}

/// The tags storch puts on a volume it makes.
fn tags(internal_name: &str, display: &str, file_system: &str) -> Vec<Tag> {
    let mut t = vec![
        Tag::new(CREATED_BY.0, CREATED_BY.1),
        Tag::new(
            NAME_TAG,
            if display.is_empty() {
                internal_name
            } else {
                display
            },
        ),
    ];
    if !file_system.is_empty() {
        t.push(Tag::new("fstype", file_system));
    }
    t
}

/// `bytes` in the smallest unit whose count fits the array's 32-bit size field (KiB up to
/// 2 TiB, as Trident sends), rounded up: (unit, count, bytes per unit).
pub fn size_units(bytes: u64) -> (&'static str, u64, u64) {
    for (unit, per) in [("kb", 1u64 << 10), ("mb", 1 << 20), ("gb", 1 << 30)] {
        let n = bytes.div_ceil(per);
        if n <= i32::MAX as u64 {
            return (unit, n, per);
        }
    }
    ("tb", bytes.div_ceil(1 << 40), 1 << 40)
}

/// The array rounds a size up to its unit at most.
fn size_matches(actual: u64, planned: u64) -> bool {
    actual >= planned && actual - planned < size_units(planned).2
}

/// Every volume of the array.
pub(super) async fn all(drv: &EseriesDriver, d: &Discovered) -> DriverResult<Vec<Volume>> {
    Ok(drv.client.get(&d.path("/volumes")).await?)
}

/// The volume labelled `name`, whoever made it.
async fn lookup(drv: &EseriesDriver, d: &Discovered, name: &str) -> DriverResult<Option<Volume>> {
    Ok(all(drv, d).await?.into_iter().find(|v| v.label() == name))
}

/// storch's volume labelled `name`, if any.
pub async fn find(drv: &EseriesDriver, d: &Discovered, name: &str) -> DriverResult<Option<Volume>> {
    Ok(lookup(drv, d, name).await?.filter(is_ours))
}

pub async fn find_or_not_found(
    drv: &EseriesDriver,
    d: &Discovered,
    name: &str,
) -> DriverResult<Volume> {
    find(drv, d, name)
        .await?
        .ok_or_else(|| DriverError::NotFound(format!("volume {name} not found")))
}

impl EseriesDriver {
    /// iSCSI: the target's IQN on the `hostDataIP` portal, the LUN of the volume's mapping to
    /// the host group (0 while it has none).
    pub(super) fn access(&self, d: &Discovered, v: &Volume) -> AccessInfo {
        AccessInfo {
            iscsi_target_portal: d.portal.clone(),
            iscsi_target_iqn: d.target_iqn.clone(),
            iscsi_lun_number: group_mapping(d, v).map(|m| m.lun).unwrap_or(0),
            iscsi_interface: "default".into(),
            ..AccessInfo::default()
        }
    }

    fn info(&self, d: &Discovered, v: &Volume) -> VolumeInfo {
        VolumeInfo {
            internal_name: v.label().to_string(),
            pool: d
                .pool_labels
                .get(&v.volume_group_ref)
                .cloned()
                .unwrap_or_else(|| v.volume_group_ref.clone()),
            size_bytes: v.capacity,
            access: self.access(d, v),
        }
    }

    /// `Conflict` when `bytes` more do not fit in the pool's free space (read fresh).
    async fn check_fits(&self, d: &Discovered, pool_ref: &str, bytes: u64) -> DriverResult<()> {
        let pool: Pool = self
            .client
            .get(&d.path(&format!("/storage-pools/{pool_ref}")))
            .await?;
        if bytes > pool.free_space {
            return Err(DriverError::Conflict(format!(
                "not enough space in pool {}: {bytes} bytes requested, {} free",
                pool.label(),
                pool.free_space
            )));
        }
        Ok(())
    }

    /// Creates a thick volume; after a 422 adopts it only if it is there as asked.
    async fn make_volume(
        &self,
        d: &Discovered,
        pool: &Pool,
        name: &str,
        bytes: u64,
        tags: Vec<Tag>,
    ) -> DriverResult<Volume> {
        self.check_fits(d, pool.reference(), bytes).await?;
        let (unit, size, _) = size_units(bytes);
        let body = CreateVolume {
            pool_id: pool.reference().to_string(),
            name: name.to_string(),
            size_unit: unit,
            size,
            seg_size: SEGMENT_KIB,
            data_assurance_enabled: pool.protection_information_capable.then_some(true),
            meta_tags: tags.clone(),
        };
        match self
            .client
            .post::<_, Volume>(&d.path("/volumes"), &body)
            .await
        {
            Ok((_, v)) => Ok(v),
            Err(e) if e.status() == Some(422) => match lookup(self, d, name).await? {
                Some(v) if v.has_tags(&tags) && v.volume_group_ref == pool.reference() => {
                    tracing::warn!(volume = %name, error = %e, "the proxy answered 422 but made the volume as asked: adopted");
                    Ok(v)
                }
                _ => Err(e.into()),
            },
            Err(e) => Err(e.into()),
        }
    }

    /// Maps a volume to the host group (the array picks the LUN); a mapping there already is
    /// kept, one elsewhere is a `Conflict`. After a 422 the volume is re-read and its mapping
    /// to the group used.
    async fn map(&self, d: &Discovered, mut v: Volume) -> DriverResult<Volume> {
        if group_mapping(d, &v).is_some() {
            return Ok(v);
        }
        if let Some(other) = v.list_of_mappings.first() {
            return Err(DriverError::Conflict(format!(
                "volume {} is mapped to {} ({}), not to host group {}",
                v.label(),
                other.map_ref,
                other.kind,
                self.cfg.access_group_name
            )));
        }
        let m = self.map_to(d, &v, &d.host_group_ref, None).await?;
        v.list_of_mappings = vec![m];
        Ok(v)
    }

    /// Maps volume `v` to `target` (a host or host group), asking for `lun` when given (else
    /// the array picks). After a 422 the volume is re-read and its mapping to the target, if
    /// the array made it anyway, is used.
    pub(super) async fn map_to(
        &self,
        d: &Discovered,
        v: &Volume,
        target: &str,
        lun: Option<i32>,
    ) -> DriverResult<Mapping> {
        let body = MapRequest {
            mappable_object_id: v.reference().to_string(),
            target_id: target.to_string(),
            lun,
        };
        match self
            .client
            .post::<_, Mapping>(&d.path("/volume-mappings"), &body)
            .await
        {
            Ok((_, m)) => Ok(m),
            Err(e) if e.status() == Some(422) => {
                let again: Volume = self
                    .client
                    .get(&d.path(&format!("/volumes/{}", v.reference())))
                    .await?;
                match again
                    .list_of_mappings
                    .into_iter()
                    .find(|m| m.map_ref == target)
                {
                    Some(m) => {
                        tracing::warn!(volume = %v.label(), error = %e, "the proxy answered 422 but mapped the volume: kept");
                        Ok(m)
                    }
                    None => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes a mapping; one already gone counts as deleted.
    pub(super) async fn unmap(&self, d: &Discovered, m: &Mapping) -> DriverResult<()> {
        let path = d.path(&format!("/volume-mappings/{}", m.reference()));
        match self.client.delete(&path).await {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.status(), Some(404 | 410)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Maps a volume storch just made; on failure deletes it, so nothing is left behind.
    async fn map_new(&self, d: &Discovered, v: Volume) -> DriverResult<Volume> {
        let reference = v.reference().to_string();
        let label = v.label().to_string();
        match self.map(d, v).await {
            Ok(v) => Ok(v),
            Err(e) => {
                if let Err(undo) = self.delete_volume(d, &reference).await {
                    tracing::warn!(volume = %label, error = %undo, "cannot delete the volume after its mapping failed");
                }
                Err(e)
            }
        }
    }

    /// Deletes a volume by reference; already gone counts as deleted. A 422 is checked: the
    /// volume gone means deleted, still there means the 422 stands.
    async fn delete_volume(&self, d: &Discovered, reference: &str) -> DriverResult<()> {
        let path = d.path(&format!("/volumes/{reference}"));
        match self.client.delete(&path).await {
            Ok(()) => Ok(()),
            Err(e) if matches!(e.status(), Some(404 | 410)) => Ok(()),
            Err(e) if e.status() == Some(422) => match self.client.get::<Volume>(&path).await {
                Err(gone) if gone.is_not_found() => Ok(()),
                _ => Err(e.into()),
            },
            Err(e) => Err(e.into()),
        }
    }
}

/// The volume's mapping to the backend's host group.
pub(super) fn group_mapping<'a>(d: &Discovered, v: &'a Volume) -> Option<&'a Mapping> {
    v.list_of_mappings
        .iter()
        .find(|m| m.map_ref == d.host_group_ref)
}

/// Refuses a taken label: by storch's volume as planned (`AlreadyExists`: an interrupted
/// create the caller may adopt; it is mapped first so that it is usable), by storch's volume
/// made otherwise (`Conflict`: never adopted), or by a volume storch did not make
/// (`AlreadyExists`; `get` does not show it, so it is not adopted either).
async fn refuse_existing(
    drv: &EseriesDriver,
    d: &Discovered,
    v: Volume,
    as_planned: bool,
) -> DriverResult<VolumeInfo> {
    let name = v.label().to_string();
    if !is_ours(&v) {
        return Err(DriverError::AlreadyExists(format!(
            "a volume labelled {name} that storch did not make exists on array {}; storch \
             does not use it",
            d.system_id
        )));
    }
    if !as_planned {
        return Err(DriverError::Conflict(format!(
            "volume {name} already exists (made by storch with another pool, size or source); \
             it is not adopted"
        )));
    }
    drv.map(d, v).await?;
    Err(DriverError::AlreadyExists(format!(
        "volume {name} already exists (made by storch as planned: an interrupted create)"
    )))
}

pub async fn create(
    drv: &EseriesDriver,
    d: &Discovered,
    req: &CreateRequest,
) -> DriverResult<VolumeInfo> {
    let pool = drv.pool(d, &req.pool)?;
    let name = &req.internal_name;
    if let Some(v) = lookup(drv, d, name).await? {
        let planned =
            v.volume_group_ref == pool.reference() && size_matches(v.capacity, req.size_bytes);
        return refuse_existing(drv, d, v, planned).await;
    }
    let tags = tags(name, &req.config.name, &req.config.file_system);
    let v = drv.make_volume(d, pool, name, req.size_bytes, tags).await?;
    let v = drv.map_new(d, v).await?;
    Ok(drv.info(d, &v))
}

/// storch's volume; one that lost its mapping (a create cut short between its two calls) is
/// mapped, so that what is adopted is usable.
pub async fn get(
    drv: &EseriesDriver,
    d: &Discovered,
    name: &str,
) -> DriverResult<Option<VolumeInfo>> {
    let Some(v) = find(drv, d, name).await? else {
        return Ok(None);
    };
    let v = if v.list_of_mappings.is_empty() {
        tracing::info!(volume = %name, "mapping a volume whose create was cut short");
        drv.map(d, v).await?
    } else {
        v
    };
    Ok(Some(drv.info(d, &v)))
}

/// storch's volumes with this backend's prefix in this backend's pools.
pub async fn list(drv: &EseriesDriver, d: &Discovered) -> DriverResult<Vec<VolumeInfo>> {
    Ok(all(drv, d)
        .await?
        .iter()
        .filter(|v| is_ours(v) && v.label().starts_with(&drv.cfg.prefix))
        .filter(|v| {
            d.pool_labels
                .get(&v.volume_group_ref)
                .is_some_and(|label| d.pools.contains_key(label))
        })
        .map(|v| drv.info(d, v))
        .collect())
}

/// Unmaps, then deletes. A volume already gone is deleted; one storch did not make is left
/// alone.
pub async fn destroy(drv: &EseriesDriver, d: &Discovered, name: &str) -> DriverResult<()> {
    let Some(v) = lookup(drv, d, name).await? else {
        return Ok(());
    };
    if !is_ours(&v) {
        tracing::warn!(volume = %name, "a volume of that label that storch did not make is left alone");
        return Ok(());
    }
    for m in &v.list_of_mappings {
        drv.unmap(d, m).await?;
    }
    drv.delete_volume(d, v.reference()).await?;
    super::publish::forget_hosts(drv, d, &v.list_of_mappings).await
}

pub async fn resize(
    drv: &EseriesDriver,
    d: &Discovered,
    name: &str,
    size_bytes: u64,
) -> DriverResult<()> {
    let v = find_or_not_found(drv, d, name).await?;
    // The size it has, or the size it was asked for before the array rounded it up.
    if size_matches(v.capacity, size_bytes) {
        return Ok(());
    }
    if size_bytes < v.capacity {
        return Err(DriverError::Invalid(format!(
            "volume {name} is {} bytes; E-Series volumes cannot shrink to {size_bytes}",
            v.capacity
        )));
    }
    // Whether the array expands volumes: its expansion status answers for this volume when it
    // can; 404 (for a volume just read, the resource is what is missing) or a 422 saying "not
    // supported" means it cannot. Asked before any change.
    let progress_path = d.path(&format!("/volumes/{}/expand", v.reference()));
    match drv.client.get::<ExpandProgress>(&progress_path).await {
        Ok(p) if p.action.is_empty() || p.action == "none" => {}
        Ok(p) => {
            return Err(DriverError::Conflict(format!(
                "volume {name} is busy ({}, {}% done); resize it when that ends",
                p.action, p.percent_complete
            )));
        }
        Err(e) if e.is_unsupported_feature() => {
            return Err(DriverError::Unsupported(format!(
                "resize is not supported by this array ({}): it has no volume expansion",
                d.system_id
            )));
        }
        Err(e) => return Err(e.into()),
    }
    drv.check_fits(d, &v.volume_group_ref, size_bytes - v.capacity)
        .await?;
    let (unit, size, _) = size_units(size_bytes);
    let body = Expand {
        expansion_size: size,
        size_unit: unit,
    };
    drv.client.post::<_, Value>(&progress_path, &body).await?;
    let started = Instant::now();
    let mut attempt = 0;
    loop {
        let p: ExpandProgress = drv.client.get(&progress_path).await?;
        if p.action.is_empty() || p.action == "none" {
            break;
        }
        attempt += 1;
        wait(drv, started, attempt, &format!("the expansion of {name}")).await?;
    }
    let after: Volume = drv
        .client
        .get(&d.path(&format!("/volumes/{}", v.reference())))
        .await?;
    if after.capacity < size_bytes {
        return Err(DriverError::Other(format!(
            "volume {name} is {} bytes after its expansion to {size_bytes}",
            after.capacity
        )));
    }
    Ok(())
}

/// Sleeps before poll `attempt` of a job, or gives up after the job timeout.
async fn wait(drv: &EseriesDriver, started: Instant, attempt: u32, what: &str) -> DriverResult<()> {
    if started.elapsed() > drv.cfg.job_timeout {
        return Err(DriverError::Unavailable(format!(
            "{what} did not finish within {:?} (jobTimeout)",
            drv.cfg.job_timeout
        )));
    }
    let delay = crate::net::backoff(attempt, Duration::from_millis(20), Duration::from_secs(2));
    tokio::time::sleep(delay).await;
    Ok(())
}

/// A new volume in the source's pool, as large, filled by a volume copy job, then mapped.
/// Anything failing after the target exists deletes it.
pub async fn clone(
    drv: &EseriesDriver,
    d: &Discovered,
    req: &CloneRequest,
) -> DriverResult<VolumeInfo> {
    check_label(&req.internal_name)?;
    let source = find_or_not_found(drv, d, &req.source_internal_name).await?;
    let pool = d
        .pools
        .values()
        .find(|p| p.reference() == source.volume_group_ref)
        .ok_or_else(|| {
            DriverError::Invalid(format!(
                "the source volume {} is not in a pool of this backend",
                req.source_internal_name
            ))
        })?;
    let name = &req.internal_name;
    if let Some(v) = lookup(drv, d, name).await? {
        let planned = v.volume_group_ref == source.volume_group_ref
            && v.tag(SOURCE_TAG) == Some(source.label());
        return refuse_existing(drv, d, v, planned).await;
    }
    let mut tags = tags(name, &req.config.name, &req.config.file_system);
    tags.push(Tag::new(SOURCE_TAG, source.label()));
    let target = drv
        .make_volume(d, pool, name, source.capacity, tags)
        .await?;
    let reference = target.reference().to_string();
    if let Err(e) = copy(drv, d, &source, &target).await {
        if let Err(undo) = drv.delete_volume(d, &reference).await {
            tracing::warn!(volume = %name, error = %undo, "cannot delete the clone after its copy failed");
        }
        return Err(e);
    }
    let target: Volume = drv
        .client
        .get(&d.path(&format!("/volumes/{reference}")))
        .await?;
    let target = drv.map_new(d, target).await?;
    Ok(drv.info(d, &target))
}

/// Runs one volume copy job to its end, then removes the job.
async fn copy(
    drv: &EseriesDriver,
    d: &Discovered,
    source: &Volume,
    target: &Volume,
) -> DriverResult<()> {
    let body = CreateCopyJob {
        source_id: source.reference().to_string(),
        target_id: target.reference().to_string(),
        copy_priority: COPY_PRIORITY,
        target_write_protected: false,
        online_copy: false,
    };
    let (_, job) = drv
        .client
        .post::<_, CopyJob>(&d.path("/volume-copy-jobs"), &body)
        .await?;
    let job_path = d.path(&format!("/volume-copy-jobs/{}", job.reference()));
    let started = Instant::now();
    let mut attempt = 0;
    let result = loop {
        let j: CopyJob = match drv.client.get(&job_path).await {
            Ok(j) => j,
            Err(e) => break Err(e.into()),
        };
        match j.status.as_str() {
            "complete" => break Ok(()),
            "failed" | "halted" => {
                break Err(DriverError::Other(format!(
                    "the volume copy of {} onto {} ended {}",
                    source.label(),
                    target.label(),
                    j.status
                )));
            }
            _ => {}
        }
        attempt += 1;
        let what = format!(
            "the volume copy of {} onto {}",
            source.label(),
            target.label()
        );
        if let Err(e) = wait(drv, started, attempt, &what).await {
            break Err(e);
        }
    };
    match drv.client.delete(&job_path).await {
        Ok(()) => {}
        Err(e) if matches!(e.status(), Some(404 | 410)) => {}
        Err(e) => {
            tracing::warn!(job = %job.reference(), error = %e, "cannot remove the volume copy job")
        }
    }
    result
}

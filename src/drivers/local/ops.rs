//! The driver's operations, blocking: each runs on `spawn_blocking`, takes the state lock
//! only to decide and record, and does the disk work outside it.

use super::client::{Pool, missing, object_name};
use super::wire::{Kind, Phase, Provisioning, SnapshotRecord, VolumeRecord};
use super::{
    Inner, MIN_VOLUME_BYTES, VOLUMES_DIR, already_exists, busy, check_encryption,
    check_internal_name, check_snapshot_name, fs, not_found, now_ms,
};
use crate::drivers::{
    CloneRequest, CreateRequest, Discovery, DriverError, DriverResult, SnapshotInfo, VolumeInfo,
};
use crate::model::{AccessInfo, PoolInfo};
use std::collections::BTreeMap;
use std::os::fd::AsFd;

impl Inner {
    pub(super) fn discover(&self) -> DriverResult<Discovery> {
        let pools = self.ready()?;
        let allocated: Vec<u64> = {
            let st = self.lock();
            (0..pools.len()).map(|pi| st.allocated(pi)).collect()
        };
        let mut infos = Vec::with_capacity(pools.len());
        let mut free_bytes = BTreeMap::new();
        for (pool, allocated) in pools.iter().zip(allocated) {
            let (total, free) = pool.space(allocated)?;
            infos.push(PoolInfo {
                name: pool.name.clone(),
                offers: pool.offers(),
                total_bytes: Some(total),
            });
            free_bytes.insert(pool.name.clone(), free);
        }
        Ok(Discovery {
            backend_name: self.cfg.backend_name.clone(),
            protocol: self.cfg.protocol,
            pools: infos,
            free_bytes,
        })
    }

    pub(super) fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        let pools = self.ready()?;
        let name = req.internal_name.as_str();
        check_internal_name("internalName", name)?;
        let (pi, pool) = self.pool(pools, &req.pool)?;
        let size = if req.size_bytes == 0 {
            self.cfg.default_size_bytes
        } else {
            req.size_bytes
        };
        if size < MIN_VOLUME_BYTES {
            return Err(DriverError::Invalid(format!(
                "requested volume size ({size} bytes) is too small; the minimum volume size is \
                 {MIN_VOLUME_BYTES} bytes (1 MiB)"
            )));
        }
        check_encryption(&req.config)?;
        let kind = self.kind_for(req.config.protocol);
        let provisioning = self.provisioning(&req.requests, &req.config)?;
        // Directories only: an image file is always 0600.
        let mode = match kind {
            Kind::File => self.unix_permissions(&req.config)?,
            Kind::Block => 0o600,
        };
        {
            let mut st = self.lock();
            if st.index.contains_key(name) {
                return Err(already_exists(name));
            }
            self.check_fits(pool, &st, pi, size, &format!("requested volume {name}"))?;
            st.insert(pi, name, VolumeRecord::new(kind, size, provisioning));
            if let Err(e) = pool.persist(&st.pools[pi]) {
                st.remove(name);
                return Err(e);
            }
        }
        let made = pool.make_volume(name, kind, size, provisioning == Provisioning::Thick, mode);
        self.finish_create(pool, pi, name, made)
    }

    /// Records the end of a create or clone: ready, or forgotten after a failure.
    pub(super) fn finish_create(
        &self,
        pool: &Pool,
        pi: usize,
        name: &str,
        made: DriverResult<()>,
    ) -> DriverResult<VolumeInfo> {
        let mut guard = self.lock();
        let st = &mut *guard;
        match made {
            Ok(()) => {
                let Some((_, v)) = st.find_mut(name) else {
                    return Err(DriverError::Other(format!(
                        "volume {name} vanished while being created"
                    )));
                };
                v.state = Phase::Ready;
                v.busy = false;
                let info = pool.info(name, v);
                pool.persist(&st.pools[pi])?;
                tracing::debug!(volume = name, pool = %pool.name, "local driver: volume created");
                Ok(info)
            }
            Err(e) => {
                st.remove(name);
                if let Err(pe) = pool.persist(&st.pools[pi]) {
                    // Still recorded as creating on disk: rolled back on the next start.
                    tracing::warn!(volume = name, error = %pe, "local driver: cannot record a failed create");
                }
                Err(e)
            }
        }
    }

    pub(super) fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        let pools = self.ready()?;
        let name = req.internal_name.as_str();
        let source = req.source_internal_name.as_str();
        let snapshot = req.source_snapshot.as_deref();
        check_internal_name("internalName", name)?;
        check_internal_name("cloneSourceVolumeInternal", source)?;
        if let Some(s) = snapshot {
            check_snapshot_name(s)?;
        }
        check_encryption(&req.config)?;
        let (pi, kind, thick) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            if st.index.contains_key(name) {
                return Err(already_exists(name));
            }
            let Some((pi, src)) = st.find(source).filter(|(_, v)| v.state == Phase::Ready) else {
                return Err(DriverError::NotFound(format!(
                    "source volume {source} not found"
                )));
            };
            if src.busy {
                return Err(busy(source));
            }
            let size = match snapshot {
                None => src.size_bytes,
                Some(s) => match src.snapshots.get(s) {
                    Some(snap) if snap.state == Phase::Ready => snap.size_bytes,
                    _ => {
                        return Err(DriverError::NotFound(format!(
                            "snapshot {s} of volume {source} not found"
                        )));
                    }
                },
            };
            let mut record = VolumeRecord::new(src.protocol, size, src.provisioning);
            record.clone_source = Some(match snapshot {
                None => source.to_string(),
                Some(s) => format!("{source}@{s}"),
            });
            let (kind, thick) = (src.protocol, src.thick());
            let pool = &pools[pi];
            self.check_fits(pool, st, pi, size, &format!("clone {name}"))?;
            if let Some((_, src)) = st.find_mut(source) {
                match snapshot.and_then(|s| src.snapshots.get_mut(s)) {
                    Some(s) => s.readers += 1,
                    None => src.readers += 1,
                }
            }
            st.insert(pi, name, record);
            if let Err(e) = pool.persist(&st.pools[pi]) {
                st.remove(name);
                st.release(source, snapshot);
                return Err(e);
            }
            (pi, kind, thick)
        };
        let pool = &pools[pi];
        let made = pool.copy_volume(source, snapshot, name, kind, thick);
        self.lock().release(source, snapshot);
        self.finish_create(pool, pi, name, made)
    }

    pub(super) fn get(&self, name: &str) -> DriverResult<Option<VolumeInfo>> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        let st = self.lock();
        Ok(st
            .find(name)
            .filter(|(pi, v)| v.visible() && pools[*pi].on_disk(name, v.protocol))
            .map(|(pi, v)| pools[pi].info(name, v)))
    }

    pub(super) fn destroy(&self, name: &str) -> DriverResult<()> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        let (pi, kind, previous) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some((pi, v)) = st.find_mut(name) else {
                return Ok(());
            };
            if v.busy || v.readers > 0 || v.snapshots.values().any(|s| s.busy || s.readers > 0) {
                return Err(busy(name));
            }
            let previous = v.state;
            v.state = Phase::Deleting;
            v.busy = true;
            let kind = v.protocol;
            if let Err(e) = pools[pi].persist(&st.pools[pi]) {
                if let Some((_, v)) = st.find_mut(name) {
                    v.state = previous;
                    v.busy = false;
                }
                return Err(e);
            }
            (pi, kind, previous)
        };
        let pool = &pools[pi];
        let removed = pool.remove_volume(name, kind);
        let mut st = self.lock();
        match removed {
            Ok(()) => {
                st.remove(name);
                pool.persist(&st.pools[pi])?;
                tracing::debug!(volume = name, pool = %pool.name, ?previous, "local driver: volume destroyed");
                Ok(())
            }
            Err(e) => {
                // Stays recorded as deleting: a later destroy (or the next start) finishes.
                if let Some((_, v)) = st.find_mut(name) {
                    v.busy = false;
                }
                Err(e)
            }
        }
    }

    pub(super) fn resize(&self, name: &str, size: u64) -> DriverResult<()> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        let (pi, old, thick) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some((pi, v)) = st.find(name).filter(|(_, v)| v.state == Phase::Ready) else {
                return Err(not_found(name));
            };
            let pool = &pools[pi];
            if v.busy || (v.protocol == Kind::Block && v.readers > 0) {
                return Err(busy(name));
            }
            let old = v.size_bytes;
            if size < old {
                return Err(DriverError::Invalid(format!(
                    "cannot shrink volume {name} from {old} to {size} bytes"
                )));
            }
            if size == old {
                return Ok(());
            }
            self.check_fits(pool, st, pi, size - old, &format!("growing volume {name}"))?;
            let Some((_, v)) = st.find_mut(name) else {
                return Err(not_found(name));
            };
            // The new size is taken now, so that concurrent creates see it.
            v.size_bytes = size;
            if v.protocol == Kind::File {
                // A directory's size is only what the pool's accounting counts.
                if let Err(e) = pool.persist(&st.pools[pi]) {
                    if let Some((_, v)) = st.find_mut(name) {
                        v.size_bytes = old;
                    }
                    return Err(e);
                }
                return Ok(());
            }
            v.busy = true;
            (pi, old, v.thick())
        };
        let pool = &pools[pi];
        let grown = pool
            .subdir(VOLUMES_DIR, false)
            .and_then(|d| d.ok_or_else(|| missing(VOLUMES_DIR)))
            .and_then(|vols| {
                fs::grow_image(vols.as_fd(), &object_name(name, Kind::Block), size, thick)
                    .map_err(|e| pool.io(&format!("grow volume {name}"), e))
            });
        let mut guard = self.lock();
        let st = &mut *guard;
        if let Some((_, v)) = st.find_mut(name) {
            v.busy = false;
            if grown.is_err() {
                v.size_bytes = old;
            }
        }
        grown?;
        pool.persist(&st.pools[pi])
    }

    pub(super) fn create_snapshot(&self, name: &str, snap: &str) -> DriverResult<SnapshotInfo> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        check_snapshot_name(snap)?;
        let (pi, kind, thick, record) = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some((pi, v)) = st.find(name).filter(|(_, v)| v.state == Phase::Ready) else {
                return Err(not_found(name));
            };
            let pool = &pools[pi];
            if v.busy {
                return Err(busy(name));
            }
            if v.snapshots.contains_key(snap) {
                return Err(DriverError::AlreadyExists(format!(
                    "snapshot {snap} of volume {name} already exists"
                )));
            }
            let size = v.size_bytes;
            self.check_fits(
                pool,
                st,
                pi,
                size,
                &format!("snapshot {snap} of volume {name}"),
            )?;
            let record = SnapshotRecord {
                created_ms: now_ms(),
                size_bytes: size,
                state: Phase::Creating,
                busy: true,
                readers: 0,
            };
            let Some((_, v)) = st.find_mut(name) else {
                return Err(not_found(name));
            };
            let (kind, thick) = (v.protocol, v.thick());
            v.readers += 1;
            v.snapshots.insert(snap.to_string(), record.clone());
            if let Err(e) = pool.persist(&st.pools[pi]) {
                if let Some((_, v)) = st.find_mut(name) {
                    v.readers -= 1;
                    v.snapshots.remove(snap);
                }
                return Err(e);
            }
            (pi, kind, thick, record)
        };
        let pool = &pools[pi];
        let made = pool.copy_to_snapshot(name, snap, kind, thick);
        let mut guard = self.lock();
        let st = &mut *guard;
        let Some((_, v)) = st.find_mut(name) else {
            return Err(not_found(name));
        };
        v.readers = v.readers.saturating_sub(1);
        match made {
            Ok(()) => {
                if let Some(s) = v.snapshots.get_mut(snap) {
                    s.state = Phase::Ready;
                    s.busy = false;
                }
                pool.persist(&st.pools[pi])?;
                Ok(SnapshotInfo {
                    name: snap.to_string(),
                    volume_internal_name: name.to_string(),
                    created_ms: record.created_ms,
                    size_bytes: record.size_bytes,
                })
            }
            Err(e) => {
                v.snapshots.remove(snap);
                if let Err(pe) = pool.persist(&st.pools[pi]) {
                    tracing::warn!(volume = name, snapshot = snap, error = %pe, "local driver: cannot record a failed snapshot");
                }
                Err(e)
            }
        }
    }

    pub(super) fn list_snapshots(&self, name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        self.ready()?;
        check_internal_name("internalName", name)?;
        let st = self.lock();
        let Some((_, v)) = st.find(name).filter(|(_, v)| v.visible()) else {
            return Err(not_found(name));
        };
        let mut out: Vec<SnapshotInfo> = v
            .snapshots
            .iter()
            .filter(|(_, s)| s.state == Phase::Ready)
            .map(|(snap, s)| SnapshotInfo {
                name: snap.clone(),
                volume_internal_name: name.to_string(),
                created_ms: s.created_ms,
                size_bytes: s.size_bytes,
            })
            .collect();
        out.sort_by(|a, b| (a.created_ms, &a.name).cmp(&(b.created_ms, &b.name)));
        Ok(out)
    }

    pub(super) fn delete_snapshot(&self, name: &str, snap: &str) -> DriverResult<()> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        check_snapshot_name(snap)?;
        let pi = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let Some((pi, v)) = st.find_mut(name) else {
                return Ok(());
            };
            let volume_busy = v.busy;
            let Some(s) = v.snapshots.get_mut(snap) else {
                return Ok(());
            };
            if volume_busy || s.busy || s.readers > 0 {
                return Err(busy(&format!("{name}@{snap}")));
            }
            let previous = s.state;
            s.state = Phase::Deleting;
            s.busy = true;
            if let Err(e) = pools[pi].persist(&st.pools[pi]) {
                if let Some(s) = st
                    .find_mut(name)
                    .and_then(|(_, v)| v.snapshots.get_mut(snap))
                {
                    s.state = previous;
                    s.busy = false;
                }
                return Err(e);
            }
            pi
        };
        let pool = &pools[pi];
        let removed = pool.remove_snapshot(name, snap);
        let mut guard = self.lock();
        let st = &mut *guard;
        let Some((_, v)) = st.find_mut(name) else {
            return removed;
        };
        match removed {
            Ok(()) => {
                v.snapshots.remove(snap);
                pool.persist(&st.pools[pi])
            }
            Err(e) => {
                if let Some(s) = v.snapshots.get_mut(snap) {
                    s.busy = false;
                }
                Err(e)
            }
        }
    }

    pub(super) fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        let pools = self.ready()?;
        let st = self.lock();
        let mut out: Vec<VolumeInfo> = st
            .pools
            .iter()
            .enumerate()
            .flat_map(|(pi, records)| {
                records
                    .iter()
                    .filter(move |(name, v)| v.visible() && pools[pi].on_disk(name, v.protocol))
                    .map(move |(name, v)| pools[pi].info(name, v))
            })
            .collect();
        out.sort_by(|a, b| a.internal_name.cmp(&b.internal_name));
        Ok(out)
    }

    pub(super) fn access_info(&self, name: &str) -> DriverResult<AccessInfo> {
        let pools = self.ready()?;
        check_internal_name("internalName", name)?;
        let st = self.lock();
        st.find(name)
            .filter(|(_, v)| v.visible())
            .map(|(pi, v)| pools[pi].access(name, v.protocol))
            .ok_or_else(|| not_found(name))
    }
}

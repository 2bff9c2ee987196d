//! Zvols, LUN mappings, snapshots and clones, and the iSCSI access info of a volume.
//!
//! A storch volume is the zvol `<pool/volumeGroup>/<internal name>`, mapped as a LUN to a
//! host group through a target group whose target carries the portal (the data address) and,
//! with CHAP, `authentication: chap`. A clone from a volume goes through the snapshot
//! `<source>@storch-clone-<clone name>`, removed when the clone is destroyed.

use serde_json::json;

use super::NexentaDriver;
use super::client::NefError;
use super::config::{ISCSI_PORT, VolumeSettings};
use super::wire::{
    CreateZvol, LunMapping, Portal, Snapshot, Target, TargetGroup, Zvol, escape, item,
};
use crate::drivers::{DriverError, DriverResult, SnapshotInfo, VolumeInfo};
use crate::model::AccessInfo;

/// The snapshot a clone from a volume (not from a snapshot) is made from.
pub const CLONE_SNAPSHOT_PREFIX: &str = "storch-clone-";

/// The block size of the zvols storch makes; sizes are rounded up to a multiple of it (a
/// zvol's size must be one).
pub const BLOCK_SIZE: u64 = 8192;

/// `size` rounded up to a multiple of [`BLOCK_SIZE`].
pub fn rounded(size: u64) -> u64 {
    size.div_ceil(BLOCK_SIZE).saturating_mul(BLOCK_SIZE)
}

/// How often a delete whose snapshots have clones promotes a clone and tries again.
const PROMOTE_RETRIES: usize = 3;

/// A driver-side error wrapped from the appliance's, keeping its message.
pub(super) fn nef(e: NefError) -> DriverError {
    e.into_driver()
}

/// `Ok` for `ENOENT`, the error otherwise.
pub(super) fn gone_ok(r: Result<(), NefError>) -> Result<(), NefError> {
    match r {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

impl NexentaDriver {
    // ---- zvols ----

    /// The zvol at `path`, `None` when there is none.
    pub(super) async fn zvol(&self, path: &str) -> DriverResult<Option<Zvol>> {
        let list = self
            .client
            .list("storage/volumes", &[("path", path.to_string())])
            .await
            .map_err(nef)?;
        for v in list {
            let z: Zvol = item("volume", v).map_err(DriverError::Other)?;
            if z.path == path {
                return Ok(Some(z));
            }
        }
        Ok(None)
    }

    /// storch's zvol named `name` in any of the backend's volume groups.
    pub(super) async fn find(&self, name: &str) -> DriverResult<Option<Zvol>> {
        for vg in &self.cfg.volume_groups {
            if let Some(z) = self.zvol(&format!("{vg}/{name}")).await? {
                return Ok(Some(z));
            }
        }
        Ok(None)
    }

    pub(super) async fn find_or_not_found(&self, name: &str) -> DriverResult<Zvol> {
        self.find(name)
            .await?
            .ok_or_else(|| DriverError::NotFound(format!("volume {name} not found")))
    }

    /// `POST storage/volumes`; `EEXIST` is `AlreadyExists` (the caller adopts or refuses).
    pub(super) async fn create_zvol(
        &self,
        path: &str,
        size: u64,
        sparse: bool,
    ) -> DriverResult<()> {
        let body = serde_json::to_value(CreateZvol {
            path,
            volume_size: rounded(size),
            sparse_volume: sparse,
            volume_block_size: Some(BLOCK_SIZE),
        })
        .map_err(|e| DriverError::Other(e.to_string()))?;
        self.client
            .post("storage/volumes", &body)
            .await
            .map_err(nef)?;
        Ok(())
    }

    pub(super) async fn resize_zvol(&self, z: &Zvol, size: u64) -> DriverResult<()> {
        let size = match z.volume_block_size.filter(|b| *b > 0) {
            Some(b) => size.div_ceil(b).saturating_mul(b),
            None => rounded(size),
        };
        if size < z.volume_size {
            return Err(DriverError::Invalid(format!(
                "invalid size: volume {} has {} bytes; a zvol cannot shrink to {size}",
                z.path, z.volume_size
            )));
        }
        if size == z.volume_size {
            return Ok(());
        }
        let path = format!("storage/volumes/{}", escape(&z.path));
        self.client
            .put(&path, &json!({"volumeSize": size}))
            .await
            .map_err(nef)?;
        Ok(())
    }

    /// Unmaps and deletes the zvol at `path` with its snapshots; promotes the newest clone of
    /// its snapshots when they have clones (`EEXIST`), at most [`PROMOTE_RETRIES`] times.
    pub(super) async fn delete_zvol(&self, path: &str) -> DriverResult<()> {
        let mappings = self.mappings_of(path).await?;
        for m in &mappings {
            let p = format!("san/lunMappings/{}", escape(&m.id));
            gone_ok(self.client.delete(&p, &[]).await).map_err(nef)?;
        }
        let p = format!("storage/volumes/{}", escape(path));
        let mut promoted = 0;
        loop {
            let r = self
                .client
                .delete(&p, &[("snapshots", "true".to_string())])
                .await;
            match gone_ok(r) {
                Ok(()) => break,
                Err(e) if e.is_code("EEXIST") && promoted < PROMOTE_RETRIES => {
                    promoted += 1;
                    if !self.promote_newest_clone(path).await? {
                        return Err(nef(e));
                    }
                }
                Err(e) => return Err(nef(e)),
            }
        }
        self.drop_empty_dynamic(&mappings).await;
        for m in &mappings {
            if m.host_group.starts_with(super::publish::HOST_GROUP_PREFIX)
                && let Err(e) = self.drop_host_group(&m.host_group).await
            {
                tracing::warn!(group = %m.host_group, error = %e, "cannot delete a host's group");
            }
        }
        Ok(())
    }

    /// Promotes the newest clone of the zvol's snapshots; false when none has clones.
    async fn promote_newest_clone(&self, path: &str) -> DriverResult<bool> {
        let mut snaps = self.snapshots_of(path).await?;
        snaps.sort_by_key(|s| s.created_ms());
        let Some(clone) = snaps.iter().rev().find_map(|s| s.clones.last()) else {
            return Ok(false);
        };
        tracing::info!(volume = %path, clone = %clone, "promoting a clone so that its origin can be deleted");
        let p = format!("storage/volumes/{}/promote", escape(clone));
        self.client.post(&p, &json!({})).await.map_err(nef)?;
        Ok(true)
    }

    // ---- snapshots ----

    pub(super) async fn snapshots_of(&self, dataset: &str) -> DriverResult<Vec<Snapshot>> {
        let q = [
            ("parent", dataset.to_string()),
            ("fields", "path,name,parent,creationTime,clones".to_string()),
        ];
        let list = self
            .client
            .list("storage/snapshots", &q)
            .await
            .map_err(nef)?;
        let mut out = Vec::new();
        for v in list {
            let s: Snapshot = item("snapshot", v).map_err(DriverError::Other)?;
            if s.dataset() == dataset {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// One snapshot (`pool/vg/vol@snap`), `None` when missing.
    pub(super) async fn snapshot(&self, path: &str) -> DriverResult<Option<Snapshot>> {
        let p = format!("storage/snapshots/{}", escape(path));
        let q = [("fields", "path,name,parent,creationTime,clones".to_string())];
        match self.client.get(&p, &q).await {
            Ok(v) => Ok(Some(item("snapshot", v).map_err(DriverError::Other)?)),
            Err(e) if e.is_not_found() || e.is_code("EBADARG") || e.is_code("EINVAL") => Ok(None),
            Err(e) => Err(nef(e)),
        }
    }

    /// `POST storage/snapshots`; an existing one is `AlreadyExists`, or kept with `reuse`.
    pub(super) async fn make_snapshot(&self, path: &str, reuse: bool) -> DriverResult<Snapshot> {
        match self
            .client
            .post("storage/snapshots", &json!({"path": path}))
            .await
        {
            Ok(_) => {}
            Err(e) if reuse && e.is_code("EEXIST") => {}
            Err(e) => return Err(nef(e)),
        }
        self.snapshot(path).await?.ok_or_else(|| {
            DriverError::Other(format!("snapshot {path} was created but cannot be read"))
        })
    }

    /// Deletes a snapshot; one already gone counts as deleted; one with clones is a conflict.
    pub(super) async fn remove_snapshot(&self, path: &str) -> DriverResult<()> {
        let p = format!("storage/snapshots/{}", escape(path));
        gone_ok(self.client.delete(&p, &[]).await).map_err(nef)
    }

    pub(super) fn snapshot_info(&self, volume: &str, s: &Snapshot, size: u64) -> SnapshotInfo {
        SnapshotInfo {
            name: s.short_name().to_string(),
            volume_internal_name: volume.to_string(),
            created_ms: s.created_ms(),
            size_bytes: size,
        }
    }

    /// Removes the snapshot a clone from a volume was made from (best effort: a failure is
    /// logged, the clone is gone either way).
    pub(super) async fn drop_clone_snapshot(&self, vg: &str, clone_name: &str) {
        let want = format!("{CLONE_SNAPSHOT_PREFIX}{clone_name}");
        let q = [
            ("parent", vg.to_string()),
            ("recursive", "true".to_string()),
            ("fields", "path,name,parent".to_string()),
        ];
        let list = match self.client.list("storage/snapshots", &q).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(clone = %clone_name, error = %e, "cannot look for the clone's snapshot");
                return;
            }
        };
        for v in list {
            let Ok(s) = item::<Snapshot>("snapshot", v) else {
                continue;
            };
            if s.short_name() == want
                && let Err(e) = self.remove_snapshot(&s.path).await
            {
                tracing::warn!(snapshot = %s.path, error = %e, "cannot delete the clone's snapshot");
            }
        }
    }

    // ---- LUN mappings, targets, target groups ----

    pub(super) async fn mappings(&self, query: &[(&str, String)]) -> DriverResult<Vec<LunMapping>> {
        let mut q = query.to_vec();
        q.push(("fields", "id,volume,targetGroup,hostGroup,lun".to_string()));
        let list = self.client.list("san/lunMappings", &q).await.map_err(nef)?;
        list.into_iter()
            .map(|v| item("LUN mapping", v).map_err(DriverError::Other))
            .collect()
    }

    pub(super) async fn mappings_of(&self, path: &str) -> DriverResult<Vec<LunMapping>> {
        let all = self.mappings(&[("volume", path.to_string())]).await?;
        Ok(all.into_iter().filter(|m| m.volume == path).collect())
    }

    /// Maps the zvol as a LUN (unless it already is): to a dynamic target group with room, or
    /// to the configured one. Returns the mapping.
    pub(super) async fn map(&self, path: &str, s: &VolumeSettings) -> DriverResult<LunMapping> {
        if let Some(m) = self.mappings_of(path).await?.into_iter().next() {
            return Ok(m);
        }
        // Allocation and mapping take turns, so that no target gets more LUNs than allowed.
        let _turn = self.alloc.lock().await;
        let (target, group) = if s.dynamic {
            self.pick_dynamic(s).await?
        } else {
            (s.target.clone(), s.target_group.clone())
        };
        self.ensure_target(&target, s).await?;
        self.ensure_target_group(&group, &target).await?;
        let body = json!({"hostGroup": s.host_group, "volume": path, "targetGroup": group});
        match self.client.post("san/lunMappings", &body).await {
            Ok(_) => {}
            Err(e) if e.is_code("EEXIST") => {}
            Err(e) => return Err(nef(e)),
        }
        self.mappings_of(path)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| {
                DriverError::Other(format!(
                    "the LUN mapping of {path} was created but is not listed"
                ))
            })
    }

    /// The dynamic (target, target group) pair `n` of a settings' bases.
    pub(super) fn dynamic_names(s: &VolumeSettings, n: usize) -> (String, String) {
        let target = match s.target.as_str() {
            "" => super::DEFAULT_DYNAMIC_TARGET,
            t => t,
        };
        let group = match s.target_group.as_str() {
            "" => super::DEFAULT_DYNAMIC_TARGET_GROUP,
            g => g,
        };
        (format!("{target}-{n}"), format!("{group}-{n}"))
    }

    /// The first dynamic target group with fewer than `numOfLunsPerTarget` LUNs.
    async fn pick_dynamic(&self, s: &VolumeSettings) -> DriverResult<(String, String)> {
        let all = self.mappings(&[]).await?;
        for n in 0..1_000_000 {
            let (target, group) = Self::dynamic_names(s, n);
            let used = all.iter().filter(|m| m.target_group == group).count();
            if used < s.luns_per_target as usize {
                return Ok((target, group));
            }
        }
        Err(DriverError::Conflict("no dynamic target has room".into()))
    }

    pub(super) async fn target(&self, name: &str) -> DriverResult<Option<Target>> {
        let q = [
            ("name", name.to_string()),
            (
                "fields",
                "name,state,authentication,alias,chapSecretSet,chapUser,portals".to_string(),
            ),
        ];
        let list = self
            .client
            .list("san/iscsi/targets", &q)
            .await
            .map_err(nef)?;
        for v in list {
            let t: Target = item("iSCSI target", v).map_err(DriverError::Other)?;
            if t.name == name {
                return Ok(Some(t));
            }
        }
        Ok(None)
    }

    /// Creates the target when missing (portal: the data address), and turns CHAP on when
    /// the settings ask for it.
    async fn ensure_target(&self, name: &str, s: &VolumeSettings) -> DriverResult<()> {
        let existing = self.target(name).await?;
        let created = existing.is_none();
        if created {
            let portals = vec![Portal {
                address: s.data_ip.clone(),
                port: ISCSI_PORT,
            }];
            let body = json!({"name": name, "portals": portals});
            match self.client.post("san/iscsi/targets", &body).await {
                Ok(_) => {}
                Err(e) if e.is_code("EEXIST") => {}
                Err(e) => return Err(nef(e)),
            }
        }
        let chap_set = existing
            .as_ref()
            .is_some_and(|t| t.authentication == "chap" && t.chap_user == s.chap_user);
        if s.use_chap && !chap_set {
            let secret = s.chap_secret.as_ref().map(|x| x.expose()).unwrap_or("");
            let body =
                json!({"authentication": "chap", "chapUser": s.chap_user, "chapSecret": secret});
            let p = format!("san/iscsi/targets/{}", escape(name));
            self.client.put(&p, &body).await.map_err(nef)?;
        }
        Ok(())
    }

    pub(super) async fn target_group(&self, name: &str) -> DriverResult<Option<TargetGroup>> {
        let p = format!("san/targetgroups/{}", escape(name));
        match self
            .client
            .get(&p, &[("fields", "name,members".to_string())])
            .await
        {
            Ok(v) => Ok(Some(item("target group", v).map_err(DriverError::Other)?)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(nef(e)),
        }
    }

    /// Creates the target group with `target` as member, or adds `target` to its members.
    async fn ensure_target_group(&self, name: &str, target: &str) -> DriverResult<()> {
        let members = match self.target_group(name).await? {
            Some(g) if g.members.iter().any(|m| m == target) => return Ok(()),
            Some(g) => g.members,
            None => {
                let body = json!({"name": name, "members": [target]});
                match self.client.post("san/targetgroups", &body).await {
                    Ok(_) => return Ok(()),
                    Err(e) if e.is_code("EEXIST") => Vec::new(),
                    Err(e) => return Err(nef(e)),
                }
            }
        };
        let mut members = members;
        members.push(target.to_string());
        let p = format!("san/targetgroups/{}", escape(name));
        self.client
            .put(&p, &json!({"members": members}))
            .await
            .map_err(nef)?;
        Ok(())
    }

    /// Deletes the backend's dynamic target groups (and their targets) that the removed
    /// mappings left without LUNs. Best effort: a failure is logged; the pair is reused later.
    async fn drop_empty_dynamic(&self, removed: &[LunMapping]) {
        if !self.cfg.defaults.dynamic {
            return;
        }
        for m in removed {
            let Some(n) = self.dynamic_index(&m.target_group) else {
                continue;
            };
            let (target, group) = Self::dynamic_names(&self.cfg.defaults, n);
            let _turn = self.alloc.lock().await;
            let left = match self.mappings(&[("targetGroup", group.clone())]).await {
                Ok(l) => l.into_iter().filter(|x| x.target_group == group).count(),
                Err(e) => {
                    tracing::warn!(group = %group, error = %e, "cannot check a dynamic target group");
                    continue;
                }
            };
            if left > 0 {
                continue;
            }
            for p in [
                format!("san/targetgroups/{}", escape(&group)),
                format!("san/iscsi/targets/{}", escape(&target)),
            ] {
                if let Err(e) = gone_ok(self.client.delete(&p, &[]).await) {
                    tracing::warn!(object = %p, error = %e, "cannot delete an empty dynamic target");
                }
            }
        }
    }

    /// `n` when `group` is the backend's dynamic target group `n`.
    fn dynamic_index(&self, group: &str) -> Option<usize> {
        let (_, base) = Self::dynamic_names(&self.cfg.defaults, 0);
        let base = base.strip_suffix('0')?;
        let n = group.strip_prefix(base)?;
        if n.is_empty() || !n.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        n.parse().ok()
    }

    // ---- access info ----

    /// The volume as the trait reports it, its access read from its mapping.
    pub(super) async fn info(&self, z: &Zvol) -> DriverResult<VolumeInfo> {
        let mapping = self.mappings_of(&z.path).await?.into_iter().next();
        let access = match mapping {
            Some(m) => self.access_of(&m).await?,
            None => AccessInfo::default(),
        };
        Ok(self.volume_info(z, access))
    }

    pub(super) fn volume_info(&self, z: &Zvol, access: AccessInfo) -> VolumeInfo {
        let (pool, name) = z.path.rsplit_once('/').unwrap_or(("", &z.path));
        VolumeInfo {
            internal_name: name.to_string(),
            pool: pool.to_string(),
            size_bytes: z.volume_size,
            access,
        }
    }

    /// iSCSI: the target IQN of the mapping's target group, its portal (the data address,
    /// port 3260), the LUN, and the CHAP user and secret when the target asks for CHAP.
    pub(super) async fn access_of(&self, m: &LunMapping) -> DriverResult<AccessInfo> {
        let group = self.target_group(&m.target_group).await?.ok_or_else(|| {
            DriverError::Other(format!(
                "target group {} of the LUN mapping of {} is missing",
                m.target_group, m.volume
            ))
        })?;
        let Some(target_name) = group.members.first() else {
            return Err(DriverError::Other(format!(
                "target group {} has no target",
                m.target_group
            )));
        };
        let target = self.target(target_name).await?;
        let portals: Vec<String> = target
            .iter()
            .flat_map(|t| t.portals.iter())
            .map(|p| format!("{}:{}", p.address, p.port))
            .collect();
        let mut a = AccessInfo {
            iscsi_target_portal: portals
                .first()
                .cloned()
                .unwrap_or_else(|| format!("{}:{ISCSI_PORT}", self.cfg.defaults.data_ip)),
            iscsi_portals: portals.iter().skip(1).cloned().collect(),
            iscsi_target_iqn: target_name.clone(),
            iscsi_lun_number: i32::try_from(m.lun).unwrap_or_default(),
            iscsi_interface: "default".into(),
            iscsi_igroup: m.host_group.clone(),
            ..AccessInfo::default()
        };
        if let Some(t) = target.filter(|t| t.authentication == "chap") {
            a.iscsi_username = t.chap_user.clone();
            if t.chap_user == self.cfg.defaults.chap_user
                && let Some(secret) = &self.cfg.defaults.chap_secret
            {
                a.iscsi_initiator_secret = secret.expose().to_string();
            }
        }
        Ok(a)
    }
}

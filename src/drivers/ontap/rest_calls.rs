//! The REST implementation of [`OntapApi`] (wire-protocols §5.5): names are resolved to UUIDs
//! with filtered collection reads (`fields=` limited to what is used), then acted on; creates
//! and deletes of volumes and snapshots wait for their jobs; "does not exist" on a delete is
//! success; duplicates keep the class ZAPI's have.

use std::collections::BTreeMap;

use async_trait::async_trait;
use reqwest::Method;
use serde_json::{Value, json};

use super::api::{AggregateKind, ApiResult, OntapApi};
use super::client::OntapError;
use super::discovery::Aggregate;
use super::rest::{Req, RestClient};
use super::rest_wire::{self as rw, codes, str_at};
use super::wire::{QtreeRecord, SnapshotRecord, VolumeCreate, VolumeRecord};

/// A "does not exist" error for an object looked up by name.
pub(super) fn missing(api: &str, what: String) -> OntapError {
    OntapError::Rest {
        api: api.to_string(),
        code: codes::ENTRY_NOT_FOUND,
        message: format!("{what} does not exist"),
        target: String::new(),
    }
}

/// Ok for "does not exist" (deletes of what is already gone).
pub(super) fn gone_ok(r: ApiResult<Value>) -> ApiResult<()> {
    match r {
        Err(e) if e.is_not_found() => Ok(()),
        r => r.map(|_| ()),
    }
}

impl RestClient {
    /// A volume's UUID by name, `None` when there is none.
    async fn volume_uuid(&self, svm: &str, name: &str) -> ApiResult<Option<String>> {
        let svm_uuid = self.svm_uuid(svm).await?;
        let records = self
            .collect(
                Req::new("/storage/volumes")
                    .q("svm.uuid", svm_uuid)
                    .q("name", name)
                    .q("fields", "uuid"),
            )
            .await?;
        let uuid = one_uuid(&records, "name", name, "uuid")?;
        self.remember_volume(svm, name, uuid.as_deref());
        Ok(uuid)
    }

    async fn require_volume(&self, svm: &str, name: &str) -> ApiResult<String> {
        self.volume_uuid(svm, name)
            .await?
            .ok_or_else(|| missing("GET /storage/volumes", format!("volume {name}")))
    }

    /// Runs `call` with the volume's UUID: the remembered one first, and when the array says
    /// it does not exist (the volume was replaced behind storch's back), the one a fresh
    /// lookup finds.
    async fn with_volume<T, F, Fut>(&self, svm: &str, name: &str, call: F) -> ApiResult<T>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = ApiResult<T>>,
    {
        if let Some(uuid) = self.remembered_volume(svm, name) {
            match call(uuid).await {
                Err(e) if e.is_not_found() => self.remember_volume(svm, name, None),
                r => return r,
            }
        }
        call(self.require_volume(svm, name).await?).await
    }

    /// `PATCH /storage/volumes/{uuid}` with one concern, waiting for a job when there is one.
    async fn volume_patch(&self, svm: &str, name: &str, body: Value) -> ApiResult<()> {
        self.with_volume(svm, name, |uuid| {
            let body = &body;
            async move {
                self.change(
                    Method::PATCH,
                    &Req::new(format!("/storage/volumes/{uuid}")),
                    Some(body),
                )
                .await
                .map(|_| ())
            }
        })
        .await
    }

    /// The tree quota rule of a qtree: its UUID.
    async fn quota_rule(&self, svm: &str, volume: &str, qtree: &str) -> ApiResult<Option<String>> {
        let svm_uuid = self.svm_uuid(svm).await?;
        let records = self
            .collect(
                Req::new("/storage/quota/rules")
                    .q("svm.uuid", svm_uuid)
                    .q("volume.name", volume)
                    .q("qtree.name", qtree)
                    .q("type", "tree")
                    .q("fields", "uuid"),
            )
            .await?;
        Ok(records
            .iter()
            .filter_map(|r| r["uuid"].as_str())
            .next()
            .map(str::to_string))
    }

    async fn export_policy_id(&self, svm_uuid: &str, policy: &str) -> ApiResult<Option<u64>> {
        let records = self
            .collect(
                Req::new("/protocols/nfs/export-policies")
                    .q("svm.uuid", svm_uuid)
                    .q("name", policy)
                    .q("fields", "id"),
            )
            .await?;
        Ok(records
            .iter()
            .filter(|r| r["name"].as_str().is_none_or(|n| n == policy))
            .find_map(|r| r["id"].as_u64()))
    }
}

/// The `key` of the only record whose `field` is `want` (records may omit `field`); more than
/// one is an error, as Trident treats it.
pub(super) fn one_uuid(
    records: &[Value],
    field: &str,
    want: &str,
    key: &str,
) -> ApiResult<Option<String>> {
    let found: Vec<&str> = records
        .iter()
        .filter(|r| r[field].as_str().is_none_or(|n| n == want))
        .filter_map(|r| r[key].as_str())
        .collect();
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.to_string())),
        many => Err(OntapError::Malformed {
            api: "lookup".into(),
            msg: format!("{} records named {want}", many.len()),
        }),
    }
}

#[async_trait]
impl OntapApi for RestClient {
    fn api_name(&self) -> &'static str {
        "rest"
    }

    async fn ontapi_version(&self) -> ApiResult<(u32, u32)> {
        Ok(rw::ontapi_equivalent(self.cluster_version().await?))
    }

    async fn data_svms(&self) -> ApiResult<Vec<String>> {
        let records = self
            .collect(Req::new("/svm/svms").q("fields", "name"))
            .await?;
        Ok(records
            .iter()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect())
    }

    async fn svm_aggregates(&self, svm: &str) -> ApiResult<Option<Vec<Aggregate>>> {
        let uuid = match self.svm_uuid(svm).await {
            Ok(u) => u,
            Err(e) if e.rest_code() == Some(codes::SVM_NOT_FOUND) => return Ok(None),
            Err(e) => return Err(e),
        };
        let record = self
            .get(&Req::new(format!("/svm/svms/{uuid}")).q("fields", "aggregates"))
            .await?;
        let names = rw::names_at(&record, "aggregates");
        // Free space needs the aggregates collection, which an SVM admin may not read.
        let space = match self
            .collect(Req::new("/storage/aggregates").q(
                "fields",
                "space.block_storage.size,space.block_storage.used",
            ))
            .await
        {
            Ok(r) => r,
            Err(OntapError::Forbidden { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        let available = |name: &str| {
            space
                .iter()
                .find(|r| r["name"] == name)
                .map(|r| {
                    let size = rw::at(r, "space.block_storage.size").as_u64().unwrap_or(0);
                    let used = rw::at(r, "space.block_storage.used").as_u64().unwrap_or(0);
                    size.saturating_sub(used)
                })
                .unwrap_or(0)
        };
        Ok(Some(
            names
                .iter()
                .map(|n| Aggregate {
                    name: n.clone(),
                    media: None,
                    available: available(n),
                    nve_capable: true,
                })
                .collect(),
        ))
    }

    /// Media from `block_storage.storage_type`; REST names no NVE capability the drivers read,
    /// so encryption stays offered and the array decides (docs/wire-notes.md).
    async fn aggregate_kinds(&self, _svm: &str) -> ApiResult<Vec<AggregateKind>> {
        match self
            .collect(Req::new("/storage/aggregates").q("fields", "block_storage.storage_type"))
            .await
        {
            Ok(records) => Ok(records
                .iter()
                .map(|r| AggregateKind {
                    name: str_at(r, "name").to_string(),
                    media: str_at(r, "block_storage.storage_type").to_string(),
                    nve_capable: true,
                })
                .collect()),
            Err(OntapError::Forbidden { .. }) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    async fn data_lifs(&self, svm: &str, protocol: &str) -> ApiResult<Vec<String>> {
        let uuid = self.svm_uuid(svm).await?;
        let records = self
            .collect(
                Req::new("/network/ip/interfaces")
                    .q("svm.uuid", uuid)
                    .q("services", format!("data_{protocol}"))
                    .q("fields", "ip.address,state"),
            )
            .await?;
        Ok(records
            .iter()
            .filter(|r| str_at(r, "state") == "up")
            .map(|r| str_at(r, "ip.address").to_string())
            .filter(|a| !a.is_empty())
            .collect())
    }

    async fn iscsi_target_name(&self, svm: &str) -> ApiResult<String> {
        let uuid = self.svm_uuid(svm).await?;
        let r = self
            .get(
                &Req::new(format!("/protocols/san/iscsi/services/{uuid}"))
                    .q("fields", "target.name,enabled"),
            )
            .await?;
        if r["enabled"] == false {
            return Err(missing(
                "GET /protocols/san/iscsi/services",
                format!("an enabled iSCSI service on SVM {svm}"),
            ));
        }
        Ok(str_at(&r, "target.name").to_string())
    }

    async fn volumes(
        &self,
        svm: &str,
        pattern: &str,
        style: Option<&str>,
    ) -> ApiResult<Vec<VolumeRecord>> {
        let mut req = Req::new("/storage/volumes")
            .q("svm.uuid", self.svm_uuid(svm).await?)
            .q("name", pattern);
        if let Some(s) = style {
            req = req.q("style", s);
        }
        let records = self.collect(req.q("fields", rw::VOLUME_FIELDS)).await?;
        Ok(records.iter().map(rw::volume_record).collect())
    }

    async fn volume_create(&self, svm: &str, v: &VolumeCreate, flexgroup: bool) -> ApiResult<()> {
        let body = rw::volume_create_body(&self.svm_uuid(svm).await?, v, flexgroup);
        // 13107405 (another create of this name is running) is waited out, as ZAPI's
        // "Job exists": then the create passes, or meets the volume the other one made.
        self.change_retrying_busy(Method::POST, &Req::new("/storage/volumes"), Some(&body))
            .await?;
        self.until_visible(&format!("volume {}", v.name), || {
            self.volume_uuid(svm, &v.name)
        })
        .await
        .map(|_| ())
    }

    /// Nothing: the `POST` carried the junction (`nas.path`) and the snapshot directory.
    async fn volume_create_finish(
        &self,
        _svm: &str,
        _v: &VolumeCreate,
        _flexgroup: bool,
    ) -> ApiResult<()> {
        Ok(())
    }

    async fn volume_mount(&self, svm: &str, name: &str, junction: &str) -> ApiResult<()> {
        self.volume_patch(svm, name, json!({"nas": {"path": junction}}))
            .await
    }

    async fn volume_set_comment(&self, svm: &str, name: &str, comment: &str) -> ApiResult<()> {
        self.volume_patch(svm, name, json!({"comment": comment}))
            .await
    }

    async fn volume_set_size(
        &self,
        svm: &str,
        name: &str,
        bytes: u64,
        _flexgroup: bool,
    ) -> ApiResult<()> {
        self.volume_patch(svm, name, json!({"size": bytes})).await
    }

    /// One `DELETE` (ONTAP unmounts and offlines as part of it) with `force=true`, which
    /// skips the recovery queue (ZAPI purges it in a second step); a volume with clones is
    /// refused (524615) and left as it was.
    async fn volume_destroy(&self, svm: &str, name: &str, _flexgroup: bool) -> ApiResult<()> {
        let Some(uuid) = self.volume_uuid(svm, name).await? else {
            return Ok(());
        };
        let req = Req::new(format!("/storage/volumes/{uuid}")).q("force", "true");
        let r = self.change_retrying_busy(Method::DELETE, &req, None).await;
        if r.is_ok() {
            self.remember_volume(svm, name, None);
        }
        match r {
            Err(e) if e.rest_code() == Some(codes::VOLUME_HAS_CLONES) => Err(OntapError::Rest {
                api: "DELETE /storage/volumes".into(),
                code: codes::VOLUME_HAS_CLONES,
                message: format!(
                    "volume {name} has FlexClones; delete or split its clones first (the \
                     volume was left as it was): {}",
                    e.reason()
                ),
                target: String::new(),
            }),
            r => gone_ok(r),
        }
    }

    async fn snapshot_create(&self, svm: &str, volume: &str, snapshot: &str) -> ApiResult<()> {
        let body = json!({"name": snapshot, "svm": {"uuid": self.svm_uuid(svm).await?}});
        self.with_volume(svm, volume, |uuid| {
            let body = &body;
            async move {
                self.change(
                    Method::POST,
                    &Req::new(format!("/storage/volumes/{uuid}/snapshots")),
                    Some(body),
                )
                .await
                .map(|_| ())
            }
        })
        .await
    }

    async fn snapshots(&self, svm: &str, volume: &str) -> ApiResult<Vec<SnapshotRecord>> {
        let Some(uuid) = self.volume_uuid(svm, volume).await? else {
            return Ok(Vec::new());
        };
        let records = self
            .collect(
                Req::new(format!("/storage/volumes/{uuid}/snapshots"))
                    .q("fields", "name,create_time,size"),
            )
            .await?;
        Ok(records
            .iter()
            .map(|r| SnapshotRecord {
                name: str_at(r, "name").to_string(),
                volume: volume.to_string(),
                access_time: rw::epoch_seconds(str_at(r, "create_time")),
                total_kib: r["size"].as_u64().unwrap_or(0) / 1024,
                busy: false,
            })
            .collect())
    }

    async fn snapshot_delete(&self, svm: &str, volume: &str, snapshot: &str) -> ApiResult<()> {
        let Some(vol) = self.volume_uuid(svm, volume).await? else {
            return Ok(());
        };
        let path = format!("/storage/volumes/{vol}/snapshots");
        let records = self
            .collect(Req::new(&path).q("name", snapshot).q("fields", "uuid"))
            .await?;
        let Some(uuid) = one_uuid(&records, "name", snapshot, "uuid")? else {
            return Ok(());
        };
        gone_ok(
            self.change(Method::DELETE, &Req::new(format!("{path}/{uuid}")), None)
                .await,
        )
    }

    async fn clone_create(
        &self,
        svm: &str,
        name: &str,
        parent: &str,
        snapshot: &str,
        space_reserve: &str,
    ) -> ApiResult<()> {
        let body = json!({
            "name": name,
            "svm": {"uuid": self.svm_uuid(svm).await?},
            "clone": {"parent_volume": {"name": parent}, "parent_snapshot": {"name": snapshot},
                      "is_flexclone": true},
            "guarantee": {"type": space_reserve},
        });
        let req = Req::new("/storage/volumes").q("return_records", "true");
        self.change(Method::POST, &req, Some(&body)).await?;
        self.until_visible(&format!("clone {name}"), || self.volume_uuid(svm, name))
            .await
            .map(|_| ())
    }

    async fn clone_split_start(&self, svm: &str, name: &str) -> ApiResult<()> {
        let body = json!({"clone": {"split_initiated": true}});
        self.volume_patch(svm, name, body).await
    }

    async fn qtrees(
        &self,
        svm: &str,
        volume_pattern: &str,
        qtree_pattern: Option<&str>,
    ) -> ApiResult<Vec<QtreeRecord>> {
        let mut req = Req::new("/storage/qtrees")
            .q("svm.uuid", self.svm_uuid(svm).await?)
            .q("volume.name", volume_pattern);
        if let Some(q) = qtree_pattern {
            req = req.q("name", q);
        }
        let records = self.collect(req.q("fields", "volume.name,name")).await?;
        Ok(records
            .iter()
            .map(|r| QtreeRecord {
                volume: str_at(r, "volume.name").to_string(),
                qtree: str_at(r, "name").to_string(),
            })
            .filter(|q| !q.qtree.is_empty())
            .collect())
    }

    async fn qtree_create(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
        mode: &str,
        security_style: &str,
        export_policy: &str,
    ) -> ApiResult<()> {
        let body = json!({
            "name": qtree,
            "volume": {"name": volume},
            "svm": {"uuid": self.svm_uuid(svm).await?},
            "unix_permissions": rw::unix_mode(mode),
            "security_style": security_style,
            "export_policy": {"name": export_policy},
        });
        self.change(Method::POST, &Req::new("/storage/qtrees"), Some(&body))
            .await?;
        self.until_visible(&format!("qtree {volume}/{qtree}"), || async {
            let q = self.qtrees(svm, volume, Some(qtree)).await?;
            Ok(q.into_iter().find(|q| q.qtree == qtree))
        })
        .await
        .map(|_| ())
    }

    async fn qtree_delete(&self, svm: &str, volume: &str, qtree: &str) -> ApiResult<()> {
        let records = self
            .collect(
                Req::new("/storage/qtrees")
                    .q("svm.uuid", self.svm_uuid(svm).await?)
                    .q("volume.name", volume)
                    .q("name", qtree)
                    .q("fields", "id,volume.uuid"),
            )
            .await?;
        let Some(r) = records.iter().find(|r| str_at(r, "name") == qtree) else {
            return Ok(());
        };
        let (vol, id) = (str_at(r, "volume.uuid"), r["id"].as_u64().unwrap_or(0));
        gone_ok(
            self.change_retrying_busy(
                Method::DELETE,
                &Req::new(format!("/storage/qtrees/{vol}/{id}")),
                None,
            )
            .await,
        )
    }

    async fn tree_quotas(
        &self,
        svm: &str,
        volume_pattern: &str,
    ) -> ApiResult<BTreeMap<String, u64>> {
        let records = self
            .collect(
                Req::new("/storage/quota/rules")
                    .q("svm.uuid", self.svm_uuid(svm).await?)
                    .q("volume.name", volume_pattern)
                    .q("type", "tree")
                    .q("fields", "volume.name,qtree.name,space.hard_limit"),
            )
            .await?;
        Ok(records
            .iter()
            .filter_map(|r| {
                let limit = rw::at(r, "space.hard_limit").as_u64()?;
                let target = format!(
                    "/vol/{}/{}",
                    str_at(r, "volume.name"),
                    str_at(r, "qtree.name")
                );
                Some((target, limit))
            })
            .collect())
    }

    /// A rule's limit in bytes (rounded up to KiB, as ZAPI keeps it); the resize is implicit.
    async fn tree_quota_set(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
        bytes: u64,
    ) -> ApiResult<()> {
        let limit = bytes.div_ceil(1024) * 1024;
        let r = match self.quota_rule(svm, volume, qtree).await? {
            Some(uuid) => {
                let body = json!({"space": {"hard_limit": limit}});
                let req = Req::new(format!("/storage/quota/rules/{uuid}"));
                self.change(Method::PATCH, &req, Some(&body)).await
            }
            None => {
                let body = json!({
                    "volume": {"name": volume}, "qtree": {"name": qtree}, "type": "tree",
                    "svm": {"uuid": self.svm_uuid(svm).await?},
                    "space": {"hard_limit": limit},
                });
                self.change(Method::POST, &Req::new("/storage/quota/rules"), Some(&body))
                    .await
            }
        };
        match r {
            Err(e)
                if matches!(
                    e.rest_code(),
                    Some(codes::QUOTA_RESIZE_FAILED | codes::QUOTA_RESIZE_SKIPPED)
                ) =>
            {
                tracing::warn!(volume = %volume, qtree = %qtree, error = %e,
                    "quota rule set, but ONTAP did not resize the quotas");
                Ok(())
            }
            r => r.map(|_| ()),
        }
    }

    async fn tree_quota_delete(&self, svm: &str, volume: &str, qtree: &str) -> ApiResult<()> {
        let Some(uuid) = self.quota_rule(svm, volume, qtree).await? else {
            return Ok(());
        };
        let req = Req::new(format!("/storage/quota/rules/{uuid}"));
        gone_ok(self.change(Method::DELETE, &req, None).await)
    }

    async fn quota_on(&self, svm: &str, volume: &str) -> ApiResult<()> {
        self.volume_patch(svm, volume, json!({"quota": {"enabled": true}}))
            .await
    }

    async fn ensure_export_policy(
        &self,
        svm: &str,
        policy: &str,
        client_match: &str,
    ) -> ApiResult<()> {
        let svm_uuid = self.svm_uuid(svm).await?;
        let id = match self.export_policy_id(&svm_uuid, policy).await? {
            Some(id) => id,
            None => {
                let body = json!({"name": policy, "svm": {"uuid": svm_uuid}});
                let req = Req::new("/protocols/nfs/export-policies");
                match self.change(Method::POST, &req, Some(&body)).await {
                    Err(e) if !e.is_duplicate() => return Err(e),
                    _ => {}
                }
                self.export_policy_id(&svm_uuid, policy)
                    .await?
                    .ok_or_else(|| missing("GET /protocols/nfs/export-policies", policy.into()))?
            }
        };
        let rules = format!("/protocols/nfs/export-policies/{id}/rules");
        let records = self
            .collect(Req::new(&rules).q("fields", "clients"))
            .await?;
        let has = records.iter().any(|r| {
            r["clients"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["match"] == client_match))
        });
        if has {
            return Ok(());
        }
        let body = json!({"clients": [{"match": client_match}], "protocols": ["nfs"],
            "ro_rule": ["any"], "rw_rule": ["any"], "superuser": ["any"]});
        match self
            .change(Method::POST, &Req::new(&rules), Some(&body))
            .await
        {
            Err(e) if e.is_duplicate() => Ok(()),
            r => r.map(|_| ()),
        }
    }

    async fn lun_create(&self, svm: &str, path: &str, size: u64) -> ApiResult<u64> {
        let body = json!({
            "name": path, "os_type": "linux", "svm": {"uuid": self.svm_uuid(svm).await?},
            "space": {"size": size, "guarantee": {"requested": false}},
        });
        let req = Req::new("/storage/luns").q("return_records", "true");
        self.change(Method::POST, &req, Some(&body)).await?;
        let luns = self
            .until_visible(&format!("LUN {path}"), || async {
                let l = self.luns(svm, path).await?;
                Ok((!l.is_empty()).then_some(l))
            })
            .await?;
        Ok(luns.get(path).copied().unwrap_or(size))
    }

    async fn luns(&self, svm: &str, pattern: &str) -> ApiResult<BTreeMap<String, u64>> {
        let records = self
            .collect(
                Req::new("/storage/luns")
                    .q("svm.uuid", self.svm_uuid(svm).await?)
                    .q("name", pattern)
                    .q("fields", "name,space.size"),
            )
            .await?;
        Ok(records
            .iter()
            .map(|r| {
                let size = rw::at(r, "space.size").as_u64().unwrap_or(0);
                (str_at(r, "name").to_string(), size)
            })
            .collect())
    }

    async fn lun_resize(&self, svm: &str, path: &str, size: u64) -> ApiResult<()> {
        let uuid = self
            .lun_uuid(svm, path)
            .await?
            .ok_or_else(|| missing("GET /storage/luns", format!("LUN {path}")))?;
        let body = json!({"space": {"size": size}});
        self.change(
            Method::PATCH,
            &Req::new(format!("/storage/luns/{uuid}")),
            Some(&body),
        )
        .await
        .map(|_| ())
    }

    async fn ensure_igroup(&self, svm: &str, igroup: &str) -> ApiResult<()> {
        if self.igroup_uuid(svm, igroup).await?.is_some() {
            return Ok(());
        }
        let body = json!({"name": igroup, "protocol": "iscsi", "os_type": "linux",
            "svm": {"uuid": self.svm_uuid(svm).await?}});
        let req = Req::new("/protocols/san/igroups").q("return_records", "true");
        match self.change(Method::POST, &req, Some(&body)).await {
            Err(e) if e.rest_code() == Some(codes::IGROUP_EXISTS) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// `POST …/igroups/{uuid}/initiators`; one already a member (5374035) is success.
    async fn igroup_add(&self, svm: &str, igroup: &str, initiator: &str) -> ApiResult<()> {
        let uuid = self
            .igroup_uuid(svm, igroup)
            .await?
            .ok_or_else(|| missing("GET /protocols/san/igroups", format!("igroup {igroup}")))?;
        let req = Req::new(format!("/protocols/san/igroups/{uuid}/initiators"));
        let body = json!({"name": initiator});
        match self.change(Method::POST, &req, Some(&body)).await {
            Err(e) if e.rest_code() == Some(codes::INITIATOR_IN_IGROUP) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// `DELETE …/igroups/{uuid}`: still mapped (1254213) is left; gone is gone.
    async fn igroup_destroy_unmapped(&self, svm: &str, igroup: &str) -> ApiResult<bool> {
        let Some(uuid) = self.igroup_uuid(svm, igroup).await? else {
            return Ok(true);
        };
        let req = Req::new(format!("/protocols/san/igroups/{uuid}"));
        match self.change(Method::DELETE, &req, None).await {
            Ok(_) => Ok(true),
            Err(e) if e.rest_code() == Some(codes::IGROUP_MAPPED) => Ok(false),
            Err(e) if e.is_not_found() => Ok(true),
            Err(e) => Err(e),
        }
    }

    async fn lun_map(&self, svm: &str, path: &str, igroup: &str) -> ApiResult<i32> {
        if let Some(id) = self.lun_id(svm, path, igroup).await? {
            return Ok(id);
        }
        let body = json!({"igroup": {"name": igroup}, "lun": {"name": path},
            "svm": {"uuid": self.svm_uuid(svm).await?}});
        let req = Req::new("/protocols/san/lun-maps").q("return_records", "true");
        match self.change(Method::POST, &req, Some(&body)).await {
            Ok(answer) => {
                if let Some(n) = answer["records"][0]["logical_unit_number"].as_i64() {
                    return Ok(n as i32);
                }
            }
            Err(e) if e.rest_code() == Some(codes::LUN_ALREADY_MAPPED) => {}
            Err(e) => return Err(e),
        }
        self.lun_id(svm, path, igroup)
            .await?
            .ok_or_else(|| missing("GET /protocols/san/lun-maps", format!("map of {path}")))
    }

    async fn lun_maps(&self, svm: &str, path: &str) -> ApiResult<BTreeMap<String, i32>> {
        Ok(self
            .lun_maps_of(svm, path, None)
            .await?
            .into_iter()
            .map(|(g, _, _, id)| (g, id))
            .collect())
    }

    async fn lun_id(&self, svm: &str, path: &str, igroup: &str) -> ApiResult<Option<i32>> {
        let maps = self.lun_maps_of(svm, path, Some(igroup)).await?;
        Ok(maps.first().map(|m| m.3))
    }

    async fn lun_unmap(&self, svm: &str, path: &str, igroup: &str) -> ApiResult<()> {
        for (_, lun, group, _) in self.lun_maps_of(svm, path, Some(igroup)).await? {
            self.lun_map_delete(&lun, &group).await?;
        }
        Ok(())
    }

    /// Unmaps from every igroup first (ONTAP refuses to delete a mapped LUN, 1254197).
    async fn lun_destroy(&self, svm: &str, path: &str) -> ApiResult<Vec<String>> {
        let Some(uuid) = self.lun_uuid(svm, path).await? else {
            return Ok(Vec::new());
        };
        let maps = self.lun_maps_of(svm, path, None).await?;
        for (_, lun, group, _) in &maps {
            let lun = if lun.is_empty() { &uuid } else { lun };
            self.lun_map_delete(lun, group).await?;
        }
        let req = Req::new(format!("/storage/luns/{uuid}"));
        gone_ok(self.change(Method::DELETE, &req, None).await)?;
        Ok(maps.into_iter().map(|m| m.0).collect())
    }
}

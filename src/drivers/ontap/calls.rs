//! The ZAPI implementation of [`OntapApi`]: the typed calls the drivers make (version, SVMs,
//! aggregates, LIFs, volumes, snapshots, clones, qtrees, quotas, export policies, LUNs, igroups).

use std::time::Duration;

use async_trait::async_trait;

use super::api::{AggregateKind, OntapApi};
use super::client::{OntapError, ZapiClient};
use super::discovery::Aggregate;
use super::wire::{QtreeRecord, SnapshotRecord, VolumeCreate, VolumeRecord, volume_query};
use crate::wire::zapi::{Node, errno};

/// How long to wait for one async job.
pub const JOB_TIMEOUT: Duration = Duration::from_secs(120);

/// The errnos that say a LUN (or its volume) is not there.
const LUN_GONE: [u32; 4] = [
    errno::EOBJECTNOTFOUND,
    errno::NO_SUCH_VOLUME,
    errno::EVOLUMEDOESNOTEXIST,
    errno::ENOENT,
];

#[async_trait]
impl OntapApi for ZapiClient {
    fn api_name(&self) -> &'static str {
        "zapi"
    }

    /// `system-get-ontapi-version` → (major, minor).
    async fn ontapi_version(&self) -> Result<(u32, u32), OntapError> {
        let r = self
            .call(&Node::new("system-get-ontapi-version"), None)
            .await?;
        let major = r.u64_at("major-version").unwrap_or(0) as u32;
        let minor = r.u64_at("minor-version").unwrap_or(0) as u32;
        Ok((major, minor))
    }

    /// Volumes whose name matches `pattern` (exact, or `prefix*`).
    async fn volumes(
        &self,
        svm: &str,
        pattern: &str,
        style: Option<&str>,
    ) -> Result<Vec<VolumeRecord>, OntapError> {
        let records = self
            .iter(
                "volume-get-iter",
                Some(volume_query(pattern, style)),
                None,
                Some(svm),
            )
            .await?;
        Ok(records.iter().map(VolumeRecord::from_node).collect())
    }

    /// `volume-create` (one aggregate) or `volume-create-async` (a FlexGroup) and its job.
    async fn volume_create(
        &self,
        svm: &str,
        v: &VolumeCreate,
        flexgroup: bool,
    ) -> Result<(), OntapError> {
        let mut n = Node::new(if flexgroup {
            "volume-create-async"
        } else {
            "volume-create"
        });
        if flexgroup {
            n.push(Node::leaf("volume-name", &v.name));
            let mut list = Node::new("aggr-list");
            for a in &v.aggregates {
                list.push(Node::leaf("aggr-name", a));
            }
            n.push(list);
        } else {
            n.push(Node::leaf("volume", &v.name));
            n.push(Node::leaf(
                "containing-aggr-name",
                v.aggregates.first().cloned().unwrap_or_default(),
            ));
        }
        n = n
            .with_leaf("size", v.size.to_string())
            .with_leaf("space-reserve", &v.space_reserve)
            .with_leaf("snapshot-policy", &v.snapshot_policy)
            .with_opt("percentage-snapshot-reserve", v.snapshot_reserve.clone())
            .with_opt("export-policy", v.export_policy.clone())
            .with_opt("unix-permissions", v.unix_permissions.clone())
            .with_leaf("volume-security-style", &v.security_style)
            .with_leaf("volume-comment", &v.comment)
            // A FlexVol is mounted by `volume_create_finish`, as Trident 18.07 does.
            .with_opt(
                "junction-path",
                v.junction_path.clone().filter(|_| flexgroup),
            );
        if v.encrypt {
            n.push(Node::leaf("encrypt", "true"));
        }
        if flexgroup {
            self.call_async(&n, Some(svm), JOB_TIMEOUT).await
        } else {
            self.call(&n, Some(svm)).await.map(|_| ())
        }
    }

    /// `volume-mount` of a FlexVol (a FlexGroup was created mounted), then the snapshot
    /// directory through a modify.
    async fn volume_create_finish(
        &self,
        svm: &str,
        v: &VolumeCreate,
        flexgroup: bool,
    ) -> Result<(), OntapError> {
        if let Some(j) = v.junction_path.as_deref().filter(|_| !flexgroup) {
            self.volume_mount(svm, &v.name, j).await?;
        }
        if let Some(visible) = v.snapdir {
            let attrs = Node::new("volume-snapshot-attributes")
                .with_leaf("snapdir-access-enabled", visible.to_string());
            self.volume_modify(svm, &v.name, attrs, flexgroup).await?;
        }
        Ok(())
    }

    async fn volume_mount(&self, svm: &str, name: &str, junction: &str) -> Result<(), OntapError> {
        let n = Node::new("volume-mount")
            .with_leaf("volume-name", name)
            .with_leaf("junction-path", junction);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    /// Sets the volume comment (where storch marks the volumes it makes).
    async fn volume_set_comment(
        &self,
        svm: &str,
        name: &str,
        comment: &str,
    ) -> Result<(), OntapError> {
        let attrs = Node::new("volume-id-attributes").with_leaf("comment", comment);
        self.volume_modify(svm, name, attrs, false).await
    }

    /// `volume-size` with a new size (absolute bytes); `-async` for FlexGroups.
    async fn volume_set_size(
        &self,
        svm: &str,
        name: &str,
        bytes: u64,
        flexgroup: bool,
    ) -> Result<(), OntapError> {
        if flexgroup {
            let n = Node::new("volume-size-async")
                .with_leaf("volume-name", name)
                .with_leaf("new-size", bytes.to_string());
            return self.call_async(&n, Some(svm), JOB_TIMEOUT).await;
        }
        let n = Node::new("volume-size")
            .with_leaf("volume", name)
            .with_leaf("new-size", bytes.to_string());
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    /// Destroys a volume in one call with `unmount-and-offline`, as Trident does:
    /// `volume-destroy`, or `volume-destroy-async` for a FlexGroup. Separate unmount and
    /// offline calls would leave a volume ONTAP then refuses to destroy (one with FlexClones,
    /// errno 15894) offline and without its junction; one call refuses without a change.
    /// A volume already gone counts as destroyed.
    async fn volume_destroy(
        &self,
        svm: &str,
        name: &str,
        flexgroup: bool,
    ) -> Result<(), OntapError> {
        let result = if flexgroup {
            let n = Node::new("volume-destroy-async")
                .with_leaf("volume-name", name)
                .with_leaf("unmount-and-offline", "true");
            self.call_async(&n, Some(svm), JOB_TIMEOUT).await
        } else {
            let n = Node::new("volume-destroy")
                .with_leaf("name", name)
                .with_leaf("unmount-and-offline", "true");
            self.call(&n, Some(svm)).await.map(|_| ())
        };
        match result {
            // Also when an earlier destroy left it queued (its purge failed).
            Ok(()) => self.recovery_queue_purge(svm, name).await,
            Err(e) if e.is_not_found() => self.recovery_queue_purge(svm, name).await,
            Err(e) if e.is_errno(&[errno::EVOLDEL_NOT_ALLOW_BY_CLONE]) => Err(OntapError::Api {
                api: "volume-destroy".into(),
                errno: errno::EVOLDEL_NOT_ALLOW_BY_CLONE,
                reason: format!(
                    "volume {name} has FlexClones; delete or split its clones first \
                     (the volume was left as it was): {}",
                    e.reason()
                ),
            }),
            Err(e) => Err(e),
        }
    }

    async fn snapshot_create(
        &self,
        svm: &str,
        volume: &str,
        snapshot: &str,
    ) -> Result<(), OntapError> {
        let n = Node::new("snapshot-create")
            .with_leaf("volume", volume)
            .with_leaf("snapshot", snapshot);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    async fn snapshots(&self, svm: &str, volume: &str) -> Result<Vec<SnapshotRecord>, OntapError> {
        let q = Node::new("snapshot-info").with_leaf("volume", volume);
        let records = self
            .iter("snapshot-get-iter", Some(q), None, Some(svm))
            .await?;
        Ok(records
            .iter()
            .filter(|r| r.str_at("volume") == volume)
            .map(|r| SnapshotRecord {
                name: r.str_at("name").to_string(),
                volume: r.str_at("volume").to_string(),
                access_time: r.u64_at("access-time").unwrap_or(0),
                total_kib: r.u64_at("total").unwrap_or(0),
                busy: r.bool_at("busy").unwrap_or(false),
            })
            .collect())
    }

    /// Deletes a snapshot; one already gone (or whose volume is gone) is success.
    async fn snapshot_delete(
        &self,
        svm: &str,
        volume: &str,
        snapshot: &str,
    ) -> Result<(), OntapError> {
        let n = Node::new("snapshot-delete")
            .with_leaf("volume", volume)
            .with_leaf("snapshot", snapshot);
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_not_found() => Ok(()),
            r => r.map(|_| ()),
        }
    }

    async fn clone_create(
        &self,
        svm: &str,
        name: &str,
        parent: &str,
        snapshot: &str,
        space_reserve: &str,
    ) -> Result<(), OntapError> {
        let n = Node::new("volume-clone-create")
            .with_leaf("volume", name)
            .with_leaf("parent-volume", parent)
            .with_leaf("parent-snapshot", snapshot)
            .with_leaf("space-reserve", space_reserve);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    async fn clone_split_start(&self, svm: &str, name: &str) -> Result<(), OntapError> {
        let n = Node::new("volume-clone-split-start").with_leaf("volume", name);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    // ---- qtrees and quotas ----

    async fn qtrees(
        &self,
        svm: &str,
        volume_pattern: &str,
        qtree_pattern: Option<&str>,
    ) -> Result<Vec<QtreeRecord>, OntapError> {
        let q = Node::new("qtree-info")
            .with_leaf("volume", volume_pattern)
            .with_opt("qtree", qtree_pattern);
        let desired = Node::new("qtree-info")
            .with(Node::new("volume"))
            .with(Node::new("qtree"));
        let records = self
            .iter("qtree-list-iter", Some(q), Some(desired), Some(svm))
            .await?;
        Ok(records
            .iter()
            .map(|r| QtreeRecord {
                volume: r.str_at("volume").to_string(),
                qtree: r.str_at("qtree").to_string(),
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
    ) -> Result<(), OntapError> {
        let n = Node::new("qtree-create")
            .with_leaf("volume", volume)
            .with_leaf("qtree", qtree)
            .with_leaf("mode", mode)
            .with_leaf("security-style", security_style)
            .with_leaf("export-policy", export_policy);
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    /// Deletes a qtree; one already gone is success.
    async fn qtree_delete(&self, svm: &str, volume: &str, qtree: &str) -> Result<(), OntapError> {
        let n = Node::new("qtree-delete")
            .with_leaf("qtree", format!("/vol/{volume}/{qtree}"))
            .with_leaf("force", "true");
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_not_found() => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// Tree quota limits (bytes) by `/vol/<volume>/<qtree>` target.
    async fn tree_quotas(
        &self,
        svm: &str,
        volume_pattern: &str,
    ) -> Result<std::collections::BTreeMap<String, u64>, OntapError> {
        let q = Node::new("quota-entry")
            .with_leaf("volume", volume_pattern)
            .with_leaf("quota-type", "tree");
        let records = self
            .iter("quota-list-entries-iter", Some(q), None, Some(svm))
            .await?;
        Ok(records
            .iter()
            .filter_map(|r| {
                let kib = r.text_at("disk-limit")?.trim().parse::<u64>().ok()?;
                Some((r.str_at("quota-target").to_string(), kib * 1024))
            })
            .collect())
    }

    async fn tree_quota_set(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
        bytes: u64,
    ) -> Result<(), OntapError> {
        let n = Node::new("quota-set-entry")
            .with_leaf("volume", volume)
            .with_leaf("qtree", "")
            .with_leaf("quota-target", format!("/vol/{volume}/{qtree}"))
            .with_leaf("quota-type", "tree")
            .with_leaf("disk-limit", bytes.div_ceil(1024).to_string());
        self.call(&n, Some(svm)).await?;
        self.quota_resize(svm, volume).await
    }

    async fn tree_quota_delete(
        &self,
        svm: &str,
        volume: &str,
        qtree: &str,
    ) -> Result<(), OntapError> {
        let n = Node::new("quota-delete-entry")
            .with_leaf("volume", volume)
            .with_leaf("qtree", "")
            .with_leaf("quota-target", format!("/vol/{volume}/{qtree}"))
            .with_leaf("quota-type", "tree");
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_not_found() => {}
            r => {
                r?;
            }
        }
        self.quota_resize(svm, volume).await
    }

    async fn quota_on(&self, svm: &str, volume: &str) -> Result<(), OntapError> {
        let n = Node::new("quota-on").with_leaf("volume", volume);
        self.call_async(&n, Some(svm), JOB_TIMEOUT).await
    }

    // ---- export policies ----

    /// Creates an export policy with one rule for `client_match` unless it exists.
    async fn ensure_export_policy(
        &self,
        svm: &str,
        policy: &str,
        client_match: &str,
    ) -> Result<(), OntapError> {
        let n = Node::new("export-policy-create").with_leaf("policy-name", policy);
        match self.call(&n, Some(svm)).await {
            Ok(_) => {}
            Err(e) if e.is_errno(&[errno::EDUPLICATEENTRY]) => {}
            Err(e) => return Err(e),
        }
        let q = Node::new("export-rule-info").with_leaf("policy-name", policy);
        let rules = self
            .iter("export-rule-get-iter", Some(q), None, Some(svm))
            .await?;
        if rules
            .iter()
            .any(|r| r.str_at("client-match") == client_match)
        {
            return Ok(());
        }
        let flavor = |name: &str, v: &str| Node::new(name).with_leaf("security-flavor", v);
        let n = Node::new("export-rule-create")
            .with_leaf("policy-name", policy)
            .with_leaf("client-match", client_match)
            .with(Node::new("protocol").with_leaf("access-protocol", "nfs"))
            .with(flavor("ro-rule", "any"))
            .with(flavor("rw-rule", "any"))
            .with(flavor("super-user-security", "any"));
        match self.call(&n, Some(svm)).await {
            Err(e)
                if e.is_errno(&[errno::EAPIERROR])
                    && e.reason().contains("already contains a rule") =>
            {
                Ok(())
            }
            r => r.map(|_| ()),
        }
    }

    // ---- LUNs and igroups ----

    async fn lun_create(&self, svm: &str, path: &str, size: u64) -> Result<u64, OntapError> {
        let n = Node::new("lun-create-by-size")
            .with_leaf("path", path)
            .with_leaf("size", size.to_string())
            .with_leaf("ostype", "linux")
            .with_leaf("space-reservation-enabled", "false")
            .with_leaf("space-allocation-enabled", "false");
        let r = self.call(&n, Some(svm)).await?;
        Ok(r.u64_at("actual-size").unwrap_or(size))
    }

    /// LUN path → size, for LUNs whose path matches `pattern`.
    async fn luns(
        &self,
        svm: &str,
        pattern: &str,
    ) -> Result<std::collections::BTreeMap<String, u64>, OntapError> {
        let q = Node::new("lun-info").with_leaf("path", pattern);
        let records = self.iter("lun-get-iter", Some(q), None, Some(svm)).await?;
        Ok(records
            .iter()
            .map(|r| (r.str_at("path").to_string(), r.u64_at("size").unwrap_or(0)))
            .collect())
    }

    async fn lun_resize(&self, svm: &str, path: &str, size: u64) -> Result<(), OntapError> {
        let n = Node::new("lun-resize")
            .with_leaf("path", path)
            .with_leaf("size", size.to_string());
        self.call(&n, Some(svm)).await.map(|_| ())
    }

    /// Creates the igroup unless it exists (9004 / 13130 are success).
    async fn ensure_igroup(&self, svm: &str, igroup: &str) -> Result<(), OntapError> {
        let n = Node::new("igroup-create")
            .with_leaf("initiator-group-name", igroup)
            .with_leaf("initiator-group-type", "iscsi")
            .with_leaf("os-type", "linux");
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_errno(&[errno::INITGROUP_EXISTS, errno::EDUPLICATEENTRY]) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// Adds an initiator; one already in the igroup (9008) is success.
    async fn igroup_add(&self, svm: &str, igroup: &str, initiator: &str) -> Result<(), OntapError> {
        let n = Node::new("igroup-add")
            .with_leaf("initiator-group-name", igroup)
            .with_leaf("initiator", initiator);
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_errno(&[errno::INITGROUP_HAS_NODE]) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// `igroup-destroy`: one still mapped (9029) is left; one missing (9003) is gone.
    async fn igroup_destroy_unmapped(&self, svm: &str, igroup: &str) -> Result<bool, OntapError> {
        let n = Node::new("igroup-destroy").with_leaf("initiator-group-name", igroup);
        match self.call(&n, Some(svm)).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_errno(&[errno::NO_SUCH_INITGROUP]) => Ok(true),
            Err(e) if e.is_errno(&[errno::INITGROUP_MAPS_EXIST]) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The LUN id of `path` in `igroup`, mapping it first when it is not mapped yet (the map
    /// list first, as Trident does, so a second map never meets 9023).
    async fn lun_map(&self, svm: &str, path: &str, igroup: &str) -> Result<i32, OntapError> {
        if let Some(id) = self.lun_id(svm, path, igroup).await? {
            return Ok(id);
        }
        let n = Node::new("lun-map")
            .with_leaf("initiator-group", igroup)
            .with_leaf("path", path);
        let r = self.call(&n, Some(svm)).await?;
        Ok(r.u64_at("lun-id-assigned").unwrap_or(0) as i32)
    }

    /// `lun-map-list-info`: igroup → LUN id; a missing LUN has none.
    async fn lun_maps(
        &self,
        svm: &str,
        path: &str,
    ) -> Result<std::collections::BTreeMap<String, i32>, OntapError> {
        let n = Node::new("lun-map-list-info").with_leaf("path", path);
        let r = match self.call(&n, Some(svm)).await {
            Ok(r) => r,
            Err(e) if e.is_errno(&LUN_GONE) => return Ok(Default::default()),
            Err(e) => return Err(e),
        };
        Ok(r.child("initiator-groups")
            .map(|groups| {
                groups
                    .children_named("initiator-group-info")
                    .map(|g| {
                        let id = g.u64_at("lun-id").unwrap_or(0) as i32;
                        (g.str_at("initiator-group-name").to_string(), id)
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// `lun-unmap`; no such map (9016), igroup (9003) or LUN is success.
    async fn lun_unmap(&self, svm: &str, path: &str, igroup: &str) -> Result<(), OntapError> {
        let n = Node::new("lun-unmap")
            .with_leaf("initiator-group", igroup)
            .with_leaf("path", path);
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_errno(&LUN_GONE) => Ok(()),
            Err(e) if e.is_errno(&[errno::NO_SUCH_LUNMAP, errno::NO_SUCH_INITGROUP]) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// Unmaps from every igroup, offlines and destroys a LUN; "already gone" is success.
    async fn lun_destroy(&self, svm: &str, path: &str) -> Result<Vec<String>, OntapError> {
        let groups: Vec<String> = self.lun_maps(svm, path).await?.into_keys().collect();
        for g in &groups {
            self.lun_unmap(svm, path, g).await?;
        }
        let n = Node::new("lun-offline").with_leaf("path", path);
        match self.call(&n, Some(svm)).await {
            Ok(_) => {}
            Err(e) if e.is_errno(&LUN_GONE) => return Ok(groups),
            Err(e) if e.is_errno(&[errno::VDISK_NOT_ENABLED]) => {}
            Err(e) => return Err(e),
        }
        let n = Node::new("lun-destroy").with_leaf("path", path);
        match self.call(&n, Some(svm)).await {
            Err(e) if e.is_errno(&LUN_GONE) => Ok(groups),
            r => r.map(|_| groups),
        }
    }

    // ---- discovery ----

    async fn data_svms(&self) -> Result<Vec<String>, OntapError> {
        let q = Node::new("vserver-info").with_leaf("vserver-type", "data");
        let records = self.iter("vserver-get-iter", Some(q), None, None).await?;
        Ok(records
            .iter()
            .filter(|r| matches!(r.str_at("vserver-type"), "data" | ""))
            .map(|r| r.str_at("vserver-name").to_string())
            .collect())
    }

    async fn svm_aggregates(&self, svm: &str) -> Result<Option<Vec<Aggregate>>, OntapError> {
        let q = Node::new("vserver-info").with_leaf("vserver-name", svm);
        let records = self.iter("vserver-get-iter", Some(q), None, None).await?;
        let records: Vec<&Node> = records
            .iter()
            .filter(|r| r.str_at("vserver-name") == svm)
            .collect();
        let [record] = records.as_slice() else {
            return Ok(None);
        };
        Ok(Some(
            record
                .at("vserver-aggr-info-list")
                .map(|l| {
                    l.children_named("vserver-aggr-info")
                        .map(|a| Aggregate {
                            name: a.str_at("aggr-name").to_string(),
                            media: None,
                            available: a.u64_at("aggr-availsize").unwrap_or(0),
                            nve_capable: true,
                        })
                        .collect()
                })
                .unwrap_or_default(),
        ))
    }

    async fn aggregate_kinds(&self, svm: &str) -> Result<Vec<AggregateKind>, OntapError> {
        match self
            .iter("vserver-show-aggr-get-iter", None, None, Some(svm))
            .await
        {
            Ok(records) => Ok(records
                .iter()
                .map(|r| AggregateKind {
                    name: r.str_at("aggregate-name").to_string(),
                    media: r.str_at("aggregate-type").to_string(),
                    nve_capable: r.bool_at("is-nve-capable").unwrap_or(false),
                })
                .collect()),
            Err(e) if e.is_errno(&[errno::EAPINOTFOUND, errno::EAPIPRIVILEGE]) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    async fn data_lifs(&self, svm: &str, protocol: &str) -> Result<Vec<String>, OntapError> {
        let records = self
            .iter(
                "net-interface-get-iter",
                Some(Node::new("net-interface-info")),
                None,
                Some(svm),
            )
            .await?;
        Ok(records
            .iter()
            .filter(|r| {
                let vs = r.str_at("vserver");
                (vs.is_empty() || vs == svm)
                    && r.str_at("operational-status") == "up"
                    && r.list_at("data-protocols").iter().any(|p| p == protocol)
            })
            .map(|r| r.str_at("address").to_string())
            .collect())
    }

    async fn iscsi_target_name(&self, svm: &str) -> Result<String, OntapError> {
        let r = self
            .call(&Node::new("iscsi-node-get-name"), Some(svm))
            .await?;
        Ok(r.str_at("node-name").to_string())
    }
}

impl ZapiClient {
    /// Changes one sub-object of a volume's attributes: `volume-modify-iter`, or for a
    /// FlexGroup the `-async` variant ONTAP requires (its job is waited for). Both pass even
    /// when the per-volume modify failed, so the failure list is checked.
    async fn volume_modify(
        &self,
        svm: &str,
        name: &str,
        attributes: Node,
        flexgroup: bool,
    ) -> Result<(), OntapError> {
        let api = if flexgroup {
            "volume-modify-iter-async"
        } else {
            "volume-modify-iter"
        };
        let n = Node::new(api)
            .with(Node::new("query").with(volume_query(name, None)))
            .with(Node::new("attributes").with(Node::new("volume-attributes").with(attributes)));
        let r = self.call(&n, Some(svm)).await?;
        let info = format!("{api}-info");
        if r.u64_at("num-failed").unwrap_or(0) > 0 {
            let f = r
                .at(&format!("failure-list/{info}"))
                .cloned()
                .unwrap_or_default();
            return Err(OntapError::Api {
                api: api.into(),
                errno: f.u64_at("error-code").unwrap_or(0) as u32,
                reason: f.str_at("error-message").to_string(),
            });
        }
        if !flexgroup {
            return Ok(());
        }
        match r.at(&format!("success-list/{info}")) {
            Some(ok) => match ok.text_at("jobid") {
                Some(id) if !id.is_empty() => self.wait_job(id, JOB_TIMEOUT).await,
                _ => Ok(()),
            },
            None => Err(OntapError::Malformed {
                api: api.into(),
                msg: format!("no FlexGroup named {name} was modified"),
            }),
        }
    }

    /// Purges a destroyed volume from the recovery queue, where ONTAP keeps it (renamed
    /// `<name>_<dsid>`, its space still held) for the SVM's `volume-delete-retention-hours`:
    /// `volume-recovery-queue-get-iter` by `<name>*`, then `volume-recovery-queue-purge` of
    /// each entry that is this volume. Gone (15661) or not allowed for this user (14719) is
    /// left to ONTAP's retention, as Trident leaves it.
    pub async fn recovery_queue_purge(&self, svm: &str, name: &str) -> Result<(), OntapError> {
        let q =
            Node::new("volume-recovery-queue-info").with_leaf("volume-name", format!("{name}*"));
        let tolerated = [errno::EOBJECTNOTFOUND, errno::EVSERVER_OP_NOT_ALLOWED];
        let records = match self
            .iter("volume-recovery-queue-get-iter", Some(q), None, Some(svm))
            .await
        {
            Ok(r) => r,
            Err(e) if e.is_errno(&tolerated) || e.is_errno(&[errno::EAPINOTFOUND]) => {
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        for r in records {
            let queued = r.str_at("volume-name");
            let vserver = r.str_at("vserver-name");
            if !is_queued_name_of(queued, name) || !(vserver.is_empty() || vserver == svm) {
                continue;
            }
            let n = Node::new("volume-recovery-queue-purge")
                .with_leaf("volume-name", queued)
                .with_leaf("vserver-name", svm);
            match self.call(&n, Some(svm)).await {
                Err(e) if e.is_errno(&tolerated) => {
                    tracing::warn!(volume = %queued, error = %e,
                        "destroyed volume left in the recovery queue");
                }
                r => {
                    r?;
                }
            }
        }
        Ok(())
    }

    /// Makes quota rule changes take effect (`quota-resize`, an async job).
    pub async fn quota_resize(&self, svm: &str, volume: &str) -> Result<(), OntapError> {
        let n = Node::new("quota-resize").with_leaf("volume", volume);
        match self.call_async(&n, Some(svm), JOB_TIMEOUT).await {
            Err(e) if e.is_not_found() => Ok(()),
            r => r,
        }
    }
}

/// Whether `queued` is the recovery-queue name of volume `name`: `<name>_<digits>`.
pub fn is_queued_name_of(queued: &str, name: &str) -> bool {
    queued
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|dsid| !dsid.is_empty() && dsid.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_queue_names() {
        assert!(is_queued_name_of("trident_a_1042", "trident_a"));
        assert!(!is_queued_name_of("trident_ab_1042", "trident_a"));
        assert!(!is_queued_name_of("trident_a_b_1", "trident_a"));
        assert!(!is_queued_name_of("trident_a_", "trident_a"));
        assert!(!is_queued_name_of("trident_a", "trident_a"));
    }
}

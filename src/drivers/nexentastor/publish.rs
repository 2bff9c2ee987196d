//! Per-host access (CSI `ControllerPublishVolume`): a host group per node and a LUN mapping of
//! the zvol to it.
//!
//! A create maps the zvol to the class's or backend's host group (`defaultHostGroup`, `All` by
//! default: the seed's behaviour, under which every initiator already reaches the volume). A
//! publish grants a host that this mapping does not reach: its initiator goes into the host
//! group `storch-host-<node>` (made when missing), and the zvol is mapped to that group
//! through the target group of its first mapping; the host finds the LUN number in the publish
//! context (`iscsiLunNumber`). An unpublish removes that mapping, and the group once no mapping uses it.
//! An initiator is a member of one host group at most (the appliance's rule): one already in
//! a group that is not storch's is refused, naming the group.

use serde_json::json;

use super::NexentaDriver;
use super::volumes::{gone_ok, nef};
use super::wire::{HostGroup, LunMapping, escape, item};
use crate::drivers::{DriverError, DriverResult, HostAccess, PublishContext};

/// The prefix of the host groups storch makes, one per node.
pub const HOST_GROUP_PREFIX: &str = "storch-host-";

/// The host group of `node` (node names are DNS names: valid group names as they are).
pub fn host_group_of(node: &str) -> String {
    format!("{HOST_GROUP_PREFIX}{node}")
}

fn is_all(group: &str) -> bool {
    group.eq_ignore_ascii_case("all")
}

impl NexentaDriver {
    async fn host_groups(&self) -> DriverResult<Vec<HostGroup>> {
        let q = [("fields", "name,members".to_string())];
        let list = self.client.list("san/hostgroups", &q).await.map_err(nef)?;
        list.into_iter()
            .map(|v| item("host group", v).map_err(DriverError::Other))
            .collect()
    }

    /// The host group `iqn` is a member of, if any.
    async fn group_of(&self, iqn: &str) -> DriverResult<Option<HostGroup>> {
        Ok(self
            .host_groups()
            .await?
            .into_iter()
            .find(|g| g.members.iter().any(|m| m == iqn)))
    }

    /// Makes `group` (storch's group of a node) with `iqn` among its members.
    async fn ensure_host_group(&self, group: &str, iqn: &str) -> DriverResult<()> {
        let existing = self
            .host_groups()
            .await?
            .into_iter()
            .find(|g| g.name == group);
        let Some(g) = existing else {
            let body = json!({"name": group, "members": [iqn]});
            return match self.client.post("san/hostgroups", &body).await {
                Ok(_) => Ok(()),
                // Made in between by another publish of this node: add the member to it.
                Err(e) if e.is_code("EEXIST") => Box::pin(self.ensure_host_group(group, iqn)).await,
                Err(e) => Err(nef(e)),
            };
        };
        if g.members.iter().any(|m| m == iqn) {
            return Ok(());
        }
        let mut members = g.members;
        members.push(iqn.to_string());
        let p = format!("san/hostgroups/{}", escape(group));
        self.client
            .put(&p, &json!({"members": members}))
            .await
            .map_err(nef)?;
        Ok(())
    }

    fn context(m: &LunMapping) -> PublishContext {
        PublishContext::from([(
            crate::drivers::PUBLISH_LUN_KEY.to_string(),
            m.lun.to_string(),
        )])
    }

    pub(super) async fn grant(
        &self,
        internal_name: &str,
        host: &HostAccess,
    ) -> DriverResult<PublishContext> {
        let iqn = host.iscsi_initiator.as_deref().ok_or_else(|| {
            DriverError::Invalid(format!(
                "host {}: no iSCSI initiator name (the CSI node id is NAME,IQN); {} grants \
                 access per initiator",
                host.node,
                super::DRIVER_NAME
            ))
        })?;
        let z = self.find_or_not_found(internal_name).await?;
        let mappings = self.mappings_of(&z.path).await?;
        let Some(first) = mappings.first() else {
            return Err(DriverError::NotFound(format!(
                "volume {internal_name} has no LUN mapping to publish through"
            )));
        };
        let own = host_group_of(&host.node);
        let group = match self.group_of(iqn).await? {
            Some(g) if g.name == own => own,
            Some(g) => {
                return match mappings.iter().find(|m| m.host_group == g.name) {
                    Some(m) => Ok(Self::context(m)),
                    None if mappings.iter().any(|m| is_all(&m.host_group)) => {
                        Ok(Self::context(first))
                    }
                    None => Err(DriverError::Conflict(format!(
                        "initiator {iqn} of host {} is a member of host group {}, which is not \
                         storch's and does not reach volume {internal_name}; an initiator \
                         belongs to one host group only",
                        host.node, g.name
                    ))),
                };
            }
            None => own,
        };
        if let Some(m) = mappings
            .iter()
            .find(|m| m.host_group == group || is_all(&m.host_group))
        {
            if m.host_group == group {
                self.ensure_host_group(&group, iqn).await?;
            }
            return Ok(Self::context(m));
        }
        self.ensure_host_group(&group, iqn).await?;
        let body = json!({"hostGroup": group, "volume": z.path, "targetGroup": first.target_group});
        match self.client.post("san/lunMappings", &body).await {
            Ok(_) => {}
            Err(e) if e.is_code("EEXIST") => {}
            Err(e) => return Err(nef(e)),
        }
        let q = [("volume", z.path.clone()), ("hostGroup", group.clone())];
        let m = self
            .mappings(&q)
            .await?
            .into_iter()
            .find(|m| m.volume == z.path && m.host_group == group)
            .ok_or_else(|| {
                DriverError::Other(format!(
                    "the LUN mapping of {} to {group} was created but is not listed",
                    z.path
                ))
            })?;
        Ok(Self::context(&m))
    }

    pub(super) async fn revoke(&self, internal_name: &str, host: &HostAccess) -> DriverResult<()> {
        let group = host_group_of(&host.node);
        if let Some(z) = self.find(internal_name).await? {
            for m in self.mappings_of(&z.path).await? {
                if m.host_group == group {
                    let p = format!("san/lunMappings/{}", escape(&m.id));
                    gone_ok(self.client.delete(&p, &[]).await).map_err(nef)?;
                }
            }
        }
        self.drop_host_group(&group).await
    }

    /// Deletes storch's host group `group` when no mapping uses it any more (missing counts
    /// as deleted).
    pub(super) async fn drop_host_group(&self, group: &str) -> DriverResult<()> {
        if !self
            .mappings(&[("hostGroup", group.to_string())])
            .await?
            .iter()
            .all(|m| m.host_group != group)
        {
            return Ok(());
        }
        let p = format!("san/hostgroups/{}", escape(group));
        match self.client.delete(&p, &[]).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            // Mapped again by a publish in between: it stays.
            Err(e) if e.is_code("EBUSY") => Ok(()),
            Err(e) => Err(nef(e)),
        }
    }
}

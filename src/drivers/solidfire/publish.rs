//! Per-host access (CSI ControllerPublish / ControllerUnpublish) through volume access groups.
//!
//! When a backend needs it: with CHAP (`UseCHAP`, or no access group configured and none
//! named `trident`) any initiator holding the account's secrets reaches every volume of the
//! account, so nothing is granted per host (`needs_publish` false). With volume access groups
//! a host reaches a volume only when its initiator is in a group the volume is in, so each
//! host is granted access (`needs_publish` true).
//!
//! Element keeps an initiator in one volume access group at a time. A publish therefore
//! looks for the group that holds the host's initiator (one the administrator made, such as a
//! configured `AccessGroups` entry, or one storch made) and adds the volume to it; when no
//! group holds it, storch makes one for the host (`storch-<node>`, its attributes saying
//! storch made it) with the initiator and the volume. Unpublish removes the volume from the
//! host's group, except from the backend's configured groups (the volume joined those at
//! create, for every host in them), and deletes a group storch made once it holds no volume
//! (with the initiator object it orphans). A group holds at most 2000 volumes and a volume is
//! in at most 64 groups: beyond that the cluster refuses and the publish is a `Conflict`.
//!
//! Publishes and unpublishes for one initiator take turns within this process, so an
//! unpublish never deletes a group a concurrent publish is adding a volume to.

use serde_json::{Value, json};

use super::volumes::{ATTR_KEY, find, find_or_not_found};
use super::wire::{AccessGroup, CreateGroupParams};
use super::{Discovered, SolidFireDriver};
use crate::drivers::{DriverError, DriverResult, HostAccess, PublishContext};

/// Element's bound on a group name.
const MAX_GROUP_NAME: usize = 64;

/// How often a publish re-reads the groups after losing a race with another client.
const ATTEMPTS: usize = 3;

/// The host's initiator as Element writes it (iSCSI names compare case-insensitively and
/// Element accepts only lower case), or `Invalid` naming the node id.
fn initiator(drv: &SolidFireDriver, host: &HostAccess) -> DriverResult<String> {
    match &host.iscsi_initiator {
        Some(iqn) if !iqn.trim().is_empty() => Ok(iqn.trim().to_ascii_lowercase()),
        _ => Err(DriverError::Invalid(format!(
            "node_id {:?} has no iSCSI initiator: backend {} grants access through volume \
             access groups, so the node id must be NAME,IQN (the node plugin reports it)",
            host.node,
            drv.cfg.default_backend_name()
        ))),
    }
}

/// The name of the group storch makes for `node` (names need not be unique on Element).
pub fn group_name(node: &str) -> String {
    format!("storch-{node}")
        .chars()
        .take(MAX_GROUP_NAME)
        .collect()
}

/// Whether storch made the group (its attributes say so).
pub fn is_storch_group(g: &AccessGroup) -> bool {
    g.attributes
        .get(ATTR_KEY)
        .and_then(|s| s.get("createdBy"))
        .and_then(Value::as_str)
        == Some("storch")
}

/// The group holding `iqn`, if any.
fn holding<'a>(groups: &'a [AccessGroup], iqn: &str) -> Option<&'a AccessGroup> {
    groups
        .iter()
        .find(|g| g.initiators.iter().any(|i| i.eq_ignore_ascii_case(iqn)))
}

fn lock_key(iqn: &str) -> String {
    format!("initiator:{iqn}")
}

/// Grants `host` access to volume `name`; idempotent. The context is empty: Element volumes
/// are LUN 0 of their own target whoever reaches them.
pub async fn publish(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
    host: &HostAccess,
) -> DriverResult<PublishContext> {
    if d.use_chap {
        find_or_not_found(drv, d, name).await?;
        return Ok(PublishContext::new());
    }
    let iqn = initiator(drv, host)?;
    let v = find_or_not_found(drv, d, name).await?;
    let _turn = drv.names.lock(&lock_key(&iqn)).await;
    let with_context = |e: DriverError| match e {
        DriverError::Conflict(m) => DriverError::Conflict(format!(
            "publish of volume {name} to node {}: {m}",
            host.node
        )),
        other => other,
    };
    for _ in 0..ATTEMPTS {
        let groups = drv.client.access_groups().await?;
        let result = match holding(&groups, &iqn) {
            Some(g) if g.volumes.contains(&v.volume_id) => Ok(()),
            Some(g) => drv.client.add_to_group(g.id, vec![v.volume_id]).await,
            None => {
                let params = CreateGroupParams {
                    name: group_name(&host.node),
                    initiators: vec![iqn.clone()],
                    volumes: vec![v.volume_id],
                    attributes: json!({ATTR_KEY: {"createdBy": "storch", "node": host.node}}),
                };
                drv.client.create_group(&params).await.map(|_| ())
            }
        };
        match result {
            Ok(()) => return Ok(PublishContext::new()),
            // Another client moved the initiator or deleted its group meanwhile: read again.
            Err(e) if e.is_name(&["xInitiatorExists"]) || e.is_not_found() => continue,
            Err(e) => return Err(with_context(e.into())),
        }
    }
    Err(DriverError::Unavailable(format!(
        "publish of volume {name} to node {}: the volume access groups of initiator {iqn} \
         kept changing; try again",
        host.node
    )))
}

/// Takes `host`'s access to volume `name` away; idempotent (a volume or host without access
/// is success).
pub async fn unpublish(
    drv: &SolidFireDriver,
    d: &Discovered,
    name: &str,
    host: &HostAccess,
) -> DriverResult<()> {
    if d.use_chap {
        return Ok(());
    }
    // A node id without an initiator was never granted anything.
    let Ok(iqn) = initiator(drv, host) else {
        return Ok(());
    };
    let volume = find(drv, d, name).await?.map(|v| v.volume_id);
    let _turn = drv.names.lock(&lock_key(&iqn)).await;
    let groups = drv.client.access_groups().await?;
    let Some(g) = holding(&groups, &iqn) else {
        return Ok(());
    };
    let mut remaining = g.volumes.clone();
    if let Some(id) = volume
        && g.volumes.contains(&id)
        && !d.access_groups.contains(&g.id)
    {
        drv.client.remove_from_group(g.id, vec![id]).await?;
        remaining.retain(|v| *v != id);
    }
    if remaining.is_empty() && is_storch_group(g) {
        drv.client.delete_group(g.id).await?;
    }
    Ok(())
}

/// After a destroy: deletes the groups storch made that held the volume and hold nothing
/// now (a volume destroyed while still published leaves no empty group behind).
pub async fn forget_volume(drv: &SolidFireDriver, groups_of_volume: &[i64]) -> DriverResult<()> {
    if groups_of_volume.is_empty() {
        return Ok(());
    }
    let groups = drv.client.access_groups().await?;
    for g in groups
        .iter()
        .filter(|g| groups_of_volume.contains(&g.id) && g.volumes.is_empty())
        .filter(|g| is_storch_group(g))
    {
        let key = g
            .initiators
            .first()
            .map(|i| lock_key(i))
            .unwrap_or_default();
        let _turn = drv.names.lock(&key).await;
        // Read again under the initiator's turn: a publish may have added a volume.
        let now = drv.client.access_groups().await?;
        if now.iter().any(|n| n.id == g.id && n.volumes.is_empty()) {
            drv.client.delete_group(g.id).await?;
        }
    }
    Ok(())
}

//! Per-host access (CSI ControllerPublish / ControllerUnpublish): a host per node and the
//! volume's LUN mapping.
//!
//! A host sees the volumes mapped to it and to its host group, and an E-Series volume has one
//! mapping (to one host or one host group). At rest a storch volume is mapped to the backend's
//! host group (`accessGroupName`), as Trident maps it at create, so every host the
//! administrator put in that group sees it. A host must exist on the array for its initiator
//! to see anything, so every node is granted access by a publish (`needs_publish` true):
//!
//! - the node's host is the one whose iSCSI initiator is the node's (made by anyone), or else
//!   a host storch makes for it: labelled `storch_<node>` (at most 30 characters), the
//!   configured `hostType`, the initiator as its one iSCSI port, in no host group;
//! - a volume mapped to that host, or to the host's group, is published already (a host the
//!   administrator put in the backend's group needs no change);
//! - otherwise the volume's group mapping moves to the host: the mapping to the group is
//!   deleted and one to the host made, with the group's LUN when the host has it free, else
//!   the LUN the array picks. A volume mapped to another host or group is a `Conflict` (the
//!   array's one mapping per volume: publishing to several nodes at once needs them in the
//!   backend's host group).
//!
//! The publish context carries `iscsiLunNumber` when the host reaches the volume through its
//! own mapping, whose LUN is the host's and may differ from the create-time one in the
//! volume's access info; through the group it is empty. Unpublish deletes the host's mapping,
//! maps the volume back to the backend's group (its create-time state), and deletes a host
//! storch made once no volume is mapped to it.
//!
//! Publishes and unpublishes take turns per volume and per initiator within this process.

use super::config::MAX_LABEL_LEN;
use super::volumes::{all, find, find_or_not_found};
use super::wire::{CreateHost, Host, HostPort, HostTypeIndex, Mapping, NULL_REF, Volume};
use super::{Discovered, EseriesDriver};
use crate::drivers::{DriverError, DriverResult, HostAccess, PublishContext};

/// The label prefix of the hosts storch makes.
pub const HOST_PREFIX: &str = "storch_";

/// The publish context key of the host's LUN.
pub use crate::drivers::PUBLISH_LUN_KEY as LUN_KEY;

/// The highest LUN the array maps.
const MAX_LUN: i32 = 255;

/// The label of the host storch makes for `node`: `storch_` and the node name (characters
/// other than letters, digits, `_` and `-` as `_`), cut to 30 characters with a hash of the
/// whole name at the end when it is longer.
pub fn host_label(node: &str) -> String {
    let clean: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = format!("{HOST_PREFIX}{clean}");
    if full.len() <= MAX_LABEL_LEN {
        return full;
    }
    use sha2::{Digest, Sha256};
    let hash = hex::encode(&Sha256::digest(node.as_bytes())[..4]);
    let keep = MAX_LABEL_LEN - HOST_PREFIX.len() - 1 - hash.len();
    format!("{HOST_PREFIX}{}_{hash}", &clean[..keep])
}

/// The host's initiator, or `Invalid` naming the node id.
fn initiator(host: &HostAccess) -> DriverResult<&str> {
    match host.iscsi_initiator.as_deref().map(str::trim) {
        Some(iqn) if !iqn.is_empty() => Ok(iqn),
        _ => Err(DriverError::Invalid(format!(
            "node_id {:?} has no iSCSI initiator: an E-Series volume is mapped to the node's \
             host, known by its initiator, so the node id must be NAME,IQN (the node plugin \
             reports it)",
            host.node
        ))),
    }
}

fn lock_key(iqn: &str) -> String {
    format!("initiator:{}", iqn.to_ascii_lowercase())
}

async fn hosts(drv: &EseriesDriver, d: &Discovered) -> DriverResult<Vec<Host>> {
    Ok(drv.client.get(&d.path("/hosts")).await?)
}

/// The host whose iSCSI initiator is `iqn`.
async fn find_host(drv: &EseriesDriver, d: &Discovered, iqn: &str) -> DriverResult<Option<Host>> {
    Ok(hosts(drv, d)
        .await?
        .into_iter()
        .find(|h| h.has_iscsi_initiator(iqn)))
}

/// The node's host, made when no host has its initiator.
async fn host_for(
    drv: &EseriesDriver,
    d: &Discovered,
    node: &str,
    iqn: &str,
) -> DriverResult<Host> {
    if let Some(h) = find_host(drv, d, iqn).await? {
        return Ok(h);
    }
    let label = host_label(node);
    tracing::info!(host = %label, node, "creating the host of a node");
    let body = CreateHost {
        name: label.clone(),
        host_type: HostTypeIndex {
            index: d.host_type_index,
        },
        ports: vec![HostPort {
            kind: "iscsi",
            port: iqn.to_string(),
            label: label.clone(),
        }],
    };
    match drv.client.post::<_, Host>(&d.path("/hosts"), &body).await {
        Ok((_, h)) if !h.reference().is_empty() => Ok(h),
        Ok(_) => find_host(drv, d, iqn).await?.ok_or_else(|| {
            DriverError::Other(format!("host {label} was created but is not listed"))
        }),
        // Made meanwhile (by another client), or the label is another host's.
        Err(e) if e.status() == Some(422) => match find_host(drv, d, iqn).await? {
            Some(h) => Ok(h),
            None => Err(DriverError::Conflict(format!(
                "cannot create host {label} for node {node} (initiator {iqn}): {e}"
            ))),
        },
        Err(e) => Err(e.into()),
    }
}

/// The LUNs the mappings to `targets` hold.
fn luns_of(volumes: &[Volume], targets: &[&str]) -> Vec<i32> {
    volumes
        .iter()
        .flat_map(|v| &v.list_of_mappings)
        .filter(|m| targets.contains(&m.map_ref.as_str()))
        .map(|m| m.lun)
        .collect()
}

/// `lun` when the mappings of `target` (and of the host's group) leave it free.
async fn free_lun(
    drv: &EseriesDriver,
    d: &Discovered,
    targets: &[&str],
    lun: i32,
) -> DriverResult<Option<i32>> {
    let taken = luns_of(&all(drv, d).await?, targets);
    Ok(((0..=MAX_LUN).contains(&lun) && !taken.contains(&lun)).then_some(lun))
}

/// Moves the volume's group mapping `group` to `host`; on failure maps it back to the group.
async fn move_to_host(
    drv: &EseriesDriver,
    d: &Discovered,
    v: &Volume,
    group: &Mapping,
    host: &Host,
) -> DriverResult<Mapping> {
    let mut targets = vec![host.reference()];
    if host.cluster_ref != NULL_REF && !host.cluster_ref.is_empty() {
        targets.push(host.cluster_ref.as_str());
    }
    let lun = free_lun(drv, d, &targets, group.lun).await?;
    drv.unmap(d, group).await?;
    match drv.map_to(d, v, host.reference(), lun).await {
        Ok(m) => Ok(m),
        Err(e) => {
            let back = free_lun(drv, d, &[&d.host_group_ref], group.lun).await;
            let back = match back {
                Ok(lun) => drv.map_to(d, v, &d.host_group_ref, lun).await.map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(undo) = back {
                tracing::warn!(volume = %v.label(), error = %undo, "cannot map the volume back to the host group after a failed publish");
            }
            Err(e)
        }
    }
}

/// Grants `host` access to volume `name`; idempotent.
pub async fn publish(
    drv: &EseriesDriver,
    d: &Discovered,
    name: &str,
    host: &HostAccess,
) -> DriverResult<PublishContext> {
    let iqn = initiator(host)?;
    let _volume_turn = drv.names.lock(name).await;
    let _host_turn = drv.names.lock(&lock_key(iqn)).await;
    let v = find_or_not_found(drv, d, name).await?;
    // A volume mapped elsewhere is refused before anything is made for the node.
    let existing = find_host(drv, d, iqn).await?;
    let reaches = |m: &Mapping, h: &Host| {
        m.map_ref == h.reference() || (h.cluster_ref != NULL_REF && m.map_ref == h.cluster_ref)
    };
    if let Some(m) = v.list_of_mappings.first()
        && m.map_ref != d.host_group_ref
        && !existing.as_ref().is_some_and(|h| reaches(m, h))
    {
        return Err(DriverError::Conflict(format!(
            "volume {name} is mapped to {} ({}); an E-Series volume has one mapping, so it \
             cannot be published to node {} as well: put the nodes that share it in host \
             group {}",
            m.map_ref, m.kind, host.node, drv.cfg.access_group_name
        )));
    }
    let h = match existing {
        Some(h) => h,
        None => host_for(drv, d, &host.node, iqn).await?,
    };
    let mut context = PublishContext::new();
    match v.list_of_mappings.first() {
        Some(m) if reaches(m, &h) && m.map_ref != h.reference() => {}
        Some(m) if m.map_ref == h.reference() => {
            context.insert(LUN_KEY.into(), m.lun.to_string());
        }
        Some(m) => {
            // The backend's group (checked above): moved to the node's host.
            let m = move_to_host(drv, d, &v, m, &h).await?;
            context.insert(LUN_KEY.into(), m.lun.to_string());
        }
        None => {
            let m = drv.map_to(d, &v, h.reference(), None).await?;
            context.insert(LUN_KEY.into(), m.lun.to_string());
        }
    }
    Ok(context)
}

/// Takes `host`'s access to volume `name` away; idempotent.
pub async fn unpublish(
    drv: &EseriesDriver,
    d: &Discovered,
    name: &str,
    host: &HostAccess,
) -> DriverResult<()> {
    // A node id without an initiator was never granted anything.
    let Ok(iqn) = initiator(host) else {
        return Ok(());
    };
    let _volume_turn = drv.names.lock(name).await;
    let _host_turn = drv.names.lock(&lock_key(iqn)).await;
    let Some(h) = find_host(drv, d, iqn).await? else {
        return Ok(());
    };
    if let Some(v) = find(drv, d, name).await? {
        for m in v
            .list_of_mappings
            .iter()
            .filter(|m| m.map_ref == h.reference())
        {
            drv.unmap(d, m).await?;
        }
        // Back to its create-time state (also when an earlier unpublish stopped here).
        let mapped_elsewhere = v
            .list_of_mappings
            .iter()
            .any(|m| m.map_ref != h.reference());
        if !mapped_elsewhere {
            let lun = match v.list_of_mappings.first() {
                Some(m) => free_lun(drv, d, &[&d.host_group_ref], m.lun).await?,
                None => None,
            };
            drv.map_to(d, &v, &d.host_group_ref, lun).await?;
        }
    }
    drop_if_unused(drv, d, &h).await
}

/// Deletes a host storch made once no volume is mapped to it.
async fn drop_if_unused(drv: &EseriesDriver, d: &Discovered, h: &Host) -> DriverResult<()> {
    if !h.label.starts_with(HOST_PREFIX) {
        return Ok(());
    }
    if !luns_of(&all(drv, d).await?, &[h.reference()]).is_empty() {
        return Ok(());
    }
    tracing::info!(host = %h.label, "deleting a host storch made, now without mappings");
    let path = d.path(&format!("/hosts/{}", h.reference()));
    match drv.client.delete(&path).await {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.status(), Some(404 | 410)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// After a destroy: deletes the hosts storch made that the volume was mapped to and that
/// have no mapping left (a volume destroyed while published leaves no host behind).
pub async fn forget_hosts(
    drv: &EseriesDriver,
    d: &Discovered,
    mappings: &[Mapping],
) -> DriverResult<()> {
    if mappings.iter().all(|m| m.map_ref == d.host_group_ref) {
        return Ok(());
    }
    for h in hosts(drv, d).await? {
        if mappings.iter().any(|m| m.map_ref == h.reference()) {
            drop_if_unused(drv, d, &h).await?;
        }
    }
    Ok(())
}

//! Cluster-wide reads: info, version, hardware, capacity, default QoS.

use serde_json::json;

use super::{Ctx, Params, R};
use crate::sim::solidfire::state::{DEFAULT_QOS, now_iso};

/// The Element version the simulator reports.
pub const CLUSTER_VERSION: &str = "12.3.0.958";
pub const CLUSTER_API_VERSION: &str = "12.3";

pub(super) fn info(ctx: &mut Ctx<'_>, _: &Params<'_>) -> R {
    let c = &ctx.c;
    let svip = c.svip.rsplit_once(':').map(|(ip, _)| ip).unwrap_or(&c.svip);
    Ok(json!({ "clusterInfo": {
        "name": c.name,
        "mvip": c.mvip,
        "svip": svip,
        "uniqueID": c.unique_id,
        "uuid": c.uuid,
        "repCount": 2,
        "attributes": {},
        "mvipNodeID": 1,
        "svipNodeID": 1,
        "encryptionAtRestState": "disabled",
        "ensemble": [c.mvip],
    }}))
}

pub(super) fn version(_: &mut Ctx<'_>, _: &Params<'_>) -> R {
    Ok(json!({
        "clusterVersion": CLUSTER_VERSION,
        "clusterAPIVersion": CLUSTER_API_VERSION,
        "softwareVersionInfo": {
            "currentVersion": CLUSTER_VERSION,
            "nodeID": 0,
            "packageName": "",
            "pendingVersion": CLUSTER_VERSION,
            "startTime": "",
        },
    }))
}

pub(super) fn hardware(_: &mut Ctx<'_>, p: &Params<'_>) -> R {
    p.opt_str("type")?;
    Ok(json!({ "clusterHardwareInfo": {
        "drives": {},
        "nodes": {
            "1": {"nodeID": 1, "serial": "SIMSF00001", "model": "SF-SIM", "chassisType": "SIM"},
        },
    }}))
}

pub(super) fn capacity(ctx: &mut Ctx<'_>, _: &Params<'_>) -> R {
    let c = &ctx.c;
    let provisioned = c.provisioned();
    let active = c.volumes.values().filter(|v| v.status == "active").count() as u64;
    Ok(json!({ "clusterCapacity": {
        "maxProvisionedSpace": c.capacity,
        "provisionedSpace": provisioned,
        "maxUsedSpace": c.capacity,
        "usedSpace": 0,
        "maxOverProvisionableSpace": c.capacity.saturating_mul(5),
        "usedMetadataSpace": 0,
        "maxUsedMetadataSpace": c.capacity / 10,
        "usedMetadataSpaceInSnapshots": 0,
        "activeBlockSpace": 0,
        "uniqueBlocks": 0,
        "uniqueBlocksUsedSpace": 0,
        "nonZeroBlocks": 0,
        "zeroBlocks": provisioned / 4096,
        "snapshotNonZeroBlocks": 0,
        "currentIOPS": 0,
        "maxIOPS": c.max_iops,
        "peakIOPS": 0,
        "averageIOPS": 0,
        "peakActiveSessions": active,
        "activeSessions": 0,
        "clusterRecentIOSize": 0,
        "timestamp": now_iso(),
    }}))
}

pub(super) fn default_qos(_: &mut Ctx<'_>, _: &Params<'_>) -> R {
    Ok(json!({
        "minIOPS": DEFAULT_QOS.min,
        "maxIOPS": DEFAULT_QOS.max,
        "burstIOPS": DEFAULT_QOS.burst,
    }))
}

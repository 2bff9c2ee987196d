//! SIGKILL of a real `storch serve` under load with a nexentastor-iscsi backend on the
//! `storch-sim nexentastor` binary (its state in a `--state` file, every call slowed a little
//! so that kills land between the calls of a create: zvol, target, target group, mapping),
//! restarted each round (`support::crash::CrashLoop`). Afterwards every acknowledged volume is
//! exactly one zvol, the appliance holds no zvol storch does not know, every zvol has a LUN
//! mapping, no mapping names a missing zvol, no dynamic target group holds more LUNs than
//! `numOfLunsPerTarget`, and the hash chain verifies. `STORCH_NEXENTA_CRASH_ROUNDS` sets the
//! rounds (default 3).

use std::collections::BTreeMap;

use serde_json::json;
use storch::sim::nexentastor::{DEFAULT_PASSWORD, DEFAULT_USERNAME};

use crate::support::crash::CrashLoop;
use crate::support::nexentastor::NexentaSim;

const LUNS_PER_TARGET: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_leaves_no_orphan_on_the_appliance() {
    let _heavy = crate::support::heavy();
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("nef.json");
    let sim = NexentaSim::start(
        tmp.path(),
        &[
            "--volume-groups",
            "tank/csi:1PiB",
            "--latency-ms",
            "3",
            "--state",
            state.to_str().unwrap(),
        ],
    );
    let backend = json!({
        "version": 1, "storageDriverName": "nexentastor-iscsi", "backendName": "nx",
        "restIp": sim.url, "username": DEFAULT_USERNAME, "password": DEFAULT_PASSWORD,
        "defaultDataIp": "192.0.2.40", "defaultVolumeGroup": "tank/csi",
        "dynamicTargetLunAllocation": true, "numOfLunsPerTarget": LUNS_PER_TARGET,
        "trustedCACertificate": sim.ca_pem(),
    });
    let crash = CrashLoop {
        rounds: crate::support::rounds("STORCH_NEXENTA_CRASH_ROUNDS", 3),
        clients: 4,
        size: "1Gi",
        backend,
        class: "nx-all",
        class_attributes: json!({"backendType": "nexentastor-iscsi"}),
        kill_while_starting_every: Some(3),
        load_ms: (1500, 1500),
        drift: true,
    };
    let internal = |n: &str| storch::drivers::nexentastor::nexenta_internal_name("", n);
    let on_array = crash
        .run(&tmp.path().join("data"), internal, async || {
            sim.zvols("tank/csi").await
        })
        .await;
    // Mappings: one per zvol, none dangling, no dynamic target group over its limit.
    let mappings = sim
        .collect("/san/lunMappings?fields=volume,targetGroup")
        .await;
    let mut per_group: BTreeMap<String, usize> = BTreeMap::new();
    let mut mapped = std::collections::BTreeSet::new();
    for m in &mappings {
        let volume = m["volume"].as_str().unwrap();
        let name = volume
            .strip_prefix("tank/csi/")
            .unwrap_or(volume)
            .to_string();
        assert!(on_array.contains(&name), "mapping of a missing zvol: {m}");
        assert!(mapped.insert(name), "zvol mapped twice: {m}");
        *per_group
            .entry(m["targetGroup"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(mapped, on_array, "every zvol is mapped");
    for (group, n) in per_group {
        assert!(n <= LUNS_PER_TARGET, "target group {group} has {n} LUNs");
    }
}

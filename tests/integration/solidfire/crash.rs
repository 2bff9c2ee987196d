//! SIGKILL of a real `storch serve` under load with a solidfire-san backend on the Element
//! simulator (persisting to its `--state` file, so the array outlives every round), restarted
//! each round (`support::crash::CrashLoop`). Afterwards every acknowledged volume exists
//! exactly once in storch and on the array, the array holds no volume storch does not know,
//! and the hash chain verifies. A volume deleted but not yet purged is an orphan: after the
//! last start storch has settled every delete, so it is deleting nothing any more (an
//! interrupted delete's retry purges what `DeleteVolume` left). `STORCH_SF_CRASH_ROUNDS` sets
//! the rounds (default 5).

use std::collections::BTreeSet;

use crate::support::crash::CrashLoop;
use crate::support::solidfire::*;
use serde_json::json;
use storch::sim::solidfire::{Cluster, ClusterSpec, SimOptions};

/// Every volume of the cluster in any state, by name; one not active is named with its
/// status, so that it shows as an orphan. A name held twice fails here.
fn names(cluster: &Cluster) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for v in cluster.volumes.values() {
        let name = match v.status.as_str() {
            "active" => v.name.clone(),
            other => format!("{} ({other})", v.name),
        };
        assert!(out.insert(name.clone()), "{name} is on the array twice");
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_leaves_no_orphan_on_the_array() {
    let _heavy = crate::support::heavy();
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("element.json");
    let sim = sf_sim_with(
        tmp.path(),
        SimOptions {
            cluster: ClusterSpec {
                mvip: "127.0.0.1".into(),
                svip: SVIP.into(),
                capacity: 1 << 50,
                max_iops: 100_000,
                tenant: None,
            },
            state: Some(state.clone()),
            // Every call takes a moment, so kills land between the calls of a create
            // (CreateVolume, then the access group) and of a delete (DeleteVolume, then
            // PurgeDeletedVolume).
            latency: std::time::Duration::from_millis(5),
            ..SimOptions::default()
        },
    )
    .await;
    // Two QoS types, so an adopted volume's QoS is compared with its own pool's; volumes
    // join the simulator's `trident` access group (the step an interrupted create may miss).
    let backend = sf_backend_ok(
        &sim,
        json!({"backendName": "sf", "Types": [
            {"Type": "Bronze", "Qos": {"minIOPS": 1000, "maxIOPS": 2000, "burstIOPS": 4000}},
            {"Type": "Gold", "Qos": {"minIOPS": 6000, "maxIOPS": 8000, "burstIOPS": 10000}},
        ]}),
    );
    let crash = CrashLoop {
        rounds: crate::support::rounds("STORCH_SF_CRASH_ROUNDS", 5),
        clients: 6,
        size: "1Gi",
        backend,
        class: "sf-all",
        class_attributes: json!({"backendType": "solidfire-san"}),
        kill_while_starting_every: Some(4),
        load_ms: (1500, 1500),
        drift: true,
    };
    let internal = storch::drivers::solidfire::solidfire_internal_name;
    let on_array = crash
        .run(&tmp.path().join("data"), internal, async || {
            names(&sim.cluster())
        })
        .await;
    // Every volume the array holds is in a group storch reaches it through.
    let cluster = sim.cluster();
    for (id, v) in cluster.volumes.iter() {
        assert!(
            cluster.groups.values().any(|g| g.volumes.contains(id)),
            "{} is in no access group",
            v.name
        );
    }
    // The state file says the same.
    sim.stop().await;
    let on_disk: Cluster = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(names(&on_disk), on_array, "the state file matches");
}

//! Crash test: a real `storch serve` under concurrent load, with a fake backend that persists
//! its volumes, SIGKILLed at random moments (also during start-up and replay) and restarted.
//! Afterwards every acknowledged volume exists exactly once in storch and on the array, the
//! array holds nothing storch does not know, and the hash chain verifies
//! (`support::crash::CrashLoop`). `STORCH_CRASH_ROUNDS` sets the rounds (default 20).

use std::collections::BTreeSet;

use crate::support::crash::CrashLoop;
use crate::support::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_and_leaks_nothing() {
    let _heavy = crate::support::heavy();
    let tmp = tempfile::tempdir().unwrap();
    let array = tmp.path().join("array.json");
    let mut backend = fake_backend(
        "crashy",
        "file",
        &[("p1", ssd()), ("p2", ssd()), ("p3", hdd())],
    );
    backend["statePath"] = json!(array);
    backend["latency"] = json!("lognormal:1ms");
    backend["failPools"] = json!({"p3": "p3 refuses everything"});
    let crash = CrashLoop {
        rounds: crate::support::rounds("STORCH_CRASH_ROUNDS", 20),
        clients: 8,
        size: "1Gi",
        backend: backend.clone(),
        class: "any",
        class_attributes: Value::Null,
        kill_while_starting_every: Some(7),
        load_ms: (0, 500),
        drift: true,
    };
    crash
        .run(
            &tmp.path().join("data"),
            |n| format!("trident-{n}"),
            async || -> BTreeSet<String> {
                // The fake array reads its state file when built: after the last stop.
                let fake = storch::drivers::build_driver(&backend).unwrap().driver;
                let volumes = fake.list_volumes().await.unwrap();
                volumes.into_iter().map(|v| v.internal_name).collect()
            },
        )
        .await;
}

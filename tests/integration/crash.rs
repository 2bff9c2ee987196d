//! Crash test: a real `storch serve` under concurrent load, with a fake backend that persists
//! its volumes, SIGKILLed at random moments and restarted. Afterwards every acknowledged volume
//! exists exactly once in storch and on the array, the array holds nothing storch does not
//! know, and the hash chain verifies. `STORCH_CRASH_ROUNDS` sets the rounds (default 20).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_loses_and_leaks_nothing() {
    let _heavy = crate::support::heavy();
    let rounds = crate::support::rounds("STORCH_CRASH_ROUNDS", 20);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let array = tmp.path().join("array.json");
    let mut backend = fake_backend(
        "crashy",
        "file",
        &[("p1", ssd()), ("p2", ssd()), ("p3", hdd())],
    );
    backend["statePath"] = json!(array);
    backend["latency"] = json!("lognormal:1ms");
    backend["failPools"] = json!({"p3": "p3 refuses everything"});
    let client = storch::net::client();
    let acked = Arc::new(Mutex::new(Acked::default()));

    for round in 0..rounds {
        let mut server = Server::start(&data, &[]);
        // Sometimes kill during start-up and replay.
        if round % 7 == 6 {
            tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 20)).await;
            server.kill();
            continue;
        }
        server.wait_ready(&client).await;
        if round == 0 {
            create(&client, &server.url, "backend", &backend).await;
            create(
                &client,
                &server.url,
                "storageclass",
                &json!({"name": "any"}),
            )
            .await;
        }
        // Load once the backend is online (after a start its driver initialises first).
        backend_online(&client, &server.url, "crashy").await;
        let tasks: Vec<_> = (0..8)
            .map(|c| {
                tokio::spawn(load(
                    client.clone(),
                    server.url.clone(),
                    acked.clone(),
                    format!("r{round}c{c}"),
                    "1Gi",
                    "any",
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 500)).await;
        server.kill();
        for t in tasks {
            t.await.unwrap();
        }
    }

    // A last start: reconciliation finishes every interrupted create and delete.
    let mut server = Server::start(&data, &[]);
    server.wait_ready(&client).await;
    let (known, acked) = check_acknowledged(&client, &server, &acked).await;
    server.stop();

    // The array holds exactly what storch knows.
    let fake = storch::drivers::build_driver(&backend).unwrap().driver;
    let on_array: BTreeSet<String> = fake
        .list_volumes()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.internal_name)
        .collect();
    let expected: BTreeSet<String> = known.iter().map(|n| format!("trident-{n}")).collect();
    assert_eq!(on_array, expected, "array and storch disagree");

    let log =
        storch::log::EventLog::open(&data.join("log"), storch::log::Durability::Flush).unwrap();
    let report = log.verify();
    assert_eq!(report.first_bad, None, "hash chain verifies");
    eprintln!(
        "{rounds} rounds: {} volumes acknowledged, {} deletes acknowledged, {} events",
        acked.live.len(),
        acked.deleted.len(),
        report.events
    );
}

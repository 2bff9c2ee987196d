//! SIGKILL of a real `storch serve` under load with an eseries-iscsi backend on the
//! `storch-sim eseries` binary (state on disk), then restarts: every acknowledged volume is
//! there once, and the array holds exactly the volumes storch knows, each mapped once. The
//! internal names are derived from the volume names, so a restart finds what an interrupted
//! create made. `STORCH_ESERIES_CRASH_ROUNDS` sets the rounds (default 4).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde_json::json;
use storch::drivers::eseries::eseries_internal_name;

use super::drivers::{backend, on_array};
use crate::support::eseries::EseriesSim;
use crate::support::{Acked, Server, backend_online, check_acknowledged, create, load};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_under_load_leaves_no_orphan_on_the_array() {
    let _heavy = crate::support::heavy();
    let rounds = crate::support::rounds("STORCH_ESERIES_CRASH_ROUNDS", 4);
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let state = tmp.path().join("array.json");
    let sim = EseriesSim::start(
        tmp.path(),
        true,
        &[
            "--pools",
            "pool_ssd:ssd:1TiB",
            "--state",
            state.to_str().unwrap(),
        ],
    );
    let doc = backend(&sim, json!({"backendName": "es"}));
    let client = storch::net::client();
    let acked = Arc::new(Mutex::new(Acked::default()));

    for round in 0..rounds {
        let mut server = Server::start(&data, &[]);
        server.wait_ready(&client).await;
        if round == 0 {
            create(&client, &server.url, "backend", &doc).await;
            create(
                &client,
                &server.url,
                "storageclass",
                &json!({"name": "any"}),
            )
            .await;
        }
        backend_online(&client, &server.url, "es").await;
        let tasks: Vec<_> = (0..6)
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
        crate::support::crash::kill_under_load(
            &mut server,
            &acked,
            150 + rand::random::<u64>() % 500,
        )
        .await;
        for t in tasks {
            t.await.unwrap();
        }
    }

    // A last start: reconciliation settles every interrupted create and delete.
    let mut server = Server::start(&data, &[]);
    server.wait_ready(&client).await;
    let (known, acked) = check_acknowledged(&client, &server, &acked).await;
    server.stop();

    let expected: BTreeSet<String> = known
        .iter()
        .map(|n| eseries_internal_name("trident_", n))
        .collect();
    let (labels, mappings) = on_array(&sim).await;
    let labels: BTreeSet<String> = labels.into_iter().collect();
    assert_eq!(labels, expected, "array and storch disagree");
    assert_eq!(mappings, expected.len(), "one mapping per volume");
    eprintln!(
        "{rounds} rounds: {} volumes acknowledged, {} deletes acknowledged, {} on the array",
        acked.live.len(),
        acked.deleted.len(),
        labels.len()
    );
}

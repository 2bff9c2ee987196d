//! The SIGKILL crash loop every array's crash test runs: a real `storch serve` under
//! concurrent load ([`super::load`]), killed at random moments and restarted, then started once
//! more so that reconciliation settles every interrupted create and delete. Afterwards every
//! acknowledged volume exists exactly once in storch and on the array, the array holds nothing
//! storch does not know, and the hash chain verifies.
//!
//! A test gives the array: the backend document, the class the load creates in, how storch
//! names a volume on it and how to list the array's volumes once the server has stopped. That
//! listing must include every volume the array still holds in any state (a volume deleted but
//! not yet purged still holds the array's space): after the last start storch has settled
//! every delete, so nothing it is still deleting can remain, and anything left over is an
//! orphan.
//!
//! With [`CrashLoop::drift`], the array also changes behind storch's back between rounds: one
//! acknowledged volume is destroyed and one grown through a second driver built from the
//! backend document (an operator's tools). After the last start and a reconcile on request,
//! storch shows the first `missing` (`VolumeMissing`, never a delete) and the second at the
//! array's size (`VolumeChangedOnArray`), and the array still holds the grown one at that size.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::{Acked, Server, backend_online, check_acknowledged, load};

/// One crash test's shape.
pub struct CrashLoop {
    /// `STORCH_*_CRASH_ROUNDS` and its default.
    pub rounds: usize,
    /// Concurrent load clients per round.
    pub clients: usize,
    /// The size of every volume the load makes.
    pub size: &'static str,
    /// The backend document, added in the first round.
    pub backend: Value,
    /// The storage class the load creates in, added in the first round with
    /// `class_attributes` (none when `Null`).
    pub class: &'static str,
    pub class_attributes: Value,
    /// Every this many rounds, the server is killed during start-up and replay instead.
    pub kill_while_starting_every: Option<usize>,
    /// The load runs `least + random(0..spread)` milliseconds before the kill.
    pub load_ms: (u64, u64),
    /// After each round's kill, destroy one acknowledged volume and grow another on the array
    /// behind storch's back (see the module's doc).
    pub drift: bool,
}

/// What a volume grows by on the array behind storch's back: well above what arrays round a
/// size up by, which drift does not count as a change.
const GROWTH: u64 = 256 << 20;

impl CrashLoop {
    /// Runs the rounds on the data dir `data`, then checks the outcome: `internal` is the
    /// array-side name of a storch volume, `array_volumes` lists the array (called after the
    /// last server stopped). Returns the array's volumes.
    pub async fn run(
        &self,
        data: &Path,
        internal: impl Fn(&str) -> String,
        array_volumes: impl AsyncFnOnce() -> BTreeSet<String>,
    ) -> BTreeSet<String> {
        let client = storch::net::client();
        let acked = Arc::new(Mutex::new(Acked::default()));
        let mut backend = None;
        for round in 0..self.rounds {
            let mut server = Server::start(data, &[]);
            if let Some(n) = self.kill_while_starting_every
                && round % n == n - 1
                && backend.is_some()
            {
                tokio::time::sleep(Duration::from_millis(rand::random::<u64>() % 20)).await;
                server.kill();
                continue;
            }
            server.wait_ready(&client).await;
            let name = match &backend {
                Some(name) => name,
                None => backend.insert(self.setup(&client, &server).await),
            };
            // The load starts once the array is reachable: a round in which the driver is
            // still initialising would only fail its creates, and its deletes would drain
            // what earlier rounds made.
            backend_online(&client, &server.url, name).await;
            let tasks: Vec<_> = (0..self.clients)
                .map(|c| {
                    tokio::spawn(load(
                        client.clone(),
                        server.url.clone(),
                        acked.clone(),
                        format!("r{round}c{c}"),
                        self.size,
                        self.class,
                    ))
                })
                .collect();
            let (least, spread) = self.load_ms;
            kill_under_load(
                &mut server,
                &acked,
                least + rand::random::<u64>() % spread.max(1),
            )
            .await;
            for t in tasks {
                t.await.unwrap();
            }
            if self.drift {
                self.change_on_array(&acked, &internal).await;
            }
        }

        // A last start: reconciliation settles every interrupted create and delete.
        let mut server = Server::start(data, &[]);
        server.wait_ready(&client).await;
        if self.drift
            && let Some(name) = &backend
        {
            // A reconcile on request waits for one under way, so its states are recorded now.
            backend_online(&client, &server.url, name).await;
            let url = format!("{}/trident/v1/backend/{name}/reconcile", server.url);
            let r = client.post(url).send().await.unwrap();
            assert_eq!(r.status(), 200, "reconcile: {}", r.text().await.unwrap());
        }
        let (known, acked) = check_acknowledged(&client, &server, &acked).await;
        if self.drift {
            check_drift(&client, &server, &acked).await;
        }
        server.stop();

        let on_array = array_volumes().await;
        // Nothing was deleted because of a comparison: the array holds every known volume but
        // those destroyed behind storch's back, and the grown ones at their new size.
        let expected: BTreeSet<String> = known
            .iter()
            .filter(|n| !acked.gone.contains(*n))
            .map(|n| internal(n))
            .collect();
        assert_eq!(on_array, expected, "array and storch disagree");
        if self.drift {
            let tool = self.tool();
            for (v, size) in &acked.grown {
                let now = tool.get(&internal(v)).await.unwrap();
                assert_eq!(now.map(|i| i.size_bytes), Some(*size), "{v} on the array");
            }
        }

        let log =
            storch::log::EventLog::open(&data.join("log"), storch::log::Durability::Flush).unwrap();
        let report = log.verify();
        assert_eq!(report.first_bad, None, "hash chain verifies");
        eprintln!(
            "{} rounds: {} volumes acknowledged, {} deletes acknowledged, {} destroyed and {} \
             grown on the array behind storch's back, {} on the array, {} events",
            self.rounds,
            acked.live.len(),
            acked.deleted.len(),
            acked.gone.len(),
            acked.grown.len(),
            on_array.len(),
            report.events
        );
        on_array
    }

    /// A second driver on the array, built from the backend document: an operator's tools.
    fn tool(&self) -> std::sync::Arc<dyn storch::drivers::StorageDriver> {
        storch::drivers::build_driver(&self.backend)
            .expect("the backend document builds")
            .driver
    }

    /// While storch is down: destroys the newest acknowledged volume on the array, then grows
    /// by [`GROWTH`] the newest other one in the same pool (the destroy made room there: the
    /// load fills the pools); the load leaves both alone from now on.
    ///
    /// With a single volume to spare after one was destroyed and none grown yet, it is grown
    /// instead, so that a run with little load still does both.
    async fn change_on_array(&self, acked: &Mutex<Acked>, internal: &impl Fn(&str) -> String) {
        let tool = self.tool();
        let grow_only = {
            let a = acked.lock().unwrap();
            a.live.len() == 1 && !a.gone.is_empty() && a.grown.is_empty()
        };
        if grow_only {
            let v = acked.lock().unwrap().live.pop_last().expect("one volume");
            let name = internal(&v);
            let before = tool.get(&name).await.unwrap().expect("on the array");
            return grow(acked, &tool, v, &name, before.size_bytes).await;
        }
        let Some(gone) = acked.lock().unwrap().live.pop_last() else {
            return;
        };
        let pool = match tool.get(&internal(&gone)).await.unwrap() {
            Some(info) => info.pool,
            None => panic!("acknowledged volume {gone} is not on the array"),
        };
        tool.destroy(&internal(&gone))
            .await
            .unwrap_or_else(|e| panic!("{gone} destroyed on the array: {e}"));
        acked.lock().unwrap().gone.insert(gone);
        let newest: Vec<String> = acked.lock().unwrap().live.iter().rev().cloned().collect();
        for v in newest {
            let name = internal(&v);
            let before = tool.get(&name).await.unwrap().expect("on the array");
            if before.pool != pool {
                continue;
            }
            acked.lock().unwrap().live.remove(&v);
            return grow(acked, &tool, v, &name, before.size_bytes).await;
        }
    }

    /// Adds the backend and the class; returns the backend's name.
    async fn setup(&self, client: &reqwest::Client, server: &Server) -> String {
        let r = client
            .post(format!("{}/trident/v1/backend", server.url))
            .json(&self.backend)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 201, "{body}; log:\n{}", server.log());
        let mut class = serde_json::json!({ "name": self.class });
        if !self.class_attributes.is_null() {
            class["attributes"] = self.class_attributes.clone();
        }
        super::create(client, &server.url, "storageclass", &class).await;
        body["backend"]
            .as_str()
            .expect("a backend name")
            .to_string()
    }
}

/// Grows volume `v` (`name` on the array, `size` bytes now) by [`GROWTH`] and records it.
async fn grow(
    acked: &Mutex<Acked>,
    tool: &std::sync::Arc<dyn storch::drivers::StorageDriver>,
    v: String,
    name: &str,
    size: u64,
) {
    tool.resize(name, size + GROWTH)
        .await
        .unwrap_or_else(|e| panic!("{v} grown on the array: {e}"));
    let after = tool.get(name).await.unwrap().expect("on the array");
    assert!(after.size_bytes >= size + GROWTH, "{v}: {after:?}");
    acked.lock().unwrap().grown.insert(v, after.size_bytes);
}

/// SIGKILLs `server` after `ms` of load, and not before the load has had a create
/// acknowledged since this call: however slow the array, every round kills a server that was
/// making volumes.
pub async fn kill_under_load(server: &mut Server, acked: &Mutex<Acked>, ms: u64) {
    let before = acked.lock().unwrap().creates;
    tokio::time::sleep(Duration::from_millis(ms)).await;
    super::eventually("a create acknowledged in this round", async || {
        acked.lock().unwrap().creates > before
    })
    .await;
    server.kill();
}

/// After the last start and a reconcile: each volume destroyed on the array shows `missing`
/// with `VolumeMissing` and was never asked to be deleted; each grown one is `online` at the
/// array's size with `VolumeChangedOnArray` (`check_acknowledged` has checked the states).
async fn check_drift(client: &reqwest::Client, server: &Server, acked: &Acked) {
    assert!(
        !acked.gone.is_empty() && !acked.grown.is_empty(),
        "the rounds changed nothing on the array"
    );
    let kinds = async |v: &str| -> Vec<String> {
        let url = format!("{}/trident/v1/events?object=volume/{v}", server.url);
        let (_, doc) = super::get_json(client, &url).await;
        doc["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_string())
            .collect()
    };
    for v in &acked.gone {
        let k = kinds(v).await;
        assert!(k.contains(&"VolumeMissing".to_string()), "{v}: {k:?}");
        for never in ["VolumeDeleteRequested", "VolumeDeleted"] {
            assert!(!k.contains(&never.to_string()), "{v}: {k:?}");
        }
    }
    for (v, size) in &acked.grown {
        let url = format!("{}/trident/v1/volume/{v}", server.url);
        let (_, doc) = super::get_json(client, &url).await;
        assert_eq!(
            doc["volume"]["Config"]["size"],
            size.to_string(),
            "{v}: {doc}"
        );
        let k = kinds(v).await;
        assert!(
            k.contains(&"VolumeChangedOnArray".to_string()),
            "{v}: {k:?}"
        );
    }
}

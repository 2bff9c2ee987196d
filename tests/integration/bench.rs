//! Smoke tests of `storch bench`: every mode runs on a tiny size and reports sane numbers.
//! Correctness only — no timing assertions.

use storch::bench::{Mix, ProvisionOptions, ReplayOptions, run_provision, run_replay};
use storch::log::Durability;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provision_mode_runs() {
    let _heavy = crate::support::heavy();
    if !crate::support::in_own_process(module_path!(), "every_provision_mode_runs") {
        return;
    }
    for (mix, durability, latency, fail_rate, via_rest) in [
        (Mix::Create, Durability::Flush, "0ms", 0.0, false),
        (Mix::Churn, Durability::Write, "1ms", 0.0, false),
        (Mix::Clone, Durability::Memory, "lognormal:1ms", 0.0, false),
        (Mix::Create, Durability::Flush, "0ms", 0.3, false),
        (Mix::Create, Durability::Flush, "0ms", 0.0, true),
        (Mix::Churn, Durability::Flush, "0ms", 0.0, true),
        (Mix::Clone, Durability::Write, "0ms", 0.0, true),
    ] {
        let opts = ProvisionOptions {
            volumes: 40,
            clients: 4,
            backends: 2,
            pools: 2,
            backend_limit: 4,
            latency: latency.into(),
            fail_rate,
            mix,
            durability,
            data_dir: None,
            via_rest,
            target: None,
            etcd: None,
            replicate_etcd: None,
        };
        let r = run_provision(opts, |_, _| {}).await.unwrap();
        let expected_ops = if mix == Mix::Churn { 80 } else { 40 };
        assert_eq!(
            r.operations + r.failed,
            expected_ops,
            "{mix:?} via REST: {via_rest}"
        );
        if fail_rate == 0.0 {
            assert_eq!(r.failed, 0, "{mix:?} via REST: {via_rest}");
        }
        if mix == Mix::Create {
            let placed: u64 = r.distribution.pools.iter().map(|p| p.volumes).sum();
            assert_eq!(
                placed, r.operations,
                "every volume is in the spread (via REST: {via_rest})"
            );
        }
        assert!(r.ops_per_sec > 0.0);
        assert!(r.latency.p50_us <= r.latency.p99_us);
        assert!(r.events_per_op >= 1.0, "{mix:?}: {}", r.events_per_op);
        assert!(r.baseline.raw_sled_records_per_sec > 0.0);
        if mix != Mix::Clone {
            assert_eq!(r.distribution.degrees_of_freedom, 3);
        }
        if latency != "0ms" {
            assert!(r.baseline.littles_law_ops_per_sec.is_some());
        }
        let json = serde_json::to_value(&r).unwrap();
        for key in [
            "operations",
            "ops_per_sec",
            "latency",
            "split",
            "baseline",
            "distribution",
        ] {
            assert!(
                json.get(key).is_some(),
                "{key} missing from the JSON report"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_options_are_refused() {
    let opts = ProvisionOptions {
        clients: 0,
        ..ProvisionOptions::default()
    };
    assert!(run_provision(opts, |_, _| {}).await.is_err());
    let opts = ProvisionOptions {
        latency: "soon".into(),
        ..ProvisionOptions::default()
    };
    assert!(
        run_provision(opts, |_, _| {})
            .await
            .unwrap_err()
            .contains("--latency")
    );
    assert!(
        run_replay(ReplayOptions {
            volumes: 0,
            data_dir: None
        })
        .await
        .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_mode_runs() {
    let r = run_replay(ReplayOptions {
        volumes: 500,
        data_dir: None,
    })
    .await
    .unwrap();
    assert_eq!(r.events, 3 + 3 * 500);
    assert!(r.full_replay_events_per_sec > 0.0);
    assert!(r.ready_with_checkpoint_s > 0.0 && r.ready_without_checkpoint_s > 0.0);
    assert!(r.checkpoint_bytes > 0, "shutdown wrote a checkpoint");
}

#[test]
fn the_bench_command_prints_json_and_tables() {
    let bin = env!("CARGO_BIN_EXE_storch");
    let out = std::process::Command::new(bin)
        .args([
            "bench",
            "provision",
            "--volumes",
            "30",
            "--clients",
            "3",
            "--backends",
            "2",
            "--pools",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["operations"], 30);
    assert_eq!(report["options"]["mix"], "create");
    let out = std::process::Command::new(bin)
        .args(["bench", "replay", "--volumes", "200"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("full replay") && text.contains("ready, from checkpoint"),
        "{text}"
    );
    let out = std::process::Command::new(bin)
        .args(["bench", "provision", "--fail-rate", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fail-rate"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_against_the_ontap_simulator() {
    let _heavy = crate::support::heavy();
    if !crate::support::in_own_process(module_path!(), "provision_against_the_ontap_simulator") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sim =
        crate::support::ontap::sim_in(dir.path(), storch::sim::ontap::SimOptions::default()).await;
    let target: storch::bench::ArrayTarget =
        format!("ontap={}", sim.management_lif()).parse().unwrap();
    let opts = ProvisionOptions {
        volumes: 20,
        clients: 4,
        backends: 2,
        backend_limit: 4,
        target: Some(target),
        ..ProvisionOptions::default()
    };
    let r = run_provision(opts, |_, _| {}).await.unwrap();
    assert_eq!((r.operations, r.failed), (20, 0));
    let pools: std::collections::BTreeSet<&str> = r
        .distribution
        .pools
        .iter()
        .map(|p| p.pool.as_str())
        .collect();
    assert!(pools.iter().all(|p| p.starts_with("aggr")), "{pools:?}");
    // A second run on the same array: its names must not collide with the first run's
    // volumes (each collision would be a failed attempt and a fall-through).
    let again = ProvisionOptions {
        volumes: 20,
        clients: 4,
        backends: 2,
        backend_limit: 4,
        target: Some(format!("ontap={}", sim.management_lif()).parse().unwrap()),
        ..ProvisionOptions::default()
    };
    let r = run_provision(again, |_, _| {}).await.unwrap();
    assert_eq!((r.operations, r.failed), (20, 0));
    assert_eq!(sim.calls("volume-create"), 40);
    // Each run removes what it made once it is measured.
    assert_eq!(r.removed_from_arrays, Some(20));
    let left: Vec<String> = sim
        .array()
        .svms
        .values()
        .flat_map(|svm| svm.volumes.iter().filter(|(_, v)| !v.is_root))
        .map(|(n, _)| n.clone())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // Several arrays: the backends are spread over them.
    let other =
        crate::support::ontap::sim_in(dir.path(), storch::sim::ontap::SimOptions::default()).await;
    let both = ProvisionOptions {
        volumes: 20,
        clients: 4,
        backends: 2,
        backend_limit: 4,
        target: Some(
            format!("ontap={},{}", sim.management_lif(), other.management_lif())
                .parse()
                .unwrap(),
        ),
        ..ProvisionOptions::default()
    };
    let r = run_provision(both, |_, _| {}).await.unwrap();
    assert_eq!((r.operations, r.failed), (20, 0));
    assert!(other.calls("volume-create") > 0);
    assert_eq!(
        sim.calls("volume-create") + other.calls("volume-create"),
        60
    );
    assert!(
        "ontap=1.2.3.4:5,"
            .parse::<storch::bench::ArrayTarget>()
            .is_err()
    );
    assert!(
        "nas=1.2.3.4:5"
            .parse::<storch::bench::ArrayTarget>()
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_against_the_solidfire_simulator() {
    use crate::support::solidfire::{GIB, sf_sim_in};
    use storch::sim::solidfire::{SolidFireSim, Tuning};
    let _heavy = crate::support::heavy();
    if !crate::support::in_own_process(module_path!(), "provision_against_the_solidfire_simulator")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sim = sf_sim_in(dir.path(), 1024 * GIB, None, Tuning::default()).await;
    let other = sf_sim_in(dir.path(), 1024 * GIB, None, Tuning::default()).await;
    let creates = |s: &SolidFireSim| s.calls("CreateVolume");
    let run = async |target: String| {
        let target: storch::bench::ArrayTarget = target.parse().unwrap();
        // The simulator's own credentials are the default.
        assert_eq!(
            (target.username.as_str(), target.password.as_str()),
            ("admin", "solidfire123")
        );
        let opts = ProvisionOptions {
            volumes: 24,
            clients: 4,
            backends: 2,
            backend_limit: 4,
            target: Some(target),
            ..ProvisionOptions::default()
        };
        run_provision(opts, |_, _| {}).await.unwrap()
    };
    let r = run(format!("solidfire={}", sim.addr())).await;
    assert_eq!((r.operations, r.failed), (24, 0));
    assert_eq!(r.latency.count, 24);
    assert!(r.ops_per_sec > 0.0 && r.split.backend.is_some(), "{r:?}");
    // The volumes were made on the array, in the backends' QoS type pools, one Element volume
    // each, and removed once measured.
    assert_eq!(creates(&sim), 24);
    let placed: u64 = r.distribution.pools.iter().map(|p| p.volumes).sum();
    assert_eq!(placed, 24);
    for p in &r.distribution.pools {
        assert!(
            ["Bronze", "Silver", "Gold"].contains(&p.pool.as_str()),
            "{p:?}"
        );
    }
    assert_eq!(r.removed_from_arrays, Some(24));
    assert_eq!(sim.calls("PurgeDeletedVolume"), 24);
    let cluster = sim.cluster();
    assert!(cluster.volumes.is_empty(), "{:?}", cluster.volumes);
    // Each backend has a tenant account of its own for the run.
    let tenants: std::collections::BTreeSet<&str> = cluster
        .accounts
        .values()
        .map(|a| a.username.as_str())
        .collect();
    assert_eq!(tenants.len(), 2, "{tenants:?}");
    assert!(
        tenants.iter().all(|t| t.starts_with("bench")),
        "{tenants:?}"
    );

    // Several arrays: the backends are spread over them (one tenant account on each), and a
    // second run on an array never takes the first run's names for its own.
    let r = run(format!("solidfire={},{}", sim.addr(), other.addr())).await;
    assert_eq!((r.operations, r.failed), (24, 0));
    assert_eq!(creates(&sim) + creates(&other), 48);
    assert_eq!(other.cluster().accounts.len(), 1);
    assert_eq!(sim.cluster().accounts.len(), 3);
    assert!(sim.cluster().volumes.is_empty() && other.cluster().volumes.is_empty());
    assert!(
        "solidfire="
            .parse::<storch::bench::ArrayTarget>()
            .is_err_and(|e| e.contains("solidfire= needs an address"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_etcd_baseline_runs_against_a_real_etcd() {
    let _heavy = crate::support::heavy();
    if !crate::support::in_own_process(module_path!(), "the_etcd_baseline_runs_against_a_real_etcd")
    {
        return;
    }
    let etcd = crate::support::etcd::Etcd::start().await;
    let opts = ProvisionOptions {
        volumes: 30,
        clients: 4,
        backends: 1,
        pools: 2,
        etcd: Some(etcd.endpoint.clone()),
        ..ProvisionOptions::default()
    };
    let r = run_provision(opts, |_, _| {}).await.unwrap();
    let e = r.baseline.etcd.expect("an etcd baseline");
    assert!(e.records >= 90 && e.records_per_sec > 0.0, "{e:?}");
    assert!(r.baseline.ratio_to_etcd.is_some_and(|x| x > 0.0));
    // A wrong endpoint is an error naming it, not a silent zero.
    let opts = ProvisionOptions {
        volumes: 5,
        clients: 1,
        backends: 1,
        pools: 1,
        etcd: Some("127.0.0.1:1".into()),
        ..ProvisionOptions::default()
    };
    let err = run_provision(opts, |_, _| {}).await.unwrap_err();
    assert!(err.contains("127.0.0.1:1"), "{err}");

    // storch's own log replicated through etcd: every event made it, and the run's keys are
    // removed afterwards.
    let opts = ProvisionOptions {
        volumes: 30,
        clients: 4,
        backends: 1,
        pools: 2,
        replicate_etcd: Some(etcd.endpoint.clone()),
        ..ProvisionOptions::default()
    };
    let r = run_provision(opts, |_, _| {}).await.unwrap();
    let rep = r.baseline.replicated.expect("a replication figure");
    assert_eq!(r.operations, 30);
    assert!(
        rep.events_per_sec > 0.0 && rep.events_per_txn >= 1.0,
        "{rep:?}"
    );
    let left = etcd
        .call(
            "/v3/kv/range",
            serde_json::json!({"key": "Lw==", "range_end": "MA==", "count_only": true}),
        )
        .await;
    assert_eq!(
        left["count"],
        serde_json::Value::Null,
        "keys left in etcd: {left}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_against_the_eseries_simulator() {
    use crate::support::eseries::EseriesSim;
    let _heavy = crate::support::heavy();
    if !crate::support::in_own_process(module_path!(), "provision_against_the_eseries_simulator") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sim = EseriesSim::start(dir.path(), true, &[]);
    let (host, port) = sim.host_port();
    let target: storch::bench::ArrayTarget = format!("eseries={host}:{port}").parse().unwrap();
    assert_eq!(
        (target.username.as_str(), target.password.as_str()),
        ("admin", "eseries123"),
        "the simulator's own credentials are the default"
    );
    let opts = ProvisionOptions {
        volumes: 12,
        clients: 4,
        backends: 2,
        backend_limit: 4,
        target: Some(target),
        ..ProvisionOptions::default()
    };
    let r = run_provision(opts, |_, _| {}).await.unwrap();
    assert_eq!((r.operations, r.failed), (12, 0), "{r:?}");
    assert_eq!(r.latency.count, 12);
    let placed: u64 = r.distribution.pools.iter().map(|p| p.volumes).sum();
    assert_eq!(placed, 12);
    for p in &r.distribution.pools {
        assert!(["pool_ssd", "pool_hdd"].contains(&p.pool.as_str()), "{p:?}");
    }
    // Made on the array, then removed once measured: the proxy's array holds no volume.
    assert_eq!(r.removed_from_arrays, Some(12));
    let id = sim.register("").await;
    let (status, volumes) = sim
        .request("GET", &format!("/storage-systems/{id}/volumes"), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(volumes, serde_json::json!([]));
}

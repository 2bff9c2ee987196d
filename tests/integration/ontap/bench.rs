//! `storch bench provision --target ontap=ADDR` in both API modes against the simulator, at a
//! tiny size (correctness only, no timing): `STORCH_BENCH_ONTAP_API=rest` pins the backends to
//! REST, `zapi` to ZAPI, on the same array serving both.

use storch::bench::{ArrayTarget, ProvisionOptions, run_provision};
use storch::sim::ontap::{ApiMode, SimOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provision_against_the_ontap_simulator_over_rest_and_zapi() {
    let _heavy = crate::support::heavy();
    if !crate::support::in_own_process(
        module_path!(),
        "provision_against_the_ontap_simulator_over_rest_and_zapi",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // ONTAP 9.15.1 serving both APIs: unpinned, a backend would pick REST.
    let opts = SimOptions {
        api: ApiMode::Both,
        ontap_version: Some([9, 15, 1]),
        ..SimOptions::default()
    };
    let sim = crate::support::ontap::sim_in(dir.path(), opts).await;
    for api in ["rest", "zapi"] {
        let mut target: ArrayTarget = format!("ontap={}", sim.management_lif()).parse().unwrap();
        target.ontap_api = Some(api.to_string());
        let (rest_before, zapi_before) = (
            sim.calls("POST /api/storage/volumes"),
            sim.calls("volume-create"),
        );
        let opts = ProvisionOptions {
            volumes: 6,
            clients: 2,
            backends: 1,
            backend_limit: 2,
            target: Some(target),
            ..ProvisionOptions::default()
        };
        let r = run_provision(opts, |_, _| {}).await.unwrap();
        assert_eq!((r.operations, r.failed), (6, 0), "{api}");
        assert_eq!(r.removed_from_arrays, Some(6), "{api}");
        let (rest, zapi) = (
            sim.calls("POST /api/storage/volumes") - rest_before,
            sim.calls("volume-create") - zapi_before,
        );
        let expected = if api == "rest" { (6, 0) } else { (0, 6) };
        assert_eq!((rest, zapi), expected, "{api}: creates per API");
        let arr = sim.array();
        let svm = &arr.svms["svm1"];
        assert!(
            svm.volumes.values().all(|v| v.is_root),
            "{api}: all removed"
        );
        assert!(svm.recovery_queue.is_empty(), "{api}: purged");
    }
}

//! Suspension through every frontend: the CLI (`update backend NAME --state`, the USER STATE
//! column), CSI (a create only suspended backends could serve is FAILED_PRECONDITION, not
//! UNAVAILABLE; `/metrics`) and Kubernetes (a ProvisioningFailed event, not a wait).

use serde_json::json;
use tonic::Code;

use crate::cli::storch;
use crate::csi::{Csi, code, create_request, unique};
use crate::support::kube_env::{Env, class_yaml, pvc_yaml};
use crate::support::*;
use storch::model::UserState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_sets_the_state_and_shows_it_in_its_own_column() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &[]);
    let client = storch::net::client();
    server.wait_ready(&client).await;
    let run = |args: &[&str], stdin: Option<&str>| {
        let mut all = vec!["--server", server.url.as_str()];
        all.extend_from_slice(args);
        storch(&all, &[], stdin)
    };
    let backend = fake_backend("lab", "file", &[("p1", ssd())]).to_string();
    run(&["create", "backend", "-f", "-"], Some(&backend)).ok();
    let headers = ["NAME", "DRIVER", "STATE", "USER STATE", "VOLUMES"];

    let rows = run(&["update", "backend", "lab", "--state", "suspended"], None)
        .ok()
        .table(&headers);
    assert_eq!(rows, [["lab", "fake", "online", "suspended", "0"]]);
    let rows = run(&["get", "backend"], None).ok().table(&headers);
    assert_eq!(rows, [["lab", "fake", "online", "suspended", "0"]]);
    let doc = run(&["get", "backend", "lab", "-o", "json"], None)
        .ok()
        .json();
    assert_eq!(doc["items"][0]["userState"], "suspended");

    // Refusals: an unknown value (clap names the flag and the values), --state with a file,
    // an unknown backend.
    let out = run(&["update", "backend", "lab", "--state", "paused"], None);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr.contains("--state") && out.stderr.contains("suspended, normal"),
        "{out:#?}"
    );
    let out = run(
        &["update", "backend", "lab", "--state", "normal", "-f", "-"],
        Some(&backend),
    );
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("cannot be used with"), "{out:#?}");
    run(&["update", "backend", "nope", "--state", "normal"], None)
        .fails_with("could not set the state of backend nope: backend nope was not found");
    let rows = run(&["get", "backend"], None).ok().table(&headers);
    assert_eq!(rows[0][3], "suspended", "the refusals changed nothing");

    let rows = run(&["update", "b", "lab", "--state", "normal"], None)
        .ok()
        .table(&headers);
    assert_eq!(rows, [["lab", "fake", "online", "normal", "0"]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_refuses_a_create_only_suspended_backends_could_serve() {
    let mut csi = Csi::start().await;
    let suspend = async |csi: &Csi, backend: &str, state: &str| {
        let url = format!("{}/trident/v1/backend/{backend}/state", csi.server.url);
        let r = http::post(&csi.http, &url, json!({ "state": state })).await;
        assert_eq!(r.status, 200, "{}", r.json);
    };
    for b in ["nfs", "san"] {
        suspend(&csi, b, "suspended").await;
    }
    let refused = csi
        .controller
        .clone()
        .create_volume(create_request(&unique("held")))
        .await;
    let status = refused.as_ref().unwrap_err().clone();
    assert_eq!(code(refused), Code::FailedPrecondition, "{status:?}");
    assert!(
        status.message().contains("suspended by the operator"),
        "{status:?}"
    );
    let metrics = csi.get_text("/metrics").await;
    for b in ["nfs", "san"] {
        let line = format!("storch_backend_suspended{{backend=\"{b}\"}} 1");
        assert!(metrics.contains(&line), "{line} in:\n{metrics}");
    }
    // Still suspended after a restart; then back to normal, creates land again.
    csi.restart().await;
    let metrics = csi.get_text("/metrics").await;
    assert!(metrics.contains("storch_backend_suspended{backend=\"nfs\"} 1"));
    suspend(&csi, "nfs", "normal").await;
    let id = csi.create(create_request(&unique("free"))).await;
    assert!(!id.is_empty());
    let metrics = csi.get_text("/metrics").await;
    assert!(
        metrics.contains("storch_backend_suspended{backend=\"nfs\"} 0"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_on_suspended_backends_fails_with_the_reason_not_a_wait() {
    let env = Env::start().await;
    env.add_backend(fake_backend("f1", "file", &[("p1", ssd())]))
        .await;
    env.core()
        .set_backend_state(&super::ctx(), "f1", UserState::Suspended)
        .await
        .unwrap();
    env.create(&class_yaml(
        "fast",
        "storch.io/storch",
        "  media: ssd\n",
        "",
    ))
    .await;
    eventually("class fast", async || {
        env.core().get_storage_class("fast").is_ok()
    })
    .await;
    env.create(&pvc_yaml("held", Some("fast"), "")).await;
    let note = env
        .event("PersistentVolumeClaim/held", "ProvisioningFailed")
        .await;
    assert!(note.contains("f1 suspended by the operator"), "{note}");
    assert!(
        !env.events()
            .iter()
            .any(|(r, _, why, _)| r == "PersistentVolumeClaim/held" && why == "WaitingForBackend"),
        "a suspension is not a wait: {:#?}",
        env.events()
    );
    // Retried with backoff: once the backend is back to normal the claim is provisioned.
    env.core()
        .set_backend_state(&super::ctx(), "f1", UserState::Normal)
        .await
        .unwrap();
    env.bound("default", "held").await;
    env.stop().await;
}

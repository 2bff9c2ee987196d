//! The pod role label of replicated storch (etcd): every replica labels its own pod
//! `storch.io/role=standby` from the start and `storch.io/role=leader` once its core takes
//! commands, so that a Service selecting `storch.io/role: leader` reaches only the leader
//! while standbys stay Ready (`/readyz?standby=ok`), as Vault's service registration does.
//!
//! Runs on every replica from [`super::Frontend::start`], not gated on the core's readiness
//! like the rest of the frontend. A label that cannot be written is logged and retried with
//! backoff; it never stops storch. A clean stop of a leader labels it `standby` again (one
//! try), so the Service lets go of it before the pod is gone.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tokio::sync::watch;

use crate::actors::{Core, Readiness};

/// The label on storch's own pod: [`Role::Leader`] or [`Role::Standby`].
pub const ROLE_LABEL: &str = "storch.io/role";

/// The role a replica has in the etcd election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Standby,
    Leader,
}

impl Role {
    fn value(self) -> &'static str {
        match self {
            Role::Standby => "standby",
            Role::Leader => "leader",
        }
    }

    /// Leader once the core takes commands (which, replicated, means it leads).
    fn of(core: &Core) -> Role {
        match core.readiness() {
            Readiness::Ready => Role::Leader,
            _ => Role::Standby,
        }
    }
}

/// The delay before the next try after `failures` failures: 1 s doubling to 1 min.
fn backoff(failures: u32) -> Duration {
    super::doubling(failures, 60)
}

/// Keeps the label of pod `pod` (in the namespace of `pods`) on this replica's role until
/// `stop`.
pub(crate) async fn run(pods: Api<Pod>, pod: String, core: Core, mut stop: watch::Receiver<bool>) {
    let mut labelled: Option<Role> = None;
    let mut failures = 0u32;
    loop {
        let want = Role::of(&core);
        if labelled != Some(want) {
            let done = tokio::select! {
                done = label(&pods, &pod, want) => done,
                _ = stop.wait_for(|s| *s) => break,
            };
            match done {
                Ok(()) => {
                    tracing::info!(pod = %pod, role = want.value(), "pod labelled {ROLE_LABEL}={}", want.value());
                    labelled = Some(want);
                    failures = 0;
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    let retry_in = backoff(failures);
                    tracing::warn!(
                        pod = %pod,
                        role = want.value(),
                        error = %e,
                        ?retry_in,
                        "could not label the pod with its role; retrying"
                    );
                    tokio::select! {
                        _ = tokio::time::sleep(retry_in) => continue,
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            }
        }
        // Labelled: wait until it leads (a leader stays one until the process stops).
        let ready = tokio::select! {
            ready = core.wait_ready(), if labelled == Some(Role::Standby) => ready,
            _ = stop.wait_for(|s| *s) => break,
        };
        if let Err(why) = ready {
            tracing::warn!(pod = %pod, %why, "the core failed: the pod stays labelled standby");
            let _ = stop.wait_for(|s| *s).await;
            return;
        }
    }
    if labelled == Some(Role::Leader) {
        let stepped_down =
            tokio::time::timeout(Duration::from_secs(3), label(&pods, &pod, Role::Standby)).await;
        match stepped_down {
            Ok(Ok(())) => tracing::info!(pod = %pod, "stopping: pod labelled {ROLE_LABEL}=standby"),
            Ok(Err(e)) => {
                tracing::warn!(pod = %pod, error = %e, "stopping: could not label the pod standby")
            }
            Err(_) => tracing::warn!(pod = %pod, "stopping: labelling the pod standby timed out"),
        }
    }
}

/// Sets the label with a merge patch, unless the pod has it already.
async fn label(pods: &Api<Pod>, pod: &str, role: Role) -> Result<(), kube::Error> {
    let current = pods.get(pod).await?;
    let has = current
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ROLE_LABEL))
        .map(String::as_str);
    if has == Some(role.value()) {
        return Ok(());
    }
    let patch = serde_json::json!({"metadata": {"labels": {ROLE_LABEL: role.value()}}});
    pods.patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_minute() {
        let secs: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}

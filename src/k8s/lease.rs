//! Leader election on a `coordination.k8s.io/v1` Lease: only the holder provisions.
//!
//! Like client-go's leader election: a Lease held by someone else counts as expired when its
//! record has not changed for `leaseDurationSeconds` by *our* clock (no trust in the other
//! replica's clock); every write carries the resourceVersion it read, so two candidates never
//! both win; the holder renews every third of the duration and gives up leading when it has
//! not renewed for two thirds of it, before anyone else may take over.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease as KubeLease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;

use super::{Ctx, is_conflict, is_not_found};

pub(super) struct Lease {
    api: Api<KubeLease>,
    name: String,
    identity: String,
    duration: Duration,
    /// The last record seen of another holder, and when (our clock) it was first seen.
    observed: std::sync::Mutex<Option<(String, Instant)>>,
}

/// The outcome of one try.
enum Try {
    Held,
    NotHeld,
}

impl Lease {
    pub(super) fn new(ctx: &Ctx) -> Lease {
        Lease {
            api: Api::namespaced(ctx.client.clone(), &ctx.namespace),
            name: ctx.opts.lease_name.clone(),
            identity: ctx.identity.clone(),
            duration: ctx.opts.lease_duration,
            observed: std::sync::Mutex::new(None),
        }
    }

    fn retry_period(&self) -> Duration {
        self.duration / 3
    }

    /// Waits until this instance holds the Lease (`true`) or `stop` is set (`false`).
    pub(super) async fn acquire(&self, stop: &mut watch::Receiver<bool>) -> bool {
        let mut logged = false;
        loop {
            match self.try_acquire().await {
                Ok(Try::Held) => return true,
                Ok(Try::NotHeld) => {
                    if !logged {
                        tracing::info!(lease = %self.name, "another replica leads; standing by");
                        logged = true;
                    }
                }
                Err(e) => tracing::warn!(lease = %self.name, error = %e, "cannot read the Lease"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.retry_period()) => {}
                _ = stop.wait_for(|s| *s) => return false,
            }
        }
    }

    /// Renews the Lease until it is lost (`false`) or `stop` is set (`true`).
    pub(super) async fn hold(&self, stop: &mut watch::Receiver<bool>) -> bool {
        let mut renewed = Instant::now();
        let deadline = self.duration * 2 / 3;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.retry_period()) => {}
                _ = stop.wait_for(|s| *s) => return true,
            }
            match self.try_acquire().await {
                Ok(Try::Held) => renewed = Instant::now(),
                Ok(Try::NotHeld) => return false,
                Err(e) => {
                    tracing::warn!(lease = %self.name, error = %e, "cannot renew the Lease");
                    if renewed.elapsed() >= deadline {
                        return false;
                    }
                }
            }
        }
    }

    /// Gives the Lease up (at shutdown), so that a standby takes over at once.
    pub(super) async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.name, "Lease released"),
            Err(e) => tracing::warn!(lease = %self.name, error = %e, "could not release the Lease"),
        }
    }

    async fn try_acquire(&self) -> Result<Try, kube::Error> {
        let now = MicroTime(Timestamp::now());
        let seconds = i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = KubeLease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    tracing::info!(lease = %self.name, "Lease created and acquired");
                    Ok(Try::Held)
                }
                Err(e) if is_conflict(&e) => Ok(Try::NotHeld),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let ours = holder == self.identity;
        if !ours && !holder.is_empty() {
            let record = format!(
                "{holder} {:?} {:?}",
                spec.renew_time.as_ref().map(|t| t.0),
                spec.lease_transitions
            );
            let held_for = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs)
                .unwrap_or(self.duration);
            let mut observed = self.observed.lock().unwrap_or_else(|e| e.into_inner());
            let since = match observed.as_ref() {
                Some((r, at)) if *r == record => *at,
                _ => {
                    *observed = Some((record, Instant::now()));
                    return Ok(Try::NotHeld);
                }
            };
            if since.elapsed() < held_for {
                return Ok(Try::NotHeld);
            }
            tracing::info!(lease = %self.name, previous = %holder, "the Lease expired; taking over");
        }
        if !ours {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = Some(seconds);
        spec.renew_time = Some(now);
        // `lease` carries the resourceVersion read above: a concurrent writer makes this 409.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                if !ours {
                    tracing::info!(lease = %self.name, identity = %self.identity, "Lease acquired");
                }
                Ok(Try::Held)
            }
            Err(e) if is_conflict(&e) || is_not_found(&e) => Ok(Try::NotHeld),
            Err(e) => Err(e),
        }
    }
}

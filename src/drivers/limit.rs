//! `LimitedDriver`: a [`StorageDriver`] wrapper that bounds the calls running on one array at
//! once (`concurrencyLimit`). Calls beyond the limit wait in a FIFO semaphore queue; the
//! wrapper counts calls queued and running (the placement policy orders backends by them),
//! records each call's duration (`storch_driver_call_seconds{backend, call, outcome}`) and
//! its wait for a permit (`storch_backend_queue_seconds`). The free bytes per pool are not
//! kept here: the backend's actor records what a discovery found (`BackendObserved`) and the
//! projection adjusts it by the volumes created, resized and deleted since.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use tokio::sync::Semaphore;
use tracing::Instrument;

use super::{
    CloneRequest, CreateRequest, Discovery, DriverError, DriverResult, HostAccess, PlannedVolume,
    PublishContext, SizeLimits, SnapshotInfo, StorageDriver, VolumeInfo,
};
use crate::model::AccessInfo;

/// Concurrent driver calls per backend, unless its config says `concurrencyLimit`.
pub const DEFAULT_LIMIT: usize = 32;

/// The most concurrent driver calls a backend config may ask for.
const MAX_LIMIT: u64 = 10_000;

/// The backend config's `concurrencyLimit` (a storch extension): how many driver calls may run
/// on the array at once; the rest queue.
pub fn concurrency_limit(doc: &serde_json::Value) -> Result<usize, String> {
    match doc
        .as_object()
        .and_then(|obj| super::config::field(obj, "concurrencyLimit"))
    {
        None | Some(serde_json::Value::Null) => Ok(DEFAULT_LIMIT),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .map(|n| n as usize)
            .ok_or_else(|| {
                format!(
                    "invalid value for concurrencyLimit: expected an integer from 1 to {MAX_LIMIT}"
                )
            }),
    }
}

/// A driver whose calls run at most `limit` at once.
#[derive(Debug)]
pub struct LimitedDriver {
    inner: Arc<dyn StorageDriver>,
    /// The backend name, for metrics and spans.
    backend: String,
    permits: Semaphore,
    limit: usize,
    queued: AtomicUsize,
    in_flight: AtomicUsize,
}

impl LimitedDriver {
    pub fn new(backend: &str, inner: Arc<dyn StorageDriver>, limit: usize) -> LimitedDriver {
        let limit = limit.max(1);
        LimitedDriver {
            inner,
            backend: backend.to_string(),
            permits: Semaphore::new(limit),
            limit,
            queued: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// Calls allowed at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Calls waiting for a permit.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Calls running.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Runs `call` (named `kind`) once a permit is free, counting and timing it.
    async fn run<T, F>(&self, kind: &'static str, call: F) -> DriverResult<T>
    where
        F: Future<Output = DriverResult<T>>,
    {
        let queued = Counted::new(&self.queued);
        let queued_at = std::time::Instant::now();
        let permit = self.permits.acquire().await;
        drop(queued);
        metrics::histogram!("storch_backend_queue_seconds")
            .record(queued_at.elapsed().as_secs_f64());
        let _permit = permit.map_err(|_| DriverError::Unavailable("backend stopped".into()))?;
        let running = Counted::new(&self.in_flight);
        let started = std::time::Instant::now();
        let backend = &self.backend;
        let span = tracing::debug_span!("driver", %backend, call = kind);
        let out = call.instrument(span).await;
        drop(running);
        let outcome = if out.is_ok() { "ok" } else { "error" };
        metrics::histogram!("storch_driver_call_seconds", "backend" => backend.clone(),
            "call" => kind, "outcome" => outcome)
        .record(started.elapsed().as_secs_f64());
        if let Err(e) = &out {
            tracing::debug!(%backend, call = kind, error = %e, "driver call failed");
        }
        out
    }
}

/// One call counted in a counter while it lives (a caller that gives up on a call, dropping
/// it, is uncounted too).
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(counter: &'a AtomicUsize) -> Counted<'a> {
        counter.fetch_add(1, Ordering::Relaxed);
        Counted(counter)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl StorageDriver for LimitedDriver {
    fn driver_name(&self) -> &'static str {
        self.inner.driver_name()
    }

    fn external_config(&self) -> serde_json::Value {
        self.inner.external_config()
    }

    fn internal_name(&self, volume_name: &str) -> String {
        self.inner.internal_name(volume_name)
    }

    fn size_limits(&self) -> SizeLimits {
        self.inner.size_limits()
    }

    async fn discover(&self) -> DriverResult<Discovery> {
        self.run("discover", self.inner.discover()).await
    }

    async fn create(&self, req: &CreateRequest) -> DriverResult<VolumeInfo> {
        self.run("create", self.inner.create(req)).await
    }

    async fn clone_volume(&self, req: &CloneRequest) -> DriverResult<VolumeInfo> {
        self.run("clone", self.inner.clone_volume(req)).await
    }

    async fn get(&self, internal_name: &str) -> DriverResult<Option<VolumeInfo>> {
        self.run("get", self.inner.get(internal_name)).await
    }

    async fn adopt(&self, planned: &PlannedVolume) -> DriverResult<Option<VolumeInfo>> {
        self.run("adopt", self.inner.adopt(planned)).await
    }

    async fn destroy(&self, internal_name: &str) -> DriverResult<()> {
        self.run("destroy", self.inner.destroy(internal_name)).await
    }

    async fn resize(&self, internal_name: &str, size_bytes: u64) -> DriverResult<()> {
        self.run("resize", self.inner.resize(internal_name, size_bytes))
            .await
    }

    async fn create_snapshot(
        &self,
        internal_name: &str,
        snapshot: &str,
    ) -> DriverResult<SnapshotInfo> {
        let call = self.inner.create_snapshot(internal_name, snapshot);
        self.run("create_snapshot", call).await
    }

    async fn list_snapshots(&self, internal_name: &str) -> DriverResult<Vec<SnapshotInfo>> {
        let call = self.inner.list_snapshots(internal_name);
        self.run("list_snapshots", call).await
    }

    async fn delete_snapshot(&self, internal_name: &str, snapshot: &str) -> DriverResult<()> {
        let call = self.inner.delete_snapshot(internal_name, snapshot);
        self.run("delete_snapshot", call).await
    }

    async fn list_volumes(&self) -> DriverResult<Vec<VolumeInfo>> {
        self.run("list_volumes", self.inner.list_volumes()).await
    }

    async fn access_info(&self, internal_name: &str) -> DriverResult<AccessInfo> {
        self.run("access_info", self.inner.access_info(internal_name))
            .await
    }

    fn needs_publish(&self) -> bool {
        self.inner.needs_publish()
    }

    async fn publish(
        &self,
        internal_name: &str,
        host: &HostAccess,
    ) -> DriverResult<PublishContext> {
        self.run("publish", self.inner.publish(internal_name, host))
            .await
    }

    async fn unpublish(&self, internal_name: &str, host: &HostAccess) -> DriverResult<()> {
        self.run("unpublish", self.inner.unpublish(internal_name, host))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_limit_reads_the_config() {
        let doc = |v: serde_json::Value| serde_json::json!({ "concurrencyLimit": v });
        assert_eq!(concurrency_limit(&serde_json::json!({})), Ok(DEFAULT_LIMIT));
        assert_eq!(
            concurrency_limit(&doc(serde_json::Value::Null)),
            Ok(DEFAULT_LIMIT)
        );
        assert_eq!(concurrency_limit(&doc(4.into())), Ok(4));
        assert!(concurrency_limit(&doc(0.into())).is_err());
        assert!(concurrency_limit(&doc("8".into())).is_err());
        assert!(concurrency_limit(&doc(10_001.into())).is_err());
    }

    const GIB: u64 = 1 << 30;

    fn fake(latency: &str) -> Arc<dyn StorageDriver> {
        let doc = serde_json::json!({
            "version": 1,
            "storageDriverName": "fake",
            "instanceName": "limit",
            "protocol": "file",
            "latency": latency,
            "pools": {"p1": {"attributes": {}, "sizeBytes": 10 * GIB}},
        });
        crate::drivers::build_driver(&doc).unwrap().driver
    }

    fn create(name: &str) -> CreateRequest {
        CreateRequest {
            internal_name: name.into(),
            pool: "p1".into(),
            size_bytes: GIB,
            config: Default::default(),
            requests: Default::default(),
        }
    }

    #[tokio::test]
    async fn calls_beyond_the_limit_queue_and_are_counted() {
        // The array never answers within the test: the first call holds the only permit.
        let d = Arc::new(LimitedDriver::new("b", fake("1h"), 1));
        let calls: Vec<_> = ["trident-a", "trident-b"]
            .into_iter()
            .map(|name| {
                let d = d.clone();
                tokio::spawn(async move { d.create(&create(name)).await })
            })
            .collect();
        while !(d.in_flight() == 1 && d.queued() == 1) {
            tokio::task::yield_now().await;
        }
        // Callers that give up are no longer counted.
        for call in calls {
            call.abort();
            assert!(call.await.unwrap_err().is_cancelled());
        }
        assert_eq!((d.in_flight(), d.queued()), (0, 0));
    }
}

//! A `metrics` recorder for benchmarks: every histogram the core records goes into an HDR
//! histogram (microseconds), every counter into an atomic, keyed by metric name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use hdrhistogram::Histogram;
use metrics::{Counter, Gauge, Key, KeyName, Metadata, SharedString, Unit};

/// One histogram, in microseconds.
pub struct Hist(Mutex<Histogram<u64>>);

impl Hist {
    fn new() -> Hist {
        Hist(Mutex::new(super::micros_histogram()))
    }

    /// A copy of the data so far.
    pub fn snapshot(&self) -> Histogram<u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl metrics::HistogramFn for Hist {
    fn record(&self, seconds: f64) {
        let micros = (seconds * 1e6).max(0.0) as u64;
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .saturating_record(micros);
    }
}

struct Count(AtomicU64);

impl metrics::CounterFn for Count {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::Relaxed);
    }

    fn absolute(&self, value: u64) {
        self.0.fetch_max(value, Ordering::Relaxed);
    }
}

/// The benchmark recorder (one per process).
#[derive(Default)]
pub struct BenchRecorder {
    histograms: Mutex<HashMap<String, Arc<Hist>>>,
    counters: Mutex<HashMap<String, Arc<Count>>>,
}

impl BenchRecorder {
    /// Installs the recorder as the process's global one, once. `None` when another recorder
    /// is already installed (then the run reports no time split).
    pub fn global() -> Option<&'static BenchRecorder> {
        static RECORDER: OnceLock<Option<&'static BenchRecorder>> = OnceLock::new();
        *RECORDER.get_or_init(|| {
            let rec: &'static BenchRecorder = Box::leak(Box::default());
            metrics::set_global_recorder(rec).ok().map(|_| rec)
        })
    }

    /// Forgets everything recorded so far (between runs).
    pub fn reset(&self) {
        for h in self
            .histograms
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            h.0.lock().unwrap_or_else(|e| e.into_inner()).reset();
        }
        for c in self
            .counters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            c.0.store(0, Ordering::Relaxed);
        }
    }

    pub fn histogram(&self, name: &str) -> Option<Histogram<u64>> {
        let map = self.histograms.lock().unwrap_or_else(|e| e.into_inner());
        map.get(name).map(|h| h.snapshot())
    }

    pub fn counter(&self, name: &str) -> u64 {
        let map = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        map.get(name)
            .map(|c| c.0.load(Ordering::Relaxed))
            .unwrap_or(0)
    }
}

impl metrics::Recorder for BenchRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut map = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let c = map
            .entry(key.name().to_string())
            .or_insert_with(|| Arc::new(Count(AtomicU64::new(0))))
            .clone();
        Counter::from_arc(c)
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> metrics::Histogram {
        let mut map = self.histograms.lock().unwrap_or_else(|e| e.into_inner());
        let h = map
            .entry(key.name().to_string())
            .or_insert_with(|| Arc::new(Hist::new()))
            .clone();
        metrics::Histogram::from_arc(h)
    }
}

//! Metrics: the process-wide Prometheus recorder, and the `/metrics` text.
//!
//! The core records its histograms and counters through the `metrics` facade
//! (`storch_operation_duration_seconds{operation,outcome}`, `storch_log_append_seconds`,
//! `storch_log_flush_seconds`, `storch_events_appended_total`,
//! `storch_driver_call_seconds{backend,call,outcome}`), and the API adds
//! `storch_http_requests_total` and `storch_http_request_duration_seconds`
//! (`{route,method,status}`). [`install`] puts a Prometheus recorder behind the facade once per
//! process. At scrape time, [`render`] adds gauges read from [`Core::stats`] and
//! [`Core::health`]; they are rendered per scrape (not kept in the recorder), so a deleted
//! backend's series disappear with it. Nothing here carries a secret: labels are object names,
//! states and operation names.

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::actors::Core;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Histogram buckets (seconds) for every `*_seconds` metric.
const SECONDS_BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// How often histogram data is drained into the handle when nobody scrapes.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder as the process's `metrics` recorder, once; later calls
/// return the same handle. `None` when another recorder was installed first (then `/metrics`
/// shows only the scrape-time gauges; a warning is logged).
pub fn install() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let builder = match PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
            {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics buckets refused; using the defaults");
                    PrometheusBuilder::new()
                }
            };
            match builder.install_recorder() {
                Ok(handle) => {
                    let upkeep = handle.clone();
                    let spawned = std::thread::Builder::new()
                        .name("storch-metrics".into())
                        .spawn(move || {
                            loop {
                                std::thread::sleep(UPKEEP_EVERY);
                                upkeep.run_upkeep();
                            }
                        });
                    if let Err(e) = spawned {
                        tracing::warn!(error = %e, "no metrics upkeep thread; scrapes do it");
                    }
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "another metrics recorder is installed; /metrics shows only storch's gauges"
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// The `/metrics` text: the recorder's metrics, then the scrape-time gauges of `core`.
pub fn render(core: &Core) -> String {
    let mut out = match install() {
        Some(handle) => {
            handle.run_upkeep();
            handle.render()
        }
        None => String::new(),
    };
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    render_gauges(core, &mut out);
    out
}

/// A label value in the text format: `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn header(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: u64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// The most pools shown one by one in each pool gauge; the pools after them (by backend and
/// pool name) are summed into one series without labels, so a scrape stays small whatever
/// the number of pools. Backends are bounded where they are added.
pub const MAX_POOL_SERIES: usize = 1000;

/// Backend states always shown (0 when none), so dashboards have every series.
const BACKEND_STATES: [&str; 4] = ["initializing", "online", "offline", "failed"];
/// Volume states always shown.
const VOLUME_STATES: [&str; 4] = ["creating", "online", "deleting", "missing"];

fn render_gauges(core: &Core, out: &mut String) {
    let stats = core.stats();

    header(out, "storch_build_info", "storch's version; always 1.");
    sample(
        out,
        "storch_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );

    header(
        out,
        "storch_ready",
        "1 when the event log is open, replayed and takes writes.",
    );
    sample(out, "storch_ready", &[], u64::from(core.health().ready()));

    header(
        out,
        "storch_log_writable",
        "1 while the event log takes writes; 0 after a failed write or flush (full or failing \
         disk) or when it lacks acknowledged records.",
    );
    sample(
        out,
        "storch_log_writable",
        &[],
        u64::from(core.log_writable()),
    );

    header(out, "storch_backends", "Backends by state.");
    for state in BACKEND_STATES {
        let n = stats.backends_by_state.get(state).copied().unwrap_or(0);
        sample(out, "storch_backends", &[("state", state)], n);
    }
    for (state, n) in &stats.backends_by_state {
        if !BACKEND_STATES.contains(state) {
            sample(out, "storch_backends", &[("state", state)], *n);
        }
    }

    header(out, "storch_volumes", "Volumes by state.");
    for state in VOLUME_STATES {
        let n = stats.volumes_by_state.get(state).copied().unwrap_or(0);
        sample(out, "storch_volumes", &[("state", state)], n);
    }
    for (state, n) in &stats.volumes_by_state {
        if !VOLUME_STATES.contains(state) {
            sample(out, "storch_volumes", &[("state", state)], *n);
        }
    }

    header(
        out,
        "storch_backend_missing_volumes",
        "Volumes of a backend that its array no longer holds (drift reconciliation).",
    );
    for (backend, n) in &stats.missing_by_backend {
        sample(
            out,
            "storch_backend_missing_volumes",
            &[("backend", backend.as_str())],
            *n,
        );
    }

    header(
        out,
        "storch_backend_suspended",
        "1 while an operator has suspended the backend (it takes no new volumes), else 0.",
    );
    for (backend, suspended) in &stats.suspended_by_backend {
        sample(
            out,
            "storch_backend_suspended",
            &[("backend", backend.as_str())],
            u64::from(*suspended),
        );
    }

    let mut pools: Vec<_> = stats.pools.iter().collect();
    pools.sort_by(|a, b| (&a.backend, &a.pool).cmp(&(&b.backend, &b.pool)));
    let folded = pools.len().saturating_sub(MAX_POOL_SERIES);
    let (shown, rest) = pools.split_at(pools.len() - folded);
    type Field = fn(&crate::actors::PoolStats) -> Option<u64>;
    let gauges: [(&str, &str, Field); 3] = [
        (
            "storch_pool_capacity_bytes",
            "A pool's size, as its backend reported it.",
            |p| p.total_bytes,
        ),
        (
            "storch_pool_free_bytes",
            "A pool's free space, as last discovered and adjusted by creates and deletes.",
            |p| p.free_bytes,
        ),
        (
            "storch_pool_used_bytes",
            "Bytes of the volumes storch placed in a pool.",
            |p| Some(p.used_bytes),
        ),
    ];
    for (name, help, field) in gauges {
        header(out, name, help);
        for p in shown {
            if let Some(v) = field(p) {
                let labels = [("backend", p.backend.as_str()), ("pool", p.pool.as_str())];
                sample(out, name, &labels, v);
            }
        }
        if !rest.is_empty() {
            // The pools past the bound, summed in one series without labels.
            let sum = rest.iter().filter_map(|p| field(p)).sum();
            sample(out, name, &[], sum);
        }
    }
    header(
        out,
        "storch_pool_series_folded",
        "Pools past the per-pool series bound, summed in the pool gauges' unlabelled series.",
    );
    sample(out, "storch_pool_series_folded", &[], folded as u64);

    header(
        out,
        "storch_backend_queue_depth",
        "Driver calls waiting for a backend's concurrency permit.",
    );
    for b in &stats.backends {
        let labels = [("backend", b.backend.as_str())];
        sample(out, "storch_backend_queue_depth", &labels, b.queue_depth);
    }
    header(
        out,
        "storch_backend_in_flight",
        "Driver calls running on a backend.",
    );
    for b in &stats.backends {
        let labels = [("backend", b.backend.as_str())];
        sample(out, "storch_backend_in_flight", &labels, b.in_flight);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
        let mut out = String::new();
        sample(&mut out, "m", &[("a", "1"), ("b", "q\"")], 7);
        assert_eq!(out, "m{a=\"1\",b=\"q\\\"\"} 7\n");
        let mut out = String::new();
        sample(&mut out, "m", &[], 0);
        assert_eq!(out, "m 0\n");
    }

    #[test]
    fn install_is_idempotent() {
        let a = install().map(|h| h as *const _);
        let b = install().map(|h| h as *const _);
        assert_eq!(a, b);
    }
}

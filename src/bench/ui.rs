//! `storch bench ui`: the dashboard's page loads against a log of N volumes. The log of
//! `storch bench replay` is served by a real core and the REST server on loopback; each page's
//! requests (the ones its script makes) are timed from the request to the last byte of the
//! answer, round after round, and a page's time is the sum of its requests (the browser sends
//! them at once, so this is an upper bound).

use std::time::Instant;

use serde::Serialize;

use super::{Percentiles, micros_histogram};
use crate::actors::{CoreOptions, CoreRuntime};

#[derive(Debug, Clone, Serialize)]
pub struct UiOptions {
    pub volumes: u64,
    /// Times each request is made.
    pub rounds: u64,
    /// Where the log goes; a temporary directory (removed afterwards) when `None`.
    pub data_dir: Option<std::path::PathBuf>,
}

/// One request of a page.
#[derive(Debug, Clone, Serialize)]
pub struct RequestTiming {
    pub path: String,
    pub bytes: u64,
    pub latency: Percentiles,
}

/// One page: its requests and the sum of their medians and their p99s.
#[derive(Debug, Clone, Serialize)]
pub struct PageTiming {
    pub page: String,
    pub requests: Vec<RequestTiming>,
    pub sum_p50_ms: f64,
    pub sum_p99_ms: f64,
}

/// The result of a run. JSON field names are stable.
#[derive(Debug, Clone, Serialize)]
pub struct UiReport {
    pub options: UiOptions,
    pub events: u64,
    pub build_s: f64,
    pub pages: Vec<PageTiming>,
    /// `GET /storch/v1/log/verify` (the hash chain walked from the first record), loaded
    /// beside the overview and the events page, not before them.
    pub verify: RequestTiming,
}

/// The pages and the requests each makes on load (see `api/ui/assets/app.js`).
fn pages(volume: &str) -> Vec<(&'static str, Vec<String>)> {
    vec![
        (
            "overview",
            vec![
                "/ui/".into(),
                "/ui/app.js".into(),
                "/storch/v1/overview".into(),
            ],
        ),
        (
            "storage classes",
            vec![
                "/storch/v1/storageclasses".into(),
                "/storch/v1/overview".into(),
            ],
        ),
        (
            "volumes (first page, by name)",
            vec!["/storch/v1/volumes".into(), "/storch/v1/overview".into()],
        ),
        (
            "volumes (sorted by size, descending, page 100)",
            vec![
                "/storch/v1/volumes?sort=-size&offset=4950".into(),
                "/storch/v1/overview".into(),
            ],
        ),
        (
            "volumes (name filter)",
            vec![
                "/storch/v1/volumes?name=0004".into(),
                "/storch/v1/overview".into(),
            ],
        ),
        (
            "volumes (sorted by created, newest first)",
            vec![
                "/storch/v1/volumes?sort=-created".into(),
                "/storch/v1/overview".into(),
            ],
        ),
        (
            "volumes (class filter, sorted by class)",
            vec![
                "/storch/v1/volumes?class=bench&sort=class".into(),
                "/storch/v1/overview".into(),
            ],
        ),
        (
            "one volume",
            vec![
                format!("/storch/v1/volumes/{volume}"),
                "/storch/v1/overview".into(),
            ],
        ),
        ("events", vec!["/storch/v1/overview".into()]),
        (
            "events (filtered by one volume)",
            vec![
                format!("/trident/v1/events?object=volume/{volume}"),
                "/storch/v1/overview".into(),
            ],
        ),
        (
            "throughput",
            vec!["/metrics".into(), "/storch/v1/overview".into()],
        ),
    ]
}

pub async fn run_ui(opts: UiOptions) -> Result<UiReport, String> {
    if opts.volumes == 0 || opts.rounds == 0 {
        return Err("--volumes and --rounds must be at least 1".into());
    }
    let given = opts.data_dir.clone();
    super::in_data_dir(given, |dir| async move { run_in(&dir, opts).await }).await
}

async fn run_in(dir: &std::path::Path, opts: UiOptions) -> Result<UiReport, String> {
    let started = Instant::now();
    let events = super::replay::build(dir, opts.volumes).await?;
    let build_s = started.elapsed().as_secs_f64();
    let rt = CoreRuntime::start(CoreOptions {
        data_dir: dir.to_path_buf(),
        ..CoreOptions::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    let core = rt.core();
    core.wait_ready().await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(crate::api::serve(listener, core.clone(), async move {
        let _ = stopped.await;
    }));
    let http = crate::net::client_builder()
        .build()
        .map_err(|e| e.to_string())?;
    // The volume in the middle of the log: its history is read from the whole log.
    let volume = format!("pvc-{:08}", opts.volumes / 2);
    let result = async {
        let mut out = Vec::new();
        for (page, paths) in pages(&volume) {
            let mut requests = Vec::new();
            for path in paths {
                requests.push(time(&http, &base, &path, opts.rounds).await?);
            }
            let ms = |f: fn(&Percentiles) -> u64| {
                requests.iter().map(|r| f(&r.latency)).sum::<u64>() as f64 / 1000.0
            };
            out.push(PageTiming {
                page: page.to_string(),
                sum_p50_ms: ms(|p| p.p50_us),
                sum_p99_ms: ms(|p| p.p99_us),
                requests,
            });
        }
        let verify = time(&http, &base, "/storch/v1/log/verify", opts.rounds.min(5)).await?;
        Ok::<_, String>((out, verify))
    }
    .await;
    let _ = stop.send(());
    let _ = serving.await;
    rt.shutdown().await;
    let (pages, verify) = result?;
    Ok(UiReport {
        options: opts,
        events,
        build_s,
        pages,
        verify,
    })
}

/// `rounds` GETs of `path`, each timed to the last byte; the first one warms up and is not
/// counted.
async fn time(
    http: &crate::net::Client,
    base: &str,
    path: &str,
    rounds: u64,
) -> Result<RequestTiming, String> {
    let mut hist = micros_histogram();
    let mut bytes = 0;
    for round in 0..=rounds {
        let started = Instant::now();
        let resp = http
            .get(format!("{base}{path}"))
            .send()
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| format!("GET {path}: {e}"))?;
        let elapsed = started.elapsed();
        if !status.is_success() {
            return Err(format!(
                "GET {path}: {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        bytes = body.len() as u64;
        if round > 0 {
            hist.saturating_record(elapsed.as_micros() as u64);
        }
    }
    Ok(RequestTiming {
        path: path.to_string(),
        bytes,
        latency: Percentiles::of(&hist),
    })
}

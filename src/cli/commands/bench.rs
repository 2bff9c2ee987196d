//! `storch bench provision|replay|ui`: offline benchmarks (see `crate::bench`), printed as a table
//! or, with `--json`, as the stable JSON report.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::bench::{
    Mix, ProvisionOptions, ProvisionReport, ReplayOptions, ReplayReport, UiOptions, UiReport,
};
use crate::cli::error::{CliError, CliResult};
use crate::log::Durability;

#[derive(Debug, Clone, Subcommand)]
pub enum BenchKind {
    /// Provision volumes through the whole pipeline against fake backends.
    Provision(Box<ProvisionArgs>),
    /// Build a log of N volumes' lifecycles and measure cold replay.
    Replay(BenchReplayArgs),
    /// Serve a log of N volumes and time the dashboard's page loads (its REST reads).
    Ui(BenchUiArgs),
}

#[derive(Debug, Clone, Args)]
pub struct BenchUiArgs {
    /// Volumes in the log.
    #[arg(long, default_value_t = 100_000)]
    pub volumes: u64,
    /// Times each request is made.
    #[arg(long, default_value_t = 20)]
    pub rounds: u64,
    /// Where the log goes (default: a temporary directory, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print the JSON report instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ProvisionArgs {
    /// Volumes to create.
    #[arg(long, default_value_t = 10_000)]
    pub volumes: u64,
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Fake backends.
    #[arg(long, default_value_t = 4)]
    pub backends: usize,
    /// Pools per backend.
    #[arg(long, default_value_t = 4)]
    pub pools: usize,
    /// Concurrent driver calls per backend.
    #[arg(long, default_value_t = 32)]
    pub backend_limit: usize,
    /// Backend latency: 0ms, 50ms, lognormal:200ms.
    #[arg(long, default_value = "0ms")]
    pub latency: String,
    /// Probability that a backend create fails.
    #[arg(long, default_value_t = 0.0)]
    pub fail_rate: f64,
    /// create, churn (create + delete) or clone.
    #[arg(long, default_value = "create")]
    pub mix: Mix,
    /// flush (ack after fsync), write (ack after the write), memory (a temporary log).
    #[arg(long, default_value = "flush", value_parser = parse_durability)]
    pub durability: Durability,
    /// Where the log goes (default: a temporary directory, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Go through the REST API on 127.0.0.1 instead of calling the core in-process.
    #[arg(long)]
    pub via_rest: bool,
    /// Provision on a running array instead of fake backends: ontap=HOST:PORT (e.g.
    /// `storch-sim ontap --tls`), solidfire=MVIP:PORT (`storch-sim solidfire --tls`) or
    /// eseries=PROXY:PORT (`storch-sim eseries --tls`), or
    /// FAMILY=HOST:PORT,HOST:PORT,… to spread the backends over several arrays (credentials
    /// from STORCH_BENCH_USERNAME/STORCH_BENCH_PASSWORD, default the simulator's; ONTAP's API
    /// from STORCH_BENCH_ONTAP_API=rest|zapi|auto). The volumes the run made are removed from
    /// the arrays afterwards.
    #[arg(long, value_name = "FAMILY=ADDR")]
    pub target: Option<crate::bench::ArrayTarget>,
    /// Also write the same records to this etcd (http://HOST:PORT, its JSON gateway), one
    /// transaction per object change, and print storch's ratio to it.
    #[arg(long, value_name = "ENDPOINT")]
    pub etcd: Option<String>,
    /// Run storch itself with its log replicated through this etcd (as the leader of a fresh
    /// prefix, removed afterwards): every acknowledged event is then in etcd too.
    #[arg(long, value_name = "ENDPOINT")]
    pub replicate_etcd: Option<String>,
    /// Print the JSON report instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct BenchReplayArgs {
    /// Volumes in the log.
    #[arg(long, default_value_t = 100_000)]
    pub volumes: u64,
    /// Where the log goes (default: a temporary directory, removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print the JSON report instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn parse_durability(s: &str) -> Result<Durability, String> {
    match s {
        "flush" => Ok(Durability::Flush),
        "write" => Ok(Durability::Write),
        "memory" => Ok(Durability::Memory),
        other => Err(format!("{other:?} is not flush, write or memory")),
    }
}

pub fn run(kind: BenchKind) -> CliResult<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Settings(format!("could not start a runtime: {e}")))?;
    let text = match kind {
        BenchKind::Provision(a) => {
            let a = *a;
            let json = a.json;
            let opts = ProvisionOptions {
                volumes: a.volumes,
                clients: a.clients,
                backends: a.backends,
                pools: a.pools,
                backend_limit: a.backend_limit,
                latency: a.latency,
                fail_rate: a.fail_rate,
                mix: a.mix,
                durability: a.durability,
                data_dir: a.data_dir,
                via_rest: a.via_rest,
                target: a.target,
                etcd: a.etcd,
                replicate_etcd: a.replicate_etcd,
            };
            let progress = std::io::stderr().is_terminal();
            let report = runtime
                .block_on(crate::bench::run_provision(opts, move |done, total| {
                    if progress {
                        eprint!("\r  {done}/{total} volumes");
                        let _ = std::io::stderr().flush();
                    }
                }))
                .map_err(CliError::Settings)?;
            if progress {
                eprintln!();
            }
            if json {
                to_json(&report)?
            } else {
                provision_table(&report)
            }
        }
        BenchKind::Replay(a) => {
            let report = runtime
                .block_on(crate::bench::run_replay(ReplayOptions {
                    volumes: a.volumes,
                    data_dir: a.data_dir,
                }))
                .map_err(CliError::Settings)?;
            if a.json {
                to_json(&report)?
            } else {
                replay_table(&report)
            }
        }
        BenchKind::Ui(a) => {
            let report = runtime
                .block_on(crate::bench::run_ui(UiOptions {
                    volumes: a.volumes,
                    rounds: a.rounds,
                    data_dir: a.data_dir,
                }))
                .map_err(CliError::Settings)?;
            if a.json {
                to_json(&report)?
            } else {
                ui_table(&report)
            }
        }
    };
    crate::cli::output::emit(&mut std::io::stdout().lock(), &text).map(|_| ())
}

fn to_json<T: serde::Serialize>(report: &T) -> CliResult<String> {
    serde_json::to_string_pretty(report)
        .map(|s| s + "\n")
        .map_err(|e| CliError::Settings(e.to_string()))
}

fn us(p: &Option<crate::bench::Percentiles>) -> String {
    match p {
        Some(p) => format!(
            "p50 {} µs, p99 {} µs, p999 {} µs (n={})",
            p.p50_us, p.p99_us, p.p999_us, p.count
        ),
        None => "not measured".into(),
    }
}

fn provision_table(r: &ProvisionReport) -> String {
    let o = &r.options;
    let b = &r.baseline;
    let mut out = format!(
        "storch bench provision: {} volumes, {} clients, {} backends × {} pools, limit {}, latency {}, fail rate {}, mix {:?}\n\n",
        o.volumes, o.clients, o.backends, o.pools, o.backend_limit, o.latency, o.fail_rate, o.mix
    );
    let rows = [
        (
            "operations",
            format!("{} ({} failed)", r.operations, r.failed),
        ),
        ("elapsed", format!("{:.3} s", r.elapsed_s)),
        ("throughput", format!("{:.0} ops/s", r.ops_per_sec)),
        (
            "latency",
            format!(
                "p50 {} µs, p99 {} µs, p999 {} µs, max {} µs",
                r.latency.p50_us, r.latency.p99_us, r.latency.p999_us, r.latency.max_us
            ),
        ),
        ("  queueing", us(&r.split.queueing)),
        ("  log append", us(&r.split.append)),
        ("  backend", us(&r.split.backend)),
        ("  projection", us(&r.split.projection)),
        ("events per op", format!("{:.2}", r.events_per_op)),
        ("flushes per op", format!("{:.3}", r.flushes_per_op)),
        (
            "peak RSS",
            r.peak_rss_bytes
                .map(crate::model::format_size)
                .unwrap_or_else(|| "unknown".into()),
        ),
        (
            "log bytes per volume",
            format!("{:.0}", r.log_bytes_per_volume),
        ),
        (
            "pool spread",
            format!(
                "chi-square {:.1} with {} degrees of freedom over {} pools",
                r.distribution.chi_square,
                r.distribution.degrees_of_freedom,
                r.distribution.pools.len()
            ),
        ),
        ("fsync (this disk)", format!("p50 {} µs", b.fsync_p50_us)),
        (
            "raw sled group commit",
            format!(
                "{:.0} records/s ({} B records, {} per flush)",
                b.raw_sled_records_per_sec, b.raw_record_bytes, b.raw_batch
            ),
        ),
        (
            "storch events",
            format!(
                "{:.0} events/s = {:.0}% of raw",
                b.storch_events_per_sec,
                b.ratio_to_raw * 100.0
            ),
        ),
    ];
    for (k, v) in rows {
        out.push_str(&format!("{k:<24}{v}\n"));
    }
    if let Some(r) = &b.replicated {
        out.push_str(&format!(
            "{:<24}{:.0} events/s replicated through etcd at {} ({:.1} events per transaction)\n",
            "etcd replication", r.events_per_sec, r.endpoint, r.events_per_txn
        ));
    }
    if let (Some(e), Some(ratio)) = (&b.etcd, b.ratio_to_etcd) {
        out.push_str(&format!(
            "{:<24}{:.0} records/s (one txn each) = storch at {:.1}× etcd\n",
            "etcd baseline", e.records_per_sec, ratio
        ));
    }
    if let Some(n) = r.removed_from_arrays {
        out.push_str(&format!(
            "{:<24}{n} volumes the run made, after it was measured\n",
            "removed from the arrays"
        ));
    }
    if let (Some(bound), Some(share)) = (b.littles_law_ops_per_sec, b.share_of_bound) {
        out.push_str(&format!(
            "{:<24}{bound:.0} ops/s (B·L/latency); storch reached {:.0}%\n",
            "Little's law bound",
            share * 100.0
        ));
    }
    out
}

fn replay_table(r: &ReplayReport) -> String {
    let bytes = |b: Option<f64>| {
        b.map(|b| format!("{b:.0} B"))
            .unwrap_or_else(|| "unknown".into())
    };
    let rows = [
        ("volumes", r.options.volumes.to_string()),
        ("events", r.events.to_string()),
        ("log size", crate::model::format_size(r.log_bytes)),
        (
            "full replay",
            format!(
                "{:.3} s ({:.0} events/s)",
                r.full_replay_s, r.full_replay_events_per_sec
            ),
        ),
        (
            "ready, no checkpoint",
            format!("{:.3} s", r.ready_without_checkpoint_s),
        ),
        (
            "ready, from checkpoint",
            format!("{:.3} s", r.ready_with_checkpoint_s),
        ),
        (
            "checkpoint size",
            crate::model::format_size(r.checkpoint_bytes),
        ),
        (
            "projection per volume",
            bytes(r.projection_bytes_per_volume),
        ),
        (
            "RSS growth per volume",
            format!(
                "{} (replay, with the log's read cache)",
                bytes(r.replay_rss_bytes_per_volume)
            ),
        ),
    ];
    let mut out = String::from("storch bench replay\n\n");
    for (k, v) in rows {
        out.push_str(&format!("{k:<24}{v}\n"));
    }
    out
}

fn ui_table(r: &UiReport) -> String {
    let mut out = format!(
        "storch bench ui: {} volumes ({} events, built in {:.1} s), {} rounds per request\n\n",
        r.options.volumes, r.events, r.build_s, r.options.rounds
    );
    let ms = |us: u64| format!("{:.1} ms", us as f64 / 1000.0);
    for page in &r.pages {
        out.push_str(&format!(
            "{}: p50 {:.1} ms, p99 {:.1} ms (sum of its requests)\n",
            page.page, page.sum_p50_ms, page.sum_p99_ms
        ));
        for req in &page.requests {
            out.push_str(&format!(
                "  {:<60} p50 {:>9}  p99 {:>9}  {} bytes\n",
                req.path,
                ms(req.latency.p50_us),
                ms(req.latency.p99_us),
                req.bytes
            ));
        }
    }
    out.push_str(&format!(
        "\nhash-chain verification (loaded beside the overview and events pages): p50 {}, p99 {}\n",
        ms(r.verify.latency.p50_us),
        ms(r.verify.latency.p99_us)
    ));
    out
}

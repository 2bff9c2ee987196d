//! Process-wide tracing setup: a `RUST_LOG`-style filter (default `info`) and a text or JSON
//! formatter, writing to stderr (stdout is kept for the one "listening" line).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, thiserror::Error)]
#[error("could not install the log subscriber: {0}")]
pub struct LoggingError(String);

/// Installs the global subscriber. Invalid `RUST_LOG` directives are skipped (the rest apply).
pub fn init(format: LogFormat) -> Result<(), LoggingError> {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env_lossy();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
    result.map_err(|e| LoggingError(e.to_string()))
}

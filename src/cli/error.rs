//! Why a client or offline command failed. The binary prints `Error: <message>` on stderr and
//! exits 1 for every variant.

use crate::net::StatusCode;

/// A failed REST call, before the command says what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum RestError {
    /// No HTTP exchange happened: refused, unresolvable, TLS handshake failed, timed out.
    #[error("cannot reach the storch server at {server}: {detail}")]
    Unreachable { server: String, detail: String },
    /// The server answered with an unexpected status; `message` is its `error` field (or the
    /// start of the body when there is none). Reads like tridentctl: `msg (404 Not Found)`.
    #[error("{message} ({status})")]
    Status { status: StatusCode, message: String },
    /// The server answered the expected status with a body that is not what the API returns.
    #[error("unexpected response from {url}: {detail}")]
    BadResponse { url: String, detail: String },
}

impl RestError {
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            RestError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Arguments that clap accepts but that do not make sense together, tridentctl's wording.
    #[error("{0}")]
    Usage(String),
    /// A REST call failed; `what` says what the command was doing (`could not get backend x`).
    /// An unreachable server is reported on its own (which call failed does not matter then).
    #[error("{}", rest_message(.what, .source))]
    Rest { what: String, source: RestError },
    /// A local file or stdin could not be read or parsed.
    #[error("{0}")]
    Input(String),
    /// Bad client settings (server address, CA file).
    #[error("{0}")]
    Settings(String),
    /// Anything else that went wrong, said in full.
    #[error("{0}")]
    Failed(String),
    /// An offline command could not open or read the data dir.
    #[error("{0}")]
    Offline(String),
    /// A record of the event log fails its hash, the chain, or decoding.
    #[error("the event log in {dir} is corrupt at sequence {seq}: {reason}")]
    Corrupt {
        dir: String,
        seq: u64,
        reason: String,
    },
    /// Writing the output failed (other than the reader going away, which is not an error).
    #[error("could not write the output: {0}")]
    Output(std::io::Error),
}

fn rest_message(what: &str, source: &RestError) -> String {
    match source {
        RestError::Unreachable { .. } => source.to_string(),
        _ => format!("{what}: {source}"),
    }
}

impl CliError {
    /// `what: source`, e.g. `could not get backend x: backend x was not found (404 Not Found)`.
    pub fn rest(what: impl Into<String>, source: RestError) -> CliError {
        CliError::Rest {
            what: what.into(),
            source,
        }
    }
}

/// `Result` of the client commands.
pub type CliResult<T> = Result<T, CliError>;

//! Runs every command but `serve`: the REST verbs on a small tokio runtime, the offline audits
//! and shell completion without one.

use clap::CommandFactory;
use serde_json::Value;

use super::{audit, drift, events, explain, objects, version};
use crate::cli::args::{Cli, Command};
use crate::cli::client::{ClientSettings, RestClient};
use crate::cli::client_args::{ClientArgs, EventsArgs, OutputFormat};
use crate::cli::error::{CliError, CliResult};
use crate::cli::output::{Kind, emit};

/// What a REST verb works with.
pub struct Ctx {
    pub rest: RestClient,
    pub format: OutputFormat,
}

impl Ctx {
    /// Prints objects of one kind in the chosen format.
    pub fn print(&self, kind: Kind, items: &[Value]) -> CliResult<()> {
        self.write(&kind.render(self.format, items)?)
    }

    /// Writes text to stdout (a closed pipe is not an error).
    pub fn write(&self, text: &str) -> CliResult<()> {
        emit(&mut std::io::stdout().lock(), text).map(|_| ())
    }
}

/// Runs a command other than `serve`.
///
/// # Panics
///
/// On `Command::Serve`, which the binary runs itself.
pub fn run(args: ClientArgs, command: Command) -> CliResult<()> {
    let format = args.output;
    match command {
        Command::Serve(_) => panic!("`serve` is not a client command"),
        Command::Completion(c) => {
            let mut script = Vec::new();
            clap_complete::generate(c.shell, &mut Cli::command(), "storch", &mut script);
            emit(
                &mut std::io::stdout().lock(),
                &String::from_utf8_lossy(&script),
            )
            .map(|_| ())
        }
        Command::Replay(r) => audit::replay(&r, format),
        Command::Bench(kind) => super::bench::run(kind),
        Command::Csi(kind) => super::csi::run(kind),
        Command::Install(a) => super::install::install(&args, *a),
        Command::Uninstall(a) => super::install::uninstall(a),
        Command::Logs(a) => super::install::logs(&args, a),
        Command::Events(EventsArgs {
            offline: Some(offline),
            ..
        }) => audit::run(offline),
        Command::Version(v) if v.client => version::client_only(format),
        rest => {
            let ctx = Ctx {
                rest: RestClient::new(&ClientSettings::from_args(&args)?)?,
                format,
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| CliError::Settings(format!("could not start a runtime: {e}")))?;
            runtime.block_on(run_rest(&ctx, rest))
        }
    }
}

async fn run_rest(ctx: &Ctx, command: Command) -> CliResult<()> {
    match command {
        Command::Create(kind) => objects::create(ctx, kind).await,
        Command::Update(kind) => objects::update(ctx, kind).await,
        Command::Get(kind) => objects::get(ctx, kind).await,
        Command::Delete(kind) => objects::delete(ctx, kind).await,
        Command::Resize(kind) => objects::resize(ctx, kind).await,
        Command::Import(kind) => drift::import(ctx, kind).await,
        Command::Reconcile(kind) => drift::reconcile(ctx, kind).await,
        Command::Explain(kind) => explain::run(ctx, kind).await,
        Command::Events(args) => events::run(ctx, args).await,
        Command::Version(_) => version::run(ctx).await,
        Command::Serve(_)
        | Command::Replay(_)
        | Command::Completion(_)
        | Command::Bench(_)
        | Command::Csi(_)
        | Command::Install(_)
        | Command::Uninstall(_)
        | Command::Logs(_) => {
            unreachable!("run() handles these without a server")
        }
    }
}

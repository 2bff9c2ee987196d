//! The `storch` binary: parse, validate, run, and turn the outcome into an exit code.
//!
//! Every error is one `Error: …` on stderr. Exit 2: the command line could not be parsed (an
//! unknown flag, a missing or malformed argument; `serve`'s settings); exit 1: the command ran
//! and failed or refused (tridentctl's exit code, e.g. `volume name not specified`).

use std::process::ExitCode;

use anyhow::Context;
use clap::FromArgMatches;
use storch::cli::{Cli, Command, SettingsError, commands, logging};

/// The exit code of a wrong command line.
const USAGE: u8 = 2;

fn main() -> ExitCode {
    // First thing: ring is the only rustls crypto provider built in.
    storch::net::install_crypto_provider();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        Command::Serve(_) => match run(cli) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("Error: {e:#}");
                if e.downcast_ref::<SettingsError>().is_some() {
                    ExitCode::from(USAGE)
                } else {
                    ExitCode::FAILURE
                }
            }
        },
        // Client verbs and offline audits: tridentctl's `Error: …`.
        command => match commands::client::run(cli.client, command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("Error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// Parses the command line: help and version print and exit 0; a usage error prints clap's
/// message (as `Error: …`, with the usage line) and exits 2.
fn parse() -> Result<Cli, ExitCode> {
    let matches = match storch::cli::command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return Err(clap_exit(e)),
    };
    if let Err(e) = storch::cli::refuse_client_options_on_servers(&matches) {
        return Err(clap_exit(e));
    }
    Cli::from_arg_matches(&matches).map_err(clap_exit)
}

fn clap_exit(e: clap::Error) -> ExitCode {
    if !e.use_stderr() {
        // --help, --version.
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    eprint!("Error: {text}");
    ExitCode::from(USAGE)
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Command::Serve(args) = cli.command {
        let settings = args.into_settings()?;
        logging::init(settings.log_format).context("could not set up logging")?;
        commands::serve::run(settings)?;
    }
    Ok(())
}

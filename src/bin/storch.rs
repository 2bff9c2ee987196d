//! The `storch` binary: parse, validate, run, and turn the outcome into an exit code.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use storch::cli::{Cli, Command, SettingsError, commands, logging};

fn main() -> ExitCode {
    // First thing: ring is the only rustls crypto provider built in.
    storch::net::install_crypto_provider();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(_) => match run(cli) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("storch: error: {e:#}");
                if e.downcast_ref::<SettingsError>().is_some() {
                    ExitCode::from(2)
                } else {
                    ExitCode::FAILURE
                }
            }
        },
        // Client verbs and offline audits: tridentctl's `Error: …` and exit code 1.
        command => match commands::client::run(cli.client, command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("Error: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if let Command::Serve(args) = cli.command {
        let settings = args.into_settings()?;
        logging::init(settings.log_format).context("could not set up logging")?;
        commands::serve::run(settings)?;
    }
    Ok(())
}

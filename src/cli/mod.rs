//! The `storch` command line: clap arguments, validated settings, and one module per command.
//!
//! Flow (ripgrep's low-level/high-level split): [`args`] parses raw arguments, [`settings`]
//! turns them into checked settings before any work starts, and [`commands`] runs them.
//! `serve` runs the server; the client verbs (`get backend`, `create volume`, …) talk to a
//! running server over REST ([`client`]); the offline audits (`events verify`, `events
//! export`, `replay`) open a stopped server's event log through [`crate::log`] and refuse one a
//! server holds.

pub mod archive;
pub mod args;
pub mod client;
pub mod client_args;
pub mod commands;
pub mod error;
pub mod logging;
pub mod output;
pub mod settings;

pub use args::{Cli, Command, ServeArgs};
pub use client_args::{ClientArgs, OutputFormat};
pub use error::CliError;
pub use logging::LogFormat;
pub use settings::{ServeSettings, SettingsError};

/// The ids of the client options (`ClientArgs`): global, so a client verb takes them before or
/// after itself; the server commands take none of them.
const CLIENT_OPTION_IDS: [&str; 5] = ["server", "output", "token", "ca_cert", "debug"];

/// Commands that run a server rather than call one.
const SERVER_COMMANDS: [&str; 2] = ["serve", "csi"];

/// The `storch` command line: [`Cli`]'s, with the client options hidden from the help of the
/// server commands (`serve`, `csi node`), where they do nothing.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    fn hide(c: clap::Command) -> clap::Command {
        // In place: on a built command, `mut_arg` would reorder the arguments under their
        // lookup keys.
        let mut c = c.mut_args(|a| {
            if CLIENT_OPTION_IDS.contains(&a.get_id().as_str()) {
                a.hide(true)
            } else {
                a
            }
        });
        let subs: Vec<String> = c
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        for sub in subs {
            c = c.mut_subcommand(sub, hide);
        }
        c
    }
    let mut cmd = Cli::command();
    // Building propagates the global client options into every subcommand first.
    cmd.build();
    for sub in SERVER_COMMANDS {
        cmd = cmd.mut_subcommand(sub, hide);
    }
    cmd
}

/// A client option given on the command line of a server command is a usage error (it would
/// do nothing); one from the environment is left alone.
pub fn refuse_client_options_on_servers(m: &clap::ArgMatches) -> Result<(), clap::Error> {
    let Some((sub, sub_m)) = m.subcommand() else {
        return Ok(());
    };
    if !SERVER_COMMANDS.contains(&sub) {
        return Ok(());
    }
    let mut levels = vec![m, sub_m];
    let mut at = sub_m;
    while let Some((_, deeper)) = at.subcommand() {
        levels.push(deeper);
        at = deeper;
    }
    for id in CLIENT_OPTION_IDS {
        let given = levels
            .iter()
            .any(|l| l.value_source(id) == Some(clap::parser::ValueSource::CommandLine));
        if given {
            let flag = format!("--{}", id.replace('_', "-"));
            return Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "{flag} is a client option; `storch {sub}` runs a server and does not use it\n"
                ),
            ));
        }
    }
    Ok(())
}

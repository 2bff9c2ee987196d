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

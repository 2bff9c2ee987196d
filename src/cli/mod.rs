//! The `storch` command line: clap arguments, validated settings, and one module per command.
//!
//! Flow (ripgrep's low-level/high-level split): [`args`] parses raw arguments, [`settings`]
//! turns them into checked settings before any work starts, and [`commands`] runs them.
//! Only `serve` exists today; client verbs (`get backend`, …) will be further [`Command`]
//! variants that talk to a running server over REST (the CLI never opens the data dir itself).

pub mod args;
pub mod commands;
pub mod logging;
pub mod settings;

pub use args::{Cli, Command, ServeArgs};
pub use logging::LogFormat;
pub use settings::{ServeSettings, SettingsError};

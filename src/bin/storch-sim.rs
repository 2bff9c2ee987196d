//! `storch-sim`: array simulators for testing storch's drivers (see `storch::sim`).

use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    storch::net::install_crypto_provider();
    let cli = storch::sim::cli::Cli::parse();
    match storch::sim::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("storch-sim: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

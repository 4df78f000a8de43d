//! `forewarn config example`: prints a fully commented configuration with every option at
//! its default.

use std::process::ExitCode;

use forewarn_daemon::config::example;

/// `forewarn config example`'s arguments (none).
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Prints the example configuration.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    print!("{}", example::for_this_platform());
    Ok(ExitCode::SUCCESS)
}

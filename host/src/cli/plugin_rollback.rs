//! `forewarn plugin rollback NAME [--yes]`: puts back the version installed before the last
//! install or upgrade (kept in the plugin directory's `.previous/`), showing what changes in
//! its grants and asking, as `plugin upgrade` does, when the version put back is granted
//! more (a second rollback rolls forward).

use crate::cli::supply_args::{DirArgs, TerminalOperator, shown_error};
use forewarn_supply::install::rollback;
use std::process::ExitCode;

/// The arguments of `plugin rollback`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The installed plugin.
    pub name: String,
    /// Agree without being asked when the version put back is granted more than the one
    /// running (automation), as `plugin upgrade --yes`. Without it and without a terminal,
    /// such a rollback changes nothing.
    #[arg(long, short)]
    pub yes: bool,
    /// The config and the plugin directory.
    #[command(flatten)]
    pub dir: DirArgs,
}

/// Runs `plugin rollback`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.dir.load()?;
    let entry = rollback(
        &config.plugin_dir,
        &args.name,
        &mut TerminalOperator {
            assume_yes: args.yes,
        },
    )
    .map_err(shown_error)?;
    println!(
        "rolled {} back to {} ({}); the daemon loads it within a second",
        args.name,
        entry.source_shown(),
        entry.signer_label()
    );
    Ok(ExitCode::SUCCESS)
}

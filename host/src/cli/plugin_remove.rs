//! `forewarn plugin remove NAME`: removes a plugin's files, its kept previous version and
//! its `plugins.lock` entry.

use crate::cli::supply_args::{DirArgs, shown_error};
use forewarn_supply::install::remove;
use std::process::ExitCode;

/// The arguments of `plugin remove`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin.
    pub name: String,
    /// The config and the plugin directory.
    #[command(flatten)]
    pub dir: DirArgs,
}

/// Runs `plugin remove`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.dir.load()?;
    let entry = remove(&config.plugin_dir, &args.name).map_err(shown_error)?;
    let origin = entry
        .map(|entry| format!(" (installed from {})", entry.source_shown()))
        .unwrap_or_default();
    println!(
        "removed {}{origin} from {}; the daemon unloads it within a second",
        args.name,
        config.plugin_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

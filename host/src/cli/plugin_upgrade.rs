//! `forewarn plugin upgrade NAME [REF]`: installs a newer version of an installed plugin,
//! showing what changes in its grants and asking again only when a grant widens.

use crate::cli::plugin_install::{self, run_mode};
use crate::cli::supply_args::{DirArgs, RegistryArgs};
use crate::supply::install::Mode;
use crate::supply::lock::Lockfile;
use std::process::ExitCode;

/// The arguments of `plugin upgrade`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The installed plugin.
    pub name: String,
    /// Where the new version is. Default: the tag it was installed from, looked up again.
    pub source: Option<String>,
    /// Upgrade even when no trusted key signed the new version (said loudly).
    #[arg(long)]
    pub allow_unsigned: bool,
    /// Agree to wider grants without being asked (automation).
    #[arg(long, short)]
    pub yes: bool,
    /// The config and the plugin directory.
    #[command(flatten)]
    pub dir: DirArgs,
    /// How to reach the registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `plugin upgrade`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let source = match args.source {
        Some(source) => source,
        None => {
            let config = args.dir.load()?;
            let lock = Lockfile::read(&config.plugin_dir)?;
            let entry = lock.plugins.get(&args.name).ok_or_else(|| {
                anyhow::anyhow!(
                    "{} was not installed with `forewarn plugin install` (it is not in {}); install it first",
                    args.name,
                    Lockfile::path(&config.plugin_dir).display()
                )
            })?;
            // The tag it came from, looked up again: `registry/repo:tag@sha256:…` → `registry/repo:tag`.
            match entry.source.split_once('@') {
                Some((tagged, _)) if !tagged.starts_with('/') => tagged.to_owned(),
                _ => anyhow::bail!(
                    "{} was installed from {}, which has no tag to look up again; name the new version: `forewarn plugin upgrade {} REF`",
                    args.name,
                    entry.source,
                    args.name
                ),
            }
        }
    };
    run_mode(
        plugin_install::Args {
            source,
            name: Some(args.name),
            allow_unsigned: args.allow_unsigned,
            yes: args.yes,
            dir: args.dir,
            registry: args.registry,
        },
        Mode::Upgrade,
    )
    .await
    .map(|()| ExitCode::SUCCESS)
}

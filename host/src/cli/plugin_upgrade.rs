//! `forewarn plugin upgrade NAME [REF]`: installs a newer version of an installed plugin,
//! showing what changes in its grants and asking again only when a grant widens. An older
//! artifact (a lower version, or the same version made earlier) is refused unless
//! `--allow-downgrade`.

use crate::cli::plugin_install::{self, run_mode};
use crate::cli::supply_args::{self, DirArgs, RegistryArgs, shown_error};
use forewarn_supply::install::{Mode, check_name};
use forewarn_supply::lock::Lockfile;
use std::process::ExitCode;

/// The arguments of `plugin upgrade`.
#[derive(Debug, clap::Args)]
#[command(after_help = supply_args::REGISTRY_CREDENTIALS_HELP)]
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
    /// Install the new artifact even when it is older than the one installed (a lower
    /// version, or the same version made earlier): going back on purpose. Without it such
    /// an upgrade is refused, since a tag re-pointed at an old signed version looks the same.
    #[arg(long)]
    pub allow_downgrade: bool,
    /// The config and the plugin directory.
    #[command(flatten)]
    pub dir: DirArgs,
    /// How to reach the registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `plugin upgrade`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    check_name(&args.name).map_err(shown_error)?;
    let source = match args.source {
        Some(source) => source,
        None => {
            let config = args.dir.load()?;
            let lock = Lockfile::read(&config.plugin_dir).map_err(shown_error)?;
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
                    entry.source_shown(),
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
            allow_downgrade: args.allow_downgrade,
            dir: args.dir,
            registry: args.registry,
        },
        Mode::Upgrade,
    )
    .await
    .map(|()| ExitCode::SUCCESS)
}

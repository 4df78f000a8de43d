//! `forewarn plugin install REF [--as NAME]`: fetches a plugin from a registry (or an OCI
//! layout directory or tarball), verifies its digests and signature, runs `plugin check`,
//! shows what it would be granted, asks, and writes it into the plugin directory.

use crate::cli::supply_args::{self, DirArgs, RegistryArgs, TerminalOperator, shown_error};
use forewarn_manifest::shown;
use forewarn_supply::install::{InstallRequest, Mode, install};
use forewarn_supply::source::{self, Source};
use std::process::ExitCode;

/// The arguments of `plugin install`.
#[derive(Debug, clap::Args)]
#[command(after_help = supply_args::REGISTRY_CREDENTIALS_HELP)]
pub struct Args {
    /// REGISTRY/REPOSITORY:TAG (or @sha256:… to pin), or the path of an OCI layout directory
    /// (`plugin pull --to DIR`) or of a tarball of one.
    pub source: String,
    /// Install under this name (default: the name the artifact gives, else the repository's
    /// last component).
    #[arg(long = "as", value_name = "NAME")]
    pub name: Option<String>,
    /// Install even when no trusted key signed it. Said loudly; use only for a plugin you
    /// have checked yourself.
    #[arg(long)]
    pub allow_unsigned: bool,
    /// Agree to the grants without being asked (automation). Without it and without a
    /// terminal, nothing is installed.
    #[arg(long, short)]
    pub yes: bool,
    /// Set by `plugin upgrade --allow-downgrade`: an older artifact may replace the one
    /// installed.
    #[arg(skip)]
    pub allow_downgrade: bool,
    /// The config and the plugin directory.
    #[command(flatten)]
    pub dir: DirArgs,
    /// How to reach the registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `plugin install` (and, with [`Mode::Upgrade`], `plugin upgrade`).
pub async fn run_mode(args: Args, mode: Mode) -> anyhow::Result<()> {
    let config = args.dir.load()?;
    let trusted = supply_args::trusted_keys(&config)?;
    let source = Source::parse(&args.source).map_err(shown_error)?;
    let fetched = source::fetch_within(
        &source,
        &args.registry.options(),
        supply_args::fetch_limits(&config),
        args.registry.timeout,
    )
    .await
    .map_err(shown_error)?;
    let mut operator = TerminalOperator {
        assume_yes: args.yes,
    };
    let installed = install(
        &config.plugin_dir,
        InstallRequest {
            fetched: fetched.fetched,
            source: fetched.source,
            name: args.name,
            fallback_name: source.fallback_name(),
            trusted: &trusted,
            allow_unsigned: args.allow_unsigned,
            mode,
            allow_downgrade: args.allow_downgrade,
        },
        &mut operator,
    )
    .await
    .map_err(shown_error)?;
    if installed.changed {
        let signer = installed
            .signer
            .map(|signer| format!("signed by {}", shown::reference(&signer.to_string())))
            .unwrap_or_else(|| "UNSIGNED".to_owned());
        println!(
            "{} {} ({}, {signer}) into {}; the daemon loads it within a second",
            match (mode, installed.downgraded) {
                (Mode::Install, _) => "installed",
                (Mode::Upgrade, false) => "upgraded",
                (Mode::Upgrade, true) => "downgraded",
            },
            installed.name,
            installed.digest,
            config.plugin_dir.display()
        );
    }
    Ok(())
}

/// Runs `plugin install`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    run_mode(args, Mode::Install)
        .await
        .map(|()| ExitCode::SUCCESS)
}

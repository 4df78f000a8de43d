//! `forewarn plugin pull REF --to DIR`: copies a plugin and its signatures from a registry
//! into an OCI image layout directory, every digest checked, for a machine without access
//! to the registry (`forewarn plugin install DIR` there).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::supply_args::{self, DirArgs, RegistryArgs, shown_error};
use forewarn_manifest::shown;
use forewarn_supply::signature::{self, Verdict};
use forewarn_supply::source::{self, Source};

/// The arguments of `plugin pull`.
#[derive(Debug, clap::Args)]
#[command(after_help = supply_args::REGISTRY_CREDENTIALS_HELP)]
pub struct Args {
    /// REGISTRY/REPOSITORY:TAG or …@sha256:….
    pub reference: String,
    /// The directory to write the OCI image layout into (missing or empty).
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
    /// The config and the plugin directory.
    #[command(flatten)]
    pub dir: DirArgs,
    /// How to reach the registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `plugin pull`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.dir.load()?;
    let source = Source::Registry(forewarn_supply::reference::Reference::parse(
        &args.reference,
    )?);
    let fetched = source::fetch_within(
        &source,
        &args.registry.options(),
        supply_args::fetch_limits(&config),
        args.registry.timeout,
    )
    .await
    .map_err(shown_error)?;
    let tag = fetched.tag.clone().unwrap_or_else(|| "latest".to_owned());
    forewarn_supply::layout::write(&args.to, &fetched.fetched, &tag).map_err(shown_error)?;
    let trusted = supply_args::trusted_keys(&config)?;
    let verdict = signature::verify(
        &fetched.fetched.digest,
        &fetched.fetched.signatures(),
        &trusted,
    );
    let signed = match verdict {
        Verdict::Trusted(signer) => format!("signed by {}", shown::reference(&signer.to_string())),
        Verdict::Unsigned => "not signed".to_owned(),
        Verdict::Refused(_) => format!(
            "{} signature(s), none by a key trusted here",
            fetched.fetched.signatures().len()
        ),
    };
    println!(
        "pulled {} ({signed}) into {}\ninstall it there with: forewarn plugin install {}",
        shown::reference(&fetched.source),
        args.to.display(),
        args.to.display()
    );
    Ok(ExitCode::SUCCESS)
}

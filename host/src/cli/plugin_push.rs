//! `forewarn plugin push PLUGIN.wasm [--manifest NAME.toml] REF [--sign KEY]`: publishes a
//! plugin to an OCI registry as a Wasm OCI artifact, signed with an OpenSSH key.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::supply_args::{self, RegistryArgs, shown_error};
use forewarn_supply::SupplyError;
use forewarn_supply::push::{PushRequest, push};
use forewarn_supply::reference::Reference;

/// The arguments of `plugin push`.
#[derive(Debug, clap::Args)]
#[command(after_help = supply_args::REGISTRY_CREDENTIALS_HELP)]
pub struct Args {
    /// The plugin component, NAME.wasm (NAME becomes the plugin's name).
    pub plugin: PathBuf,
    /// Where to push: REGISTRY/REPOSITORY:TAG, e.g. registry.example.com/acme/lb-drain:1.2.0.
    pub reference: String,
    /// Its manifest. Default: NAME.toml beside the component if present, else none (every
    /// default, no capabilities).
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Sign the artifact's digest with this OpenSSH ed25519 private key (a passphrase-protected
    /// key is handed to `ssh-keygen -Y sign`, which asks for the passphrase).
    #[arg(long, value_name = "KEY")]
    pub sign: Option<PathBuf>,
    /// The version annotation (`org.opencontainers.image.version`). Default: the tag.
    #[arg(long)]
    pub version: Option<String>,
    /// How to reach the registry.
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// Runs `plugin push`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let reference = Reference::parse(&args.reference)?;
    let request = PushRequest {
        wasm: args.plugin,
        manifest: args.manifest,
        reference: reference.clone(),
        sign: args.sign,
        version: args.version,
        registry: args.registry.options(),
        max_wasm_bytes: forewarn_daemon::plugins::set::DEFAULT_MAX_PLUGIN_BYTES,
    };
    let pushed = tokio::time::timeout(args.registry.timeout, push(request))
        .await
        .map_err(|_| SupplyError::TimedOut {
            what: format!("pushing to {reference}"),
            after: args.registry.timeout,
            outcome: "the tag may still name the artifact it named before; push again",
        })
        .and_then(|pushed| pushed)
        .map_err(shown_error)?;
    println!("pushed {} to {reference}", pushed.name);
    println!("  digest:  {}", pushed.digest);
    println!("  grants:  {}", pushed.grants.one_line());
    match pushed.signed {
        true => println!(
            "  signed:  yes ({}:{})",
            reference.repository,
            pushed.digest.signature_tag()
        ),
        false => println!("  signed:  no (installs need --allow-unsigned; push with --sign KEY)"),
    }
    // The flags the push needed to reach the registry, the install needs too.
    println!(
        "install it with: forewarn plugin install {}{}",
        reference.at_digest(&pushed.digest),
        args.registry.repeated()
    );
    Ok(ExitCode::SUCCESS)
}

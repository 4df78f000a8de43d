//! `forewarn plugin check PATH`: is the file a usable plugin component (its world, imports,
//! exports, memory at start under the cap of `NAME.toml` beside it)?

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::plugins::manifest::PluginManifest;
use crate::supply::component_check::check_component;

/// The arguments of `plugin check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The .wasm component.
    pub path: PathBuf,
}

/// Runs `plugin check`: exit 0 for a usable plugin, 1 otherwise.
pub async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let path = args.path;
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    // As the daemon would load it: under the memory cap of `NAME.toml` beside it, if any.
    let name = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let beside = path.with_extension("toml");
    let manifest = match beside.is_file() {
        true => PluginManifest::load(&beside)?,
        false => PluginManifest::default(),
    };
    let cap = manifest.memory.as_u64();
    let on_failure = manifest.on_failure;
    let checked =
        tokio::task::spawn_blocking(move || check_component(&name, &bytes, &manifest)).await?;
    let checked = match checked {
        Ok(checked) => checked,
        Err(problem) => {
            eprintln!("{}: {problem}", path.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    let report = checked.report;
    println!(
        "{}: a valid forewarn plugin (world {})",
        path.display(),
        checked.world
    );
    println!("  size:    {} bytes", report.size_bytes);
    println!("  sha256:  {}", report.content_hash);
    println!(
        "  memory:  {:.1} MiB at start (cap {:.1} MiB)",
        report.initial_memory_bytes as f64 / 1_048_576.0,
        cap as f64 / 1_048_576.0
    );
    println!("  on-failure: {on_failure} ({})", on_failure.meaning());
    println!("  exports: {}", report.exports.join(", "));
    println!("  imports:");
    for import in &report.imports {
        println!("    {import}");
    }
    Ok(ExitCode::SUCCESS)
}

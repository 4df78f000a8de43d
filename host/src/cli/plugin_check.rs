//! `forewarn plugin check PLUGIN.wasm`: whether a file is a plugin the daemon would load,
//! under which name, and what it imports and exports (the same checks `plugin push` and
//! `plugin install` make, in `supply::component_check`).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::plugin_files::PluginFile;
use crate::supply::component_check::check_component;

/// Options of `forewarn plugin check`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// The .wasm component.
    pub path: PathBuf,
}

/// Checks the component as the daemon would load it: under the name `plugin test` gives it
/// ([`PluginFile::name`]) and the memory cap of `NAME.toml` beside it, if any. Exit 0 for a
/// usable plugin, 1 otherwise.
pub async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let path = args.path;
    let file = PluginFile::new(path.clone());
    let name = match file.name() {
        Ok(name) => name,
        Err(error) => {
            eprintln!("{}: not a usable forewarn plugin: {error}", path.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    let bytes = std::fs::read(&path)
        .map_err(|error| anyhow::anyhow!("cannot read {}: {error}", path.display()))?;
    let manifest = file.manifest()?;
    let cap = manifest.memory.as_u64();
    let on_failure = manifest.on_failure;
    let plugin = name.name.clone();
    let checked =
        tokio::task::spawn_blocking(move || check_component(&plugin, &bytes, &manifest)).await?;
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
    println!("  name:    {}", name.name);
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
    if let Some(notice) = name.notice(&path) {
        println!("{notice}");
    }
    Ok(ExitCode::SUCCESS)
}

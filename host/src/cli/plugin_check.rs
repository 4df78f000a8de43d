//! `forewarn plugin check PLUGIN.wasm`: whether a file is a plugin the daemon would load,
//! under which name, and what it imports and exports.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::plugin_files::PluginFile;

/// Options of `forewarn plugin check`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// The .wasm component.
    pub path: PathBuf,
}

/// Checks the component as the daemon would load it: under the name `plugin test` gives it
/// ([`PluginFile::name`]) and the memory cap of `NAME.toml` beside it, if any.
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
    let settings = file.manifest()?.runtime_settings();
    let runtime = forewarn_runtime::Runtime::new(
        forewarn_runtime::RuntimeConfig::default(),
        forewarn_runtime::HostServices::default(),
    )?;
    let cap = settings.memory_limit_bytes;
    let plugin = name.name.clone();
    let report =
        tokio::task::spawn_blocking(move || runtime.inspect(&plugin, &bytes, &settings)).await?;
    let report = match report {
        Ok(report) => report,
        Err(error) => {
            eprintln!("{}: not a usable forewarn plugin: {error}", path.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    let version = report
        .exports
        .iter()
        .find_map(|export| export.strip_prefix("forewarn:plugin/handler@"))
        .unwrap_or("?");
    println!(
        "{}: a valid forewarn plugin (world forewarn:plugin/event-handler@{version})",
        path.display()
    );
    println!("  name:    {}", name.name);
    println!("  size:    {} bytes", report.size_bytes);
    println!("  sha256:  {}", report.content_hash);
    println!(
        "  memory:  {:.1} MiB at start (cap {:.1} MiB)",
        report.initial_memory_bytes as f64 / 1_048_576.0,
        cap as f64 / 1_048_576.0
    );
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

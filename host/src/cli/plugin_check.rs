//! `forewarn plugin check PATH`: loads a component as the daemon would (under the memory cap
//! of `NAME.toml` beside it) and shows its version, size, hash, memory, failure policy,
//! imports and exports; exit 1 when it is not a usable forewarn plugin.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use forewarn_runtime::{ComponentReport, HostServices, Runtime, RuntimeConfig};

use crate::plugins::manifest::PluginManifest;

/// `forewarn plugin check`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The .wasm component.
    path: PathBuf,
}

/// Inspects the component and prints what the daemon would see.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let path = &args.path;
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let runtime = Runtime::new(RuntimeConfig::default(), HostServices::default())?;
    // As the daemon would load it: under the memory cap of `NAME.toml` beside it, if any.
    let name = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    let beside = path.with_extension("toml");
    let manifest = if beside.is_file() {
        PluginManifest::load(&beside)?
    } else {
        PluginManifest::default()
    };
    let settings = manifest.runtime_settings();
    let cap = settings.memory_limit_bytes;
    let report =
        tokio::task::spawn_blocking(move || runtime.inspect(&name, &bytes, &settings)).await?;
    match report {
        Ok(report) => {
            print!("{}", describe(path, &report, &manifest, cap));
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("{}: not a usable forewarn plugin: {error}", path.display());
            Ok(ExitCode::FAILURE)
        }
    }
}

/// What `plugin check` prints about a usable component.
fn describe(path: &Path, report: &ComponentReport, manifest: &PluginManifest, cap: u64) -> String {
    let version = report
        .exports
        .iter()
        .find_map(|name| name.strip_prefix("forewarn:plugin/handler@"))
        .unwrap_or("?");
    let mut out = format!(
        "{}: a valid forewarn plugin (world forewarn:plugin/event-handler@{version})\n",
        path.display()
    );
    out.push_str(&format!("  size:    {} bytes\n", report.size_bytes));
    out.push_str(&format!("  sha256:  {}\n", report.content_hash));
    out.push_str(&format!(
        "  memory:  {:.1} MiB at start (cap {:.1} MiB)\n",
        report.initial_memory_bytes as f64 / 1_048_576.0,
        cap as f64 / 1_048_576.0
    ));
    out.push_str(&format!(
        "  on-failure: {} ({})\n",
        manifest.on_failure,
        manifest.on_failure.meaning()
    ));
    out.push_str(&format!("  exports: {}\n", report.exports.join(", ")));
    out.push_str("  imports:\n");
    for import in &report.imports {
        out.push_str(&format!("    {import}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn takes_one_component_path() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&["plugins.d/lb-drain.wasm"]).expect("parses");
        assert_eq!(args.path, PathBuf::from("plugins.d/lb-drain.wasm"));
        assert!(parse::<Args>(&[]).is_err());
    }

    #[test]
    fn describes_the_world_version_memory_and_failure_policy() {
        let report = ComponentReport {
            content_hash: "ab12".into(),
            size_bytes: 2048,
            imports: vec!["forewarn:plugin/host@0.1.0".into()],
            exports: vec!["forewarn:plugin/handler@0.1.0".into()],
            initial_memory_bytes: 1_179_648,
        };
        let manifest = PluginManifest::parse("on-failure = \"approve\"").expect("manifest");
        let text = describe(Path::new("p.wasm"), &report, &manifest, 64 << 20);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "p.wasm: a valid forewarn plugin (world forewarn:plugin/event-handler@0.1.0)"
        );
        assert_eq!(lines[3], "  memory:  1.1 MiB at start (cap 64.0 MiB)");
        assert!(lines[4].starts_with("  on-failure: approve ("), "{text}");
        assert_eq!(lines[6..], ["  imports:", "    forewarn:plugin/host@0.1.0"]);
    }
}

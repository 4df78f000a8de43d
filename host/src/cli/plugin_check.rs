//! `forewarn plugin check PLUGIN.wasm`: whether a file is a plugin the daemon would load,
//! under which name (the one `plugin test` gives it), under the memory cap of `NAME.toml`
//! beside it, and what it imports and exports — the same checks `plugin push` and `plugin
//! install` make (`forewarn_supply::component_check`). Exit 1 when it is not a usable plugin.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::plugin_files::PluginFile;
use forewarn_manifest::PluginManifest;
use forewarn_supply::component_check::{CheckedComponent, check_component};

/// `forewarn plugin check`'s arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The .wasm component.
    pub path: PathBuf,
}

/// Checks the component as the daemon would load it and prints what the daemon would see.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
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
    let plugin = name.name.clone();
    let checked_manifest = manifest.clone();
    let checked =
        tokio::task::spawn_blocking(move || check_component(&plugin, &bytes, &checked_manifest))
            .await?;
    let checked = match checked {
        Ok(checked) => checked,
        Err(problem) => {
            eprintln!("{}: {problem}", path.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    print!("{}", describe(&path, &name.name, &checked, &manifest));
    if let Some(notice) = name.notice(&path) {
        println!("{notice}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What `plugin check` prints about a usable component.
fn describe(
    path: &Path,
    name: &str,
    checked: &CheckedComponent,
    manifest: &PluginManifest,
) -> String {
    let report = &checked.report;
    let mut out = format!(
        "{}: a valid forewarn plugin (world {})\n",
        path.display(),
        checked.world
    );
    out.push_str(&format!("  name:    {name}\n"));
    out.push_str(&format!("  size:    {} bytes\n", report.size_bytes));
    out.push_str(&format!("  sha256:  {}\n", report.content_hash));
    out.push_str(&format!(
        "  memory:  {:.1} MiB at start (cap {:.1} MiB)\n",
        report.initial_memory_bytes as f64 / 1_048_576.0,
        manifest.memory.as_u64() as f64 / 1_048_576.0
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
    use forewarn_runtime::ComponentReport;

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
    fn describes_the_world_name_memory_and_failure_policy() {
        let checked = CheckedComponent {
            report: ComponentReport {
                content_hash: "ab12".into(),
                size_bytes: 2048,
                imports: vec!["forewarn:plugin/host@0.1.0".into()],
                exports: vec!["forewarn:plugin/handler@0.1.0".into()],
                initial_memory_bytes: 1_179_648,
            },
            world: "forewarn:plugin/event-handler@0.1.0".into(),
        };
        let manifest = PluginManifest::parse("on-failure = \"approve\"").expect("manifest");
        let text = describe(Path::new("p.wasm"), "p", &checked, &manifest);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "p.wasm: a valid forewarn plugin (world forewarn:plugin/event-handler@0.1.0)"
        );
        assert_eq!(lines[1], "  name:    p");
        assert_eq!(lines[4], "  memory:  1.1 MiB at start (cap 64.0 MiB)");
        assert!(lines[5].starts_with("  on-failure: approve ("), "{text}");
        assert_eq!(lines[7..], ["  imports:", "    forewarn:plugin/host@0.1.0"]);
    }
}

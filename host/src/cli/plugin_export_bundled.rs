//! `forewarn plugin export-bundled DIR`: writes each plugin bundled in this binary
//! (`NAME.wasm` and `NAME.toml`) into DIR, and prints the paths written.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::bundled::bundled_plugins;

/// `forewarn plugin export-bundled`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to write them (created if missing).
    dir: PathBuf,
}

/// Writes each bundled plugin's component and manifest.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for plugin in bundled_plugins() {
        let wasm = dir.join(format!("{}.wasm", plugin.name));
        let manifest = dir.join(format!("{}.toml", plugin.name));
        std::fs::write(&wasm, plugin.wasm)
            .with_context(|| format!("cannot write {}", wasm.display()))?;
        std::fs::write(&manifest, plugin.manifest)
            .with_context(|| format!("cannot write {}", manifest.display()))?;
        println!("{}", wasm.display());
        println!("{}", manifest.display());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[tokio::test]
    async fn writes_every_bundled_plugin_and_its_manifest() {
        assert_consistent::<Args>();
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path().join("new/bundled");
        let args = parse::<Args>(&[dir.to_str().expect("utf-8")]).expect("parses");
        assert_eq!(run(args).await.expect("exports"), ExitCode::SUCCESS);
        for plugin in bundled_plugins() {
            let wasm = std::fs::read(dir.join(format!("{}.wasm", plugin.name))).expect("wasm");
            assert_eq!(wasm, plugin.wasm);
            let toml = std::fs::read(dir.join(format!("{}.toml", plugin.name))).expect("toml");
            assert_eq!(toml, plugin.manifest.as_bytes());
        }
    }
}

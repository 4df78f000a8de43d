//! `forewarn plugin list`: the plugins in the plugin directory with their provenance: where
//! each was installed from, its digest, who signed it, what it is granted, and whether the
//! file is still the one installed.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::supply_args::DirArgs;
use crate::supply::lock::{Lockfile, Provenance};
use crate::supply::reference::Digest;

/// The arguments of `plugin list`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config and the plugin directory.
    #[command(flatten)]
    pub dir: DirArgs,
}

/// Runs `plugin list`.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.dir.load()?;
    print!("{}", render(&config.plugin_dir)?);
    Ok(ExitCode::SUCCESS)
}

/// The listing of `plugin_dir`.
pub fn render(plugin_dir: &Path) -> anyhow::Result<String> {
    let lock = Lockfile::read(plugin_dir)?;
    let mut names: Vec<String> = std::fs::read_dir(plugin_dir)
        .map_err(|error| anyhow::anyhow!("cannot list {}: {error}", plugin_dir.display()))?
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?;
            (!name.starts_with('.')).then_some(())?;
            name.strip_suffix(".wasm").map(str::to_owned)
        })
        .collect();
    names.extend(lock.plugins.keys().cloned());
    names.sort();
    names.dedup();
    let mut out = String::new();
    if names.is_empty() {
        let _ = writeln!(out, "no plugins in {}", plugin_dir.display());
        return Ok(out);
    }
    for name in names {
        let wasm = plugin_dir.join(format!("{name}.wasm"));
        let hash = std::fs::read(&wasm)
            .ok()
            .map(|bytes| Digest::of(&bytes).hex().to_owned());
        let Some(hash) = hash else {
            let _ = writeln!(
                out,
                "{name}: MISSING: in plugins.lock but {} is gone (`forewarn plugin remove {name}` tidies up)",
                wasm.display()
            );
            continue;
        };
        match lock.provenance(&name, &hash) {
            Provenance::NotInstalled => {
                let _ = writeln!(
                    out,
                    "{name}: copied in by hand (no provenance), sha256 {}",
                    &hash[..12]
                );
            }
            Provenance::Installed(entry) | Provenance::Modified(entry) => {
                let state = match entry.wasm_sha256 == hash {
                    true => String::new(),
                    false => format!(
                        "  CHANGED SINCE INSTALL: the file's sha256 is {}, not {}\n",
                        &hash[..12],
                        &entry.wasm_sha256[..12.min(entry.wasm_sha256.len())]
                    ),
                };
                let previous = entry_previous(&lock, &name);
                let _ = write!(
                    out,
                    "{name}: {}\n  digest:  {}\n  signer:  {}\n  grants:  {}\n  since:   {}\n{previous}{state}",
                    entry.source,
                    entry.digest,
                    entry.signer_label(),
                    entry.grants.one_line(),
                    entry.installed_at
                );
            }
        }
    }
    Ok(out)
}

fn entry_previous(lock: &Lockfile, name: &str) -> String {
    lock.plugins
        .get(name)
        .and_then(|entry| entry.previous.as_ref())
        .map(|previous| {
            format!(
                "  previous: {} (`forewarn plugin rollback {name}`)\n",
                previous.source
            )
        })
        .unwrap_or_default()
}

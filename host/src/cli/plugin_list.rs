//! `forewarn plugin list`: the plugins in the plugin directory with their provenance: where
//! each was installed from, its digest, who signed it, what it is granted, and whether its
//! files (component and manifest) are still the ones installed. Everything the lock file or
//! the directory supplies is printed escaped ([`forewarn_manifest::shown`]).

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use crate::cli::supply_args::DirArgs;
use forewarn_manifest::shown;
use forewarn_supply::lock::{Changed, LockEntry, Lockfile, Provenance, manifest_sha256_beside};
use forewarn_supply::reference::Digest;

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
    let lock = Lockfile::read(plugin_dir).map_err(crate::cli::supply_args::shown_error)?;
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
        let _ = writeln!(
            out,
            "no plugins in {}",
            shown::reference(&plugin_dir.display().to_string())
        );
        return Ok(out);
    }
    for name in names {
        let shown_name = shown::name(&name);
        let wasm = plugin_dir.join(format!("{name}.wasm"));
        let hash = std::fs::read(&wasm)
            .ok()
            .map(|bytes| Digest::of(&bytes).hex().to_owned());
        let Some(hash) = hash else {
            let _ = writeln!(
                out,
                "{shown_name}: MISSING: in plugins.lock but {} is gone (`forewarn plugin remove {shown_name}` tidies up)",
                shown::reference(&wasm.display().to_string())
            );
            continue;
        };
        let manifest_hash = manifest_sha256_beside(&wasm);
        match lock.provenance(&name, &hash, manifest_hash.as_deref()) {
            Provenance::NotInstalled => {
                let _ = writeln!(
                    out,
                    "{shown_name}: copied in by hand (no provenance), sha256 {}",
                    &hash[..12]
                );
            }
            Provenance::Installed(entry) => {
                let _ = write!(out, "{}", describe(&lock, &name, &entry, ""));
            }
            Provenance::Modified(entry, changed) => {
                let state = format!(
                    "  CHANGED SINCE INSTALL: {} {} not what was installed (sha256 now {}); \
                     what runs is not what was verified and consented to: `forewarn plugin \
                     upgrade {shown_name} --yes` or `forewarn plugin rollback {shown_name}` \
                     puts back verified files\n",
                    changed.files(&shown_name),
                    match changed {
                        Changed::Both => "are",
                        Changed::Component | Changed::Manifest => "is",
                    },
                    now_hashes(changed, &hash, manifest_hash.as_deref()),
                );
                let _ = write!(out, "{}", describe(&lock, &name, &entry, &state));
            }
        }
    }
    Ok(out)
}

/// The lines of an installed plugin, then `state`.
fn describe(lock: &Lockfile, name: &str, entry: &LockEntry, state: &str) -> String {
    let version = entry
        .version
        .as_deref()
        .map(|version| format!("\n  version: {}", shown::version(version)))
        .unwrap_or_default();
    format!(
        "{}: {}{version}\n  digest:  {}\n  signer:  {}\n  grants:  {}\n  since:   {}\n{}{state}",
        shown::name(name),
        entry.source_shown(),
        shown::reference(&entry.digest),
        entry.signer_label(),
        entry.grants.one_line(),
        shown::name(&entry.installed_at),
        entry_previous(lock, name)
    )
}

/// The sha256 (first 12 hex digits) of each changed file as it is now.
fn now_hashes(changed: Changed, wasm: &str, manifest: Option<&str>) -> String {
    let manifest = manifest
        .map(|hash| &hash[..12.min(hash.len())])
        .unwrap_or("(removed)");
    match changed {
        Changed::Component => wasm[..12].to_owned(),
        Changed::Manifest => manifest.to_owned(),
        Changed::Both => format!("{} and {manifest}", &wasm[..12]),
    }
}

fn entry_previous(lock: &Lockfile, name: &str) -> String {
    lock.plugins
        .get(name)
        .and_then(|entry| entry.previous.as_ref())
        .map(|previous| {
            format!(
                "  previous: {} (`forewarn plugin rollback {}`)\n",
                previous.source_shown(),
                shown::name(name)
            )
        })
        .unwrap_or_default()
}

//! `plugins.lock` in the plugin directory: for each plugin installed with `forewarn plugin
//! install`, where it came from (reference and manifest digest), the sha256 of the files
//! written, who signed it, and the grants the operator consented to; and the same for the
//! previous version, kept for `plugin rollback`.
//!
//! It lives beside the files it describes, under the same ownership rules, so it travels with
//! the directory (configuration management, backups) and can never describe another
//! directory's files. The daemon only reads it, for `forewarn status`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::supply::error::SupplyError;
use crate::supply::grants::GrantSummary;

/// The lock file's name in the plugin directory.
pub const LOCK_FILE: &str = "plugins.lock";
/// Largest lock file read.
const MAX_LOCK_BYTES: u64 = 4 * 1024 * 1024;
/// The format version written.
const VERSION: u32 = 1;

/// The whole lock file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Lockfile {
    /// The format's version (1).
    pub version: u32,
    /// Installed plugins by name.
    #[serde(default)]
    pub plugins: BTreeMap<String, LockEntry>,
}

/// One installed plugin (or its previous version).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LockEntry {
    /// The reference installed from (`registry/repo:tag@sha256:…`), or the layout's path.
    pub source: String,
    /// The artifact's manifest digest (what was signed).
    pub digest: String,
    /// sha256 of `NAME.wasm` as written (the daemon's content hash).
    pub wasm_sha256: String,
    /// sha256 of `NAME.toml` as written; none when the plugin has no manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_sha256: Option<String>,
    /// Who signed it (the trusted key's comment); none when installed with --allow-unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
    /// The signing key's fingerprint (`SHA256:…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer_key: Option<String>,
    /// When it was installed, RFC 3339.
    pub installed_at: String,
    /// What its manifest grants, as consented to.
    pub grants: GrantSummary,
    /// The version before this one, kept in `.previous/` for `plugin rollback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Box<LockEntry>>,
}

impl LockEntry {
    /// "alice@example.com (SHA256:…)", or "unsigned".
    pub fn signer_label(&self) -> String {
        match (&self.signer, &self.signer_key) {
            (Some(name), Some(key)) if name != key => format!("{name} ({key})"),
            (Some(name), _) => name.clone(),
            _ => "unsigned".to_owned(),
        }
    }

    /// The entry without its previous version.
    pub fn without_previous(&self) -> LockEntry {
        LockEntry {
            previous: None,
            ..self.clone()
        }
    }
}

impl Lockfile {
    /// The lock file's path in `plugin_dir`.
    pub fn path(plugin_dir: &Path) -> PathBuf {
        plugin_dir.join(LOCK_FILE)
    }

    /// Reads `plugin_dir/plugins.lock`; an empty lock when there is none.
    pub fn read(plugin_dir: &Path) -> Result<Lockfile, SupplyError> {
        let path = Lockfile::path(plugin_dir);
        let bytes = match std::fs::File::open(&path) {
            Ok(file) => {
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(
                    &mut std::io::Read::take(file, MAX_LOCK_BYTES),
                    &mut bytes,
                )
                .map_err(|source| {
                    SupplyError::io("read", &path, source, "check its permissions")
                })?;
                bytes
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Lockfile {
                    version: VERSION,
                    plugins: BTreeMap::new(),
                });
            }
            Err(source) => {
                return Err(SupplyError::io(
                    "read",
                    &path,
                    source,
                    "check its permissions",
                ));
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        toml::from_str(&text).map_err(|error| {
            SupplyError::Conflict(format!(
                "{} is not a forewarn lock file: {}; restore it from a backup, or move it away \
                 (forewarn then knows no installed plugin's origin)",
                path.display(),
                crate::plugins::manifest::describe_toml_error(&text, &error)
            ))
        })
    }

    /// Writes the lock file atomically (a temporary file, fsync, rename), mode 0644.
    pub fn write(&self, plugin_dir: &Path) -> Result<(), SupplyError> {
        let path = Lockfile::path(plugin_dir);
        let temporary = plugin_dir.join(format!(".{LOCK_FILE}.tmp"));
        let text = format!(
            "# Written by `forewarn plugin install`: where each plugin came from, who signed it and\n\
             # what it was granted. Do not edit; see docs/plugin-directory.md.\n{}",
            toml::to_string(self).expect("the lock file serializes")
        );
        write_atomically(&temporary, &path, text.as_bytes())
    }

    /// The provenance to show for the plugin `name` whose component hashes to `wasm_sha256`.
    pub fn provenance(&self, name: &str, wasm_sha256: &str) -> Provenance {
        match self.plugins.get(name) {
            None => Provenance::NotInstalled,
            Some(entry) if entry.wasm_sha256 == wasm_sha256 => {
                Provenance::Installed(entry.without_previous())
            }
            Some(entry) => Provenance::Modified(entry.without_previous()),
        }
    }
}

/// What the lock file says of a loaded plugin.
#[derive(Debug, Clone, PartialEq)]
pub enum Provenance {
    /// Not installed with `forewarn plugin install` (copied in by hand, or bundled).
    NotInstalled,
    /// Installed, and the running bytes are the ones installed.
    Installed(LockEntry),
    /// Installed, but the file was changed since.
    Modified(LockEntry),
}

/// Writes `bytes` to `temporary` (mode 0644, no link followed), fsyncs, renames to `path`.
pub(crate) fn write_atomically(
    temporary: &Path,
    path: &Path,
    bytes: &[u8],
) -> Result<(), SupplyError> {
    let fix = "check that the plugin directory exists and you may write it (as root, or the daemon's user)";
    let _stale = std::fs::remove_file(temporary);
    let mut file = forewarn_platform::file_access::create_new_shared_options()
        .open(temporary)
        .map_err(|source| SupplyError::io("create", temporary, source, fix))?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(source) = written {
        let _cleanup = std::fs::remove_file(temporary);
        return Err(SupplyError::io("write", temporary, source, fix));
    }
    std::fs::rename(temporary, path).map_err(|source| {
        let _cleanup = std::fs::remove_file(temporary);
        SupplyError::io("rename into place", path, source, fix)
    })
}

/// Lock files read while one status snapshot is built, one per plugin directory.
#[derive(Debug, Default)]
pub struct LockCache {
    by_dir: std::collections::HashMap<PathBuf, Option<Lockfile>>,
}

impl LockCache {
    /// The lock entry of the plugin `name` loaded from `wasm` with content hash `wasm_sha256`,
    /// and whether the running bytes are the ones installed; none when it was not installed
    /// with `forewarn plugin install` (or the lock cannot be read).
    pub fn provenance(
        &mut self,
        wasm: &Path,
        name: &str,
        wasm_sha256: &str,
    ) -> Option<(LockEntry, bool)> {
        let dir = wasm.parent()?.to_path_buf();
        let lock = self
            .by_dir
            .entry(dir)
            .or_insert_with_key(|dir| Lockfile::read(dir).ok())
            .as_ref()?;
        match lock.provenance(name, wasm_sha256) {
            Provenance::NotInstalled => None,
            Provenance::Installed(entry) => Some((entry, true)),
            Provenance::Modified(entry) => Some((entry, false)),
        }
    }
}

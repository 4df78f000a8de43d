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

use crate::error::SupplyError;
use forewarn_manifest::GrantSummary;
use forewarn_manifest::shown;

/// The lock file's name in the plugin directory.
pub const LOCK_FILE: &str = "plugins.lock";
/// Largest lock file read.
const MAX_LOCK_BYTES: u64 = 4 * 1024 * 1024;
/// The format version written: 2 keeps each plugin's `[capabilities]` table whole under
/// its grants; version 1's flat grants are still read.
const VERSION: u32 = 2;

/// The whole lock file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Lockfile {
    /// The format's version (2; 1 is read too).
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
    /// The artifact's version annotation (`org.opencontainers.image.version`), if it has
    /// one: an upgrade to a lower version is refused unless `--allow-downgrade`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// When the artifact says it was made (`org.opencontainers.image.created`, RFC 3339):
    /// the same version made earlier is a downgrade too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// When it was installed, RFC 3339.
    pub installed_at: String,
    /// What its manifest grants, as consented to (version 1's flat form is read too).
    #[serde(deserialize_with = "GrantSummary::read")]
    pub grants: GrantSummary,
    /// The version before this one, kept in `.previous/` for `plugin rollback`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<Box<LockEntry>>,
}

impl LockEntry {
    /// "alice@example.com (SHA256:…)", or "unsigned"; escaped and cut (the lock is a file
    /// anyone with write access to the directory can edit).
    pub fn signer_label(&self) -> String {
        match (&self.signer, &self.signer_key) {
            (Some(name), Some(key)) if name != key => {
                format!("{} ({})", shown::name(name), shown::name(key))
            }
            (Some(name), _) => shown::name(name),
            _ => "unsigned".to_owned(),
        }
    }

    /// The source as shown: escaped and cut.
    pub fn source_shown(&self) -> String {
        shown::reference(&self.source)
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
                forewarn_manifest::describe_toml_error(&text, &error)
            ))
        })
    }

    /// Writes the lock file atomically (a temporary file, fsync, rename), mode 0644, in the
    /// current version's form whatever version it was read in.
    pub fn write(&self, plugin_dir: &Path) -> Result<(), SupplyError> {
        let current = Lockfile {
            version: VERSION,
            plugins: self.plugins.clone(),
        };
        let path = Lockfile::path(plugin_dir);
        let temporary = plugin_dir.join(format!(".{LOCK_FILE}.tmp"));
        let text = format!(
            "# Written by `forewarn plugin install`: where each plugin came from, who signed it and\n\
             # what it was granted. Do not edit; see docs/plugin-directory.md.\n{}",
            toml::to_string(&current).expect("the lock file serializes")
        );
        write_atomically(&temporary, &path, text.as_bytes())
    }

    /// The provenance to show for the plugin `name` whose component hashes to `wasm_sha256`
    /// and whose manifest (`NAME.toml`, none when there is none) hashes to `manifest_sha256`.
    pub fn provenance(
        &self,
        name: &str,
        wasm_sha256: &str,
        manifest_sha256: Option<&str>,
    ) -> Provenance {
        let Some(entry) = self.plugins.get(name) else {
            return Provenance::NotInstalled;
        };
        let component = entry.wasm_sha256 != wasm_sha256;
        let manifest = entry.manifest_sha256.as_deref() != manifest_sha256;
        let entry = entry.without_previous();
        match (component, manifest) {
            (false, false) => Provenance::Installed(entry),
            (true, false) => Provenance::Modified(entry, Changed::Component),
            (false, true) => Provenance::Modified(entry, Changed::Manifest),
            (true, true) => Provenance::Modified(entry, Changed::Both),
        }
    }
}

/// What the lock file says of a loaded plugin.
#[derive(Debug, Clone, PartialEq)]
pub enum Provenance {
    /// Not installed with `forewarn plugin install` (copied in by hand, or bundled).
    NotInstalled,
    /// Installed, and the running files (component and manifest) are the ones installed.
    Installed(LockEntry),
    /// Installed, but a file was changed since (a manifest widened by hand, a component
    /// replaced): the entry describes what was installed, not what runs.
    Modified(LockEntry, Changed),
}

/// Which of a plugin's files differ from what was installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    /// `NAME.wasm`.
    Component,
    /// `NAME.toml` (changed, added or removed).
    Manifest,
    /// Both.
    Both,
}

impl Changed {
    /// Which files, in words ("NAME.toml").
    pub fn files(self, name: &str) -> String {
        match self {
            Changed::Component => format!("{name}.wasm"),
            Changed::Manifest => format!("{name}.toml"),
            Changed::Both => format!("{name}.wasm and {name}.toml"),
        }
    }
}

/// The sha256 (hex) of `NAME.toml` beside `wasm`, if there is one (and it can be read).
pub fn manifest_sha256_beside(wasm: &Path) -> Option<String> {
    std::fs::read(wasm.with_extension("toml"))
        .ok()
        .map(|bytes| crate::reference::Digest::of(&bytes).hex().to_owned())
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
    /// and whether the files are the ones installed (the component, and the manifest beside
    /// it: one widened by hand is not); none when it was not installed with `forewarn plugin
    /// install` (or the lock cannot be read).
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
        let manifest_sha256 = manifest_sha256_beside(wasm);
        match lock.provenance(name, wasm_sha256, manifest_sha256.as_deref()) {
            Provenance::NotInstalled => None,
            Provenance::Installed(entry) => Some((entry, true)),
            Provenance::Modified(entry, _) => Some((entry, false)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock written by a forewarn before version 2, as `plugin install` wrote it.
    const VERSION_1: &str = r#"
version = 1

[plugins.probe]
source = "127.0.0.1:5000/probe:1.0.0@sha256:ab"
digest = "sha256:ab"
wasm-sha256 = "cd"
installed-at = "2026-11-30T10:00:00Z"

[plugins.probe.grants]
actions = ["stop-app"]
readiness = true
http = ["127.0.0.1:8080"]
azure-identity = []
memory = "64.0 MiB"
budget = "10s"
http-response-limit = "1.0 MiB"
on-failure = "hold"
"#;

    #[test]
    fn a_version_1_lock_is_read_and_written_back_as_version_2() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(Lockfile::path(dir.path()), VERSION_1).unwrap();
        let lock = Lockfile::read(dir.path()).unwrap();
        let grants = &lock.plugins["probe"].grants;
        assert_eq!(grants.capabilities.actions, ["stop-app"]);
        assert_eq!(grants.capabilities.http, ["127.0.0.1:8080"]);
        assert!(grants.capabilities.readiness);
        assert_eq!(lock.version, 1);
        lock.write(dir.path()).unwrap();
        let text = std::fs::read_to_string(Lockfile::path(dir.path())).unwrap();
        assert!(text.contains("version = 2"), "{text}");
        assert!(
            text.contains("[plugins.probe.grants.capabilities]"),
            "{text}"
        );
        assert_eq!(Lockfile::read(dir.path()).unwrap().plugins, lock.plugins);
    }
}

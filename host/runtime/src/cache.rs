//! The on-disk cache of compiled components, keyed by the component's content hash and the
//! engine's compatibility hash, so a restart or a reload of known content skips compiling.
//!
//! Loading an entry runs its native code, so the cache trusts nothing it did not write: the
//! directory must be the daemon's own (0700), and every entry must match the SHA-256 digest
//! recorded in `index.sha256` when it was compiled; anything else is recompiled.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use forewarn_platform::trust::{self, FileRules, Owners, TrustError};

/// The file, in the cache directory, of entry name → hex SHA-256 of the entry's bytes.
pub(crate) const CACHE_INDEX_FILE: &str = "index.sha256";
/// Largest index accepted (about 100 000 entries).
const INDEX_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Largest compiled entry accepted.
const ENTRY_MAX_BYTES: u64 = 1024 * 1024 * 1024;

/// A directory of `<sha256>-<engine>.cwasm` files written by this daemon, and their digests.
#[derive(Debug, Clone)]
pub(crate) struct CompileCache {
    dir: PathBuf,
    /// Entry file name → hex SHA-256 of its bytes; mirrors `index.sha256`.
    index: Arc<Mutex<BTreeMap<String, String>>>,
}

impl CompileCache {
    /// Opens (and creates, private to this user) the cache directory: refuses one another
    /// user could write, removes temporary files a crash left, loads the digest index.
    pub(crate) fn open(dir: &Path) -> Result<CompileCache, TrustError> {
        trust::ensure_private_dir(dir)?;
        remove_stale_temporaries(dir);
        let index = load_index(dir);
        Ok(CompileCache {
            dir: dir.to_path_buf(),
            index: Arc::new(Mutex::new(index)),
        })
    }

    /// The cached component, if an entry exists, matches its recorded digest and the engine
    /// accepts it. A stale, damaged or tampered entry is removed and reported as a miss.
    pub(crate) fn load(&self, engine: &Engine, content_hash: &str) -> Option<Component> {
        let name = entry_name(engine, content_hash);
        let path = self.dir.join(&name);
        let recorded = self.lock().get(&name).cloned();
        let Some(recorded) = recorded else {
            if path.exists() {
                tracing::warn!(path = %path.display(), "compile-cache entry has no recorded digest; compiling instead");
                self.discard(&name);
            }
            return None;
        };
        // Read into memory rather than `deserialize_file`, which maps the file: a mapped
        // entry truncated or overwritten in place later (`cp` over it, a restore) would
        // kill the daemon with SIGBUS when the plugin next runs.
        let bytes = match trust::read_trusted_file(&path, entry_rules()) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "could not read compile-cache entry; compiling instead");
                self.discard(&name);
                return None;
            }
        };
        let digest = hex::encode(Sha256::digest(&bytes));
        if digest != recorded {
            tracing::warn!(path = %path.display(), recorded = %recorded, found = %digest, "compile-cache entry does not match its recorded digest (changed after it was written); recompiling");
            self.discard(&name);
            return None;
        }
        // SAFETY: the bytes are exactly those `store` serialized from this engine
        // configuration (their SHA-256 matches the digest recorded then, in a directory
        // only this user can write); wasmtime still checks the header and compatibility.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "discarding unusable compile-cache entry");
                self.discard(&name);
                None
            }
        }
    }

    /// Writes `component` for `content_hash`: temp file (never through a link), fsync,
    /// rename, then the digest into the index (written the same way), so a crash never
    /// leaves a half-written entry or an entry without its digest under the real name.
    pub(crate) fn store(
        &self,
        engine: &Engine,
        content_hash: &str,
        component: &Component,
    ) -> Result<(), CacheError> {
        let bytes = component
            .serialize()
            .map_err(|error| CacheError::Serialize {
                message: error.to_string(),
            })?;
        let name = entry_name(engine, content_hash);
        let path = self.dir.join(&name);
        write_atomically(&path, &bytes)?;
        let mut index = self.lock();
        index.insert(name, hex::encode(Sha256::digest(&bytes)));
        self.write_index(&index)
    }

    /// Removes, with its digest, every entry whose content hash is not in `keep` (plugins
    /// no longer present) or that `engine` cannot load (compiled under another engine
    /// configuration, such as an earlier forewarn's). Returns how many entries were removed.
    pub(crate) fn retain(&self, engine: &Engine, keep: &BTreeSet<String>) -> usize {
        let mut index = self.lock();
        let mut removed = 0;
        for name in entry_names(&self.dir) {
            let content_hash = name.split('-').next().unwrap_or_default();
            if keep.contains(content_hash) && name == entry_name(engine, content_hash) {
                continue;
            }
            if fs::remove_file(self.dir.join(&name)).is_ok() {
                removed += 1;
            }
            index.remove(&name);
        }
        index.retain(|name, _| self.dir.join(name).exists());
        if let Err(error) = self.write_index(&index) {
            tracing::warn!(%error, "could not update the compile-cache index after eviction");
        }
        removed
    }

    fn discard(&self, name: &str) {
        let _ignored = fs::remove_file(self.dir.join(name));
        let mut index = self.lock();
        if index.remove(name).is_some()
            && let Err(error) = self.write_index(&index)
        {
            tracing::warn!(%error, "could not update the compile-cache index");
        }
    }

    fn write_index(&self, index: &BTreeMap<String, String>) -> Result<(), CacheError> {
        let bytes = format_index(index);
        write_atomically(&self.dir.join(CACHE_INDEX_FILE), bytes.as_bytes())
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        crate::mutex::lock(&self.index)
    }
}

fn entry_name(engine: &Engine, content_hash: &str) -> String {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{content_hash}-{:016x}.cwasm", hasher.finish())
}

fn entry_rules() -> FileRules {
    FileRules {
        owners: Owners::DaemonOnly,
        max_bytes: ENTRY_MAX_BYTES,
        max_setting: "(none: delete the file)",
    }
}

/// The `.cwasm` file names in `dir`.
fn entry_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".cwasm"))
        .collect()
}

/// Removes `*.tmp` files: written by a store that crashed before its rename.
fn remove_stale_temporaries(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let is_tmp = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.ends_with(".tmp"));
        if is_tmp && fs::remove_file(entry.path()).is_ok() {
            tracing::info!(path = %entry.path().display(), "removed a stale compile-cache temporary file");
        }
    }
}

/// The index as last written; an absent, unreadable or untrusted one is empty (every entry
/// is then recompiled once).
fn load_index(dir: &Path) -> BTreeMap<String, String> {
    let path = dir.join(CACHE_INDEX_FILE);
    if !path.exists() {
        return BTreeMap::new();
    }
    let rules = FileRules {
        owners: Owners::DaemonOnly,
        max_bytes: INDEX_MAX_BYTES,
        max_setting: "(none: delete the file)",
    };
    let text = match trust::read_trusted_file(&path, rules) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) => {
            tracing::warn!(%error, "compile-cache index not used; every entry is recompiled");
            return BTreeMap::new();
        }
    };
    parse_index(&text)
}

/// The index format: one `NAME DIGEST` pair per line (both are hex, dashes and dots).
fn format_index(index: &BTreeMap<String, String>) -> String {
    index
        .iter()
        .map(|(name, digest)| format!("{name} {digest}\n"))
        .collect()
}

fn parse_index(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(name, digest)| (name.to_owned(), digest.to_owned()))
        .collect()
}

/// Why a compiled component could not be cached (the plugin still loads).
#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheError {
    #[error("could not serialize the compiled component: {message}")]
    Serialize { message: String },
    #[error("could not write the compile cache entry {}: {source} (check free disk space and permissions)", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes `path.tmp` (mode 0600, never through a link), fsyncs it and renames it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(".tmp");
    let temp = PathBuf::from(temp);
    let write = |temp: &Path| -> std::io::Result<()> {
        let mut file = trust::create_options().open(temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    write(&temp).map_err(|source| CacheError::Write {
        path: temp.clone(),
        source,
    })?;
    fs::rename(&temp, path).map_err(|source| CacheError::Write {
        path: path.to_path_buf(),
        source,
    })
}

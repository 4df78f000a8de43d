//! The on-disk cache of compiled components, keyed by the component's content hash and the
//! engine's compatibility hash, so a restart or a reload of known content skips compiling.

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// A directory of `<sha256>-<engine>.cwasm` files written by this daemon.
#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
}

impl CompileCache {
    /// Opens (and creates, private to this user) the cache directory.
    pub fn open(dir: &Path) -> std::io::Result<CompileCache> {
        fs::create_dir_all(dir)?;
        restrict_to_owner(dir)?;
        Ok(CompileCache {
            dir: dir.to_path_buf(),
        })
    }

    /// Where the compiled form of `content_hash` lives for `engine`.
    pub fn entry_path(&self, engine: &Engine, content_hash: &str) -> PathBuf {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir
            .join(format!("{content_hash}-{:016x}.cwasm", hasher.finish()))
    }

    /// The cached component, if an entry exists and the engine accepts it. A stale or
    /// damaged entry is removed and reported as a miss.
    pub fn load(&self, engine: &Engine, content_hash: &str) -> Option<Component> {
        let path = self.entry_path(engine, content_hash);
        if !path.exists() {
            return None;
        }
        // Read into memory rather than `deserialize_file`, which maps the file: a mapped
        // entry truncated or overwritten in place later (`cp` over it, a restore) would
        // kill the daemon with SIGBUS when the plugin next runs.
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "could not read compile-cache entry; compiling instead");
                return None;
            }
        };
        // SAFETY: entries are written only by `store` below, from `Component::serialize`
        // of this same engine configuration, into a directory only this user can write;
        // wasmtime still checks the header and the engine compatibility hash.
        match unsafe { Component::deserialize(engine, &bytes) } {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "discarding unusable compile-cache entry");
                let _ignored = fs::remove_file(&path);
                None
            }
        }
    }

    /// Writes `component` for `content_hash`: temp file, fsync, rename, so a crash never
    /// leaves a half-written entry under the real name.
    pub fn store(
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
        let path = self.entry_path(engine, content_hash);
        let temp = path.with_extension("cwasm.tmp");
        write_synced(&temp, &bytes).map_err(|source| CacheError::Write {
            path: temp.clone(),
            source,
        })?;
        fs::rename(&temp, &path).map_err(|source| CacheError::Write { path, source })
    }
}

/// Why a compiled component could not be cached (the plugin still loads).
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("could not serialize the compiled component: {message}")]
    Serialize { message: String },
    #[error("could not write the compile cache entry {}: {source} (check free disk space and permissions)", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = fs::File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(unix)]
fn restrict_to_owner(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

#[cfg(not(unix))]
fn restrict_to_owner(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

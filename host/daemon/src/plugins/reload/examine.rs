//! Looking at one plugin's files: read only when they are trusted and not moving, skipped when
//! their content is what was last tried, loaded (checked and compiled) otherwise. Blocking.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use forewarn_runtime::Runtime;
use sha2::{Digest, Sha256};

use forewarn_platform::trust::{self, FileRules, TrustError};

use crate::plugins::set::{self as plugins, LoadedPlugin, PluginFileLimits, PluginLoadError};
use forewarn_manifest::{FailurePolicy, PluginManifest};

/// What was on disk for one plugin the last time it was tried: the SHA-256 of the
/// component and of the manifest (if any). Identical content is not tried twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fingerprint {
    wasm: [u8; 32],
    manifest: Option<[u8; 32]>,
}

/// The result of looking at one plugin's files.
pub(super) enum Outcome {
    /// No `NAME.wasm`: the plugin is not (or no longer) installed.
    Absent,
    /// The same content as the last attempt (loaded or failed): nothing to do.
    Unchanged,
    /// A file changed while it was read: try again after the next quiet period.
    StillBeingWritten(PathBuf),
    Loaded {
        plugin: Box<LoadedPlugin>,
        fingerprint: Fingerprint,
        elapsed: Duration,
    },
    Failed {
        error: PluginLoadError,
        fingerprint: Fingerprint,
        /// The `on-failure` of the manifest read with the failed file, when it was read.
        on_failure: Option<FailurePolicy>,
    },
}

/// Reads one plugin's files and, if they differ from the last attempt, loads them. Blocking.
/// Files that are not trusted (links, FIFOs, devices, oversized, writable by others) fail
/// that plugin only, and the version already loaded stays live.
pub(super) fn examine(
    runtime: &Runtime,
    dir: &Path,
    stem: &str,
    last: Option<&Fingerprint>,
    limits: PluginFileLimits,
) -> Outcome {
    let wasm = dir.join(format!("{stem}.wasm"));
    let manifest_path = dir.join(format!("{stem}.toml"));
    let bytes = match read_settled(&wasm, limits.wasm_rules()) {
        Ok(Settled::Absent) => return Outcome::Absent,
        Ok(Settled::Moving) => return Outcome::StillBeingWritten(wasm),
        Ok(Settled::Bytes(bytes)) => bytes,
        Err(source) => return untrusted(source, [0; 32]),
    };
    let manifest_text = match read_settled(&manifest_path, limits.manifest_rules()) {
        Ok(Settled::Absent) => None,
        Ok(Settled::Moving) => return Outcome::StillBeingWritten(manifest_path),
        Ok(Settled::Bytes(text)) => Some(text),
        Err(source) => return untrusted(source, sha256(&bytes)),
    };
    let fingerprint = Fingerprint {
        wasm: sha256(&bytes),
        manifest: manifest_text.as_deref().map(sha256),
    };
    if last == Some(&fingerprint) {
        return Outcome::Unchanged;
    }
    let started = Instant::now();
    let manifest = match read_manifest(&manifest_path, manifest_text.as_deref()) {
        Ok(manifest) => manifest,
        Err(error) => {
            return Outcome::Failed {
                error,
                fingerprint,
                on_failure: None,
            };
        }
    };
    let on_failure = manifest.on_failure;
    match plugins::load_plugin_bytes(runtime, &wasm, &bytes, manifest) {
        Ok(plugin) => Outcome::Loaded {
            plugin: Box::new(plugin),
            fingerprint,
            elapsed: started.elapsed(),
        },
        Err(error) => Outcome::Failed {
            error,
            fingerprint,
            on_failure: Some(on_failure),
        },
    }
}

/// A plugin whose file (component or manifest) failed the trust check, recorded by the
/// component's hash so that it is not tried again until something changes.
fn untrusted(source: TrustError, wasm: [u8; 32]) -> Outcome {
    Outcome::Failed {
        error: PluginLoadError::Untrusted(source),
        fingerprint: Fingerprint {
            wasm,
            manifest: None,
        },
        on_failure: None,
    }
}

/// The manifest of the text read (the defaults without one).
fn read_manifest(
    manifest_path: &Path,
    manifest_text: Option<&[u8]>,
) -> Result<PluginManifest, PluginLoadError> {
    let manifest = match manifest_text {
        None => PluginManifest::default(),
        Some(raw) => {
            let text = std::str::from_utf8(raw).map_err(|_| {
                PluginLoadError::Manifest(forewarn_manifest::ManifestError::Invalid {
                    path: manifest_path.to_path_buf(),
                    problem: forewarn_manifest::ManifestProblem::NotUtf8,
                })
            })?;
            PluginManifest::from_text(manifest_path, text)?
        }
    };
    Ok(manifest)
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// A file's content, read only if it did not change while being read.
enum Settled {
    Absent,
    /// Its size or modification time changed between the two looks: still being written.
    Moving,
    Bytes(Vec<u8>),
}

/// Reads `path` if it is a trusted regular file (see [`trust::read_trusted_file`]),
/// comparing its size and modification time before and after the read.
fn read_settled(path: &Path, rules: FileRules) -> Result<Settled, TrustError> {
    let Some(before) = look_at(path)? else {
        return Ok(Settled::Absent);
    };
    let bytes = match trust::read_trusted_file(path, rules) {
        Ok(bytes) => bytes,
        Err(TrustError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {
            return Ok(Settled::Absent);
        }
        Err(error) => return Err(error),
    };
    let Some(after) = look_at(path)? else {
        return Ok(Settled::Absent);
    };
    let same_size = before.len() == after.len() && after.len() == bytes.len() as u64;
    let same_time = before.modified().ok() == after.modified().ok();
    if same_size && same_time {
        Ok(Settled::Bytes(bytes))
    } else {
        Ok(Settled::Moving)
    }
}

/// The metadata of `path` itself (a link is not followed), or None if it is absent.
fn look_at(path: &Path) -> Result<Option<std::fs::Metadata>, TrustError> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) => Ok(Some(metadata)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TrustError::Io {
            action: "inspect",
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_read_sees_absent_and_present_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.wasm");
        assert!(matches!(
            read_settled(&path, PluginFileLimits::default().wasm_rules()).unwrap(),
            Settled::Absent
        ));
        std::fs::write(&path, b"abc").unwrap();
        assert!(
            matches!(read_settled(&path, PluginFileLimits::default().wasm_rules()).unwrap(), Settled::Bytes(bytes) if bytes == b"abc")
        );
    }
}

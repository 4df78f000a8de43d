//! The set of loaded plugins the daemon dispatches to: each with its manifest, kept in
//! dependency order (`after`), and how plugins are loaded from files or bundled bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use forewarn_imds::EventType;
use forewarn_runtime::trust::{self, FileRules, Owners, TrustError};
use forewarn_runtime::{LoadError, Plugin, Runtime};

use crate::plugins::manifest::{ManifestError, PluginManifest};

/// Where a plugin came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// A `.wasm` file in the plugin directory.
    File(PathBuf),
    /// Compiled into the forewarn binary (the demo's bundled plugins).
    Bundled,
}

/// A plugin ready to call, with the operator's settings for it.
#[derive(Clone)]
pub struct LoadedPlugin {
    pub plugin: Plugin,
    pub manifest: PluginManifest,
    pub source: PluginSource,
}

impl LoadedPlugin {
    pub fn name(&self) -> &str {
        self.plugin.name()
    }
}

/// The plugins live at one moment, in dependency order. Replaced whole on reload, so a
/// dispatch round sees one consistent set.
#[derive(Clone, Default)]
pub struct PluginSet {
    ordered: Vec<LoadedPlugin>,
    /// Per plugin, the loaded plugins it runs after.
    predecessors: BTreeMap<String, Vec<String>>,
    /// Problems found while ordering (unknown names in `after`, cycles), for the log and status.
    warnings: Vec<String>,
    /// Plugin files that failed to load, by file, with the reason (the previous version of
    /// that plugin, if any, stays in `ordered`).
    load_errors: BTreeMap<PathBuf, String>,
}

/// A plugin file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PluginLoadError {
    #[error("cannot read plugin {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Manifest(#[from] ManifestError),
    #[error("plugin {} was not loaded: {source}", path.display())]
    Component { path: PathBuf, source: LoadError },
    #[error(
        "plugin file name {} is not usable: a plugin name is 1 to 64 of a-z, 0-9, '-' and '_' (rename the file)",
        path.display()
    )]
    BadName { path: PathBuf },
    #[error("plugin file refused: {0}")]
    Untrusted(#[from] TrustError),
}

/// Default largest plugin component: well above a Python component (about 40 MiB).
pub const DEFAULT_MAX_PLUGIN_BYTES: u64 = 64 * 1024 * 1024;
/// Default largest plugin manifest.
pub const DEFAULT_MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// How large plugin files may be (`max-plugin-size`, `max-manifest-size` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginFileLimits {
    pub max_wasm_bytes: u64,
    pub max_manifest_bytes: u64,
}

impl Default for PluginFileLimits {
    fn default() -> Self {
        PluginFileLimits {
            max_wasm_bytes: DEFAULT_MAX_PLUGIN_BYTES,
            max_manifest_bytes: DEFAULT_MAX_MANIFEST_BYTES,
        }
    }
}

impl PluginFileLimits {
    /// The rules a `.wasm` must pass: a regular file of the daemon's user or root, writable
    /// by no one else, at most `max_wasm_bytes`.
    pub fn wasm_rules(&self) -> FileRules {
        FileRules {
            owners: Owners::DaemonOrRoot,
            max_bytes: self.max_wasm_bytes,
            max_setting: "max-plugin-size",
        }
    }

    /// The rules a `.toml` manifest must pass (it grants capabilities, root actions too).
    pub fn manifest_rules(&self) -> FileRules {
        FileRules {
            owners: Owners::DaemonOrRoot,
            max_bytes: self.max_manifest_bytes,
            max_setting: "max-manifest-size",
        }
    }
}

impl PluginLoadError {
    /// The file the error is about (the component or its manifest).
    pub fn path(&self) -> &Path {
        match self {
            PluginLoadError::Read { path, .. }
            | PluginLoadError::Component { path, .. }
            | PluginLoadError::BadName { path } => path,
            PluginLoadError::Manifest(error) => error.path(),
            PluginLoadError::Untrusted(error) => error.path(),
        }
    }
}

impl PluginSet {
    /// Orders `plugins` so that every plugin comes after those it names in `after`.
    /// Unknown names are ignored and a cycle is broken by name order, each with a warning,
    /// so one bad manifest line never leaves the VM without its other plugins.
    pub fn new(plugins: Vec<LoadedPlugin>) -> PluginSet {
        let mut warnings = Vec::new();
        let by_name: BTreeMap<String, LoadedPlugin> = plugins
            .into_iter()
            .map(|plugin| (plugin.name().to_owned(), plugin))
            .collect();
        let mut predecessors = BTreeMap::new();
        for (name, plugin) in &by_name {
            let mut known = Vec::new();
            for before in &plugin.manifest.after {
                if by_name.contains_key(before) {
                    known.push(before.clone());
                } else {
                    warnings.push(format!(
                        "plugin `{name}` runs after `{before}`, which is not loaded; ignoring that constraint"
                    ));
                }
            }
            predecessors.insert(name.clone(), known);
        }
        let order = topological_order(&predecessors, &mut warnings);
        let ordered = order
            .iter()
            .filter_map(|name| by_name.get(name).cloned())
            .collect();
        PluginSet {
            ordered,
            predecessors,
            warnings,
            load_errors: BTreeMap::new(),
        }
    }

    /// The same set, reporting these load failures (file → reason).
    pub fn with_load_errors(mut self, load_errors: BTreeMap<PathBuf, String>) -> PluginSet {
        self.load_errors = load_errors;
        self
    }

    /// Plugin files that failed to load, with the reason.
    pub fn load_errors(&self) -> &BTreeMap<PathBuf, String> {
        &self.load_errors
    }

    /// All plugins, in dependency order.
    pub fn all(&self) -> &[LoadedPlugin] {
        &self.ordered
    }

    pub fn get(&self, name: &str) -> Option<&LoadedPlugin> {
        self.ordered.iter().find(|plugin| plugin.name() == name)
    }

    /// The plugins subscribed to `event_type`, in dependency order.
    pub fn subscribers(&self, event_type: EventType) -> Vec<&LoadedPlugin> {
        self.ordered
            .iter()
            .filter(|plugin| plugin.manifest.subscribes_to(event_type))
            .collect()
    }

    /// The loaded plugins `name` must wait for.
    pub fn predecessors(&self, name: &str) -> &[String] {
        self.predecessors
            .get(name)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Problems found while ordering the plugins.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }
}

/// Kahn's algorithm with names in sorted order at each step, so the order is stable.
fn topological_order(
    predecessors: &BTreeMap<String, Vec<String>>,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let mut done: Vec<String> = Vec::new();
    let mut remaining: BTreeSet<&String> = predecessors.keys().collect();
    while !remaining.is_empty() {
        let ready = remaining.iter().copied().find(|name| {
            predecessors[*name]
                .iter()
                .all(|before| done.contains(before))
        });
        let next = match ready {
            Some(name) => name,
            None => {
                // Every remaining plugin waits on another: a cycle. Break it by name order.
                let stuck: Vec<&str> = remaining.iter().map(|name| name.as_str()).collect();
                warnings.push(format!(
                    "plugins {} name each other in `after` (a cycle); running them in name order",
                    stuck.join(", ")
                ));
                remaining
                    .iter()
                    .copied()
                    .next()
                    .expect("remaining is not empty")
            }
        };
        remaining.remove(next);
        done.push(next.clone());
    }
    done
}

/// The plugin name a file stands for: its stem, if it is a usable name.
pub fn plugin_name_of(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    let valid = !stem.is_empty()
        && stem.len() <= 64
        && stem.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-' || byte == b'_'
        });
    valid.then(|| stem.to_owned())
}

/// Loads one plugin from `NAME.wasm`, with `NAME.toml` beside it when present. Blocking.
pub fn load_plugin_file(runtime: &Runtime, wasm: &Path) -> Result<LoadedPlugin, PluginLoadError> {
    if plugin_name_of(wasm).is_none() {
        return Err(PluginLoadError::BadName {
            path: wasm.to_path_buf(),
        });
    }
    let limits = PluginFileLimits::default();
    let manifest_path = wasm.with_extension("toml");
    let manifest = if std::fs::symlink_metadata(&manifest_path).is_ok() {
        let raw = trust::read_trusted_file(&manifest_path, limits.manifest_rules())?;
        let text = String::from_utf8_lossy(&raw);
        PluginManifest::from_text(&manifest_path, &text)?
    } else {
        PluginManifest::default()
    };
    let bytes = trust::read_trusted_file(wasm, limits.wasm_rules())?;
    load_plugin_bytes(runtime, wasm, &bytes, manifest)
}

/// Loads a plugin from the bytes of `wasm` (already read) with its manifest: checks the
/// name, compiles (or takes the compiled form from the cache) and validates. Blocking.
pub fn load_plugin_bytes(
    runtime: &Runtime,
    wasm: &Path,
    bytes: &[u8],
    manifest: PluginManifest,
) -> Result<LoadedPlugin, PluginLoadError> {
    let name = plugin_name_of(wasm).ok_or_else(|| PluginLoadError::BadName {
        path: wasm.to_path_buf(),
    })?;
    let plugin = runtime
        .load(&name, bytes, manifest.runtime_settings())
        .map_err(|source| PluginLoadError::Component {
            path: wasm.to_path_buf(),
            source,
        })?;
    Ok(LoadedPlugin {
        plugin,
        manifest,
        source: PluginSource::File(wasm.to_path_buf()),
    })
}

/// Loads every `*.wasm` in `dir` (sorted by name). Files that fail are returned beside the
/// plugins that loaded, so one broken file costs only itself. Blocking.
pub fn load_plugin_dir(
    runtime: &Runtime,
    dir: &Path,
) -> Result<(Vec<LoadedPlugin>, Vec<PluginLoadError>), std::io::Error> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| is_plugin_file(path))
        .collect();
    paths.sort();
    let mut loaded = Vec::new();
    let mut failed = Vec::new();
    for path in paths {
        match load_plugin_file(runtime, &path) {
            Ok(plugin) => loaded.push(plugin),
            Err(error) => failed.push(error),
        }
    }
    Ok((loaded, failed))
}

/// Whether `path` names a plugin component (`*.wasm`, not hidden).
pub fn is_plugin_file(path: &Path) -> bool {
    let hidden = path
        .file_name()
        .and_then(|name| name.to_str())
        .is_none_or(|name| name.starts_with('.'));
    !hidden
        && path
            .extension()
            .is_some_and(|extension| extension == "wasm")
}

/// Whether `path` is a file the plugin directory watcher acts on: a visible `*.wasm` or
/// `*.toml`. Editor temp files (`x.wasm.swp`, `x.wasm~`, `x.wasm.tmp`, `#x.toml#`) and
/// dotfiles are not.
pub fn is_watched_file(path: &Path) -> bool {
    let Some(file_name) = path.file_name().and_then(|name| name.to_str()) else {
        return false;
    };
    if file_name.starts_with('.') || file_name.starts_with('#') {
        return false;
    }
    path.extension()
        .is_some_and(|extension| extension == "wasm" || extension == "toml")
}

/// Shared handle to the live plugin set.
pub type SharedPlugins = tokio::sync::watch::Receiver<Arc<PluginSet>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn order(edges: &[(&str, &[&str])]) -> (Vec<String>, Vec<String>) {
        let predecessors = edges
            .iter()
            .map(|(name, after)| {
                (
                    name.to_string(),
                    after.iter().map(|s| s.to_string()).collect(),
                )
            })
            .collect();
        let mut warnings = Vec::new();
        (topological_order(&predecessors, &mut warnings), warnings)
    }

    #[test]
    fn orders_by_after_then_name() {
        let (order, warnings) = order(&[
            ("graceful-shutdown", &["lb-drain", "checkpoint"]),
            ("checkpoint", &["lb-drain"]),
            ("lb-drain", &[]),
            ("audit", &[]),
        ]);
        assert_eq!(
            order,
            ["audit", "lb-drain", "checkpoint", "graceful-shutdown"]
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn cycle_is_broken_with_a_warning() {
        let (order, warnings) = order(&[("a", &["b"]), ("b", &["a"]), ("c", &[])]);
        assert_eq!(order, ["c", "a", "b"]);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("cycle"));
    }

    #[test]
    fn plugin_names_come_from_file_stems() {
        assert_eq!(
            plugin_name_of(Path::new("/x/lb-drain.wasm")).as_deref(),
            Some("lb-drain")
        );
        assert_eq!(plugin_name_of(Path::new("/x/Bad Name.wasm")), None);
        assert!(is_plugin_file(Path::new("/x/a.wasm")));
        assert!(!is_plugin_file(Path::new("/x/.a.wasm")));
        assert!(!is_plugin_file(Path::new("/x/a.wasm.tmp")));
        assert!(!is_plugin_file(Path::new("/x/a.toml")));
    }

    #[test]
    fn watcher_ignores_editor_files_and_dotfiles() {
        for watched in ["/x/a.wasm", "/x/lb-drain.toml", "/x/Bad Name.wasm"] {
            assert!(is_watched_file(Path::new(watched)), "{watched}");
        }
        for ignored in [
            "/x/.a.wasm",
            "/x/.a.wasm.swp",
            "/x/a.wasm.swp",
            "/x/a.wasm~",
            "/x/a.toml~",
            "/x/a.wasm.tmp",
            "/x/#a.toml#",
            "/x/a.wat",
            "/x/README",
            "/x/",
        ] {
            assert!(!is_watched_file(Path::new(ignored)), "{ignored}");
        }
    }
}

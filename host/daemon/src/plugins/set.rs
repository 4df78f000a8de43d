//! The set of loaded plugins the daemon dispatches to: each with its manifest, kept in
//! dependency order (`after`), and how plugins are loaded from files or bundled bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use forewarn_platform::trust::{FileRules, Owners, TrustError};
use forewarn_runtime::{LoadError, Plugin, Runtime};

use forewarn_imds::PluginName;

use crate::pipeline::roster::Roster;
use forewarn_manifest::{ManifestError, PluginManifest, name_problem};

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
    /// The compiled, validated component, ready to instantiate per call.
    pub plugin: Plugin,
    /// Its manifest (the defaults when the plugin has no `.toml`).
    pub manifest: PluginManifest,
    /// Where it was loaded from: a file in the plugin directory, or bundled.
    pub source: PluginSource,
}

impl LoadedPlugin {
    /// The plugin's name: its file name without `.wasm` (or the bundled plugin's name),
    /// unique within a [`PluginSet`].
    pub fn name(&self) -> &str {
        self.plugin.name()
    }

    /// What tells this version of the plugin from another: its component's sha256 and a
    /// digest of its manifest (a new `.wasm` or a changed `.toml` is a new version).
    fn version(&self) -> String {
        version_of(self.plugin.content_hash(), &self.manifest)
    }
}

/// A plugin's version: its component's sha256 and its manifest's digest.
fn version_of(content_hash: &str, manifest: &PluginManifest) -> String {
    format!("{content_hash}/{}", manifest.digest())
}

/// The plugins live at one moment, in dependency order. Replaced whole on reload, so a
/// dispatch round sees one consistent set. The pipeline sees only its [`Roster`].
#[derive(Clone, Default)]
pub struct PluginSet {
    /// In the roster's order.
    ordered: Vec<LoadedPlugin>,
    roster: Arc<Roster>,
}

/// A plugin file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PluginLoadError {
    /// The plugin's `.toml` manifest could not be read or is invalid.
    #[error("{0}")]
    Manifest(#[from] ManifestError),
    /// The component did not compile or does not implement forewarn's plugin world.
    /// (`reason` is in the message and deliberately not the error's source, so an error
    /// chain printed whole (`{:#}`) says it once.)
    #[error("plugin {} was not loaded: {reason}", path.display())]
    Component {
        /// The `.wasm` file.
        path: PathBuf,
        /// What the runtime rejected.
        reason: LoadError,
    },
    /// The file name is not a valid plugin name (1–64 of `a-z 0-9 - _`).
    #[error(
        "plugin file name {} is not usable: a plugin name is 1 to 64 of a-z, 0-9, '-' and '_' (rename the file)",
        path.display()
    )]
    BadName {
        /// The file with the rejected name.
        path: PathBuf,
    },
    /// The file (or its manifest) is not one forewarn trusts: writable by another user, a
    /// symbolic link, not a regular file, or larger than [`PluginFileLimits`] allows.
    #[error("plugin file refused: {0}")]
    Untrusted(#[from] TrustError),
}

/// Default largest plugin component: well above a Python component (about 40 MiB).
pub const DEFAULT_MAX_PLUGIN_BYTES: u64 = 64 * 1024 * 1024;
/// Default largest plugin manifest.
pub(crate) const DEFAULT_MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// How large plugin files may be (`max-plugin-size`, `max-manifest-size` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginFileLimits {
    /// Largest `.wasm` accepted, in bytes (`max-plugin-size`; 64 MiB by default).
    pub max_wasm_bytes: u64,
    /// Largest `.toml` manifest accepted, in bytes (`max-manifest-size`; 1 MiB by default).
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
    pub(crate) fn wasm_rules(&self) -> FileRules {
        FileRules {
            owners: Owners::DaemonOrRoot,
            max_bytes: self.max_wasm_bytes,
            max_setting: "max-plugin-size",
        }
    }

    /// The rules a `.toml` manifest must pass (it grants capabilities, root actions too).
    pub(crate) fn manifest_rules(&self) -> FileRules {
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
            PluginLoadError::Component { path, .. } | PluginLoadError::BadName { path } => path,
            PluginLoadError::Manifest(error) => error.path(),
            PluginLoadError::Untrusted(error) => error.path(),
        }
    }
}

impl PluginSet {
    /// Orders `plugins` so that every plugin comes after those it names in `after` (see
    /// [`Roster::new`]: one bad manifest line never leaves the VM without its other plugins).
    pub fn new(plugins: Vec<LoadedPlugin>) -> PluginSet {
        let mut roster = Roster::new(
            plugins
                .iter()
                .map(|plugin| (PluginName::from(plugin.name()), plugin.manifest.terms()))
                .collect(),
        );
        let versions = plugins
            .iter()
            .map(|plugin| (PluginName::from(plugin.name()), plugin.version()))
            .collect();
        roster.set_versions(&versions);
        let mut by_name: BTreeMap<String, LoadedPlugin> = plugins
            .into_iter()
            .map(|plugin| (plugin.name().to_owned(), plugin))
            .collect();
        let ordered = roster
            .members()
            .iter()
            .filter_map(|member| by_name.remove(member.name.as_str()))
            .collect();
        PluginSet {
            ordered,
            roster: Arc::new(roster),
        }
    }

    /// A set scheduled by `roster` with no component behind it (tests of what is built from
    /// a set).
    #[cfg(test)]
    pub(crate) fn of_roster(roster: Roster) -> PluginSet {
        PluginSet {
            ordered: Vec::new(),
            roster: Arc::new(roster),
        }
    }

    /// The same set, reporting these load failures (file → reason).
    pub(crate) fn with_load_errors(mut self, load_errors: BTreeMap<PathBuf, String>) -> PluginSet {
        Arc::make_mut(&mut self.roster).set_load_errors(load_errors);
        self
    }

    /// The same set, where these files' load errors are of advisory plugins (their manifest
    /// says `on-failure = "approve"`): they do not hold approvals.
    pub(crate) fn with_advisory_load_errors(mut self, files: BTreeSet<PathBuf>) -> PluginSet {
        Arc::make_mut(&mut self.roster).set_advisory_load_errors(files);
        self
    }

    /// Whether the load error of `file` holds approvals (see [`Roster::load_error_holds`]).
    pub fn load_error_holds(&self, file: &Path) -> bool {
        self.roster.load_error_holds(file)
    }

    /// What the pipeline schedules by: names, manifests, order and load errors.
    pub(crate) fn roster(&self) -> &Arc<Roster> {
        &self.roster
    }

    /// Plugin files that failed to load, with the reason.
    pub fn load_errors(&self) -> &BTreeMap<PathBuf, String> {
        self.roster.load_errors()
    }

    /// All plugins, in dependency order.
    pub fn all(&self) -> &[LoadedPlugin] {
        &self.ordered
    }

    /// The plugin called `name`.
    pub fn get(&self, name: &PluginName) -> Option<&LoadedPlugin> {
        self.ordered.iter().find(|plugin| plugin.name() == name)
    }

    /// Problems found while ordering the plugins.
    pub fn warnings(&self) -> &[String] {
        self.roster.warnings()
    }

    /// Whether no plugin is loaded.
    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }
}

/// The plugin name a file stands for: its stem, if it is a usable name.
pub(crate) fn plugin_name_of(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    name_problem(stem).is_none().then(|| stem.to_owned())
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
    load_plugin_named(runtime, &name, wasm, bytes, manifest)
}

/// Loads the plugin `name` from the bytes of `wasm` with its manifest, whatever the file is
/// called (`plugin test` and `demo --plugins` name a file outside the plugin directory by
/// `forewarn_host::cli::plugin_files::PluginFile::name`). Blocking.
pub fn load_plugin_named(
    runtime: &Runtime,
    name: &str,
    wasm: &Path,
    bytes: &[u8],
    manifest: PluginManifest,
) -> Result<LoadedPlugin, PluginLoadError> {
    let plugin = runtime
        .load(name, bytes, manifest.runtime_settings())
        .map_err(|reason| PluginLoadError::Component {
            path: wasm.to_path_buf(),
            reason,
        })?;
    Ok(LoadedPlugin {
        plugin,
        manifest,
        source: PluginSource::File(wasm.to_path_buf()),
    })
}

/// Whether `path` names a plugin component (`*.wasm`, not hidden).
#[cfg(test)]
pub(crate) fn is_plugin_file(path: &Path) -> bool {
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
pub(crate) fn is_watched_file(path: &Path) -> bool {
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
pub(crate) type SharedPlugins = tokio::sync::watch::Receiver<Arc<PluginSet>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_change_to_the_manifest_or_the_component_is_a_new_version() {
        let manifest = PluginManifest::parse("budget = \"5s\"").unwrap();
        let same = PluginManifest::parse("budget = \"5s\"").unwrap();
        assert_eq!(version_of("abc", &manifest), version_of("abc", &same));
        assert_ne!(version_of("abc", &manifest), version_of("abd", &same));
        // Settings the pipeline never reads still make a new version (a raised memory cap
        // lifts a quarantine).
        for other in [
            "budget = \"5s\"\nmemory = \"128MiB\"",
            "budget = \"5s\"\n[config]\nurl = \"http://127.0.0.1:1\"",
            "budget = \"5s\"\n[capabilities]\nreadiness = true",
        ] {
            let changed = PluginManifest::parse(other).unwrap();
            assert_eq!(manifest.terms(), changed.terms(), "{other}");
            assert_ne!(
                version_of("abc", &manifest),
                version_of("abc", &changed),
                "{other}"
            );
        }
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

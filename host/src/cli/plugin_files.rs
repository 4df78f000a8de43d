//! Plugins named on the command line rather than installed: `plugin test`'s PLUGIN.wasm and
//! `demo --plugins DIR`'s files, each with its manifest (`NAME.toml` beside it) and overrides.

use std::path::{Path, PathBuf};

use anyhow::Context;
use forewarn_runtime::Runtime;

use forewarn_daemon::plugins::set::{LoadedPlugin, load_plugin_named};
use forewarn_manifest::name_problem;
use forewarn_manifest::{ConfigValue, PluginManifest};

/// The name `plugin check`, `plugin test` and `demo --plugins` give a plugin file, and where it
/// came from. The daemon knows a plugin by its file name in the plugin directory, so a file
/// called otherwise (`drain_notice-0.1.0.wasm`) is checked and tested under the name it
/// must be installed as, and both commands say so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallName {
    /// The plugin's name.
    pub name: String,
    /// Why it is not simply the file's stem; None when it is.
    pub renamed: Option<Renamed>,
}

/// Where a plugin's name came from when the file's stem is not a usable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renamed {
    /// The manifest's stem (`--manifest drain-notice.toml`).
    FromManifest,
    /// The stem up to its first character a name cannot have, less a version
    /// (`drain_notice-0.1.0` -> `drain_notice`).
    FromStemPrefix,
}

/// A plugin file whose name gives no plugin name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{file} cannot be installed under its name: forewarn knows a plugin by its file name \
     without .wasm, which must be 1 to 64 of a-z, 0-9, '-' and '_' ({problem}). Rename it, \
     e.g. to {suggestion}.wasm, and its manifest to {suggestion}.toml"
)]
pub struct InstallNameError {
    /// The file as given.
    pub file: String,
    /// What is wrong with its stem.
    pub problem: &'static str,
    /// A usable name close to it.
    pub suggestion: String,
}

impl InstallName {
    /// The note `plugin check` and `plugin test` print when the name is not the file's stem:
    /// what the file is taken as, and what to rename it to.
    pub fn notice(&self, wasm: &Path) -> Option<String> {
        let why = match self.renamed? {
            Renamed::FromManifest => "the name of its manifest",
            Renamed::FromStemPrefix => "the start of its file name",
        };
        Some(format!(
            "note: {} is taken as the plugin `{name}` ({why}): the daemon knows a plugin by its \
             file name, so install it as {name}.wasm (and its manifest as {name}.toml)",
            wasm.display(),
            name = self.name
        ))
    }
}

/// The longest usable start of `stem`: up to the first character a name cannot have, less
/// a trailing version fragment (`-0` of `-0.1.0`) and separators. None when nothing is left.
fn stem_prefix(stem: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
    let end = stem.find(|c: char| !allowed(c)).unwrap_or(stem.len());
    let mut prefix = &stem[..end];
    if stem[end..].starts_with('.') {
        // `name-1.2.3`, `name_v2.0`: the part after the last separator is a version's start.
        if let Some((head, tail)) = prefix.rsplit_once(['-', '_']) {
            let tail = tail.strip_prefix('v').unwrap_or(tail);
            if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) {
                prefix = head;
            }
        }
    }
    let prefix = prefix.trim_end_matches(['-', '_']);
    (name_problem(prefix).is_none() && prefix.len() >= 2).then(|| prefix.to_owned())
}

/// A usable name close to `stem`: lower-cased, other characters turned into `-`.
fn suggest_name(stem: &str) -> String {
    let mut out = String::new();
    for c in stem.chars().map(|c| c.to_ascii_lowercase()) {
        let keep = c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
        let c = if keep { c } else { '-' };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    let out: String = out.trim_end_matches('-').chars().take(64).collect();
    if out.is_empty() {
        "my-plugin".to_owned()
    } else {
        out
    }
}

/// A plugin component file, with what configures it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFile {
    /// The `.wasm` component; its stem is the plugin's name.
    pub wasm: PathBuf,
    /// The manifest; None: `NAME.toml` beside the component if present, else the defaults.
    pub manifest: Option<PathBuf>,
    /// `[config]` values set or replaced (`--config KEY=VALUE`), as text.
    pub config: Vec<(String, String)>,
}

impl PluginFile {
    /// The component `wasm` with its default manifest and no overrides.
    pub fn new(wasm: PathBuf) -> Self {
        PluginFile {
            wasm,
            manifest: None,
            config: Vec::new(),
        }
    }

    /// The manifest to read: the one given, else `NAME.toml` beside the component if it exists.
    fn manifest_path(&self) -> Option<PathBuf> {
        self.manifest.clone().or_else(|| {
            let beside = self.wasm.with_extension("toml");
            beside.is_file().then_some(beside)
        })
    }

    /// The name the plugin is checked and tested under: the file's stem when it is a usable
    /// name, else the stem of the manifest given with `--manifest`, else the stem's usable
    /// start; an error naming the rename when none is.
    pub fn name(&self) -> Result<InstallName, InstallNameError> {
        let stem = |path: &Path| {
            path.file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let wasm_stem = stem(&self.wasm);
        if name_problem(&wasm_stem).is_none() {
            return Ok(InstallName {
                name: wasm_stem,
                renamed: None,
            });
        }
        let manifest_stem = self.manifest.as_deref().map(stem);
        if let Some(name) = manifest_stem.filter(|name| name_problem(name).is_none()) {
            return Ok(InstallName {
                name,
                renamed: Some(Renamed::FromManifest),
            });
        }
        if let Some(name) = stem_prefix(&wasm_stem) {
            return Ok(InstallName {
                name,
                renamed: Some(Renamed::FromStemPrefix),
            });
        }
        Err(InstallNameError {
            file: self.wasm.display().to_string(),
            problem: name_problem(&wasm_stem).unwrap_or("it is not usable"),
            suggestion: suggest_name(&wasm_stem),
        })
    }

    /// The manifest settings the plugin runs under: the manifest's, or the defaults.
    pub fn manifest(&self) -> anyhow::Result<PluginManifest> {
        let mut manifest = match self.manifest_path() {
            Some(path) => PluginManifest::load(&path)?,
            None => PluginManifest::default(),
        };
        for (key, value) in &self.config {
            manifest
                .config
                .insert(key.clone(), ConfigValue::Text(value.clone()));
        }
        Ok(manifest)
    }

    /// Reads, compiles and validates the plugin under [`PluginFile::name`] (blocking).
    pub fn load(&self, runtime: &Runtime) -> anyhow::Result<LoadedPlugin> {
        let name = self.name()?;
        let manifest = self.manifest()?;
        let bytes = std::fs::read(&self.wasm)
            .with_context(|| format!("cannot read {}", self.wasm.display()))?;
        Ok(load_plugin_named(
            runtime, &name.name, &self.wasm, &bytes, manifest,
        )?)
    }
}

/// Every `*.wasm` in `dir` (not hidden), sorted, each with its `NAME.toml` if present.
pub fn in_dir(dir: &Path) -> anyhow::Result<Vec<PluginFile>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the plugin directory {}", dir.display()))?;
    let mut files: Vec<PluginFile> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            let visible = path
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| !name.starts_with('.'));
            visible && path.extension().is_some_and(|ext| ext == "wasm")
        })
        .map(PluginFile::new)
        .collect();
    files.sort_by(|a, b| a.wasm.cmp(&b.wasm));
    Ok(files)
}

/// A `--config` argument that is not `KEY=VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not KEY=VALUE (e.g. --config greeting=hello)")]
pub struct NotAConfigPair(String);

/// Parses `KEY=VALUE` (`--config`); the error says the form.
pub fn parse_config_pair(text: &str) -> Result<(String, String), NotAConfigPair> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.to_owned()))
        }
        _ => Err(NotAConfigPair(text.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_pairs_need_a_key() {
        assert_eq!(
            parse_config_pair("mode=trap=1"),
            Ok(("mode".into(), "trap=1".into()))
        );
        assert_eq!(
            parse_config_pair("empty="),
            Ok(("empty".into(), String::new()))
        );
        assert!(parse_config_pair("=x").is_err());
        assert!(parse_config_pair("novalue").is_err());
    }

    fn name_of(wasm: &str, manifest: Option<&str>) -> Result<InstallName, InstallNameError> {
        PluginFile {
            manifest: manifest.map(PathBuf::from),
            ..PluginFile::new(PathBuf::from(wasm))
        }
        .name()
    }

    #[test]
    fn a_usable_stem_is_the_name() {
        let name = name_of("/x/drain_notice.wasm", Some("/y/other.toml")).expect("usable");
        assert_eq!(
            name,
            InstallName {
                name: "drain_notice".into(),
                renamed: None
            }
        );
        assert_eq!(name.notice(Path::new("/x/drain_notice.wasm")), None);
    }

    #[test]
    fn a_versioned_file_is_named_by_its_manifest_or_its_stems_start() {
        let rows = [
            (
                "drain_notice-0.1.0.wasm",
                None,
                "drain_notice",
                Renamed::FromStemPrefix,
            ),
            (
                "drain-notice-v2.0.wasm",
                None,
                "drain-notice",
                Renamed::FromStemPrefix,
            ),
            (
                "lb-drain.backup.wasm",
                None,
                "lb-drain",
                Renamed::FromStemPrefix,
            ),
            (
                "drain_notice-0.1.0.wasm",
                Some("drain-notice.toml"),
                "drain-notice",
                Renamed::FromManifest,
            ),
        ];
        for (wasm, manifest, expected, renamed) in rows {
            let name = name_of(wasm, manifest).expect(wasm);
            assert_eq!(name.name, expected, "{wasm}");
            assert_eq!(name.renamed, Some(renamed), "{wasm}");
            let notice = name.notice(Path::new(wasm)).expect("a notice");
            assert!(
                notice.contains(&format!("install it as {expected}.wasm")),
                "{notice}"
            );
        }
    }

    #[test]
    fn a_file_without_a_usable_start_says_what_to_rename_it_to() {
        let error = name_of("/x/Drain Notice.wasm", Some("/x/Also Bad.toml")).unwrap_err();
        assert_eq!(error.suggestion, "drain-notice");
        assert_eq!(
            error.to_string(),
            "/x/Drain Notice.wasm cannot be installed under its name: forewarn knows a plugin by \
             its file name without .wasm, which must be 1 to 64 of a-z, 0-9, '-' and '_' (it \
             contains a character outside a-z, 0-9, '_' and '-'). Rename it, e.g. to \
             drain-notice.wasm, and its manifest to drain-notice.toml"
        );
        assert!(name_of("/x/.wasm", None).is_err());
    }

    #[test]
    fn a_directory_lists_its_visible_components() {
        let temp = tempfile::tempdir().expect("tempdir");
        for name in ["b.wasm", "a.wasm", "a.toml", ".hidden.wasm", "notes.txt"] {
            std::fs::write(temp.path().join(name), b"").expect("write");
        }
        let names: Vec<PathBuf> = in_dir(temp.path())
            .expect("listed")
            .into_iter()
            .map(|file| {
                file.wasm
                    .strip_prefix(temp.path())
                    .expect("inside")
                    .to_path_buf()
            })
            .collect();
        assert_eq!(names, [PathBuf::from("a.wasm"), PathBuf::from("b.wasm")]);
        let a = PluginFile::new(temp.path().join("a.wasm"));
        assert_eq!(a.manifest_path(), Some(temp.path().join("a.toml")));
        assert_eq!(
            PluginFile::new(temp.path().join("b.wasm")).manifest_path(),
            None
        );
    }
}

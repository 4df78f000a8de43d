//! Plugins named on the command line rather than installed: `plugin test`'s PLUGIN.wasm and
//! `demo --plugins DIR`'s files, each with its manifest (`NAME.toml` beside it) and overrides.

use std::path::{Path, PathBuf};

use anyhow::Context;
use forewarn_runtime::Runtime;

use crate::plugins::manifest::{ConfigValue, PluginManifest};
use crate::plugins::set::{LoadedPlugin, load_plugin_bytes};

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

    /// Reads, compiles and validates the plugin (blocking).
    pub fn load(&self, runtime: &Runtime) -> anyhow::Result<LoadedPlugin> {
        let mut manifest = match self.manifest_path() {
            Some(path) => PluginManifest::load(&path)?,
            None => PluginManifest::default(),
        };
        for (key, value) in &self.config {
            manifest
                .config
                .insert(key.clone(), ConfigValue::Text(value.clone()));
        }
        let bytes = std::fs::read(&self.wasm)
            .with_context(|| format!("cannot read {}", self.wasm.display()))?;
        Ok(load_plugin_bytes(runtime, &self.wasm, &bytes, manifest)?)
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

/// Parses `KEY=VALUE` (`--config`); the error says the form.
pub fn parse_config_pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.to_owned()))
        }
        _ => Err(format!(
            "`{text}` is not KEY=VALUE (e.g. --config greeting=hello)"
        )),
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

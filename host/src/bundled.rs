//! The plugins compiled into the forewarn binary (built from `plugins/*` by `build.rs`),
//! with the manifests they ship with; the demo runs them, `plugin export` writes them out.

use forewarn_manifest::PluginManifest;

// The generated constants are `pub` for every crate that embeds plugins; here they are
// read only through `bundled_plugins`.
#[allow(unreachable_pub)]
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/bundled_wasm.rs"));
}

/// One bundled plugin: its name, component bytes and default manifest text.
pub struct BundledPlugin {
    /// The plugin's name ("lb-drain", "checkpoint", "graceful-shutdown", "notify");
    /// `plugin export` writes it as `NAME.wasm` and `NAME.toml`.
    pub name: &'static str,
    /// The WebAssembly component, as built from `plugins/NAME` with the `plugin` profile.
    pub wasm: &'static [u8],
    /// The manifest the plugin ships with, as TOML text (a valid [`PluginManifest`]).
    pub manifest: &'static str,
}

/// Each bundled plugin: its name, the package under `plugins/` that builds it (the key of the
/// generated `ALL` table: `host/build.rs` builds these packages), and the manifest it ships
/// with. The name is the plugin's everywhere else (files, config, logs); the package name only
/// has to be unique in the workspace (the notify plugin's is `notify-plugin`: `notify` is
/// also the file-watching crate's).
const SHIPPED: &[(&str, &str, &str)] = &[
    (
        "lb-drain",
        "lb-drain",
        include_str!("../../plugins/lb-drain/lb-drain.toml"),
    ),
    (
        "checkpoint",
        "checkpoint",
        include_str!("../../plugins/checkpoint/checkpoint.toml"),
    ),
    (
        "graceful-shutdown",
        "graceful-shutdown",
        include_str!("../../plugins/graceful-shutdown/graceful-shutdown.toml"),
    ),
    (
        "notify",
        "notify-plugin",
        include_str!("../../plugins/notify/notify.toml"),
    ),
];

/// The bundled plugins, in the order they are documented.
pub fn bundled_plugins() -> Vec<BundledPlugin> {
    SHIPPED
        .iter()
        .filter_map(|&(name, package, manifest)| {
            let (_, wasm) = embedded::ALL.iter().find(|(built, _)| *built == package)?;
            Some(BundledPlugin {
                name,
                wasm,
                manifest,
            })
        })
        .collect()
}

/// A bundled plugin's manifest that does not parse: a broken build of forewarn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bundled manifest of {plugin}: {problem}; this is a bug in forewarn")]
pub struct BrokenBundledManifest {
    /// The bundled plugin.
    pub plugin: &'static str,
    /// What the manifest parser said (the line and the key).
    pub problem: forewarn_manifest::ManifestProblem,
}

impl BundledPlugin {
    /// The shipped manifest, parsed. It is tested at build time, so failure is a bug.
    pub fn parsed_manifest(&self) -> Result<PluginManifest, BrokenBundledManifest> {
        PluginManifest::parse(self.manifest).map_err(|problem| BrokenBundledManifest {
            plugin: self.name,
            problem,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_plugin_has_a_valid_manifest_and_a_component() {
        let plugins = bundled_plugins();
        assert_eq!(plugins.len(), 4);
        for plugin in plugins {
            assert!(
                !plugin.manifest.is_empty(),
                "{} has no manifest",
                plugin.name
            );
            plugin.parsed_manifest().unwrap();
            assert_eq!(&plugin.wasm[..4], b"\0asm");
        }
    }
}

//! The workspace as `cargo metadata` describes it: its root, and for each requested plugin
//! package its directory and the name of its cdylib (the `.wasm` file's stem).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::BuildError;
use crate::nested::{cargo_command, run};

/// The parts of `cargo metadata --no-deps` this crate reads.
#[derive(Debug, Deserialize)]
pub(crate) struct Workspace {
    #[serde(rename = "workspace_root")]
    pub(crate) root: PathBuf,
    packages: Vec<Package>,
}

#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    manifest_path: PathBuf,
    targets: Vec<Target>,
}

#[derive(Debug, Deserialize)]
struct Target {
    name: String,
    crate_types: Vec<String>,
}

/// A workspace package that builds a component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PluginCrate {
    pub(crate) package: String,
    pub(crate) dir: PathBuf,
    /// The library target's name: the component is `<lib_name>.wasm`.
    pub(crate) lib_name: String,
}

impl Workspace {
    /// Reads the workspace that contains the calling build script's package.
    pub(crate) fn load() -> Result<Self, BuildError> {
        let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
            .ok_or(BuildError::MissingEnv("CARGO_MANIFEST_DIR"))?;
        let mut command = cargo_command()?;
        command
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(Path::new(&manifest_dir).join("Cargo.toml"));
        Self::parse(&run(
            &mut command,
            |_| "cargo metadata failed: fix the Cargo.toml it names below.",
        )?)
    }

    fn parse(json: &[u8]) -> Result<Self, BuildError> {
        Ok(serde_json::from_slice(json)?)
    }

    /// The requested packages, in the order asked.
    pub(crate) fn find_plugin_crates(
        &self,
        names: &[&str],
    ) -> Result<Vec<PluginCrate>, BuildError> {
        names
            .iter()
            .map(|name| self.find_plugin_crate(name))
            .collect()
    }

    fn find_plugin_crate(&self, name: &str) -> Result<PluginCrate, BuildError> {
        let package = self
            .packages
            .iter()
            .find(|package| package.name == name)
            .ok_or_else(|| BuildError::UnknownPackage(name.to_owned()))?;
        let cdylib = package
            .targets
            .iter()
            .find(|target| target.crate_types.iter().any(|kind| kind == "cdylib"))
            .ok_or_else(|| BuildError::NotCdylib(name.to_owned()))?;
        let dir = package
            .manifest_path
            .parent()
            .unwrap_or(Path::new("/"))
            .to_owned();
        Ok(PluginCrate {
            package: package.name.clone(),
            dir,
            lib_name: cdylib.name.clone(),
        })
    }

    /// What should rebuild the components: the crates themselves, the SDK,
    /// the WIT, and the workspace manifest and lock file (profile, dependency versions).
    pub(crate) fn watched_paths(&self, crates: &[PluginCrate]) -> Vec<PathBuf> {
        let shared = ["sdk", "wit", "Cargo.toml", "Cargo.lock"].map(|name| self.root.join(name));
        crates
            .iter()
            .map(|krate| krate.dir.clone())
            .chain(shared)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const METADATA: &str = r#"{
        "workspace_root": "/ws",
        "packages": [
            {"name": "probe-guest", "manifest_path": "/ws/tests/guests/probe/Cargo.toml",
             "targets": [{"name": "probe_guest", "crate_types": ["cdylib"], "kind": ["cdylib"]}]},
            {"name": "forewarn-sdk", "manifest_path": "/ws/sdk/Cargo.toml",
             "targets": [{"name": "forewarn_sdk", "crate_types": ["lib"], "kind": ["lib"]}]}
        ],
        "version": 1
    }"#;

    #[test]
    fn finds_cdylib_packages() {
        let workspace = Workspace::parse(METADATA.as_bytes()).expect("metadata parses");
        let found = workspace
            .find_plugin_crates(&["probe-guest"])
            .expect("found");
        assert_eq!(
            found,
            vec![PluginCrate {
                package: "probe-guest".into(),
                dir: "/ws/tests/guests/probe".into(),
                lib_name: "probe_guest".into(),
            }]
        );
        let watched = workspace.watched_paths(&found);
        assert_eq!(
            watched,
            [
                "/ws/tests/guests/probe",
                "/ws/sdk",
                "/ws/wit",
                "/ws/Cargo.toml",
                "/ws/Cargo.lock"
            ]
            .map(PathBuf::from)
            .to_vec()
        );
    }

    #[test]
    fn unknown_and_non_cdylib_packages_are_errors_that_say_the_fix() {
        let workspace = Workspace::parse(METADATA.as_bytes()).expect("metadata parses");
        let unknown = workspace
            .find_plugin_crates(&["nope"])
            .expect_err("unknown");
        assert!(matches!(unknown, BuildError::UnknownPackage(ref name) if name == "nope"));
        let library = workspace
            .find_plugin_crates(&["forewarn-sdk"])
            .expect_err("not a cdylib");
        assert!(
            library.to_string().contains("crate-type = [\"cdylib\"]"),
            "{library}"
        );
    }
}

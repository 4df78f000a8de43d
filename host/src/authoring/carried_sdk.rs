//! The plugin SDKs this binary carries: each language's registry package (sdk/, sdk/c,
//! sdk/python, sdk/js as they are packaged) embedded at build time, written out by
//! `forewarn sdk export` and into a new project by `forewarn plugin new`, so that neither
//! needs the tree the binary was built from.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::authoring::languages::Lang;

include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));

/// The SDKs' version (all four share it): 0.3.x binds forewarn:plugin@0.3.0.
pub const SDK_VERSION: &str = env!("FOREWARN_SDK_VERSION");

/// The package's name on its registry (crates.io, PyPI, npm; the C tarball's stem).
pub const PACKAGE_NAME: &str = "forewarn-sdk";

/// Where `plugin new` writes the carried SDK inside a project.
pub const VENDOR_DIR: &str = "vendor/forewarn-sdk";

/// The files of `lang`'s package: (path inside the package, bytes).
pub fn files(lang: Lang) -> impl Iterator<Item = (&'static str, &'static [u8])> {
    SDK_FILES
        .iter()
        .filter(move |(file_lang, _, _)| *file_lang == lang.as_str())
        .map(|(_, path, bytes)| (*path, *bytes))
}

/// The bytes of one file of `lang`'s package, if it has it.
pub fn file(lang: Lang, path: &str) -> Option<&'static [u8]> {
    files(lang).find_map(|(file, bytes)| (file == path).then_some(bytes))
}

/// Writes `lang`'s package into `dir` (created if missing); returns the files written,
/// relative to `dir`. Refuses a `dir` that is not empty, leaving it untouched.
pub fn write(lang: Lang, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    refuse_non_empty(dir)?;
    let mut written = Vec::new();
    for (path, bytes) in files(lang) {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&target, bytes)
            .with_context(|| format!("cannot write {}", target.display()))?;
        make_executable_if_script(&target, bytes)?;
        written.push(PathBuf::from(path));
    }
    if written.is_empty() {
        anyhow::bail!("this forewarn was built without the {lang} SDK (sdk/ was incomplete)");
    }
    Ok(written)
}

/// A file starting with `#!` (the JS SDK's `forewarn-build-js`) is written executable.
fn make_executable_if_script(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if bytes.starts_with(b"#!") {
        forewarn_platform::file_access::make_executable(path)
            .with_context(|| format!("cannot make {} executable", path.display()))?;
    }
    Ok(())
}

/// Fails when `dir` exists and is not an empty directory.
pub fn refuse_non_empty(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "{} exists and is not a directory: pass another DIR, or remove it",
            dir.display()
        );
    }
    let has_entries = match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_some(),
        Err(_) => false,
    };
    if has_entries {
        anyhow::bail!(
            "{} already exists and is not empty: pass another DIR, or remove it first; forewarn \
             never overwrites files",
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The version each package's own metadata gives, as its registry reads it.
    fn package_version(lang: Lang) -> String {
        let (path, prefix) = match lang {
            Lang::Rust => ("Cargo.toml", "version = \""),
            Lang::Python => ("pyproject.toml", "version = \""),
            Lang::Js => ("package.json", "  \"version\": \""),
            Lang::C => ("forewarn-sdk.pc", "Version: "),
        };
        let text =
            String::from_utf8_lossy(file(lang, path).expect("the package's metadata")).into_owned();
        text.lines()
            .find_map(|line| line.strip_prefix(prefix))
            .map(|rest| rest.trim_end_matches([',', '"']).to_owned())
            .unwrap_or_else(|| panic!("{lang}: no version in {path}"))
    }

    #[test]
    fn every_package_has_the_sdk_version_and_names_its_contract_and_releases() {
        let wit = forewarn_runtime::wit::latest_version();
        let minor = |version: &str| version.rsplit_once('.').map(|(head, _)| head.to_owned());
        assert_eq!(
            minor(SDK_VERSION),
            minor(&wit),
            "the SDK version {SDK_VERSION} must follow the WIT contract {wit} (0.3.x for 0.3.0)"
        );
        for lang in Lang::ALL {
            assert_eq!(package_version(lang), SDK_VERSION, "{lang}");
            let said: String = files(lang)
                .filter(|(path, _)| !path.ends_with(".wit"))
                .map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned())
                .collect();
            assert!(
                said.contains(&format!("forewarn:plugin@{wit}")),
                "{lang}: names no contract"
            );
            assert!(
                said.contains("forewarn >= 0.1.0"),
                "{lang}: says not which forewarn releases load what it builds"
            );
            assert!(
                files(lang).any(|(path, _)| path.ends_with("README.md")),
                "{lang}: no README"
            );
        }
    }

    #[test]
    fn the_wit_contract_is_inside_each_package_that_builds_with_it() {
        let contract = include_bytes!("../../../wit/forewarn.wit");
        for (lang, path) in [
            (Lang::Rust, "wit/forewarn.wit"),
            (Lang::Python, "forewarn/wit/forewarn.wit"),
            (Lang::Js, "wit/forewarn.wit"),
        ] {
            assert_eq!(file(lang, path), Some(&contract[..]), "{lang}: {path}");
        }
        assert!(file(Lang::C, "generated/event_handler.h").is_some());
    }

    #[test]
    fn writing_refuses_a_non_empty_dir_and_writes_the_whole_package() {
        let temp = tempfile::tempdir().expect("tempdir");
        std::fs::write(temp.path().join("mine.txt"), "keep").expect("write");
        let error = write(Lang::C, temp.path()).unwrap_err().to_string();
        assert!(error.contains("already exists and is not empty"), "{error}");
        let dir = temp.path().join("sdk");
        let written = write(Lang::Js, &dir).expect("written");
        assert_eq!(written.len(), files(Lang::Js).count());
        assert!(dir.join("testing/hooks.js").is_file());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.join("build.mjs"))
                .expect("stat")
                .permissions();
            assert_eq!(mode.mode() & 0o111, 0o111, "the build script is executable");
        }
    }
}

//! forewarn-wasm-build: called from build scripts to compile workspace crates into
//! wasm32-wasip2 components with a nested cargo, and to write Rust constants naming them.
//!
//! ```no_run
//! // build.rs
//! let built = forewarn_wasm_build::build_components(&["probe-guest", "noop-guest"]);
//! let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap()).join("guests.rs");
//! forewarn_wasm_build::write_constants(&out, &built);
//! ```
//!
//! The nested build runs `cargo build --target wasm32-wasip2 --profile plugin` in its own
//! target directory, `<workspace target dir>/wasm`, shared by every caller: it never waits on
//! the lock of the outer build, and a second caller finds the components already built.

mod constants;
mod error;
mod nested;
mod target_dir;
pub use target_dir::SHARED_WASM_TARGET_DIR;
mod toolchain;
mod workspace;

use std::path::{Path, PathBuf};

use constants::{render_constants, render_embedded};
use error::BuildError;
use toolchain::{TargetPlan, ensure_wasm_target};

/// The rustc target plugins are built for.
const WASM_TARGET: &str = "wasm32-wasip2";
/// The cargo profile plugins are built with (`[profile.plugin]` in the workspace).
const WASM_PROFILE: &str = "plugin";

/// One compiled component, as [`build_components`] returns it. A build script may rename
/// `package` before [`write_constants`]: the constant's name is derived from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltComponent {
    /// The cargo package it was built from, e.g. `probe-guest`.
    pub package: String,
    /// Absolute path of the `.wasm` component, under `<target dir>/wasm/wasm32-wasip2/plugin/`.
    pub path: PathBuf,
}

/// Builds the workspace packages `packages` (each a `cdylib`) into components, in the order
/// given, and tells cargo to rerun the build script when they, `sdk/`, `wit/` or the workspace
/// manifest or lock file change.
///
/// Blocks for the whole nested `cargo build` (seconds when the components are up to date,
/// minutes on a cold target directory) and, the first time on a toolchain without the wasm
/// target, for `rustup target add`. Must be called from a build script: it reads the
/// variables cargo sets for one (`CARGO`, `OUT_DIR`, `CARGO_MANIFEST_DIR`).
///
/// When the build fails this prints the error (the nested cargo's command line and output,
/// or what to install) on standard error and exits the build script with status 1: cargo
/// shows exactly that to the person, with no panic message or backtrace around it.
pub fn build_components(packages: &[&str]) -> Vec<BuiltComponent> {
    try_build_components(packages).unwrap_or_else(|error| fail(&error))
}

/// Ends the build script with `error` as the whole message.
fn fail(error: &BuildError) -> ! {
    eprintln!("error: {error}");
    std::process::exit(1)
}

/// [`build_components`], returning the failure instead of ending the build script.
fn try_build_components(packages: &[&str]) -> Result<Vec<BuiltComponent>, BuildError> {
    let workspace = workspace::Workspace::load()?;
    let crates = workspace.find_plugin_crates(packages)?;
    for path in workspace.watched_paths(&crates) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let wasm_target_dir = target_dir::wasm_target_dir(&workspace.root)?;
    let target = ensure_wasm_target(&wasm_target_dir)?;
    // A target removed after this build (a fresh-machine check does so in a warm tree) must
    // run this script again: the directory is watched, and a missing path is a change.
    println!("cargo:rerun-if-changed={}", target.lib_dir.display());
    if let Some(TargetPlan::Install { toolchain, .. }) = target.installed {
        let toolchain = toolchain.as_deref().unwrap_or("the active toolchain");
        println!(
            "cargo:warning=the wasm32-wasip2 target was missing: added it with `rustup target add {WASM_TARGET}` for {toolchain}"
        );
    }
    nested::build(&workspace.root, &wasm_target_dir, packages)?;
    crates
        .iter()
        .map(|krate| {
            let path = nested::artifact_path(&wasm_target_dir, &krate.lib_name);
            match path.is_file() {
                true => Ok(BuiltComponent {
                    package: krate.package.clone(),
                    path,
                }),
                false => Err(BuildError::MissingArtifact {
                    package: krate.package.clone(),
                    path,
                }),
            }
        })
        .collect()
}

/// Writes `out` as Rust source with `pub const NAME: &str = "/abs/path.wasm";` for each
/// component (NAME is the package in SCREAMING_SNAKE_CASE) and
/// `pub const ALL: &[(&str, &str)]` listing `(package, path)` pairs.
///
/// Exits the build script with the error when `out` cannot be written or a path is not UTF-8.
pub fn write_constants(out: &Path, built: &[BuiltComponent]) {
    write_source(out, render_constants(built));
}

/// Like [`write_constants`], but each constant holds the component's bytes
/// (`pub const NAME: &[u8] = include_bytes!("/abs/path.wasm");`) and `ALL` is
/// `&[(&str, &[u8])]`. For embedding components in a binary.
///
/// Exits the build script with the error when `out` cannot be written or a path is not UTF-8.
pub fn write_embedded(out: &Path, built: &[BuiltComponent]) {
    write_source(out, render_embedded(built));
}

fn write_source(out: &Path, source: Result<String, BuildError>) {
    let written = source.and_then(|text| {
        std::fs::write(out, text).map_err(|source| BuildError::Write {
            path: out.to_owned(),
            source,
        })
    });
    if let Err(error) = written {
        fail(&error);
    }
}

//! `BuildError`: every way building plugin components can fail, each message naming the
//! problem and, where there is one, the fix.

use std::path::PathBuf;

/// Why the components could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A required environment variable is missing (not running under cargo).
    #[error(
        "environment variable {0} is not set: forewarn-wasm-build must run inside a cargo build script"
    )]
    MissingEnv(&'static str),
    /// cargo itself could not be started.
    #[error("could not run `{command}`: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    /// `cargo metadata` or `cargo build` exited with an error.
    #[error("`{command}` failed ({status}).\n\n{hint}\n\n--- cargo's output ---\n{stderr}")]
    CargoFailed {
        command: String,
        status: String,
        hint: &'static str,
        stderr: String,
    },
    /// `cargo metadata` printed something that is not its JSON.
    #[error("could not read the output of `cargo metadata`: {0}")]
    Metadata(#[from] serde_json::Error),
    /// A requested package is not a member of the workspace.
    #[error(
        "package `{0}` is not a member of the workspace: check its name, or add its directory to [workspace] members"
    )]
    UnknownPackage(String),
    /// A requested package does not build a cdylib, so there is no component.
    #[error(
        "package `{0}` builds no cdylib: add `[lib] crate-type = [\"cdylib\"]` to its Cargo.toml"
    )]
    NotCdylib(String),
    /// The build succeeded but the expected `.wasm` is not there.
    #[error("cargo built `{package}` but {} does not exist", path.display())]
    MissingArtifact { package: String, path: PathBuf },
    /// A path cannot be written into Rust source.
    #[error("path {} is not UTF-8, so it cannot be written into Rust source: move the workspace to a UTF-8 path", .0.display())]
    NonUtf8Path(PathBuf),
    /// The generated source could not be written.
    #[error("could not write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

//! `BuildError`: every way building plugin components can fail, each message naming the
//! problem and, where there is one, the fix.

use std::path::PathBuf;

/// Why the components could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
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
    /// The wasm target is missing and there is no rustup to add it.
    #[error(
        "the Rust toolchain building forewarn (sysroot {}) has no standard library for the wasm32-wasip2 target, and no `rustup` was found on PATH or in CARGO_HOME to add it: install it with your toolchain's own means (with rustup: `rustup target add wasm32-wasip2`; a distribution's Rust: its rust-std package for wasm32-wasip2), then build again",
        sysroot.display()
    )]
    TargetMissing { sysroot: PathBuf },
    /// rustup said it added the target, but the toolchain still has none.
    #[error(
        "`rustup target add wasm32-wasip2` succeeded, but the toolchain building forewarn (sysroot {}) still has no wasm32-wasip2 standard library: the `rustc` cargo runs is not the one rustup manages (check RUSTC and PATH), or add the target to that toolchain by hand",
        sysroot.display()
    )]
    TargetStillMissing { sysroot: PathBuf },
    /// The generated source could not be written.
    #[error("could not write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

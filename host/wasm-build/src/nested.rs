//! The nested cargo: a `Command` for the `cargo` running this build script with the outer
//! build's environment scrubbed, the `cargo build` of the components, and where they land.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::BuildError;
use crate::{WASM_PROFILE, WASM_TARGET};

/// Variables the outer cargo sets (or the person set for the outer build) that would make
/// the nested build wrong: flags and wrappers meant for the host target (clippy's driver
/// included), the outer target and target dir, the outer jobserver.
const SCRUBBED: &[&str] = &[
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CARGO_BUILD_RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_TARGET",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_MANIFEST_LINKS",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_TARGET_TMPDIR",
    "CLIPPY_ARGS",
    "CLIPPY_CONF_DIR",
    "__CARGO_FIX_PLZ",
    "OUT_DIR",
    "TARGET",
    "HOST",
    "NUM_JOBS",
    "OPT_LEVEL",
    "DEBUG",
    "PROFILE",
    "RUSTC_LINKER",
    "RUSTDOC",
];

/// Prefixes of per-package variables cargo sets for a build script, which would leak into
/// the nested build's own build scripts.
const SCRUBBED_PREFIXES: &[&str] = &["CARGO_CFG_", "CARGO_FEATURE_", "CARGO_PKG_", "DEP_"];

/// Whether the nested cargo must not inherit the variable `name`.
pub(crate) fn is_scrubbed(name: &str) -> bool {
    SCRUBBED.contains(&name)
        || SCRUBBED_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// A `Command` for the cargo that runs this build script (`$CARGO`), without the outer
/// build's environment.
pub(crate) fn cargo_command() -> Result<Command, BuildError> {
    let cargo = std::env::var_os("CARGO").ok_or(BuildError::MissingEnv("CARGO"))?;
    let mut command = Command::new(cargo);
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(is_scrubbed) {
            command.env_remove(&name);
        }
    }
    Ok(command)
}

/// Builds `packages` for wasm32-wasip2 with the plugin profile into `target_dir`.
pub(crate) fn build(
    workspace_root: &Path,
    target_dir: &Path,
    packages: &[&str],
) -> Result<(), BuildError> {
    let mut command = cargo_command()?;
    command
        .current_dir(workspace_root)
        .args([
            "build",
            "--target",
            WASM_TARGET,
            "--profile",
            WASM_PROFILE,
            "--color",
            "never",
        ])
        .arg("--manifest-path")
        .arg(workspace_root.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target_dir);
    if let Some(jobs) = std::env::var_os("NUM_JOBS") {
        command.arg("--jobs").arg(jobs);
    }
    for package in packages {
        command.args(["--package", package]);
    }
    run(&mut command, hint_for_build).map(drop)
}

/// Where cargo puts the component of the library `lib_name`.
pub(crate) fn artifact_path(target_dir: &Path, lib_name: &str) -> PathBuf {
    target_dir
        .join(WASM_TARGET)
        .join(WASM_PROFILE)
        .join(format!("{lib_name}.wasm"))
}

/// What to tell the person, given the failed build's error output.
pub(crate) fn hint_for_build(stderr: &str) -> &'static str {
    if stderr.contains("may not be installed") || stderr.contains("can't find crate for `core`") {
        return "The wasm32-wasip2 target is missing: run `rustup target add wasm32-wasip2` \
                (rustup installs it by itself from rust-toolchain.toml on a fresh setup).";
    }
    "A plugin crate (or forewarn-sdk) did not compile for wasm32-wasip2; the compiler's \
     errors are below. Reproduce with the command above, run from the workspace root."
}

/// Runs `command` to completion and returns its standard output, or the failure with the
/// command line, its error output and what `hint` makes of that output.
pub(crate) fn run(
    command: &mut Command,
    hint: fn(&str) -> &'static str,
) -> Result<Vec<u8>, BuildError> {
    let shown = show(command);
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|source| BuildError::Spawn {
            command: shown.clone(),
            source,
        })?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    Err(BuildError::CargoFailed {
        command: shown,
        status: output.status.to_string(),
        hint: hint(&stderr),
        stderr,
    })
}

/// The command line as a person would type it (with its working directory).
fn show(command: &Command) -> String {
    let mut shown = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        shown.push(' ');
        shown.push_str(&arg.to_string_lossy());
    }
    match command.get_current_dir() {
        Some(dir) => format!("cd {} && {shown}", dir.display()),
        None => shown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_what_would_break_the_nested_build() {
        for name in [
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
            "RUSTC_WORKSPACE_WRAPPER",
            "RUSTC_WRAPPER",
            "CARGO_BUILD_TARGET",
            "CARGO_TARGET_DIR",
            "CARGO_MAKEFLAGS",
            "MAKEFLAGS",
            "MFLAGS",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_MANIFEST_DIR",
            "CARGO_CFG_TARGET_OS",
            "CARGO_FEATURE_STD",
            "CARGO_PKG_NAME",
            "DEP_Z_INCLUDE",
            "OUT_DIR",
            "TARGET",
        ] {
            assert!(is_scrubbed(name), "{name} should be scrubbed");
        }
    }

    #[test]
    fn keeps_what_the_nested_build_needs() {
        for name in [
            "CARGO",
            "CARGO_HOME",
            "RUSTUP_TOOLCHAIN",
            "RUSTC",
            "PATH",
            "HOME",
            "CARGO_NET_OFFLINE",
        ] {
            assert!(!is_scrubbed(name), "{name} should be kept");
        }
    }

    #[test]
    fn artifact_lands_under_target_and_profile() {
        let path = artifact_path(Path::new("/t/wasm"), "probe_guest");
        assert_eq!(
            path,
            Path::new("/t/wasm/wasm32-wasip2/plugin/probe_guest.wasm")
        );
    }

    #[test]
    fn missing_target_gets_the_rustup_hint() {
        let stderr = "error[E0463]: can't find crate for `core`\n  = note: the `wasm32-wasip2` target may not be installed";
        assert!(hint_for_build(stderr).contains("rustup target add wasm32-wasip2"));
        assert!(!hint_for_build("error[E0308]: mismatched types").contains("rustup"));
    }

    #[test]
    fn failed_command_reports_command_line_and_stderr() {
        let mut command = Command::new("sh");
        command
            .args(["-c", "echo 'it broke' >&2; exit 3"])
            .current_dir("/");
        let error = run(&mut command, |_| "the hint").expect_err("exit 3 is a failure");
        let shown = error.to_string();
        assert!(shown.contains("cd / && sh -c"), "{shown}");
        assert!(shown.contains("it broke"), "{shown}");
        assert!(shown.contains("the hint"), "{shown}");
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let mut command = Command::new("/nonexistent/cargo");
        let error = run(&mut command, |_| "unused").expect_err("cannot start");
        assert!(matches!(error, BuildError::Spawn { .. }), "{error}");
    }
}

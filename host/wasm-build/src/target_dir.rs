//! Where the nested build puts its output: `<outer target dir>/wasm`, the outer target dir
//! found from OUT_DIR's ancestors (cargo tags its root with CACHEDIR.TAG) or CARGO_TARGET_DIR;
//! or, when set to an absolute path, [`SHARED_WASM_TARGET_DIR`] (a cross build in a target
//! dir of its own reuses the plugins the native build compiled, instead of compiling them
//! again).

use std::path::{Path, PathBuf};

use crate::error::BuildError;

/// The variable naming the nested build's target directory outright (tests/windows.sh
/// sets it to the native build's `target/wasm`).
pub const SHARED_WASM_TARGET_DIR: &str = "FOREWARN_WASM_TARGET_DIR";

/// The nested build's target directory, shared by every build script that calls this crate.
pub(crate) fn wasm_target_dir(workspace_root: &Path) -> Result<PathBuf, BuildError> {
    println!("cargo:rerun-if-env-changed={SHARED_WASM_TARGET_DIR}");
    if let Some(shared) = std::env::var_os(SHARED_WASM_TARGET_DIR).map(PathBuf::from)
        && shared.is_absolute()
    {
        return Ok(shared);
    }
    let out_dir = std::env::var_os("OUT_DIR").ok_or(BuildError::MissingEnv("OUT_DIR"))?;
    let cargo_target_dir = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from);
    let outer = outer_target_dir(
        Path::new(&out_dir),
        cargo_target_dir.as_deref(),
        workspace_root,
    );
    Ok(outer.join("wasm"))
}

/// The outer build's target directory: the nearest ancestor of `out_dir` holding
/// CACHEDIR.TAG, else an absolute `cargo_target_dir`, else `<workspace>/target`.
pub(crate) fn outer_target_dir(
    out_dir: &Path,
    cargo_target_dir: Option<&Path>,
    workspace_root: &Path,
) -> PathBuf {
    if let Some(tagged) = out_dir
        .ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").is_file())
    {
        return tagged.to_owned();
    }
    match cargo_target_dir {
        Some(dir) if dir.is_absolute() => dir.to_owned(),
        _ => workspace_root.join("target"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_tagged_ancestor_of_out_dir() {
        let target = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            target.path().join("CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55",
        )
        .expect("tag");
        let out_dir = target
            .path()
            .join("x86_64-unknown-linux-gnu/debug/build/forewarn-tests-0123/out");
        std::fs::create_dir_all(&out_dir).expect("out dir");
        let found = outer_target_dir(&out_dir, Some(Path::new("/elsewhere")), Path::new("/ws"));
        assert_eq!(found, target.path());
    }

    #[test]
    fn falls_back_to_absolute_cargo_target_dir_then_workspace_target() {
        let untagged = Path::new("/nonexistent/debug/build/x/out");
        assert_eq!(
            outer_target_dir(untagged, Some(Path::new("/t")), Path::new("/ws")),
            Path::new("/t")
        );
        assert_eq!(
            outer_target_dir(untagged, Some(Path::new("rel")), Path::new("/ws")),
            Path::new("/ws/target")
        );
        assert_eq!(
            outer_target_dir(untagged, None, Path::new("/ws")),
            Path::new("/ws/target")
        );
    }
}

//! Making sure the toolchain building this workspace has the wasm32-wasip2 standard library:
//! when it is missing, `rustup target add` for the active toolchain, once, under a file lock.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::WASM_TARGET;
use crate::error::BuildError;
use crate::nested::run;

/// What to do about the wasm target, given what is known of the toolchain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TargetPlan {
    /// The target's standard library is installed: build.
    Ready,
    /// Missing, and rustup can add it: run this rustup for this toolchain (None: the active one).
    Install {
        rustup: PathBuf,
        toolchain: Option<String>,
    },
    /// Missing, and there is no rustup to add it.
    Impossible { sysroot: PathBuf },
}

/// The facts [`plan`] decides on, gathered by [`Toolchain::probe`] (or written by a test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Toolchain {
    /// `rustc --print sysroot`.
    pub(crate) sysroot: PathBuf,
    /// The rustup found on PATH or in CARGO_HOME, if any.
    pub(crate) rustup: Option<PathBuf>,
    /// `RUSTUP_TOOLCHAIN`, set by rustup's proxies: the toolchain this build runs on.
    pub(crate) toolchain: Option<String>,
}

impl Toolchain {
    /// Asks the `rustc` cargo uses for its sysroot, and looks for rustup.
    pub(crate) fn probe() -> Result<Self, BuildError> {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| OsString::from("rustc"));
        let mut command = Command::new(rustc);
        command.args(["--print", "sysroot"]);
        let output = run(
            &mut command,
            |_| "rustc could not tell its sysroot: check that the Rust toolchain is installed.",
        )?;
        let sysroot = PathBuf::from(String::from_utf8_lossy(&output).trim());
        let path = std::env::var_os("PATH").unwrap_or_default();
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")));
        Ok(Toolchain {
            sysroot,
            rustup: find_rustup(&path, cargo_home.as_deref()),
            toolchain: std::env::var("RUSTUP_TOOLCHAIN")
                .ok()
                .filter(|name| !name.is_empty()),
        })
    }

    /// Whether the sysroot holds the wasm target's standard library.
    pub(crate) fn has_wasm_target(&self) -> bool {
        target_lib_dir(&self.sysroot).is_dir()
    }
}

/// `<sysroot>/lib/rustlib/wasm32-wasip2/lib`: where rustup puts the target's std.
pub(crate) fn target_lib_dir(sysroot: &Path) -> PathBuf {
    sysroot
        .join("lib")
        .join("rustlib")
        .join(WASM_TARGET)
        .join("lib")
}

/// The decision, from the facts alone.
pub(crate) fn plan(toolchain: &Toolchain) -> TargetPlan {
    if toolchain.has_wasm_target() {
        return TargetPlan::Ready;
    }
    match &toolchain.rustup {
        Some(rustup) => TargetPlan::Install {
            rustup: rustup.clone(),
            toolchain: toolchain.toolchain.clone(),
        },
        None => TargetPlan::Impossible {
            sysroot: toolchain.sysroot.clone(),
        },
    }
}

/// The first executable `rustup` on `path`, else `<cargo_home>/bin/rustup`.
pub(crate) fn find_rustup(path: &std::ffi::OsStr, cargo_home: Option<&Path>) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join("rustup"))
        .chain(cargo_home.map(|home| home.join("bin").join("rustup")))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata()
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

/// The wasm target as [`ensure_wasm_target`] left it.
#[derive(Debug)]
pub(crate) struct TargetReady {
    /// How it was installed, when it was missing (the caller tells the person, in one line).
    pub(crate) installed: Option<TargetPlan>,
    /// Its standard library's directory: the build script watches it, so that removing the
    /// target (`rustup target remove`) runs the script again, which adds it back.
    pub(crate) lib_dir: PathBuf,
}

/// Makes sure the wasm target is there, adding it when missing. `lock_dir` holds the lock
/// file that keeps two build scripts of one build from running rustup at once.
pub(crate) fn ensure_wasm_target(lock_dir: &Path) -> Result<TargetReady, BuildError> {
    let found = Toolchain::probe()?;
    if found.has_wasm_target() {
        return Ok(TargetReady {
            installed: None,
            lib_dir: target_lib_dir(&found.sysroot),
        });
    }
    let _lock = lock(lock_dir)?;
    // Another build script may have installed it while this one waited for the lock.
    let toolchain = Toolchain::probe()?;
    let lib_dir = target_lib_dir(&toolchain.sysroot);
    let decided = plan(&toolchain);
    match &decided {
        TargetPlan::Ready => {
            return Ok(TargetReady {
                installed: None,
                lib_dir,
            });
        }
        TargetPlan::Install { rustup, toolchain } => install(rustup, toolchain.as_deref())?,
        TargetPlan::Impossible { sysroot } => {
            return Err(BuildError::TargetMissing {
                sysroot: sysroot.clone(),
            });
        }
    }
    if !Toolchain::probe()?.has_wasm_target() {
        return Err(BuildError::TargetStillMissing {
            sysroot: toolchain.sysroot,
        });
    }
    Ok(TargetReady {
        installed: Some(decided),
        lib_dir,
    })
}

/// `rustup target add wasm32-wasip2 [--toolchain NAME]`.
fn install(rustup: &Path, toolchain: Option<&str>) -> Result<(), BuildError> {
    let mut command = Command::new(rustup);
    command.args(["target", "add", WASM_TARGET]);
    if let Some(name) = toolchain {
        command.args(["--toolchain", name]);
    }
    run(&mut command, |_| {
        "rustup could not add the wasm32-wasip2 target (see its output below): check the \
         network access to the Rust distribution server, or install the target by another \
         means for this toolchain."
    })
    .map(drop)
}

/// An exclusive lock on `<lock_dir>/wasm-target.lock`, released when dropped.
fn lock(lock_dir: &Path) -> Result<File, BuildError> {
    let path = lock_dir.join("wasm-target.lock");
    let locked = std::fs::create_dir_all(lock_dir)
        .and_then(|()| File::create(&path))
        .and_then(|file| file.lock().map(|()| file));
    locked.map_err(|source| BuildError::Write { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sysroot_with(targets: &[&str]) -> tempfile::TempDir {
        let sysroot = tempfile::tempdir().expect("tempdir");
        for target in targets {
            std::fs::create_dir_all(sysroot.path().join("lib/rustlib").join(target).join("lib"))
                .expect("target dir");
        }
        sysroot
    }

    fn toolchain(sysroot: &Path, rustup: Option<&str>, name: Option<&str>) -> Toolchain {
        Toolchain {
            sysroot: sysroot.to_owned(),
            rustup: rustup.map(PathBuf::from),
            toolchain: name.map(str::to_owned),
        }
    }

    #[test]
    fn installed_target_needs_nothing_whatever_rustup_is() {
        let sysroot = sysroot_with(&["x86_64-unknown-linux-gnu", WASM_TARGET]);
        for rustup in [None, Some("/r/rustup")] {
            let facts = toolchain(sysroot.path(), rustup, Some("1.95.0"));
            assert_eq!(plan(&facts), TargetPlan::Ready);
        }
    }

    #[test]
    fn missing_target_with_rustup_is_installed_for_the_active_toolchain() {
        let sysroot = sysroot_with(&["x86_64-unknown-linux-gnu"]);
        let facts = toolchain(sysroot.path(), Some("/r/rustup"), Some("1.95.0"));
        assert_eq!(
            plan(&facts),
            TargetPlan::Install {
                rustup: "/r/rustup".into(),
                toolchain: Some("1.95.0".into()),
            }
        );
        let unnamed = toolchain(sysroot.path(), Some("/r/rustup"), None);
        assert_eq!(
            plan(&unnamed),
            TargetPlan::Install {
                rustup: "/r/rustup".into(),
                toolchain: None,
            }
        );
    }

    #[test]
    fn missing_target_without_rustup_is_impossible_and_says_how_to_fix_it() {
        let sysroot = sysroot_with(&["x86_64-unknown-linux-gnu"]);
        let facts = toolchain(sysroot.path(), None, None);
        assert_eq!(
            plan(&facts),
            TargetPlan::Impossible {
                sysroot: sysroot.path().to_owned()
            }
        );
        let message = BuildError::TargetMissing {
            sysroot: sysroot.path().to_owned(),
        }
        .to_string();
        assert!(message.contains("wasm32-wasip2"), "{message}");
        assert!(message.contains("rustup"), "{message}");
        assert!(!message.contains('\n'), "one paragraph: {message}");
    }

    #[test]
    fn rustup_is_found_on_path_then_in_cargo_home() {
        let on_path = tempfile::tempdir().expect("tempdir");
        let home = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(home.path().join("bin")).expect("bin");
        for dir in [on_path.path(), &home.path().join("bin")] {
            let rustup = dir.join("rustup");
            std::fs::write(&rustup, "#!/bin/sh\n").expect("script");
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&rustup, std::fs::Permissions::from_mode(0o755))
                    .expect("chmod");
            }
        }
        let path =
            std::env::join_paths([Path::new("/nonexistent"), on_path.path()]).expect("joined PATH");
        assert_eq!(
            find_rustup(&path, Some(home.path())),
            Some(on_path.path().join("rustup"))
        );
        assert_eq!(
            find_rustup(std::ffi::OsStr::new("/nonexistent"), Some(home.path())),
            Some(home.path().join("bin/rustup"))
        );
        assert_eq!(
            find_rustup(std::ffi::OsStr::new("/nonexistent"), None),
            None
        );
    }
}

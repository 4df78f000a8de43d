//! Where components are compiled: in this process, or in a short-lived child process (the
//! daemon's way), so the compiler's code and memory never stay resident in the daemon.
//!
//! The child is the same `forewarn` binary run as `forewarn compile-plugin`: it reads the
//! component on stdin and writes wasmtime's compiled form on stdout ([`compile_to_bytes`]).
//! The parent loads that form like a compile-cache entry; if the child cannot run or its
//! output is refused, the parent compiles in process instead (and says so in the log).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::allocation::InstanceAllocation;
use crate::error::LoadError;

/// The child's exit status for a component that is not valid (its message on stderr).
pub const EXIT_INVALID_COMPONENT: i32 = 65;
/// The subcommand that runs [`compile_to_bytes`] over stdin and stdout.
pub const COMPILE_SUBCOMMAND: &str = "compile-plugin";

/// How the runtime compiles a component it has not cached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Compiler {
    /// With this process's engine (tests, `plugin check`, short-lived commands).
    #[default]
    InProcess,
    /// In a child: `PROGRAM compile-plugin --allocation A` (the forewarn binary itself).
    Subprocess(PathBuf),
}

/// Compiles `component` for an engine configured like the runtime's with `allocation`,
/// returning the serialized form [`Component::deserialize`] loads.
pub fn compile_to_bytes(
    component: &[u8],
    allocation: InstanceAllocation,
) -> Result<Vec<u8>, LoadError> {
    let engine =
        Engine::new(&crate::engine_config::engine_config(allocation)).map_err(|error| {
            LoadError::Compile {
                message: format!("cannot start the compiler: {error:#}"),
            }
        })?;
    engine
        .precompile_component(component)
        .map_err(|error| LoadError::Compile {
            message: format!("{error:#}"),
        })
}

/// What a child compile gave.
pub(crate) enum ChildCompile {
    Compiled(Component),
    /// The component itself is at fault: no point compiling it here.
    Invalid(LoadError),
    /// The child could not do it (missing, killed, refused output): compile here instead.
    Unavailable(String),
}

/// Runs `program compile-plugin` over `bytes` and loads its output into `engine`.
pub(crate) fn compile_in_child(
    program: &PathBuf,
    allocation: InstanceAllocation,
    engine: &Engine,
    bytes: &[u8],
) -> ChildCompile {
    let spawned = Command::new(program)
        .arg(COMPILE_SUBCOMMAND)
        .arg("--allocation")
        .arg(allocation.as_arg())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            return ChildCompile::Unavailable(format!("cannot run {}: {error}", program.display()));
        }
    };
    // The child reads all of stdin before it writes, so writing first cannot deadlock; a
    // child that exits early makes the write fail, and its status below says why.
    if let Some(mut stdin) = child.stdin.take() {
        let _ignored = stdin.write_all(bytes);
    }
    let output = match child.wait_with_output() {
        Ok(output) => output,
        Err(error) => return ChildCompile::Unavailable(format!("the compiler child: {error}")),
    };
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    match output.status.code() {
        Some(0) => {}
        Some(EXIT_INVALID_COMPONENT) => {
            return ChildCompile::Invalid(LoadError::Compile { message: stderr });
        }
        _ => {
            return ChildCompile::Unavailable(format!(
                "the compiler child failed ({}): {stderr}",
                output.status
            ));
        }
    }
    // SAFETY: the bytes are wasmtime's own serialization, made just now by this same
    // binary for an engine configured like `engine`; wasmtime checks the header and the
    // configuration before loading and refuses anything else (then we compile here).
    match unsafe { Component::deserialize(engine, &output.stdout) } {
        Ok(component) => ChildCompile::Compiled(component),
        Err(error) => {
            ChildCompile::Unavailable(format!("the compiled form was refused: {error:#}"))
        }
    }
}

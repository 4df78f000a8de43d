//! Where components are compiled: in this process, or in a short-lived child process (the
//! daemon's way), so the compiler's code and memory never stay resident in the daemon.
//!
//! The child is the same `forewarn` binary run as `forewarn compile-plugin`: it reads the
//! component on stdin and writes wasmtime's compiled form on stdout ([`compile_to_bytes`]).
//! The parent loads that form like a compile-cache entry. The child runs confined
//! ([`CompileLimits`]): a component built to make the compiler slow or memory-hungry costs
//! a child that is killed, and the plugin fails to load; it is never compiled in the daemon
//! instead. Only where no child can be started at all (the program is missing) does the
//! parent compile in process (and say so in the log).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::allocation::InstanceAllocation;
use crate::confined_child::{Finished, NotFinished, run_confined};
use crate::error::{CompileFailure, LoadError};
use forewarn_events::truncate;

/// The child's exit status for a component that is not valid (its message on stderr).
pub const EXIT_INVALID_COMPONENT: i32 = 65;
/// The subcommand that runs [`compile_to_bytes`] over stdin and stdout.
pub const COMPILE_SUBCOMMAND: &str = "compile-plugin";

/// How much CPU time (over all its threads) the compiler child may use before it is
/// stopped: the bundled plugins compile in well under a second, a Python component in about
/// 25 s of CPU time (13 s on 2 cores). CPU time, not wall-clock time, so that a VM busy with
/// its workload (or a test run with both cores taken) does not refuse a plugin it would
/// compile on a quiet one.
pub const COMPILE_CPU_TIME: Duration = Duration::from_secs(120);
/// How long the compiler child may run in all, before it is killed: the backstop for a child
/// that waits instead of working (its CPU time then stays low).
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(600);
/// The compiler child's address space (`RLIMIT_AS`), before [`COMPILE_ADDRESS_SPACE_PER_CPU`].
pub const COMPILE_ADDRESS_SPACE: u64 = 4 << 30;
/// The compiler child's address space for each CPU: each compiler thread reserves a malloc
/// arena (64 MiB) and a stack.
pub const COMPILE_ADDRESS_SPACE_PER_CPU: u64 = 128 << 20;
/// Most of the child's stderr kept in an error.
const CHILD_STDERR_MAX_BYTES: usize = 4096;

/// Limits on the child that compiles a component ([`Compiler::Subprocess`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileLimits {
    /// The child is killed (with its process tree) if it has not exited by then.
    pub timeout: Duration,
    /// The most CPU time the child may use (`RLIMIT_CPU`; on Windows its Job Object's
    /// per-process user time); whole seconds, at least one.
    pub cpu_time: Duration,
    /// The most address space the child may map (`RLIMIT_AS`; on Windows its Job Object's
    /// committed-memory limit): past it an allocation fails and the child aborts.
    pub address_space_bytes: u64,
}

impl Default for CompileLimits {
    /// [`COMPILE_TIMEOUT`]; [`COMPILE_ADDRESS_SPACE`] plus [`COMPILE_ADDRESS_SPACE_PER_CPU`]
    /// for each CPU this process may use.
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let per_cpu = COMPILE_ADDRESS_SPACE_PER_CPU.saturating_mul(cpus as u64);
        CompileLimits {
            timeout: COMPILE_TIMEOUT,
            cpu_time: COMPILE_CPU_TIME,
            address_space_bytes: COMPILE_ADDRESS_SPACE.saturating_add(per_cpu),
        }
    }
}

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
        Engine::new(&crate::engine_config::compiler_config(allocation)).map_err(|error| {
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
    /// The child ran and failed (killed at its time-out or memory limit, crashed, refused
    /// output): the plugin fails to load, and is not compiled here instead.
    Failed(CompileFailure),
    /// No child could be started at all (the program is missing): compile here instead.
    Unavailable(String),
}

/// Runs `program compile-plugin` over `bytes`, confined by `limits`, and loads its output
/// into `engine`.
pub(crate) fn compile_in_child(
    program: &Path,
    allocation: InstanceAllocation,
    limits: CompileLimits,
    engine: &Engine,
    bytes: &[u8],
) -> ChildCompile {
    let mut command = Command::new(program);
    command
        .arg(COMPILE_SUBCOMMAND)
        .arg("--allocation")
        .arg(allocation.as_arg());
    let input = bytes.to_vec();
    match run_confined(
        &mut command,
        input,
        limits.timeout,
        limits.address_space_bytes,
        limits.cpu_time.as_secs().max(1),
    ) {
        Ok(finished) => judge(finished, engine, limits.cpu_time),
        Err(NotFinished::Spawn(error)) => {
            ChildCompile::Unavailable(format!("cannot run {}: {error}", program.display()))
        }
        Err(NotFinished::TimedOut) => ChildCompile::Failed(CompileFailure::TimedOut {
            after: limits.timeout,
        }),
        Err(NotFinished::Wait(error)) => ChildCompile::Failed(CompileFailure::Wait {
            message: error.to_string(),
        }),
    }
}

/// What the child's exit means: its compiled form, the component's fault (exit status
/// [`EXIT_INVALID_COMPONENT`]), or the child's failure.
fn judge(finished: Finished, engine: &Engine, cpu_time: Duration) -> ChildCompile {
    let stderr = String::from_utf8_lossy(&finished.stderr);
    let stderr = truncate(stderr.trim(), CHILD_STDERR_MAX_BYTES).to_owned();
    match (
        finished.status.code(),
        forewarn_platform::exit_status::signal(&finished.status),
    ) {
        _ if forewarn_platform::exit_status::cpu_time_limit_reached(&finished.status) => {
            ChildCompile::Failed(CompileFailure::CpuTime { limit: cpu_time })
        }
        (Some(0), _) => load_compiled(engine, &finished.stdout),
        (Some(EXIT_INVALID_COMPONENT), _) => {
            ChildCompile::Invalid(LoadError::Compile { message: stderr })
        }
        (Some(code), _) => ChildCompile::Failed(CompileFailure::Exited { code, stderr }),
        (None, Some(signal)) => ChildCompile::Failed(CompileFailure::Signal { signal, stderr }),
        (None, None) => ChildCompile::Failed(CompileFailure::Wait {
            message: format!("it ended without an exit status ({})", finished.status),
        }),
    }
}

/// Loads the compiled form the child wrote.
fn load_compiled(engine: &Engine, compiled: &[u8]) -> ChildCompile {
    // SAFETY: the bytes are wasmtime's own serialization, made just now by this same
    // binary for an engine configured like `engine`; wasmtime checks the header and the
    // configuration before loading and refuses anything else.
    match unsafe { Component::deserialize(engine, compiled) } {
        Ok(component) => ChildCompile::Compiled(component),
        Err(error) => ChildCompile::Failed(CompileFailure::OutputRefused {
            message: format!("{error:#}"),
        }),
    }
}

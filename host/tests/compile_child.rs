//! Plugins compiled in a child process (`forewarn compile-plugin`), as the daemon does:
//! the result runs, an invalid component is refused with the compiler's message, a child
//! that cannot be started falls back to compiling in process, and a child that ran and
//! failed — exited, killed, too slow — fails the load instead (`fixtures/compile-child/`
//! stand in for such children).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use forewarn_runtime::wit::latest::Phase;
use forewarn_runtime::{
    CompileFailure, CompileLimits, Compiler, HostServices, LoadError, PluginSettings, Runtime,
    RuntimeConfig,
};
use forewarn_test_support::fixtures::{sample_context, sample_event};
use forewarn_test_support::guests::NOOP;

fn runtime(compiler: Compiler) -> Runtime {
    runtime_with(compiler, CompileLimits::default())
}

fn runtime_with(compiler: Compiler, compile_limits: CompileLimits) -> Runtime {
    let config = RuntimeConfig {
        compiler,
        compile_limits,
        ..RuntimeConfig::default()
    };
    Runtime::new(config, HostServices::default()).expect("runtime")
}

/// A script of `fixtures/compile-child/` as the compiler child.
fn fake_child(script: &str) -> Compiler {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compile-child");
    Compiler::Subprocess(dir.join(script))
}

/// Why loading the no-op plugin with `compiler` (under `limits`) failed.
fn load_failure(compiler: Compiler, limits: CompileLimits) -> LoadError {
    let bytes = std::fs::read(NOOP).expect("the no-op guest is built");
    match runtime_with(compiler, limits).load("noop", &bytes, PluginSettings::default()) {
        Ok(_) => panic!("the plugin loaded: it was compiled in the daemon instead"),
        Err(error) => error,
    }
}

/// The child's failure in a load error for the plugin `noop`.
fn child_failure(error: LoadError) -> CompileFailure {
    match error {
        LoadError::CompilerFailed { plugin, failure } if plugin == "noop" => failure,
        other => panic!("not the compiler child's failure for `noop`: {other:?}"),
    }
}

fn forewarn() -> Compiler {
    Compiler::Subprocess(PathBuf::from(env!("CARGO_BIN_EXE_forewarn")))
}

#[tokio::test]
async fn a_plugin_compiled_in_a_child_answers() {
    let bytes = std::fs::read(NOOP).expect("the no-op guest is built");
    let plugin = runtime(forewarn())
        .load("noop", &bytes, PluginSettings::default())
        .expect("loads");
    let outcome = plugin
        .call(
            &sample_event(),
            Phase::Prepare,
            &sample_context(),
            std::time::Duration::from_secs(10),
        )
        .await;
    assert!(outcome.answer.is_ok(), "{:?}", outcome.answer);
}

#[test]
fn an_invalid_component_is_refused_with_the_childs_message() {
    // A component header followed by nothing valid.
    let bytes = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00, 0xff, 0xff];
    let Err(error) = runtime(forewarn()).load("broken", &bytes, PluginSettings::default()) else {
        panic!("a broken component loaded");
    };
    let LoadError::Compile { message } = &error else {
        panic!("not a compile error: {error:?}");
    };
    assert!(!message.is_empty(), "the child's message was lost");
    assert!(
        !message.contains("compile-plugin"),
        "the message is the compiler's, not the child's plumbing: {message}"
    );
}

#[test]
fn a_child_that_cannot_run_falls_back_to_compiling_here() {
    let bytes = std::fs::read(NOOP).expect("the no-op guest is built");
    let missing = Compiler::Subprocess(PathBuf::from("/nonexistent/forewarn"));
    runtime(missing)
        .load("noop", &bytes, PluginSettings::default())
        .expect("compiled in process instead");
}

#[test]
fn a_child_that_exits_with_an_error_fails_the_load_instead_of_compiling_here() {
    let error = load_failure(fake_child("exits-1.sh"), CompileLimits::default());
    let failure = child_failure(error.clone());
    assert_eq!(
        failure,
        CompileFailure::Exited {
            code: 1,
            stderr: "compile-plugin: something went wrong".into()
        }
    );
    let message = error.to_string();
    assert!(message.contains("plugin `noop`"), "{message}");
    assert!(message.contains("not compiled in the daemon"), "{message}");
}

#[test]
fn a_child_killed_by_a_signal_fails_the_load_instead_of_compiling_here() {
    let error = load_failure(fake_child("killed-by-signal.sh"), CompileLimits::default());
    let failure = child_failure(error);
    assert!(
        matches!(failure, CompileFailure::Signal { signal: 9, .. }),
        "{failure:?}"
    );
}

#[test]
fn a_child_that_hangs_is_killed_at_the_compile_timeout() {
    let limits = CompileLimits {
        timeout: Duration::from_millis(300),
        ..CompileLimits::default()
    };
    let started = Instant::now();
    let failure = child_failure(load_failure(fake_child("hangs.sh"), limits));
    assert_eq!(
        failure,
        CompileFailure::TimedOut {
            after: limits.timeout
        }
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(10),
        "the load took {elapsed:?}"
    );
}

#[test]
fn a_child_that_keeps_working_is_stopped_at_its_cpu_time_not_its_wall_clock_time() {
    // One second of CPU time against a wall-clock time-out two minutes away: the child is
    // stopped for its CPU time (SIGXCPU), so a busy machine, where the wall clock runs out
    // first, does not refuse a component a quiet one compiles.
    let limits = CompileLimits {
        cpu_time: Duration::from_secs(1),
        timeout: Duration::from_secs(120),
        ..CompileLimits::default()
    };
    let error = load_failure(fake_child("spins.sh"), limits);
    let failure = child_failure(error.clone());
    assert_eq!(
        failure,
        CompileFailure::CpuTime {
            limit: Duration::from_secs(1)
        }
    );
    let message = error.to_string();
    assert!(message.contains("1 s of CPU time"), "{message}");
}

#[test]
fn the_child_runs_under_its_address_space_limit_and_first_for_the_oom_killer() {
    let limits = CompileLimits {
        address_space_bytes: 3 << 30,
        ..CompileLimits::default()
    };
    let failure = child_failure(load_failure(fake_child("reports-limits.sh"), limits));
    // `ulimit -v` counts KiB; 1000 is the highest OOM score adjustment; `ulimit -t` seconds.
    let expected = format!(
        "{} 1000 {}",
        (3u64 << 30) / 1024,
        forewarn_runtime::COMPILE_CPU_TIME.as_secs()
    );
    assert_eq!(
        failure,
        CompileFailure::Exited {
            code: 3,
            stderr: expected
        }
    );
}

#[test]
fn the_real_child_compiles_within_the_smallest_default_address_space() {
    let bytes = std::fs::read(NOOP).expect("the no-op guest is built");
    let limits = CompileLimits {
        address_space_bytes: forewarn_runtime::COMPILE_ADDRESS_SPACE,
        ..CompileLimits::default()
    };
    runtime_with(forewarn(), limits)
        .load("noop", &bytes, PluginSettings::default())
        .expect("compiled in the child under its limit");
}

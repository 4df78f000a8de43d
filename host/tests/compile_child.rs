//! Plugins compiled in a child process (`forewarn compile-plugin`), as the daemon does:
//! the result runs, an invalid component is refused with the compiler's message, and a
//! child that cannot run falls back to compiling in process.

use std::path::PathBuf;

use forewarn_runtime::wit::latest::Phase;
use forewarn_runtime::{Compiler, HostServices, LoadError, PluginSettings, Runtime, RuntimeConfig};
use forewarn_test_support::fixtures::{sample_context, sample_event};
use forewarn_test_support::guests::NOOP;

fn runtime(compiler: Compiler) -> Runtime {
    let config = RuntimeConfig {
        compiler,
        ..RuntimeConfig::default()
    };
    Runtime::new(config, HostServices::default()).expect("runtime")
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

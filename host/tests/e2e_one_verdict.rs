//! One bug, one verdict (issue 51): a Rust panic, a C `abort()`, an uncaught Python exception
//! and an uncaught JavaScript exception are each `trapped` in `forewarn plugin test`, with the
//! best location the language gives, and in the daemon the failure policy applies to them
//! alike. A plugin without its `on_event` export fails its build, naming the function to add.
//!
//! The plugins are in host/tests/fixtures/one-verdict/, built with the SDKs' build scripts; the
//! toolchains come from `tests/install-language-toolchains.sh` (a missing one FAILS the test
//! with the command that installs it, never a silent skip).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use forewarn_test_support::forewarn_binary;
use forewarn_test_support::guests::PROBE;
use forewarn_test_support::harness::{Daemon, DaemonConfig, Simulator, wait_for};
use forewarn_test_support::scenario_texts::SHORT_REBOOT;

/// Generous: a debug daemon compiling an 18 MiB component on a busy 2-core machine.
const TIMEOUT: Duration = Duration::from_secs(180);

/// A Reboot 15 minutes ahead: approved within the test's time only if forewarn approves early.
const FAR_REBOOT: &str = r#"
name = "far-reboot"
description = "One Reboot, 15 min notice."
end_after = "1h"

[[events]]
type = "Reboot"
source = "Platform"
appear_at = "1s"
notice = "15m"
duration_seconds = -1
description = "test reboot"
runs_for = "1m"
"#;

fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture(name: &str) -> PathBuf {
    repo_dir()
        .join("host/tests/fixtures/one-verdict")
        .join(name)
}

/// One language's build: its script and the argument of tests/install-language-toolchains.sh.
#[derive(Clone, Copy)]
struct Language {
    name: &'static str,
    build_script: &'static str,
    toolchain: &'static str,
}

const C: Language = Language {
    name: "C",
    build_script: "sdk/c/build.sh",
    toolchain: "c",
};
const PYTHON: Language = Language {
    name: "Python",
    build_script: "sdk/python/build.sh",
    toolchain: "python",
};
const JAVASCRIPT: Language = Language {
    name: "JavaScript",
    build_script: "sdk/js/build.sh",
    toolchain: "js",
};

/// Runs the language's build script on `source` into `output`.
fn run_build(language: Language, source: &Path, output: &Path) -> Output {
    Command::new("bash")
        .arg(repo_dir().join(language.build_script))
        .arg(source)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap_or_else(|error| panic!("cannot run bash {}: {error}", language.build_script))
}

/// Builds `source` into `dir/NAME.wasm`; panics with the output and the install command when
/// the build fails.
fn build(language: Language, source: &str, dir: &Path, name: &str) -> PathBuf {
    let output = dir.join(format!("{name}.wasm"));
    let result = run_build(language, &fixture(source), &output);
    assert!(
        result.status.success(),
        "building the {} fixture {source} failed ({}). If its toolchain is missing, install it \
         with `tests/install-language-toolchains.sh {}`.\nstdout:\n{}\nstderr:\n{}",
        language.name,
        result.status,
        language.toolchain,
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr),
    );
    output
}

fn describe(output: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `forewarn plugin test PLUGIN --json --scenario short-reboot --speed 10 ARGS`: its one
/// verdict, after checking that it exited 1 (the plugin failed).
fn failed_verdict(plugin: &Path, args: &[&str]) -> Value {
    let dir = plugin.parent().expect("the plugin's folder");
    let scenario = dir.join("short-reboot.toml");
    std::fs::write(&scenario, SHORT_REBOOT).expect("write the scenario");
    let output = Command::new(forewarn_binary!())
        .args(["plugin", "test"])
        .arg(plugin)
        .arg("--json")
        .arg("--scenario")
        .arg(&scenario)
        .args(["--speed", "10"])
        .args(args)
        .env_remove("FOREWARN_LOG")
        .output()
        .expect("forewarn runs");
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let verdicts: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .filter(|entry: &Value| entry["kind"] == "verdict")
        .collect();
    assert_eq!(verdicts.len(), 1, "{}", describe(&output));
    verdicts[0].clone()
}

/// The verdict is a trap in `prepare` whose reason ends with `detail`.
fn assert_trapped_with(verdict: &Value, detail: &str) {
    assert_eq!(verdict["verdict"], "trapped", "{verdict}");
    assert_eq!(verdict["phase"], "prepare", "{verdict}");
    let reason = verdict["reason"].as_str().unwrap_or_default();
    assert!(
        reason.ends_with(&format!("({detail})")),
        "the reason should end with ({detail}): {verdict}"
    );
}

#[test]
fn a_rust_panic_is_trapped_with_its_message_and_location() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("probe.wasm");
    std::fs::copy(PROBE, &plugin).unwrap();
    std::fs::write(
        dir.path().join("probe.toml"),
        "[config]\nmode = \"panic\"\n",
    )
    .unwrap();
    let verdict = failed_verdict(&plugin, &[]);
    let reason = verdict["reason"].as_str().unwrap_or_default();
    assert_eq!(verdict["verdict"], "trapped", "{verdict}");
    assert!(
        reason.contains("(probe panicked on purpose at ") && reason.contains("misbehave.rs:"),
        "the panic's message and location: {verdict}"
    );
}

#[test]
fn a_c_abort_is_trapped_in_the_function_that_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = build(C, "aborter.c", dir.path(), "aborter");
    assert_trapped_with(&failed_verdict(&plugin, &[]), "in fw_on_event");
}

#[test]
fn an_uncaught_python_exception_is_trapped_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = build(PYTHON, "raiser.py", dir.path(), "raiser");
    assert_trapped_with(
        &failed_verdict(&plugin, &[]),
        "plugin raised ValueError: invalid literal for int() with base 10: 'ten' at raiser.py:6, in limit",
    );
}

#[test]
fn an_uncaught_javascript_exception_is_trapped_at_its_source_line() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = build(JAVASCRIPT, "thrower.js", dir.path(), "thrower");
    let verdict = failed_verdict(&plugin, &[]);
    assert_eq!(verdict["verdict"], "trapped", "{verdict}");
    let reason = verdict["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("(plugin threw SyntaxError: JSON.parse: ")
            && reason.ends_with(" at thrower.js:5:15)"),
        "the exception and its place in thrower.js (not the bundle): {verdict}"
    );
}

/// The failure policy sees the JavaScript exception as it sees a panic: with `on-failure =
/// "approve"` the advisory plugin's failure counts as consent and the Reboot 15 minutes away
/// is approved at IMDS now (a deferral, what the SDK used to make of it, would hold it).
#[test]
fn in_the_daemon_an_uncaught_exception_meets_the_failure_policy() {
    let temp = tempfile::tempdir().unwrap();
    let plugin_dir = temp.path().join("plugins.d");
    std::fs::create_dir(&plugin_dir).unwrap();
    build(JAVASCRIPT, "thrower.js", &plugin_dir, "thrower");
    std::fs::write(
        plugin_dir.join("thrower.toml"),
        "budget = \"10s\"\non-failure = \"approve\"\n",
    )
    .unwrap();
    let simulator = Simulator::builder(forewarn_binary!())
        .scenario_text(FAR_REBOOT)
        .start();
    let config = temp.path().join("forewarn.toml");
    DaemonConfig::vm_a(temp.path(), plugin_dir.clone(), &simulator.base_url).write(&config);
    let daemon = Daemon::start(forewarn_binary!(), &config);
    let state = simulator.wait_for_state(TIMEOUT, "the Reboot approved at IMDS", |state| {
        !state.approvals.is_empty()
    });
    assert!(
        state.approvals[0].accepted,
        "{}",
        daemon.describe_for_failure()
    );
    // The approval can reach the simulator before the test has read the decision from the
    // daemon's output: wait for it, do not read once.
    let failed = wait_for(TIMEOUT, "a decision of thrower", || {
        daemon
            .decisions()
            .into_iter()
            .find(|decision| decision.plugin == "thrower")
            .ok_or_else(|| format!("no decision of thrower\n{}", daemon.describe_for_failure()))
    });
    assert!(
        failed.reason.contains("plugin threw SyntaxError"),
        "the failed call's reason names the exception: {failed:?}"
    );
}

/// The build of a plugin without its answer fails, before any test, naming the function to add;
/// no component is written.
#[test]
fn a_plugin_without_on_event_does_not_build_and_is_told_what_to_add() {
    let dir = tempfile::tempdir().unwrap();
    for (language, source, fix) in [
        (
            PYTHON,
            "no_on_event.py",
            "add `def on_event(event, phase, ctx):`",
        ),
        (
            JAVASCRIPT,
            "no-on-event.js",
            "add `export function onEvent(event, phase, ctx)`",
        ),
        (
            C,
            "no_on_event.c",
            "add `fw_decision fw_on_event(const fw_event *event, fw_phase phase, const fw_context *ctx)`",
        ),
    ] {
        let output = dir.path().join(format!("{}.wasm", language.toolchain));
        let result = run_build(language, &fixture(source), &output);
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(
            !result.status.success() && stderr.contains(fix),
            "{}: the build should fail saying {fix:?}\n{}",
            language.name,
            describe(&result)
        );
        assert!(
            !output.exists(),
            "{}: a component was written",
            language.name
        );
    }
}

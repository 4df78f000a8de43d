//! From an empty folder to a tested plugin in each of the four languages: `forewarn plugin new`,
//! then the build and test commands its README gives, `plugin check`, and `forewarn plugin test`.
//!
//! The project's tests must pass out of the box and the built plugin must pass `plugin test`
//! against two built-in scenarios (a Reboot's whole life, and a Spot eviction with 30 s notice).
//! The toolchains come from `tests/install-language-toolchains.sh`; a missing one FAILS the test
//! with the command that installs it. Each test prints its wall time from `plugin new` on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use forewarn_test_support::forewarn_binary;
use serde_json::Value;

/// The scenarios each new plugin is tested against.
const SCENARIOS: [&str; 2] = ["full-lifecycle", "spot-preemption"];

/// One language's project.
struct Language {
    /// `--lang`.
    lang: &'static str,
    /// The plugin's name.
    name: &'static str,
    /// What installs the toolchain, said when a command fails.
    fix: &'static str,
}

const RUST: Language = Language {
    lang: "rust",
    name: "hello-rust",
    fix: "The Rust template needs the wasm32-wasip2 target (`rustup target add wasm32-wasip2`) and crates.io.",
};
const C: Language = Language {
    lang: "c",
    name: "hello-c",
    fix: "Install clang and wasi-libc with `tests/install-language-toolchains.sh c`, and gcc and make.",
};
const PYTHON: Language = Language {
    lang: "python",
    name: "hello-py",
    fix: "Install componentize-py and pytest with `tests/install-language-toolchains.sh python`.",
};
const JS: Language = Language {
    lang: "js",
    name: "hello-js",
    fix: "Install node and componentize-js with `tests/install-language-toolchains.sh js`.",
};

fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn forewarn(dir: &Path, args: &[&str]) -> Output {
    Command::new(forewarn_binary!())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run forewarn")
}

fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `forewarn plugin new NAME --lang LANG DIR` in a fresh temp dir; the project's directory.
fn plugin_new(language: &Language) -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join(language.name);
    let output = forewarn(
        temp.path(),
        &[
            "plugin",
            "new",
            language.name,
            "--lang",
            language.lang,
            dir.to_str().expect("a UTF-8 temp path"),
        ],
    );
    assert!(output.status.success(), "plugin new: {}", describe(&output));
    (temp, dir)
}

/// The commands of the first fenced block of the project's README, comments cut off.
fn readme_commands(dir: &Path) -> Vec<String> {
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("the project has a README");
    readme
        .split("```")
        .nth(1)
        .expect("the README has a fenced block")
        .lines()
        .skip(1)
        .map(|line| {
            line.split(" #")
                .next()
                .unwrap_or_default()
                .trim()
                .to_owned()
        })
        .filter(|line| !line.is_empty())
        .collect()
}

/// Runs one README command with bash in the project; panics with its output and the fix.
fn run_command(dir: &Path, command: &str, fix: &str) -> Output {
    let started = Instant::now();
    let output = Command::new("bash")
        .args(["-c", command])
        .current_dir(dir)
        .output()
        .unwrap_or_else(|error| panic!("cannot run bash: {error}"));
    assert!(
        output.status.success(),
        "`{command}` in {} failed. {fix}\n{}",
        dir.display(),
        describe(&output)
    );
    eprintln!("`{command}`: {:.1} s", started.elapsed().as_secs_f64());
    output
}

/// `forewarn plugin test NAME.wasm --manifest NAME.toml --scenario S --json` passes, and the
/// plugin's own approvals are in the timeline.
fn assert_plugin_test_passes(dir: &Path, name: &str, scenario: &str) {
    let wasm = format!("{name}.wasm");
    let manifest = format!("{name}.toml");
    let args = [
        "plugin",
        "test",
        &wasm,
        "--manifest",
        &manifest,
        "--scenario",
        scenario,
        "--json",
    ];
    let output = forewarn(dir, &args);
    assert!(
        output.status.success(),
        "plugin test on {scenario}: {}",
        describe(&output)
    );
    let entries: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let verdict = entries
        .iter()
        .find(|entry| entry["kind"] == "verdict")
        .unwrap_or_else(|| panic!("no verdict line: {}", describe(&output)));
    assert_eq!(verdict["verdict"], "passed", "{verdict}");
    assert_eq!(verdict["plugin"], name, "{verdict}");
    let approvals = entries
        .iter()
        .filter(|entry| {
            entry["kind"] == "plugin-answered"
                && entry["plugin"] == name
                && entry["outcome"] == "approve"
        })
        .count();
    assert!(
        approvals >= 1,
        "{name} approved nothing on {scenario}: {}",
        describe(&output)
    );
}

/// `forewarn plugin check NAME.wasm` accepts it.
fn assert_plugin_check_passes(dir: &Path, name: &str) {
    let output = forewarn(dir, &["plugin", "check", &format!("{name}.wasm")]);
    assert!(
        output.status.success(),
        "plugin check: {}",
        describe(&output)
    );
}

/// The whole path for one language; `prepare` runs after `plugin new`, before the build.
fn new_build_test_and_plugin_test(language: &Language, prepare: impl FnOnce(&Path)) {
    let started = Instant::now();
    let (_temp, dir) = plugin_new(language);
    prepare(&dir);
    let commands = readme_commands(&dir);
    let name = language.name;
    assert_eq!(commands.len(), 3, "build, test, install: {commands:?}");
    assert_eq!(
        commands[2],
        format!("sudo install -m 644 {name}.wasm {name}.toml /etc/forewarn/plugins.d/")
    );
    run_command(&dir, &commands[1], language.fix);
    run_command(&dir, &commands[0], language.fix);
    assert_plugin_check_passes(&dir, name);
    for scenario in SCENARIOS {
        assert_plugin_test_passes(&dir, name, scenario);
    }
    eprintln!(
        "{}: plugin new to a passing plugin test on {} scenarios: {:.1} s",
        language.lang,
        SCENARIOS.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_new_rust_plugin_builds_passes_its_tests_and_plugin_test() {
    new_build_test_and_plugin_test(&RUST, |dir| {
        // The crate's `target/` lives under this workspace's, so later runs build warm; the
        // README's commands (which name `target/…`) run unchanged.
        let shared = repo_dir().join("target/authoring/rust-template");
        std::fs::create_dir_all(&shared).expect("create the shared target dir");
        std::os::unix::fs::symlink(&shared, dir.join("target")).expect("link target/");
    });
}

#[test]
fn a_new_c_plugin_builds_passes_its_tests_and_plugin_test() {
    new_build_test_and_plugin_test(&C, |_| {});
}

#[test]
fn a_new_python_plugin_builds_passes_its_tests_and_plugin_test() {
    new_build_test_and_plugin_test(&PYTHON, |_| {});
}

#[test]
fn a_new_js_plugin_builds_passes_its_tests_and_plugin_test() {
    new_build_test_and_plugin_test(&JS, |_| {});
}

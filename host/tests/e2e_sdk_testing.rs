//! The native testing hosts of the C, Python and JavaScript SDKs, and the plugin templates in
//! `sdk/templates/` (what `forewarn plugin new` writes): each SDK's own tests of its testing
//! host (`sdk/c/test.sh`, pytest on `sdk/python/tests`, `node --test` on `sdk/js/test`) pass;
//! each template, filled in, passes its own test command out of the box, and builds into a
//! plugin that `forewarn plugin check` accepts.
//!
//! The toolchains come from `tests/install-language-toolchains.sh`; a missing one FAILS the test
//! with the command that installs it (never a silent skip).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use forewarn_test_support::forewarn_binary;

fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `program args` in `dir`; panics with its output and `fix` unless it succeeds.
fn run_ok(dir: &Path, program: &str, args: &[&str], fix: &str) -> Output {
    let started = Instant::now();
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|error| {
            panic!("cannot run {program} in {}: {error}. {fix}", dir.display())
        });
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "`{program} {}` in {} failed ({}). {fix}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        args.join(" "),
        dir.display(),
        output.status,
    );
    eprintln!(
        "`{program} {}` in {}: {:.1} s",
        args.join(" "),
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    output
}

/// `sdk/templates/LANG` filled in as plugin `name` in a fresh temp dir (as `forewarn plugin new`
/// does, by `sdk/templates/instantiate.sh`).
fn instantiate(lang: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join(name);
    let script = repo_dir().join("sdk/templates/instantiate.sh");
    run_ok(
        temp.path(),
        "bash",
        &[script.to_str().unwrap(), lang, name, dir.to_str().unwrap()],
        "sdk/templates/instantiate.sh fills in a template",
    );
    (temp, dir)
}

/// `forewarn plugin check` accepts `wasm`.
fn assert_valid_plugin(wasm: &Path) {
    let output = Command::new(forewarn_binary!())
        .args(["plugin", "check"])
        .arg(wasm)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("a valid forewarn plugin"),
        "forewarn plugin check rejected {} ({}):\n{stdout}\n{}",
        wasm.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

const C_FIX: &str = "The C testing host needs gcc (apt-get install gcc) and cargo; the build needs \
                     `tests/install-language-toolchains.sh c`.";
const PYTHON_FIX: &str =
    "Install componentize-py and pytest with `tests/install-language-toolchains.sh python`.";
const JS_FIX: &str =
    "Install node and componentize-js with `tests/install-language-toolchains.sh js`.";

#[test]
fn c_sdk_testing_host_passes_its_own_tests() {
    let sdk = repo_dir().join("sdk/c");
    let output = run_ok(
        &sdk,
        "bash",
        &["test.sh", "tests/drain.c", "tests/test_testing.c"],
        C_FIX,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("checks passed"), "{stdout}");
}

#[test]
fn python_sdk_testing_host_passes_its_own_tests() {
    let sdk = repo_dir().join("sdk/python");
    let output = run_ok(&sdk, "bash", &["test.sh"], PYTHON_FIX);
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The bindings mirror is checked against componentize-py, which is installed: no skips.
    assert!(
        stdout.contains(" passed") && !stdout.contains("skipped"),
        "{stdout}"
    );
}

#[test]
fn js_sdk_testing_host_passes_its_own_tests() {
    let sdk = repo_dir().join("sdk/js");
    let output = run_ok(&sdk, "bash", &["test.sh"], JS_FIX);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("# fail 0"), "{stdout}");
}

#[test]
fn c_template_passes_make_test_and_builds_a_valid_plugin() {
    let (_temp, dir) = instantiate("c", "hello-c");
    run_ok(&dir, "make", &["test"], C_FIX);
    run_ok(&dir, "make", &[], C_FIX);
    assert_valid_plugin(&dir.join("hello-c.wasm"));
}

#[test]
fn python_template_passes_its_tests_and_builds_a_valid_plugin() {
    let (_temp, dir) = instantiate("python", "hello-py");
    let output = run_ok(&dir, "bash", &["test.sh"], PYTHON_FIX);
    assert!(String::from_utf8_lossy(&output.stdout).contains(" passed"));
    run_ok(&dir, "bash", &["build.sh"], PYTHON_FIX);
    assert_valid_plugin(&dir.join("hello-py.wasm"));
}

#[test]
fn js_template_passes_node_test_and_builds_a_valid_plugin() {
    let (_temp, dir) = instantiate("js", "hello-js");
    let output = run_ok(&dir, "node", &["--test"], JS_FIX);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("# pass 4") && stdout.contains("# fail 0"),
        "{stdout}"
    );
    run_ok(&dir, "bash", &["build.sh"], JS_FIX);
    assert_valid_plugin(&dir.join("hello-js.wasm"));
}

//! The native testing hosts of the C, Python and JavaScript SDKs: each SDK's own tests of its
//! testing host (`sdk/c/test.sh`, pytest on `sdk/python/tests`, `node --test` on `sdk/js/test`)
//! pass. (The templates that use them are tested from `plugin new` on in e2e_authoring.)
//!
//! The toolchains come from `tests/install-language-toolchains.sh`; a missing one FAILS the test
//! with the command that installs it (never a silent skip).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

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

//! From an empty folder to a tested plugin in each of the four languages, the way an author
//! with only the installed `forewarn` and the language's toolchain gets there: the binary is
//! copied into a temporary folder (as the `.deb` installs it, away from the tree it was built
//! in) and run from another one, with every environment variable that names this checkout
//! removed. `forewarn plugin new` writes the project with the SDK the binary carries; no file
//! it writes names the checkout (asserted); then the commands the project's README gives (set
//! up, build, test), `plugin check`, and `forewarn plugin test` against two built-in scenarios
//! (a Reboot's whole life, and a Spot eviction with 30 s notice).
//!
//! The toolchains come from `tests/install-language-toolchains.sh` (clang and wasi-libc;
//! Node.js; python3 with venv) and the registries (crates.io, PyPI, npm) the project's own
//! commands install from, as an author's machine does; a missing one FAILS the test with the
//! command that installs it. The generated Rust crate builds in a target folder shared across
//! runs (under this workspace's target/, linked as the project's `target/` after the files were
//! scanned), so wit-bindgen is compiled once. Each test prints its wall time from `plugin new`.

use std::ffi::OsString;
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
    fix: "The Python template needs python3 with venv (`tests/install-language-toolchains.sh python`) and PyPI.",
};
const JS: Language = Language {
    lang: "js",
    name: "hello-js",
    fix: "The JavaScript template needs Node.js >= 20.19 with npm (`tests/install-language-toolchains.sh js`) and the npm registry.",
};

/// The checkout this test runs in, as the generated files must never name it.
fn repo_dir() -> PathBuf {
    std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .expect("the checkout exists")
}

/// An author's machine without the checkout: the binary copied into `bin/`, a work folder, and
/// the environment with nothing that names the checkout.
struct Machine {
    _temp: tempfile::TempDir,
    bin: PathBuf,
    work: PathBuf,
    env: Vec<(OsString, OsString)>,
}

impl Machine {
    fn new() -> Machine {
        let temp = tempfile::tempdir().expect("temp dir");
        let bin = temp.path().join("bin");
        let work = temp.path().join("work");
        std::fs::create_dir_all(&bin).expect("bin/");
        std::fs::create_dir_all(&work).expect("work/");
        // Copied by `cp`, not by this process: a file this process held open for writing
        // would be inherited by a child another test thread forks meanwhile, and running it
        // would fail with "Text file busy" (ETXTBSY) until that child execs.
        let copied = Command::new("cp")
            .arg(forewarn_binary!())
            .arg(bin.join("forewarn"))
            .status()
            .expect("run cp");
        assert!(copied.success(), "cp the binary into bin/: {copied}");
        let env = author_environment(&bin);
        Machine {
            _temp: temp,
            bin,
            work,
            env,
        }
    }

    fn command(&self, program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
        let mut command = Command::new(program);
        command.env_clear().envs(self.env.clone()).current_dir(dir);
        command
    }

    fn forewarn(&self, dir: &Path, args: &[&str]) -> Output {
        self.command(self.bin.join("forewarn"), dir)
            .args(args)
            .output()
            .expect("run the copied forewarn")
    }
}

/// This process's environment less every variable whose value names the checkout (cargo's
/// CARGO_MANIFEST_DIR, CARGO_TARGET_TMPDIR, …) and cargo's own CARGO_* variables; PATH keeps
/// its entries outside the checkout behind `bin`, and the executables of those inside it (the
/// Node.js tests/install-language-toolchains.sh may have fetched) are linked into `bin`.
fn author_environment(bin: &Path) -> Vec<(OsString, OsString)> {
    let repo = repo_dir();
    let repo_text = repo.display().to_string();
    let mut path = vec![bin.to_path_buf()];
    for entry in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let inside = std::fs::canonicalize(&entry).is_ok_and(|real| real.starts_with(&repo));
        if !inside {
            path.push(entry);
            continue;
        }
        for tool in std::fs::read_dir(&entry).into_iter().flatten().flatten() {
            let _ignored = std::os::unix::fs::symlink(tool.path(), bin.join(tool.file_name()));
        }
    }
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(key, value)| {
            let key = key.to_string_lossy();
            key != "PATH"
                && !key.starts_with("CARGO")
                && !value.to_string_lossy().contains(&repo_text)
        })
        .collect();
    env.push((
        "PATH".into(),
        std::env::join_paths(path).expect("a PATH without colons in its entries"),
    ));
    env
}

fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Every file under `dir` (symbolic links not followed), relative to it.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder)
            .expect("read a project folder")
            .flatten()
        {
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    files
}

/// No file `plugin new` wrote names the checkout: neither its path nor the sdk/ under it.
fn assert_no_file_names_the_checkout(dir: &Path) {
    let repo = repo_dir().display().to_string();
    let files = files_under(dir);
    assert!(files.len() > 5, "{files:?}");
    for file in files {
        let text = String::from_utf8_lossy(&std::fs::read(&file).expect("read")).into_owned();
        assert!(
            !text.contains(&repo),
            "{} names the checkout {repo}: a project must build without it",
            file.display()
        );
    }
}

/// The commands of the first fenced block of the project's README, comments cut off, without
/// the final `sudo install` (the daemon's plugin directory is not this test's to write).
fn readme_commands(dir: &Path, name: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("the project has a README");
    let mut commands: Vec<String> = readme
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
        .collect();
    assert_eq!(
        commands.pop(),
        Some(format!(
            "sudo install -m 644 {name}.wasm {name}.toml /etc/forewarn/plugins.d/"
        )),
        "the README ends with the install"
    );
    commands
}

/// Runs one README command with bash in the project; panics with its output and the fix.
fn run_command(machine: &Machine, dir: &Path, command: &str, fix: &str) {
    let started = Instant::now();
    let output = machine
        .command("bash", dir)
        .args(["-c", command])
        .output()
        .unwrap_or_else(|error| panic!("cannot run bash: {error}"));
    assert!(
        output.status.success(),
        "`{command}` in {} failed. {fix}\n{}",
        dir.display(),
        describe(&output)
    );
    eprintln!("`{command}`: {:.1} s", started.elapsed().as_secs_f64());
}

/// `forewarn plugin test NAME.wasm --manifest NAME.toml --scenario S --json` passes, and the
/// plugin's own approvals are in the timeline.
fn assert_plugin_test_passes(machine: &Machine, dir: &Path, name: &str, scenario: &str) {
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
    let output = machine.forewarn(dir, &args);
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

/// The whole path for one language; `prepare` runs after the files were scanned, before the
/// project's own commands.
fn new_build_test_and_plugin_test(language: &Language, prepare: impl FnOnce(&Machine, &Path)) {
    let machine = Machine::new();
    let started = Instant::now();
    let name = language.name;
    let output = machine.forewarn(
        &machine.work,
        &["plugin", "new", name, "--lang", language.lang],
    );
    assert!(output.status.success(), "plugin new: {}", describe(&output));
    let dir = machine.work.join(name);
    assert!(
        dir.join("vendor/forewarn-sdk/README.md").is_file(),
        "the carried SDK is in the project"
    );
    assert_no_file_names_the_checkout(&dir);
    prepare(&machine, &dir);
    for command in readme_commands(&dir, name) {
        run_command(&machine, &dir, &command, language.fix);
    }
    let check = machine.forewarn(&dir, &["plugin", "check", &format!("{name}.wasm")]);
    assert!(check.status.success(), "plugin check: {}", describe(&check));
    for scenario in SCENARIOS {
        assert_plugin_test_passes(&machine, &dir, name, scenario);
    }
    eprintln!(
        "{}: plugin new to a passing plugin test on {} scenarios, without the checkout: {:.1} s",
        language.lang,
        SCENARIOS.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_new_rust_plugin_builds_passes_its_tests_and_plugin_test_without_the_checkout() {
    new_build_test_and_plugin_test(&RUST, |_, dir| {
        // Shared across runs, so wit-bindgen and its dependencies build once; the README's
        // commands (which name `target/…`) run unchanged.
        let shared = repo_dir().join("target/authoring/rust-template");
        std::fs::create_dir_all(&shared).expect("create the shared target dir");
        std::os::unix::fs::symlink(&shared, dir.join("target")).expect("link target/");
    });
}

#[test]
fn a_new_c_plugin_builds_passes_its_tests_and_plugin_test_without_the_checkout() {
    new_build_test_and_plugin_test(&C, |_, _| {});
}

#[test]
fn a_new_python_plugin_builds_passes_its_tests_and_plugin_test_without_the_checkout() {
    new_build_test_and_plugin_test(&PYTHON, |_, _| {});
}

#[test]
fn a_new_js_plugin_builds_passes_its_tests_and_plugin_test_without_the_checkout() {
    new_build_test_and_plugin_test(&JS, |_, _| {});
}

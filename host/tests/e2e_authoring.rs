//! From an empty folder to a tested plugin in each of the four languages, the way an author
//! with only the installed `forewarn` and the language's toolchain gets there: the binary is
//! copied into a temporary folder (as the `.deb` installs it, away from the tree it was built
//! in) and run from another one, with every environment variable that names this checkout
//! removed. `forewarn plugin new` writes the project with the SDK the binary carries; no file
//! it writes names the checkout (asserted); then the commands the project's README gives (set
//! up, build, test), `plugin check`, and `forewarn plugin test --all-scenarios` as the README
//! gives it (a Reboot's whole life and a Spot eviction with 30 s notice among them, which must
//! call the plugin); the `http-drain` templates the same way against a local drain service;
//! and `forewarn plugin dev`'s loop on a Rust project. Each language's `http-drain`
//! template goes the same way (`plugin new --template http-drain`), then `plugin test` on a
//! Reboot's whole life against a drain service the test runs on 127.0.0.1, granted in the
//! manifest and named with `--config drain-url=…` as an author would.
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
use forewarn_test_support::harness::{http_get, http_post_json, wait_for};
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

/// `forewarn plugin test NAME.wasm --manifest NAME.toml --scenario S --json` with `extra`
/// arguments (`--config KEY=VALUE`) passes, and the plugin's own approvals are in the
/// timeline; the timeline's entries.
fn plugin_test_passes_with(
    machine: &Machine,
    dir: &Path,
    name: &str,
    scenario: &str,
    extra: &[&str],
) -> Vec<Value> {
    let wasm = format!("{name}.wasm");
    let manifest = format!("{name}.toml");
    let mut args = vec![
        "plugin",
        "test",
        &wasm,
        "--manifest",
        &manifest,
        "--scenario",
        scenario,
        "--json",
    ];
    args.extend_from_slice(extra);
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
    entries
}

/// `forewarn plugin test NAME.wasm --manifest NAME.toml --all-scenarios`, as the project's
/// README says to run it (with `--json`): it passes, every scenario passed or did not concern
/// the plugin, and the [`SCENARIOS`] passed with calls answered. Prints how long it took.
fn assert_all_scenarios_pass(machine: &Machine, dir: &Path, name: &str) {
    let wasm = format!("{name}.wasm");
    let manifest = format!("{name}.toml");
    let started = Instant::now();
    let args = [
        "plugin",
        "test",
        &wasm,
        "--manifest",
        &manifest,
        "--all-scenarios",
        "--json",
    ];
    let output = machine.forewarn(dir, &args);
    assert!(
        output.status.success(),
        "plugin test --all-scenarios: {}",
        describe(&output)
    );
    let verdicts: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["kind"] == "verdict")
        .collect();
    assert!(verdicts.len() >= 20, "{}", describe(&output));
    for verdict in &verdicts {
        assert_eq!(verdict["plugin"], name, "{verdict}");
        assert!(
            verdict["verdict"] == "passed" || verdict["verdict"] == "not-concerned",
            "{verdict}"
        );
    }
    for scenario in SCENARIOS {
        let verdict = verdicts
            .iter()
            .find(|verdict| verdict["scenario"] == scenario)
            .unwrap_or_else(|| panic!("no verdict on {scenario}: {}", describe(&output)));
        assert_eq!(verdict["verdict"], "passed", "{verdict}");
        assert!(verdict["calls"].as_u64() >= Some(1), "{verdict}");
    }
    eprintln!(
        "`forewarn plugin test {wasm} --manifest {manifest} --all-scenarios` ({} scenarios): {:.1} s",
        verdicts.len(),
        started.elapsed().as_secs_f64()
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
    assert_all_scenarios_pass(&machine, &dir, name);
    eprintln!(
        "{}: plugin new to a passing `plugin test --all-scenarios` ({} of them named), without the checkout: {:.1} s",
        language.lang,
        SCENARIOS.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_new_rust_plugin_builds_passes_its_tests_and_plugin_test_without_the_checkout() {
    new_build_test_and_plugin_test(&RUST, |_, dir| share_the_rust_target(dir));
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

/// The template each language's second test starts from.
const HTTP_DRAIN: &str = "http-drain";

/// What the stand-in for the drain service got: (method, path, body) per request.
type DrainRequests = std::sync::Arc<std::sync::Mutex<Vec<(String, String, String)>>>;

/// A drain service on 127.0.0.1 that records each request and answers 200; its `host:port`.
/// Serves until the test process ends.
fn start_drain_service() -> (String, DrainRequests) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the drain service");
    let address = listener.local_addr().expect("its address").to_string();
    let requests = DrainRequests::default();
    let sink = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::Write;
            let _ignored = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
            let Ok(reader) = stream.try_clone() else {
                continue;
            };
            let Ok(request) =
                forewarn_test_support::harness::read_request(&mut std::io::BufReader::new(reader))
            else {
                continue;
            };
            sink.lock().expect("requests").push((
                request.method,
                request.path,
                String::from_utf8_lossy(&request.body).into_owned(),
            ));
            let mut stream = stream;
            let _ignored = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (address, requests)
}

/// The http-drain template in one language: `plugin new --template http-drain`, the README's
/// commands (which run its tests: the readiness hold and the faked answers), `plugin check`;
/// then `plugin test` on a Reboot's whole life with the manifest's `http` grant and
/// `--config drain-url=…` pointed at a drain service this test runs, as an author points them
/// at theirs. The test passes (nothing answering would make the plugin defer until the event
/// started), the service got the plugin's POST for each event, the demo's load balancer saw
/// `/readyz` fail (the VM out of rotation), and the plugin put the VM back.
fn new_http_drain_plugin_drains_through_the_service(
    language: &Language,
    name: &str,
    prepare: impl FnOnce(&Machine, &Path),
) {
    let machine = Machine::new();
    let started = Instant::now();
    let output = machine.forewarn(
        &machine.work,
        &[
            "plugin",
            "new",
            name,
            "--lang",
            language.lang,
            "--template",
            HTTP_DRAIN,
        ],
    );
    assert!(output.status.success(), "plugin new: {}", describe(&output));
    let dir = machine.work.join(name);
    assert_no_file_names_the_checkout(&dir);
    prepare(&machine, &dir);
    for command in readme_commands(&dir, name) {
        run_command(&machine, &dir, &command, language.fix);
    }
    let check = machine.forewarn(&dir, &["plugin", "check", &format!("{name}.wasm")]);
    assert!(check.status.success(), "plugin check: {}", describe(&check));

    let (address, requests) = start_drain_service();
    let manifest_path = dir.join(format!("{name}.toml"));
    let manifest = std::fs::read_to_string(&manifest_path).expect("the manifest");
    let granted = manifest.replace(
        "http = [\"127.0.0.1:8080\"]",
        &format!("http = [\"{address}\"]"),
    );
    assert_ne!(
        granted, manifest,
        "the manifest grants the default drain-url's host:port"
    );
    std::fs::write(&manifest_path, granted).expect("grant the drain service");
    let drain_url = format!("drain-url=http://{address}/drain");
    let scenario = SCENARIOS[0];
    let entries =
        plugin_test_passes_with(&machine, &dir, name, scenario, &["--config", &drain_url]);

    let requests = requests.lock().expect("requests").clone();
    let approved: Vec<&str> = entries
        .iter()
        .filter(|entry| {
            entry["kind"] == "plugin-answered"
                && entry["phase"] == "prepare"
                && entry["outcome"] == "approve"
        })
        .filter_map(|entry| entry["event_id"].as_str())
        .collect();
    assert!(!approved.is_empty(), "{entries:?}");
    for event_id in &approved {
        let told = requests.iter().any(|(method, path, body)| {
            let notice: Value = serde_json::from_str(body).unwrap_or_default();
            method == "POST" && path == "/drain" && notice["event_id"] == *event_id
        });
        assert!(told, "the service was not told of {event_id}: {requests:?}");
    }
    let out_of_rotation = entries
        .iter()
        .any(|entry| entry["kind"] == "workload" && entry["what"] == "out-of-rotation");
    assert!(
        out_of_rotation,
        "the load balancer never saw /readyz fail: {entries:?}"
    );
    let back = entries.iter().any(|entry| {
        entry["kind"] == "plugin-log"
            && entry["plugin"] == name
            && entry["message"]
                .as_str()
                .is_some_and(|message| message.ends_with("is over: back in rotation"))
    });
    assert!(back, "the plugin did not put the VM back: {entries:?}");
    eprintln!(
        "{} {HTTP_DRAIN}: plugin new to a passing plugin test on {scenario} against a drain \
         service ({} request(s)), without the checkout: {:.1} s",
        language.lang,
        requests.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Links the project's `target/` to one shared across runs and tests, so wit-bindgen and its
/// dependencies build once; the README's commands (which name `target/…`) run unchanged.
fn share_the_rust_target(dir: &Path) {
    let shared = repo_dir().join("target/authoring/rust-template");
    std::fs::create_dir_all(&shared).expect("create the shared target dir");
    std::os::unix::fs::symlink(&shared, dir.join("target")).expect("link target/");
}

#[test]
fn a_new_rust_http_drain_plugin_drains_through_its_service_without_the_checkout() {
    new_http_drain_plugin_drains_through_the_service(&RUST, "drain-rust", |_, dir| {
        share_the_rust_target(dir);
    });
}

#[test]
fn a_new_c_http_drain_plugin_drains_through_its_service_without_the_checkout() {
    new_http_drain_plugin_drains_through_the_service(&C, "drain-c", |_, _| {});
}

#[test]
fn a_new_python_http_drain_plugin_drains_through_its_service_without_the_checkout() {
    new_http_drain_plugin_drains_through_the_service(&PYTHON, "drain-py", |_, _| {});
}

#[test]
fn a_new_js_http_drain_plugin_drains_through_its_service_without_the_checkout() {
    new_http_drain_plugin_drains_through_the_service(&JS, "drain-js", |_, _| {});
}

/// The lines a running `forewarn plugin dev` printed so far, read by a thread.
struct DevOutput {
    child: std::process::Child,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl DevOutput {
    fn start(mut command: Command) -> DevOutput {
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start forewarn plugin dev");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let lines = lines.clone();
            std::thread::spawn(move || {
                use std::io::BufRead;
                for line in std::io::BufReader::new(stream)
                    .lines()
                    .map_while(Result::ok)
                {
                    lines.lock().expect("lines").push(line);
                }
            });
        }
        DevOutput { child, lines }
    }

    fn text(&self) -> String {
        self.lines.lock().expect("lines").join("\n")
    }

    /// The address of the URL printed after `label` in the header (`console:`, `status:`).
    fn address(&self, label: &str) -> String {
        wait_for(DEV_TIMEOUT, label, || {
            let found = self.lines.lock().expect("lines").iter().find_map(|line| {
                let rest = line.split_once(label)?.1.trim_start();
                let url = rest.split_whitespace().next()?;
                Some(
                    url.trim_start_matches("http://")
                        .trim_end_matches('/')
                        .to_owned(),
                )
            });
            // The lock is released before the failure text takes it again.
            found.ok_or_else(|| self.text())
        })
    }
}

impl Drop for DevOutput {
    fn drop(&mut self) {
        let _ignored = self.child.kill();
        let _ignored = self.child.wait();
    }
}

/// How long `plugin dev` may take for a step (a release build of the template, cold).
const DEV_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The live plugin's sha256 at the dev daemon's /status.
fn live_hash(status: &str, name: &str) -> Result<String, String> {
    let body = http_get(status, "/status")?;
    let status: Value = serde_json::from_str(&body).map_err(|error| error.to_string())?;
    status["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|plugin| plugin["name"] == name)
        .and_then(|plugin| plugin["content_hash"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{name} is not live: {body}"))
}

/// A Reboot made at the simulator's console; its event id.
fn make_reboot(console: &str) -> String {
    let made = http_post_json(
        console,
        "/simulator/events",
        r#"{"type": "Reboot", "not_before_seconds": 600}"#,
    )
    .expect("the console makes a Reboot");
    let made: Value = serde_json::from_str(&made).expect("JSON");
    made["event_id"].as_str().expect("event_id").to_owned()
}

fn approved_at_imds(console: &str, event_id: &str) -> Result<bool, String> {
    let body = http_get(console, "/simulator/state")?;
    let state: Value = serde_json::from_str(&body).map_err(|error| error.to_string())?;
    Ok(state["approvals"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|approval| approval["event_id"] == event_id && approval["accepted"] == true))
}

/// `plugin dev` on a new Rust project, with the copied binary: the first round builds,
/// checks, loads the plugin into the dev daemon and tests it; a Reboot made at the console is
/// approved at the simulator. An edit that makes the plugin defer is rebuilt and live in the
/// same daemon (a new sha256 at /status), and the next Reboot is deferred with the edit's
/// reason and not approved. A broken edit leaves that version live.
#[test]
fn plugin_dev_rebuilds_each_edit_into_the_running_dev_daemon() {
    let machine = Machine::new();
    let name = "dev-loop";
    let output = machine.forewarn(&machine.work, &["plugin", "new", name, "--lang", "rust"]);
    assert!(output.status.success(), "plugin new: {}", describe(&output));
    let dir = machine.work.join(name);
    let shared = repo_dir().join("target/authoring/rust-template");
    std::fs::create_dir_all(&shared).expect("create the shared target dir");
    std::os::unix::fs::symlink(&shared, dir.join("target")).expect("link target/");
    let mut command = machine.command(machine.bin.join("forewarn"), &dir);
    command.args(["plugin", "dev"]);
    let dev = DevOutput::start(command);
    let console = dev.address("console:");
    let status = dev.address("status:");
    let first = wait_for(DEV_TIMEOUT, "the plugin live in the dev daemon", || {
        live_hash(&status, name)
    });
    assert!(
        first == sha256_of(&dir.join(format!("{name}.wasm"))),
        "the live version is the one built"
    );
    let approved = make_reboot(&console);
    wait_for(
        DEV_TIMEOUT,
        "the first Reboot approved at IMDS",
        || match approved_at_imds(&console, &approved)? {
            true => Ok(()),
            false => Err(dev.text()),
        },
    );

    let source = dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&source).expect("src/lib.rs");
    let edited = text.replacen(
        "fn prepare(event: &Event, ctx: &Context) -> Decision {\n",
        "fn prepare(event: &Event, ctx: &Context) -> Decision {\n    if event.id.len() > 1 {\n        return Decision::defer(\"held by the edit\", std::time::Duration::from_secs(5));\n    }\n",
        1,
    );
    assert_ne!(
        edited, text,
        "the template's prepare() is where the edit goes"
    );
    let saved = Instant::now();
    std::fs::write(&source, edited).expect("edit src/lib.rs");
    let second = wait_for(DEV_TIMEOUT, "the edited plugin live", || {
        let live = live_hash(&status, name)?;
        match live != first {
            true => Ok(live),
            false => Err(dev.text()),
        }
    });
    eprintln!(
        "plugin dev: from the save of src/lib.rs to the new version live in the dev daemon: {:.1} s",
        saved.elapsed().as_secs_f64()
    );
    let deferred = make_reboot(&console);
    wait_for(
        DEV_TIMEOUT,
        "the edited plugin's deferral at /status",
        || {
            let body = http_get(&status, "/status")?;
            let view: Value = serde_json::from_str(&body).map_err(|error| error.to_string())?;
            let answered = view["events"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|event| event["id"] == deferred.as_str())
                .flat_map(|event| event["plugins"].as_array().cloned().unwrap_or_default())
                .any(|answer| {
                    answer["decision"] == "defer" && answer["reason"] == "held by the edit"
                });
            match answered {
                true => Ok(()),
                false => Err(body),
            }
        },
    );
    assert!(
        !approved_at_imds(&console, &deferred).expect("state"),
        "a deferred Reboot is not approved"
    );

    std::fs::write(&source, "this is not Rust").expect("break src/lib.rs");
    wait_for(DEV_TIMEOUT, "the broken build reported", || {
        match dev.text().contains("build failed") {
            true => Ok(()),
            false => Err(dev.text()),
        }
    });
    assert_eq!(
        live_hash(&status, name).expect("status"),
        second,
        "a broken edit leaves the last good build live"
    );
}

fn sha256_of(path: &Path) -> String {
    let output = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

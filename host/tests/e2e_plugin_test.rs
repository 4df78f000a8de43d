//! End-to-end tests of `forewarn plugin test` and `forewarn demo --plugins`: the probe guest
//! approving, trapping, looping past its budget and deferring past NotBefore, read as JSON.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use forewarn_test_support::forewarn_binary;
use forewarn_test_support::guests::{OTHER_WORLD, PROBE};
use forewarn_test_support::scenario_texts::SHORT_REBOOT;

/// A directory holding the probe as `probe.wasm` with a manifest `probe.toml`.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(manifest: &str) -> Project {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::copy(PROBE, dir.path().join("probe.wasm")).expect("copy the probe");
        std::fs::write(dir.path().join("probe.toml"), manifest).expect("write the manifest");
        std::fs::write(dir.path().join("short-reboot.toml"), SHORT_REBOOT).expect("scenario");
        Project { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `forewarn plugin test probe.wasm --json --scenario short-reboot.toml --speed 10 ARGS`.
    fn plugin_test(&self, args: &[&str]) -> Output {
        let scenario = self.path("short-reboot.toml");
        forewarn(
            &[
                "plugin",
                "test",
                path_str(&self.path("probe.wasm")),
                "--json",
                "--scenario",
                path_str(&scenario),
                "--speed",
                "10",
            ],
            args,
        )
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}

fn forewarn(base: &[&str], args: &[&str]) -> Output {
    Command::new(forewarn_binary!())
        .args(base)
        .args(args)
        .env_remove("FOREWARN_LOG")
        .output()
        .expect("forewarn runs")
}

/// The JSON lines of stdout.
fn entries(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect()
}

fn verdicts(entries: &[Value]) -> Vec<&Value> {
    entries.iter().filter(|e| e["kind"] == "verdict").collect()
}

fn describe(output: &Output) -> String {
    format!(
        "status {}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The one verdict of a single-scenario run, after checking the exit code.
fn single_verdict(output: &Output, code: i32) -> Value {
    assert_eq!(output.status.code(), Some(code), "{}", describe(output));
    let entries = entries(output);
    let verdicts = verdicts(&entries);
    assert_eq!(verdicts.len(), 1, "{}", describe(output));
    verdicts[0].clone()
}

#[test]
fn an_approving_plugin_passes_and_its_decisions_are_shown() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    let output = project.plugin_test(&[]);
    let verdict = single_verdict(&output, 0);
    assert_eq!(verdict["verdict"], "passed", "{verdict}");
    assert_eq!(verdict["plugin"], "probe");
    let entries = entries(&output);
    assert_eq!(entries[0]["kind"], "demo", "the header comes first");
    assert_eq!(
        entries[0]["plugins"],
        serde_json::json!(["probe"]),
        "only the plugin runs"
    );
    assert!(
        entries.iter().any(|e| e["kind"] == "plugin-answered"
            && e["plugin"] == "probe"
            && e["phase"] == "prepare"
            && e["outcome"] == "approve"),
        "{}",
        describe(&output)
    );
    assert!(entries.iter().any(|e| e["kind"] == "approved"));
}

/// hardware-failure's Reboot runs for 10 minutes, started with no notice: at real time the
/// scenario lasts over 10 minutes (past the test's 5-minute limit), but while the Reboot runs
/// the daemon only waits, so that stretch is skipped: the test ends in seconds, and the
/// plugin still hears the start and the end.
#[test]
fn a_stretch_where_the_daemon_only_waits_is_skipped_even_at_real_time() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    let probe = project.path("probe.wasm");
    let output = forewarn(
        &["plugin", "test", path_str(&probe), "--json"],
        &["--scenario", "hardware-failure", "--speed", "1"],
    );
    let verdict = single_verdict(&output, 0);
    assert_eq!(verdict["verdict"], "passed", "{verdict}");
    let skipped = verdict["skipped_scenario_s"].as_f64().unwrap_or_default();
    assert!(skipped >= 590.0, "skipped {skipped} s: {verdict}");
    let entries = entries(&output);
    for phase in ["started", "ended-after-start"] {
        assert!(
            entries.iter().any(|e| e["kind"] == "plugin-answered"
                && e["plugin"] == "probe"
                && e["phase"] == phase),
            "no {phase} call: {}",
            describe(&output)
        );
    }
}

#[test]
fn a_trapping_plugin_fails_with_the_trap() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    // --config replaces the manifest's value.
    let output = project.plugin_test(&["--config", "mode=panic"]);
    let verdict = single_verdict(&output, 1);
    assert_eq!(verdict["verdict"], "trapped", "{verdict}");
    assert_eq!(verdict["phase"], "prepare");
    assert!(
        verdict["reason"]
            .as_str()
            .is_some_and(|reason| !reason.is_empty()),
        "{verdict}"
    );
}

#[test]
fn a_plugin_past_its_budget_fails() {
    let project = Project::new("budget = \"300ms\"\n[config]\nmode = \"loop\"\n");
    let verdict = single_verdict(&project.plugin_test(&[]), 1);
    assert_eq!(verdict["verdict"], "out-of-budget", "{verdict}");
}

#[test]
fn a_plugin_still_deferring_at_not_before_fails() {
    let manifest =
        "[config]\nmode = \"defer-until-attempt\"\nattempts = \"1000000\"\nretry-ms = \"300\"\n";
    let project = Project::new(manifest);
    let verdict = single_verdict(&project.plugin_test(&[]), 1);
    assert_eq!(
        verdict["verdict"], "still-deferring-at-not-before",
        "{verdict}"
    );
    // Played again at real time (its own waits are real time), and failed there too.
    assert_eq!(verdict["speed"], 1.0, "{verdict}");
    assert_eq!(
        verdict["real_time_check"]["result"], "failed-too",
        "{verdict}"
    );
    assert!(
        verdict["reason"]
            .as_str()
            .is_some_and(|reason| reason.starts_with("attempt=")),
        "the plugin's own last reason: {verdict}"
    );
}

/// A component of another world: the reason is said once, not once per layer of the error.
#[test]
fn a_plugin_that_does_not_load_says_why_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let other = dir.path().join("other.wasm");
    std::fs::copy(OTHER_WORLD, &other).expect("copy the other-world guest");
    let output = forewarn(&["plugin", "test", path_str(&other)], &[]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let sentence = "does not implement forewarn's plugin world";
    assert_eq!(stderr.matches(sentence).count(), 1, "{}", describe(&output));
}

/// `plugin test … | head -1`: the reader goes away; the test still ends with its verdict's
/// exit status, not a panic on the broken pipe (101).
#[test]
fn a_closed_output_pipe_ends_the_output_not_the_test() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    let scenario = project.path("short-reboot.toml");
    let mut child = Command::new(forewarn_binary!())
        .args(["plugin", "test", path_str(&project.path("probe.wasm"))])
        .args(["--scenario", path_str(&scenario), "--speed", "10"])
        .env_remove("FOREWARN_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("forewarn runs");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("forewarn ends");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
}

#[test]
fn a_plugin_that_does_not_load_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bogus = dir.path().join("bogus.wasm");
    std::fs::write(&bogus, b"not wasm").expect("write");
    let output = forewarn(&["plugin", "test", path_str(&bogus)], &[]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(verdicts(&entries(&output)).is_empty());
}

#[test]
fn all_scenarios_prints_one_verdict_per_built_in_scenario() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    let list = forewarn(&["simulate", "--list"], &[]);
    let builtins: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        // `idle`, the console's canvas, never ends: --all-scenarios leaves it out.
        .filter(|name| name != "idle")
        .collect();
    assert!(builtins.len() > 5, "{builtins:?}");
    let output = forewarn(
        &[
            "plugin",
            "test",
            path_str(&project.path("probe.wasm")),
            "--all-scenarios",
            "--json",
            "--speed",
            "120",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let entries = entries(&output);
    assert!(
        entries.iter().all(|e| e["kind"] == "verdict"),
        "only verdict lines with --all-scenarios: {}",
        describe(&output)
    );
    let scenarios: Vec<String> = entries
        .iter()
        .map(|e| e["scenario"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(scenarios, builtins);
    assert!(
        entries.iter().any(|e| e["verdict"] == "passed"),
        "{}",
        describe(&output)
    );
    // Compiled once for the run: every scenario's daemon loaded it from the run's cache.
    assert!(
        entries.iter().all(|e| e["compiled"] == false),
        "a scenario compiled the plugin again: {}",
        describe(&output)
    );
}

/// A plugin whose own waits are real time (three attempts a second apart) misses a Spot
/// eviction's 30 s notice at 60x, where it is half a second, and makes it in a daemon. The
/// test plays the scenario again at real time, and that verdict is the one that counts.
#[test]
fn a_plugin_that_fails_only_faster_than_real_time_is_told_so_and_passes() {
    let manifest =
        "[config]\nmode = \"defer-until-attempt\"\nattempts = \"3\"\nretry-ms = \"1000\"\n";
    let project = Project::new(manifest);
    let output = forewarn(
        &[
            "plugin",
            "test",
            path_str(&project.path("probe.wasm")),
            "--scenario",
            "spot-preemption",
            "--json",
        ],
        &[],
    );
    let verdict = single_verdict(&output, 0);
    assert_eq!(verdict["verdict"], "passed", "{verdict}");
    assert_eq!(verdict["speed"], 1.0, "{verdict}");
    let check = &verdict["real_time_check"];
    assert_eq!(check["result"], "passed-only-there", "{verdict}");
    assert_eq!(
        check["fast"]["verdict"], "still-deferring-at-not-before",
        "{verdict}"
    );
}

#[test]
fn a_scenario_that_never_ends_is_refused_with_where_to_play_it() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    let output = forewarn(
        &[
            "plugin",
            "test",
            path_str(&project.path("probe.wasm")),
            "--scenario",
            "idle",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("never ends") && stderr.contains("forewarn simulate --scenario idle"),
        "{stderr}"
    );
}

#[test]
fn demo_with_plugins_runs_the_extra_plugin_beside_the_bundled_ones() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    let output = forewarn(
        &[
            "demo",
            "--json",
            "--speed",
            "30",
            "--drain-seconds",
            "1",
            "--plugins",
            path_str(project.dir.path()),
        ],
        &[],
    );
    assert!(output.status.success(), "{}", describe(&output));
    let entries = entries(&output);
    let plugins = entries[0]["plugins"]
        .as_array()
        .expect("the header's plugins");
    assert!(plugins.contains(&Value::from("probe")), "{plugins:?}");
    assert!(plugins.contains(&Value::from("lb-drain")), "{plugins:?}");
    assert!(
        entries.iter().any(|e| e["kind"] == "plugin-answered"
            && e["plugin"] == "probe"
            && e["outcome"] == "approve"),
        "{}",
        describe(&output)
    );
}

/// `plugin check` and `plugin test` agree on a file whose name is no plugin name: the same
/// component as `probe_notice-0.1.0.wasm` is accepted by both as the plugin `probe_notice`, and
/// both say to install it as probe_notice.wasm; `Bad Name.wasm` is refused by both with the
/// rename.
#[test]
fn check_and_test_agree_on_a_versioned_file_name_and_say_what_to_rename() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    let versioned = project.path("probe_notice-0.1.0.wasm");
    std::fs::copy(project.path("probe.wasm"), &versioned).expect("copy");
    let rename = "install it as probe_notice.wasm";

    let check = forewarn(&["plugin", "check", path_str(&versioned)], &[]);
    assert!(check.status.success(), "{}", describe(&check));
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(said.contains("a valid forewarn plugin"), "{said}");
    assert!(said.contains("name:    probe_notice\n"), "{said}");
    assert!(said.contains(rename), "{said}");

    let scenario = project.path("short-reboot.toml");
    let manifest = project.path("probe.toml");
    let tested = forewarn(
        &[
            "plugin",
            "test",
            path_str(&versioned),
            "--json",
            "--speed",
            "10",
        ],
        &[
            "--scenario",
            path_str(&scenario),
            "--config",
            "mode=approve",
        ],
    );
    let verdict = single_verdict(&tested, 0);
    assert_eq!(verdict["verdict"], "passed", "{verdict}");
    assert_eq!(verdict["plugin"], "probe_notice", "{verdict}");
    assert!(
        String::from_utf8_lossy(&tested.stderr).contains(rename),
        "{}",
        describe(&tested)
    );
    // With a manifest of a usable name, that name (its stem) is the plugin's.
    let tested = forewarn(
        &[
            "plugin",
            "test",
            path_str(&versioned),
            "--json",
            "--speed",
            "10",
        ],
        &[
            "--scenario",
            path_str(&scenario),
            "--manifest",
            path_str(&manifest),
        ],
    );
    assert_eq!(single_verdict(&tested, 0)["plugin"], "probe");

    let bad = project.path("Bad Name.wasm");
    std::fs::copy(project.path("probe.wasm"), &bad).expect("copy");
    let check = forewarn(&["plugin", "check", path_str(&bad)], &[]);
    let tested = forewarn(
        &["plugin", "test", path_str(&bad)],
        &["--scenario", path_str(&scenario)],
    );
    assert_eq!(check.status.code(), Some(1), "{}", describe(&check));
    assert_eq!(tested.status.code(), Some(2), "{}", describe(&tested));
    for output in [&check, &tested] {
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(
            said.contains("Rename it, e.g. to bad-name.wasm"),
            "{}",
            describe(output)
        );
    }
}

/// graceful-shutdown's manifest for the action test: its stop and start actions named and
/// granted.
const GRACEFUL_SHUTDOWN_MANIFEST: &str = r#"
subscribe = ["Reboot"]
budget = "10s"

[config]
stop-action = "stop-app"
start-action = "start-app"
event-types = "Reboot"

[capabilities]
actions = ["stop-app", "start-app"]
"#;

/// `plugin test --daemon-config FILE` runs the actions that file defines, for real: the
/// bundled graceful-shutdown's stop action writes `stop` and its start action `start` into a
/// file, in that order. Without the flag, the demo's own stop and start run and the file is
/// never written.
#[test]
fn a_daemon_config_gives_the_plugin_its_real_actions() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    let exported = forewarn(
        &[
            "plugin",
            "export-bundled",
            path_str(&project.path("bundled")),
        ],
        &[],
    );
    assert!(exported.status.success(), "{}", describe(&exported));
    let plugin = project.path("graceful-shutdown.wasm");
    std::fs::copy(project.path("bundled/graceful-shutdown.wasm"), &plugin).expect("copy");
    std::fs::write(
        project.path("graceful-shutdown.toml"),
        GRACEFUL_SHUTDOWN_MANIFEST,
    )
    .expect("write the manifest");
    let ran = project.path("ran.txt");
    let action = |word: &str| {
        format!(
            "argv = [\"sh\", \"-c\", \"echo {word} >> '{}'\"]\n",
            ran.display()
        )
    };
    let daemon_config = project.path("forewarn.toml");
    std::fs::write(
        &daemon_config,
        format!(
            "[actions.stop-app]\n{}\n[actions.start-app]\n{}",
            action("stop"),
            action("start")
        ),
    )
    .expect("write the daemon config");
    let test = |extra: &[&str]| {
        let scenario = project.path("short-reboot.toml");
        let mut args = vec!["--scenario", path_str(&scenario), "--speed", "10", "--json"];
        args.extend_from_slice(extra);
        forewarn(&["plugin", "test", path_str(&plugin)], &args)
    };

    let without = test(&[]);
    assert_eq!(single_verdict(&without, 0)["verdict"], "passed");
    assert!(!ran.exists(), "the demo's actions ran, not the file's");

    let with = test(&["--daemon-config", path_str(&daemon_config)]);
    assert_eq!(
        single_verdict(&with, 0)["verdict"],
        "passed",
        "{}",
        describe(&with)
    );
    let written = std::fs::read_to_string(&ran).unwrap_or_default();
    assert_eq!(written, "stop\nstart\n", "{}", describe(&with));
}

/// A daemon config that does not parse stops the test before it starts, naming the file and
/// the fix (exit 2: forewarn's error, not the plugin's).
#[test]
fn a_wrong_daemon_config_is_refused_with_the_fix() {
    let project = Project::new("[config]\nmode = \"approve\"\n");
    let daemon_config = project.path("forewarn.toml");
    std::fs::write(&daemon_config, "[actions.stop-app]\nargv = \"true\"\n").expect("write");
    let output = project.plugin_test(&["--daemon-config", path_str(&daemon_config)]);
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("--daemon-config") && said.contains("actions.stop-app"),
        "{}",
        describe(&output)
    );
}

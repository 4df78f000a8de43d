//! End-to-end tests of the Windows build: `forewarn.exe` (x86_64-pc-windows-gnu) run under
//! Wine against the simulator running natively on Linux. The bundled plugins prepare a
//! Reboot that is approved at IMDS; an action's process tree is killed at its timeout
//! (Job Object); the plugin directory reloads; a world-writable plugin directory is refused
//! (its DACL, as Wine derives it from the mode bits); the service is installed, started,
//! asked for its status and stopped through Wine's Service Control Manager.
//!
//! They need the exe and a Wine prefix: `bash tests/windows.sh` builds them and runs these
//! tests with `--ignored` (it sets `FOREWARN_WINDOWS_EXE`, `WINE` and `WINEPREFIX`); a plain
//! `cargo test` skips them. Wine's sockets and process starts are 50–200× slower than
//! Linux's: nothing here is timed, and every wait is long.

// These tests drive Wine from Linux. Built for Windows (tests/windows.sh selects this
// target so that cargo links forewarn.exe with the tests' features) the file is empty.
// not on Windows: these tests run on Linux and drive forewarn.exe under Wine (tests/windows.sh)
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use forewarn_simulator::Transition;
use forewarn_test_support::harness::{
    Daemon, PluginDecision, Simulator, free_loopback_address, http_get, install_bundled_plugin,
    same_id, wait_for,
};

/// Why these tests are ignored in a plain `cargo test`.
const NEEDS_WINE: &str = "needs forewarn.exe and Wine: bash tests/windows.sh runs it";

/// The longest wait for one thing under Wine.
const WINE_WAIT: Duration = Duration::from_secs(240);

/// A Reboot one second after the daemon's first poll, with 15 minutes' notice: forewarn's
/// approval (when every plugin approved) starts it long before NotBefore.
const REBOOT_SCENARIO: &str = r#"
name = "windows-reboot"
description = "A platform Reboot that starts when approved and ends 5 s later."
end_after = "5s"

[[events]]
type = "Reboot"
source = "Platform"
appear_at = "1s"
notice = "15m"
description = "Virtual machine is going to be restarted because of planned host maintenance."
runs_for = "5s"
"#;

/// A scenario with no event for 15 minutes: the daemon just polls.
const QUIET_SCENARIO: &str = r#"
name = "windows-quiet"
description = "Nothing scheduled."
end_after = "15m"
"#;

/// The Windows exe tests/windows.sh built.
fn windows_exe() -> PathBuf {
    let exe = std::env::var_os("FOREWARN_WINDOWS_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "FOREWARN_WINDOWS_EXE is not set: these tests run the Windows build ({NEEDS_WINE})"
            )
        });
    assert!(exe.is_file(), "{} is missing: {NEEDS_WINE}", exe.display());
    exe
}

/// Wine's loader running `forewarn.exe` (the prefix comes from `WINEPREFIX`).
fn forewarn_exe() -> Command {
    assert!(
        std::env::var_os("WINEPREFIX").is_some(),
        "WINEPREFIX is not set: {NEEDS_WINE}"
    );
    let wine = std::env::var_os("WINE").unwrap_or_else(|| "/usr/lib/wine/wine64".into());
    let mut command = Command::new(wine);
    command.arg(windows_exe());
    command
}

/// `forewarn.exe ARGS`, waited for, its output kept.
fn run_exe(args: &[&str]) -> Output {
    forewarn_exe()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run forewarn.exe under Wine")
}

/// A Linux path as the Windows process sees it: Wine's drive Z: is the Linux root.
fn windows_path(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// A temporary directory with `plugins/`, a simulator playing `scenario` from the daemon's
/// first poll, and the daemon's config.
struct WindowsSetup {
    dir: tempfile::TempDir,
    simulator: Simulator,
}

impl WindowsSetup {
    fn new(scenario: &str) -> WindowsSetup {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir_all(dir.path().join("plugins")).expect("create the plugin dir");
        let simulator = Simulator::builder(forewarn_test_support::forewarn_binary!())
            .scenario_text(scenario)
            .start_on_first_poll()
            .start();
        WindowsSetup { dir, simulator }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes the config (paths in Windows form, as TOML literal strings) with `extra`
    /// appended, and returns its path.
    fn write_config(&self, admin: &str, extra: &str) -> PathBuf {
        let config = format!(
            "vm-name = \"vm-a\"\nstate-dir = '{}'\nplugin-dir = '{}'\n\n[imds]\nurl = \"{}\"\n\
             poll-interval = \"500ms\"\n\n[admin]\nlisten = \"{admin}\"\n\n[policy]\n\
             prepare-lead-time = \"1h\"\n\n{extra}\n",
            windows_path(&self.path("state")),
            windows_path(&self.path("plugins")),
            self.simulator.base_url,
        );
        let path = self.path("forewarn.toml");
        std::fs::write(&path, config).expect("write the config");
        path
    }

    /// `forewarn.exe run` with the config; its JSON log read live.
    fn start_daemon(&self, extra: &str) -> Daemon {
        let config = self.write_config("127.0.0.1:0", extra);
        Daemon::start_through(forewarn_exe(), Path::new(&windows_path(&config)))
    }
}

/// The accepted approval of `event_id` at the simulator, waited for.
fn approval_at_imds(setup: &WindowsSetup, daemon: &Daemon) -> (String, u64) {
    wait_for(WINE_WAIT, "an accepted approval at IMDS", || {
        setup
            .simulator
            .state()
            .approvals
            .iter()
            .find(|approval| approval.accepted)
            .map(|approval| (approval.event_id.clone(), approval.at_unix_ms))
            .ok_or_else(|| daemon.describe_for_failure())
    })
}

/// The arguments of Linux process `pid`. Wine writes a Windows process's command line
/// into its /proc cmdline split at the spaces, one NUL-separated argument each.
fn arguments_of(pid: u32) -> Option<Vec<String>> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        cmdline
            .split(|byte| *byte == 0)
            .filter(|argument| !argument.is_empty())
            .map(|argument| String::from_utf8_lossy(argument).into_owned())
            .collect(),
    )
}

/// Whether `arguments` are those of `ping -n COUNT …` (the program named `ping` or
/// `…\ping.exe`; a `cmd.exe /c "… ping -n COUNT …"` line does not count).
fn is_ping(arguments: &[String], count: &str) -> bool {
    let Some(program) = arguments.first() else {
        return false;
    };
    let name = program.rsplit(['\\', '/']).next().unwrap_or(program);
    let name = name.to_ascii_lowercase();
    (name == "ping" || name == "ping.exe")
        && arguments
            .windows(2)
            .any(|pair| pair[0] == "-n" && pair[1] == count)
}

/// Linux processes (each Wine process is one) running `ping -n COUNT`.
fn pings(count: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| arguments_of(*pid).is_some_and(|arguments| is_ping(&arguments, count)))
        .collect()
}

/// Whether the process `pid` still runs `ping -n COUNT` (a pid reused by another process
/// does not count).
fn still_pings(pid: u32, count: &str) -> bool {
    arguments_of(pid).is_some_and(|arguments| is_ping(&arguments, count))
}

/// Linux processes whose command line (arguments joined by spaces) contains `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            arguments_of(*pid).is_some_and(|arguments| arguments.join(" ").contains(needle))
        })
        .collect()
}

fn toml_argv(argv: &[&str]) -> String {
    let quoted: Vec<String> = argv.iter().map(|arg| format!("{arg:?}")).collect();
    format!("[{}]", quoted.join(", "))
}

#[test]
#[ignore = "needs forewarn.exe and Wine: bash tests/windows.sh runs it"]
fn a_reboot_is_prepared_by_the_bundled_plugins_and_approved_at_imds() {
    let setup = WindowsSetup::new(REBOOT_SCENARIO);
    install_bundled_plugin(
        &setup.path("plugins"),
        "lb-drain",
        Some(
            "subscribe = [\"Reboot\"]\nbudget = \"10s\"\n[config]\ndrain-seconds = 1\n[capabilities]\nreadiness = true\n",
        ),
    );
    install_bundled_plugin(
        &setup.path("plugins"),
        "graceful-shutdown",
        Some(
            "subscribe = [\"Reboot\"]\nbudget = \"30s\"\n[config]\nstop-action = \"stop-app\"\n\
              start-action = \"start-app\"\n[capabilities]\nactions = [\"stop-app\", \"start-app\"]\n",
        ),
    );
    // The actions are Windows commands: cmd.exe writes a file, as a script stopping and
    // starting a Windows service would (`net stop MyService`).
    let stopped = setup.path("stopped.txt");
    let started = setup.path("started.txt");
    let actions = format!(
        "[actions.stop-app]\nargv = {}\ntimeout = \"60s\"\n\n[actions.start-app]\nargv = {}\ntimeout = \"60s\"\n",
        toml_argv(&[
            "cmd.exe",
            "/c",
            &format!("echo stopped> {}", windows_path(&stopped))
        ]),
        toml_argv(&[
            "cmd.exe",
            "/c",
            &format!("echo started> {}", windows_path(&started))
        ]),
    );
    let daemon = setup.start_daemon(&actions);

    let (event_id, _approved_at) = approval_at_imds(&setup, &daemon);
    // Approval came only after the stop action ran: its file exists already.
    let stop_text = std::fs::read_to_string(&stopped).unwrap_or_default();
    assert_eq!(
        stop_text.trim(),
        "stopped",
        "{}",
        daemon.describe_for_failure()
    );
    // The approval can reach IMDS before the test has read the plugins' approvals from the
    // daemon's output: wait for them, do not read once.
    let approved = |decisions: &[PluginDecision], plugin: &str| {
        decisions.iter().any(|decision| {
            decision.plugin == plugin
                && decision.phase == "prepare"
                && decision.decision == "approve"
                && same_id(&decision.event_id, &event_id)
        })
    };
    let decisions = daemon.wait_for_decisions(WINE_WAIT, "both plugins' approvals", |decisions| {
        ["lb-drain", "graceful-shutdown"]
            .iter()
            .all(|plugin| approved(decisions, plugin))
    });
    for plugin in ["lb-drain", "graceful-shutdown"] {
        assert!(
            approved(&decisions, plugin),
            "{plugin} approved the Reboot: {}",
            daemon.describe_for_failure()
        );
    }
    // After the maintenance the start action runs.
    setup
        .simulator
        .wait_for_transition(WINE_WAIT, &event_id, Transition::Removed);
    wait_for(
        WINE_WAIT,
        "the start action's file",
        || match std::fs::read_to_string(&started) {
            Ok(text) if text.trim() == "started" => Ok(()),
            other => Err(format!("{other:?}; {}", daemon.describe_for_failure())),
        },
    );
}

#[test]
#[ignore = "needs forewarn.exe and Wine: bash tests/windows.sh runs it"]
fn an_action_past_its_timeout_is_killed_with_every_process_it_started() {
    let setup = WindowsSetup::new(REBOOT_SCENARIO);
    install_bundled_plugin(
        &setup.path("plugins"),
        "graceful-shutdown",
        Some(
            "subscribe = [\"Reboot\"]\nbudget = \"60s\"\n[config]\nstop-action = \"stop-app\"\n\
              [capabilities]\nactions = [\"stop-app\"]\n",
        ),
    );
    // cmd.exe starts a grandchild (`start /b`) and waits in a child of its own; both ping
    // for minutes. The counts, from this test process's id, are its marks in the process
    // list.
    let mark = 300 + std::process::id() % 600;
    let (grandchild_count, child_count) = (mark.to_string(), (mark + 1).to_string());
    let command = format!(
        "start /b ping -n {grandchild_count} 127.0.0.1 > nul & ping -n {child_count} 127.0.0.1 > nul"
    );
    let actions = format!(
        "[actions.stop-app]\nargv = {}\ntimeout = \"5s\"\n",
        toml_argv(&["cmd.exe", "/c", &command]),
    );
    let daemon = setup.start_daemon(&actions);

    let (grandchild, child) = wait_for(
        WINE_WAIT,
        "the action's child and grandchild to run",
        || match (
            pings(&grandchild_count).first(),
            pings(&child_count).first(),
        ) {
            (Some(grandchild), Some(child)) => Ok((*grandchild, *child)),
            seen => Err(format!("seen {seen:?}; {}", daemon.describe_for_failure())),
        },
    );
    // The action's timeout is 5 s; ping would go on for five minutes more.
    wait_for(WINE_WAIT, "the action's whole tree to be killed", || {
        let alive: Vec<u32> = [(grandchild, &grandchild_count), (child, &child_count)]
            .into_iter()
            .filter(|(pid, count)| still_pings(*pid, count))
            .map(|(pid, _)| pid)
            .collect();
        match alive.is_empty() {
            true => Ok(()),
            false => Err(format!(
                "still running: {alive:?}; {}",
                daemon.describe_for_failure()
            )),
        }
    });
    let decisions =
        daemon.wait_for_decisions(WINE_WAIT, "graceful-shutdown to defer", |decisions| {
            decisions.iter().any(|decision| {
                decision.plugin == "graceful-shutdown" && decision.decision == "defer"
            })
        });
    // What was not waited for: the plugin was told of the timeout (its own reason, not a
    // failure to start or an exit status), for the Reboot the simulator scheduled, and
    // IMDS holds no approval of it: a deferring plugin kept the daemon from approving early.
    let deferral = decisions
        .iter()
        .find(|decision| decision.plugin == "graceful-shutdown" && decision.decision == "defer")
        .expect("the deferral waited for");
    assert!(
        deferral
            .reason
            .contains("did not finish within the budget; it was killed"),
        "the plugin was not told of the timeout: {deferral:?}"
    );
    assert_eq!(deferral.phase, "prepare", "{deferral:?}");
    let state = setup.simulator.state();
    let scheduled: Vec<&str> = state
        .history
        .iter()
        .map(|change| change.event_id.as_str())
        .collect();
    assert!(
        scheduled
            .iter()
            .any(|event_id| same_id(&deferral.event_id, event_id)),
        "the deferral is for {}, not an event the simulator scheduled ({scheduled:?})",
        deferral.event_id
    );
    assert!(
        state.approvals.is_empty(),
        "IMDS holds an approval although graceful-shutdown deferred: {:?}",
        state.approvals
    );
}

#[test]
#[ignore = "needs forewarn.exe and Wine: bash tests/windows.sh runs it"]
fn a_plugin_dropped_into_the_directory_is_loaded_while_the_daemon_runs() {
    let setup = WindowsSetup::new(QUIET_SCENARIO);
    let daemon = setup.start_daemon("");
    let admin = daemon.admin_address(WINE_WAIT);
    let plugins_of = |body: &str| -> Vec<String> {
        let status: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        status["plugins"]
            .as_array()
            .map(|plugins| {
                plugins
                    .iter()
                    .filter_map(|plugin| plugin["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = wait_for(WINE_WAIT, "/status from the Windows daemon", || {
        http_get(&admin, "/status")
    });
    assert!(plugins_of(&before).is_empty(), "{before}");

    // Deployed as an operator would: written aside, then renamed into place.
    let dir = setup.path("plugins");
    let staging = setup.path("staging");
    std::fs::create_dir_all(&staging).expect("staging dir");
    install_bundled_plugin(&staging, "lb-drain", None);
    std::fs::rename(staging.join("lb-drain.toml"), dir.join("lb-drain.toml"))
        .expect("rename the manifest");
    std::fs::rename(staging.join("lb-drain.wasm"), dir.join("lb-drain.wasm"))
        .expect("rename the plugin");

    wait_for(WINE_WAIT, "lb-drain in /status", || {
        let body = http_get(&admin, "/status")?;
        match plugins_of(&body).contains(&"lb-drain".to_owned()) {
            true => Ok(()),
            false => Err(format!("{body}\n{}", daemon.describe_for_failure())),
        }
    });
}

#[test]
#[ignore = "needs forewarn.exe and Wine: bash tests/windows.sh runs it"]
fn a_plugin_directory_everyone_may_write_is_refused_naming_the_fix() {
    let setup = WindowsSetup::new(QUIET_SCENARIO);
    let plugins = setup.path("plugins");
    // Wine gives a directory whose mode lets others write an ACL entry granting Everyone
    // write access; that is the DACL the daemon reads.
    let mut permissions = std::fs::metadata(&plugins).expect("metadata").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o777);
    std::fs::set_permissions(&plugins, permissions).expect("chmod 777");
    let config = setup.write_config("127.0.0.1:0", "");

    let output = run_exe(&["run", "--config", &windows_path(&config)]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "the daemon ran with a world-writable plugin directory: {stderr}"
    );
    assert!(stderr.contains("writable by Everyone"), "{stderr}");
    assert!(
        stderr.contains(&windows_path(&plugins)),
        "names the directory: {stderr}"
    );
    assert!(stderr.contains("Fix: `icacls"), "names the fix: {stderr}");
    // The simulator was never asked: nothing ran.
    assert!(setup.simulator.state().requests.is_empty());
}

/// Removes the service when dropped, so a failing test leaves Wine's SCM clean.
struct ServiceGuard;

impl Drop for ServiceGuard {
    fn drop(&mut self) {
        let _ignored = run_exe(&["service", "uninstall"]);
    }
}

#[test]
#[ignore = "needs forewarn.exe and Wine: bash tests/windows.sh runs it"]
fn the_service_is_installed_started_asked_for_status_and_stopped_through_the_scm() {
    let setup = WindowsSetup::new(QUIET_SCENARIO);
    let admin = free_loopback_address();
    let config = windows_path(&setup.write_config(&admin, ""));
    let _cleanup = ServiceGuard;
    let _leftover = run_exe(&["service", "uninstall"]);
    // An earlier run's log must not pass for this one's.
    let logs = service_log_dir_in_the_prefix();
    let _absent = std::fs::remove_dir_all(&logs);

    let install = run_exe(&["service", "install", "--config", &config, "--no-start"]);
    assert!(install.status.success(), "{install:?}");
    // Started through the SCM: `service start` returns once the service reports running,
    // which it does once IMDS (the simulator) has answered.
    let start = run_exe(&["service", "start"]);
    assert!(start.status.success(), "{start:?}");
    assert!(
        !setup.simulator.state().requests.is_empty(),
        "the service reported running before IMDS answered"
    );
    let query =
        Command::new(std::env::var_os("WINE").unwrap_or_else(|| "/usr/lib/wine/wine64".into()))
            .args(["sc", "query", "forewarn"])
            .output()
            .expect("sc query");
    assert!(
        String::from_utf8_lossy(&query.stdout).contains("RUNNING"),
        "{query:?}"
    );

    let status = run_exe(&["status", "--admin", &admin, "--json"]);
    assert!(status.status.success(), "{status:?}");
    let snapshot: serde_json::Value =
        serde_json::from_slice(&status.stdout).expect("`forewarn status --json` prints JSON");
    assert_eq!(snapshot["vm_name"], "vm-a", "{snapshot}");
    assert_eq!(snapshot["phase"], "running", "{snapshot}");

    let stop = run_exe(&["service", "stop"]);
    assert!(stop.status.success(), "{stop:?}");
    assert!(
        http_get(&admin, "/healthz").is_err(),
        "the admin endpoint still answers after the service stopped"
    );
    wait_for(
        WINE_WAIT,
        "the service's process to exit",
        || match processes_with(SERVICE_PROCESS).as_slice() {
            [] => Ok(()),
            running => Err(format!("still running: {running:?}")),
        },
    );
    let uninstall = run_exe(&["service", "uninstall"]);
    assert!(uninstall.status.success(), "{uninstall:?}");

    // A service has no console: its log went to C:\ProgramData\forewarn\logs, the known
    // folder, though Wine sets the service's %ProgramData% to C:\users\Public.
    let logged: String = std::fs::read_dir(&logs)
        .unwrap_or_else(|error| panic!("{}: {error}", logs.display()))
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
        .collect();
    assert!(logged.contains("forewarn starting"), "{logged}");
    assert!(logged.contains("forewarn stopped"), "{logged}");
    // Not asserted: that IMDS is asked nothing after the stop. Under Wine, with both cores
    // busy, the SCM started the service again about 1 s after a clean stop in 2 of 6 runs
    // (a compute GET, then polls, until the uninstall); the stop itself is proven above by
    // the admin endpoint going away and the process exiting. Open: docs/windows.md.
}

/// The service's log directory seen from Linux: `C:\ProgramData\forewarn\logs`, where `C:`
/// is the prefix's `drive_c`.
fn service_log_dir_in_the_prefix() -> PathBuf {
    PathBuf::from(std::env::var_os("WINEPREFIX").expect("WINEPREFIX"))
        .join("drive_c/ProgramData/forewarn/logs")
}

/// The service's process, as the SCM starts it.
const SERVICE_PROCESS: &str = "service run --config";

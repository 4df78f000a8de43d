//! The compile fallback (docs/operations.md, "Compiling"): only where no compiler child can
//! be started at all is a plugin compiled in the daemon, with a warning. The real binary,
//! run from a copy of its own, has that copy removed while it runs (as a package manager
//! removing the program under a running service would): a plugin added afterwards still
//! loads, prepares and lets the event be approved at IMDS, and the daemon warns once,
//! naming the program it could not run.

use std::time::Duration;

use forewarn_simulator::Transition;
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, Simulator, http_get, install_bundled_plugin, same_id, wait_for,
};

const WAIT: Duration = Duration::from_secs(90);

/// What the daemon says when it compiles a plugin in process (host/runtime/src/runtime.rs).
const COMPILED_IN_THE_DAEMON: &str = "could not compile the plugin in a child process; compiling it in the daemon instead (its memory stays in use)";

/// lb-drain for Reboots, draining 1 s.
const LB_DRAIN_MANIFEST: &str = "subscribe = [\"Reboot\"]\nbudget = \"5s\"\n\
     [config]\ndrain-seconds = 1\n[capabilities]\nreadiness = true\n";

#[test]
fn a_plugin_added_after_the_binary_is_gone_is_compiled_in_the_daemon_with_a_warning() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The daemon runs from a copy named `forewarn`, its compiler child the same program.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("the bin directory");
    let program = bin.join("forewarn");
    std::fs::copy(forewarn_binary!(), &program).expect("copy the forewarn binary");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).expect("the plugin directory");
    let simulator = Simulator::builder(forewarn_binary!())
        .scenario("idle")
        .start();
    let config = DaemonConfig::vm_a(dir.path(), plugins.clone(), &simulator.base_url);
    let config_path = dir.path().join("forewarn.toml");
    config.write(&config_path);

    let daemon = Daemon::start(&program, &config_path);
    let admin = daemon.admin_address(WAIT);
    wait_for(WAIT, "the daemon to poll IMDS", || {
        let body = http_get(&admin, "/status")?;
        let status: serde_json::Value =
            serde_json::from_str(&body).map_err(|error| format!("{error}: {body}"))?;
        match status["imds"]["last_success"].is_string() {
            true => Ok(()),
            false => Err(daemon.describe_for_failure()),
        }
    });
    assert!(
        daemon.lines_with_message(COMPILED_IN_THE_DAEMON).is_empty(),
        "{}",
        daemon.describe_for_failure()
    );

    // The program is gone: no compiler child can be started any more.
    std::fs::remove_file(&program).expect("remove the copy of the binary");
    install_bundled_plugin(&plugins, "lb-drain", Some(LB_DRAIN_MANIFEST));

    // The effect: the plugin loads, prepares, and the event is approved at IMDS.
    let event = simulator.generate_event(
        "{\"type\": \"Reboot\", \"not_before_seconds\": 600, \"runs_for_seconds\": 1}",
    );
    let state = simulator.wait_for_state(WAIT, "the approval at IMDS", |state| {
        state
            .approvals
            .iter()
            .any(|approval| approval.accepted && same_id(&approval.event_id, &event))
    });
    assert!(
        state
            .history
            .iter()
            .any(|record| same_id(&record.event_id, &event)
                && record.transition == Transition::Appeared),
        "the event never appeared"
    );
    // The approval can reach IMDS before the test has read lb-drain's decision from the
    // daemon's output: wait for it, do not read once.
    assert!(
        daemon
            .wait_for_phase(WAIT, Some(&event), "lb-drain", "prepare")
            .iter()
            .any(|d| same_id(&d.event_id, &event)
                && d.plugin == "lb-drain"
                && d.phase == "prepare"),
        "lb-drain did not prepare: {}",
        daemon.describe_for_failure()
    );

    // The warning, once, naming the program it could not run.
    let warned = daemon.lines_with_message(COMPILED_IN_THE_DAEMON);
    assert_eq!(warned.len(), 1, "{}", daemon.describe_for_failure());
    assert_eq!(warned[0].fields["level"], "WARN", "{:?}", warned[0].fields);
    let reason = warned[0].fields["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&program.display().to_string()),
        "the warning does not name {}: {reason}",
        program.display()
    );
}

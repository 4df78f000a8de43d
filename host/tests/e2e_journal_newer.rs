//! A journal written by a newer forewarn (docs/operations.md, "Readiness across restarts"):
//! the real binary starts on a state directory whose `journal.json` has a schema version
//! above its own and a field it does not know. It resumes the event in progress, keeps both
//! journal files byte for byte beside them before its first write replaces them, and says
//! the problem and the fix. Checked at the files, not only in the log.

use std::path::{Path, PathBuf};
use std::time::Duration;

use forewarn_daemon::log_messages::{
    JOURNAL_FROM_A_NEWER_FOREWARN, JOURNAL_FROM_A_NEWER_FOREWARN_NOT_KEPT, JOURNAL_QUARANTINED,
};
use forewarn_daemon::ops::status::StatusSnapshot;
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, Simulator, http_get, install_bundled_plugin, same_id, wait_for,
};

const WAIT: Duration = Duration::from_secs(90);

/// lb-drain for Reboots, draining long enough that the event is still in progress when the
/// second daemon starts.
const LB_DRAIN_MANIFEST: &str = "subscribe = [\"Reboot\"]\nbudget = \"5s\"\n\
     prepare-time = \"4s\"\n[config]\ndrain-seconds = 300\n[capabilities]\nreadiness = true\n";

/// A schema version no forewarn writes yet.
const NEWER_VERSION: u64 = 99;

fn status(admin: &str) -> Result<StatusSnapshot, String> {
    let body = http_get(admin, "/status")?;
    serde_json::from_str(&body).map_err(|error| format!("bad /status ({error}): {body}"))
}

/// Starts the daemon and waits until it has polled IMDS with its plugin loaded.
fn start(config: &Path) -> (Daemon, String) {
    let daemon = Daemon::start(forewarn_binary!(), config);
    let admin = daemon.admin_address(WAIT);
    wait_for(WAIT, "the daemon to run with its plugin", || {
        let status = status(&admin)
            .map_err(|error| format!("{error}\n{}", daemon.describe_for_failure()))?;
        match status.plugins.len() == 1 && status.imds.last_success.is_some() {
            true => Ok(()),
            false => Err(daemon.describe_for_failure()),
        }
    });
    (daemon, admin)
}

/// The files in `dir` whose names start with `prefix`.
fn files_starting(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the state directory")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(prefix))
        })
        .collect();
    found.sort();
    found
}

#[test]
fn a_journal_from_a_newer_forewarn_is_kept_as_written_and_its_events_resume() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).expect("the plugin directory");
    install_bundled_plugin(&plugins, "lb-drain", Some(LB_DRAIN_MANIFEST));
    let simulator = Simulator::builder(forewarn_binary!())
        .scenario("idle")
        .start();
    let config = DaemonConfig::vm_a(dir.path(), plugins, &simulator.base_url);
    let state_dir = config.state_dir.clone();
    let config_path = dir.path().join("forewarn.toml");
    config.write(&config_path);

    // A first run journals an event in progress (lb-drain drains for minutes).
    let (mut first, _) = start(&config_path);
    let event = simulator.generate_event(
        "{\"type\": \"Reboot\", \"not_before_seconds\": 900, \"runs_for_seconds\": 2}",
    );
    first.wait_for_phase(WAIT, Some(&event), "lb-drain", "prepare");
    first.kill();
    // A second run compacts that into `journal.json` at its start, then logs its own
    // commits (lb-drain asked again) in `journal.log`.
    let log_path = state_dir.join("journal.log");
    let (mut second, _) = start(&config_path);
    wait_for(
        WAIT,
        "a change-log line of the second run",
        || match std::fs::read(&log_path)
            .unwrap_or_default()
            .contains(&b'\n')
        {
            true => Ok(()),
            false => Err(second.describe_for_failure()),
        },
    );
    second.kill();

    // As a newer forewarn would leave it: a higher version and a field this one lacks.
    let snapshot_path = state_dir.join("journal.json");
    let mut snapshot: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&snapshot_path).expect("journal.json"))
            .expect("journal.json is JSON");
    snapshot["version"] = NEWER_VERSION.into();
    snapshot["recorded_only_by_the_newer_forewarn"] = serde_json::json!({"kept": true});
    let newer_snapshot = serde_json::to_vec_pretty(&snapshot).expect("encode");
    std::fs::write(&snapshot_path, &newer_snapshot).expect("write journal.json");
    let newer_log = std::fs::read(&log_path).expect("journal.log");
    assert!(
        newer_log.contains(&b'\n'),
        "the first run left no change-log line, so the test would not see the log kept"
    );

    let (older, admin) = start(&config_path);

    // The problem and the fix, once, naming where the journal was kept.
    let said = older.wait_for_message(WAIT, JOURNAL_FROM_A_NEWER_FOREWARN);
    assert_eq!(said.len(), 1, "{}", older.describe_for_failure());
    assert_eq!(said[0].fields["version"], NEWER_VERSION);
    assert!(
        older
            .lines_with_message(JOURNAL_FROM_A_NEWER_FOREWARN_NOT_KEPT)
            .is_empty()
            && older.lines_with_message(JOURNAL_QUARANTINED).is_empty(),
        "{}",
        older.describe_for_failure()
    );

    // At the files: both kept byte for byte, and named in the log line.
    let suffix = format!(".v{NEWER_VERSION}-");
    let kept_snapshots = files_starting(&state_dir, &format!("journal.json{suffix}"));
    let kept_logs = files_starting(&state_dir, &format!("journal.log{suffix}"));
    assert_eq!(kept_snapshots.len(), 1, "{kept_snapshots:?}");
    assert_eq!(kept_logs.len(), 1, "{kept_logs:?}");
    assert!(
        std::fs::read(&kept_snapshots[0]).expect("the kept snapshot") == newer_snapshot,
        "the kept journal.json is not the newer forewarn's"
    );
    assert!(
        std::fs::read(&kept_logs[0]).expect("the kept log") == newer_log,
        "the kept journal.log is not the newer forewarn's"
    );
    let named = said[0].fields["kept"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for kept in kept_snapshots.iter().chain(&kept_logs) {
        assert!(
            named.contains(&kept.display().to_string()),
            "the log line does not say where {} is: {named}",
            kept.display()
        );
    }

    // The event resumed: the daemon shows it, and its own journal (this version's) has it.
    wait_for(WAIT, "the resumed event in /status", || {
        let status = status(&admin)?;
        match status.events.iter().any(|e| same_id(e.id.as_str(), &event)) {
            true => Ok(()),
            false => Err(older.describe_for_failure()),
        }
    });
    let rewritten: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&snapshot_path).expect("journal.json"))
            .expect("journal.json is JSON");
    assert!(
        rewritten["version"]
            .as_u64()
            .is_some_and(|v| v < NEWER_VERSION),
        "this forewarn's journal claims the newer schema: {}",
        rewritten["version"]
    );
    let events = rewritten["events"].as_object().expect("events");
    assert!(
        events.keys().any(|id| same_id(id, &event)),
        "the event in progress was not resumed into this forewarn's journal: {rewritten}"
    );
}

//! End to end: the outcome record of each event (docs/operations.md, "What an event cost"),
//! with the impact measured from inside the VM. The real `forewarn run` against `forewarn
//! simulate`; each test reads the record where people do (`/status/events`, the record
//! files in the state directory, `forewarn events show|export`), never the log.
//!
//! - a Freeze during which the daemon is stopped (SIGSTOP, as a paused VM stops every
//!   process) for 5 s records a pause of 5 s ± 0.5;
//! - a Reboot during which the daemon is killed and started 8 s later in another boot (a
//!   boot id file, `FOREWARN_BOOT_ID_FILE`) records a downtime of 8 s ± 1;
//! - records survive a restart, the bound (`[outcomes] keep`) evicts the oldest, and the
//!   CloudEvents export parses with the CloudEvents SDK from PyPI and round-trips;
//! - the status page draws the Freeze's record in Chromium: the announced window and the
//!   measured pause to one scale, no external assets (`tests/browser/pages.mjs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use forewarn_test_support::browser::{assert_png, screenshot_dir, status_page_seen};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, ProbePlugin, Setup, TestEnv, http_get, repository_root, same_id, wait_for,
};
use serde_json::Value;

/// Generous: two cores shared by several test binaries.
const WAIT: Duration = Duration::from_secs(60);

/// `GET /status/events`, parsed.
fn events_view(admin: &str) -> Result<Value, String> {
    let body = http_get(admin, "/status/events")?;
    serde_json::from_str(&body).map_err(|error| format!("{error}: {body}"))
}

/// The newest record of `event_id` in a `/status/events` answer.
fn record_in(view: &Value, event_id: &str) -> Option<Value> {
    view["records"]
        .as_array()?
        .iter()
        .rev()
        .find(|record| same_id(record["event_id"].as_str().unwrap_or_default(), event_id))
        .cloned()
}

/// Waits until the daemon's record of `event_id` satisfies `check`; returns it.
fn wait_for_record(
    daemon: &Daemon,
    event_id: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let admin = daemon.admin_address(WAIT);
    wait_for(WAIT, what, || {
        let view = events_view(&admin)?;
        match record_in(&view, event_id) {
            Some(record) if check(&record) => Ok(record),
            Some(record) => Err(record.to_string()),
            None => Err(format!("no record of {event_id}: {view}")),
        }
    })
}

/// The record files of the state directory, parsed.
fn record_files(state_dir: &Path) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(state_dir.join("outcomes")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| {
            entry
                .path()
                .extension()
                .is_some_and(|extension| extension == "json")
        })
        .filter_map(|entry| std::fs::read(entry.path()).ok())
        .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
        .collect()
}

/// Waits until the record file of `event_id` on disk satisfies `check`.
fn wait_for_record_file(
    state_dir: &Path,
    event_id: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) {
    wait_for(WAIT, what, || {
        let files = record_files(state_dir);
        match files
            .iter()
            .find(|record| same_id(record["event_id"].as_str().unwrap_or_default(), event_id))
        {
            Some(record) if check(record) => Ok(()),
            Some(record) => Err(record.to_string()),
            None => Err(format!("no file of {event_id} among {}", files.len())),
        }
    });
}

/// `forewarn ARGS --admin ADDRESS`'s standard output; panics when it fails.
fn forewarn_cli(args: &[&str], admin: &str) -> String {
    let output = Command::new(forewarn_binary!())
        .args(args)
        .args(["--admin", admin])
        .stdin(Stdio::null())
        .output()
        .expect("run forewarn");
    assert!(
        output.status.success(),
        "forewarn {args:?}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// The measured impact of a record: (kind, milliseconds, precision).
fn impact(record: &Value) -> (String, u64, u64) {
    let impact = &record["happened"]["impact"];
    (
        impact["kind"].as_str().unwrap_or_default().to_owned(),
        impact["milliseconds"].as_u64().unwrap_or_default(),
        impact["precision_ms"].as_u64().unwrap_or_default(),
    )
}

fn stage(record: &Value) -> &str {
    record["stage"].as_str().unwrap_or_default()
}

/// Sends `signal` (`-STOP`, `-CONT`) to `pid`.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {pid}");
}

#[test]
fn a_freeze_that_stops_the_daemon_for_5_s_records_a_pause_of_5_s() {
    let env = TestEnv::builder(forewarn_binary!())
        .scenario("idle")
        .plugins(&[ProbePlugin::new("drain", "approve").subscribe(&["Freeze"])])
        .wait(WAIT)
        .start();
    let event = env.simulator().generate_event(
        "{\"type\": \"Freeze\", \"not_before_seconds\": 30, \"duration_seconds\": 9, \"runs_for_seconds\": 600}",
    );
    wait_for_record(&env.daemon, &event, "the Freeze seen Started", |record| {
        stage(record) == "started"
    });

    // The VM pauses: every process stops, the daemon with it, for 5 s.
    let stopped = Instant::now();
    signal(env.daemon.pid(), "-STOP");
    std::thread::sleep(Duration::from_secs(5));
    signal(env.daemon.pid(), "-CONT");
    let stopped_for = stopped.elapsed();
    env.simulator().end_event(&event);

    let record = wait_for_record(&env.daemon, &event, "the Freeze's pause", |record| {
        impact(record).0 != "pending"
    });
    let (kind, milliseconds, precision) = impact(&record);
    assert_eq!(kind, "pause", "{record:#}");
    let measured = Duration::from_millis(milliseconds);
    assert!(
        measured.abs_diff(stopped_for) <= Duration::from_millis(500),
        "paused {measured:?}, stopped {stopped_for:?}: {record:#}"
    );
    assert_eq!(precision, 50, "{record:#}");
    assert!(
        record["happened"]["impact"]["how"]
            .as_str()
            .is_some_and(|how| how.contains("monotonic")),
        "{record:#}"
    );
    let verdict = record["verdict"]["text"].as_str().unwrap_or_default();
    assert!(
        verdict.contains("paused ") && verdict.contains("announced ≤ 9 s"),
        "{verdict}"
    );
    assert_eq!(record["announced"]["duration_seconds"], 9, "{record:#}");
    assert_eq!(record["announced"]["names_this_vm"], true, "{record:#}");
    // The plugin prepared it, and the approval went before NotBefore.
    assert_eq!(
        record["handled"]["calls"][0]["plugin"], "drain",
        "{record:#}"
    );
    assert_eq!(
        record["handled"]["approval"]["state"], "accepted",
        "{record:#}"
    );
    assert!(verdict.starts_with("prepared "), "{verdict}");

    // For docs/operations.md ("What an event cost"): run with --nocapture to see it.
    println!("{record:#}");

    // The same record through the command line, and the metric.
    let admin = env.daemon.admin_address(WAIT);
    let shown: Value =
        serde_json::from_str(&forewarn_cli(&["events", "show", &event, "--json"], &admin))
            .expect("events show --json is JSON");
    assert_eq!(impact(&shown), impact(&record));
    let metrics = http_get(&admin, "/metrics").expect("GET /metrics");
    assert!(
        metrics.contains("forewarn_event_impact_seconds_count{event_type=\"Freeze\"} 1"),
        "{metrics}"
    );

    assert_page_draws_the_freeze(&admin, &event, &record);
}

/// The status page in Chromium, once the record is finished: the Freeze drawn with its
/// announced window (DurationInSeconds) and its measured pause at one scale, the verdict and
/// the figures beside it, nothing fetched from elsewhere.
fn assert_page_draws_the_freeze(admin: &str, event: &str, record: &Value) {
    let seen = status_page_seen(admin, &[("FOREWARN_OUTCOMES", "1")], WAIT);
    assert_eq!(seen["page_errors"], serde_json::json!([]), "{seen:#}");
    assert_eq!(seen["outside_requests"], serde_json::json!([]), "{seen:#}");
    assert_eq!(seen["external_references"], 0, "{seen:#}");
    let drawn = &seen["records"][0];
    assert_eq!(drawn["event_id"], event, "{seen:#}");
    assert_eq!(drawn["verdict"], record["verdict"]["text"], "{seen:#}");
    let whole = &drawn["drawings"][0];
    let paused_ms = record["happened"]["impact"]["milliseconds"]
        .as_f64()
        .expect("the pause");
    assert_eq!(whole["impact"], "pause", "{seen:#}");
    assert_eq!(whole["measured_ms"].as_f64(), Some(paused_ms), "{seen:#}");
    assert_eq!(whole["announced_ms"].as_f64(), Some(9000.0), "{seen:#}");
    assert_eq!(whole["approved"], true, "{seen:#}");
    // One scale: the bars' widths stand as 5 s to 9 s (to a unit, the bars' rounding).
    let scale = |key: &str| whole[key].as_f64().expect("a width");
    let expected = scale("announced_width") * paused_ms / 9000.0;
    assert!(
        (scale("measured_width") - expected).abs() <= 1.0,
        "the pause is drawn {} wide, {expected:.1} expected beside the announced window: {seen:#}",
        scale("measured_width")
    );
    let legend = drawn["legend"].as_str().unwrap_or_default();
    assert!(
        legend.contains("announced ≤ 9 s") && legend.contains("measured pause "),
        "{seen:#}"
    );
    assert_png(&screenshot_dir().join("outcomes.png"));
}

/// The Reboot test's boot id file, holding `id`.
fn boot_id_file(dir: &Path, id: &str) -> PathBuf {
    let path = dir.join("boot-id");
    std::fs::write(&path, format!("{id}\n")).expect("write the boot id file");
    path
}

fn start_in_boot(setup: &Setup, boot_id: &Path) -> Daemon {
    let boot_id = boot_id.to_str().expect("a UTF-8 path");
    Daemon::start_with_env(
        forewarn_binary!(),
        &setup.config,
        &[("FOREWARN_BOOT_ID_FILE", boot_id)],
    )
}

#[test]
fn a_reboot_that_keeps_the_daemon_down_8_s_records_a_downtime_of_8_s() {
    let setup = TestEnv::builder(forewarn_binary!())
        .scenario("idle")
        .wait(WAIT)
        .prepare();
    let state_dir = setup.dir.path().join("state");
    let boot_id = boot_id_file(setup.dir.path(), "boot-before");
    let mut daemon = start_in_boot(&setup, &boot_id);
    let event = setup.simulator.generate_event(
        "{\"type\": \"Reboot\", \"not_before_seconds\": 2, \"runs_for_seconds\": 600}",
    );
    wait_for_record_file(
        &state_dir,
        &event,
        "the Reboot's record, Started, on disk",
        |record| stage(record) == "started",
    );

    // The VM reboots: the daemon dies with it and starts 8 s later in a new boot.
    daemon.kill();
    let killed = Instant::now();
    boot_id_file(setup.dir.path(), "boot-after");
    std::thread::sleep(Duration::from_secs(8).saturating_sub(killed.elapsed()));
    let daemon = start_in_boot(&setup, &boot_id);
    wait_for_record(
        &daemon,
        &event,
        "the record read back after the restart",
        |record| stage(record) == "started",
    );
    setup.simulator.end_event(&event);

    let record = wait_for_record(&daemon, &event, "the Reboot's downtime", |record| {
        impact(record).0 != "pending"
    });
    let (kind, milliseconds, precision) = impact(&record);
    assert_eq!(kind, "downtime", "{record:#}");
    let measured = Duration::from_millis(milliseconds);
    assert!(
        measured.abs_diff(Duration::from_secs(8)) <= Duration::from_secs(1),
        "down {measured:?}: {record:#}"
    );
    assert_eq!(precision, 500, "{record:#}");
    assert_eq!(
        record["happened"]["restart"]["kind"], "rebooted",
        "{record:#}"
    );
}

/// A VM on a dedicated host that a Redeploy moves to another one (the simulator's
/// `dedicated_hosts`: the compute metadata's `host.id` names the next host once it started).
const REDEPLOY_ON_A_DEDICATED_HOST: &str = r#"
name = "redeploy-on-a-dedicated-host"
open_ended = true
dedicated_hosts = ["/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/hostGroups/hg/hosts/host-1", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/hostGroups/hg/hosts/host-2"]
[[events]]
id = "REDEPLOY-1"
type = "Redeploy"
appear_at = "0s"
notice = "2s"
runs_for = "10m"
"#;

#[test]
fn a_redeploy_that_comes_back_on_another_dedicated_host_records_the_move() {
    let setup = TestEnv::builder(forewarn_binary!())
        .scenario_text(REDEPLOY_ON_A_DEDICATED_HOST)
        .wait(WAIT)
        .prepare();
    let state_dir = setup.dir.path().join("state");
    let boot_id = boot_id_file(setup.dir.path(), "boot-before");
    let mut daemon = start_in_boot(&setup, &boot_id);
    let event = "REDEPLOY-1";
    wait_for_record_file(
        &state_dir,
        event,
        "the Redeploy's record, Started, on disk",
        |record| stage(record) == "started",
    );

    // The VM is redeployed: the daemon dies with it and starts in a new boot, on host-2.
    daemon.kill();
    boot_id_file(setup.dir.path(), "boot-after");
    let daemon = start_in_boot(&setup, &boot_id);
    wait_for_record(
        &daemon,
        event,
        "the record read back after the restart",
        |record| record["happened"]["restart"]["kind"] == "rebooted",
    );
    setup.simulator.end_event(event);

    let record = wait_for_record(&daemon, event, "the Redeploy's host", |record| {
        impact(record).0 != "pending" && !record["happened"]["host"].is_null()
    });
    let host = &record["happened"]["host"];
    assert_eq!(host["kind"], "moved", "{record:#}");
    assert!(
        host["from"]
            .as_str()
            .is_some_and(|from| from.ends_with("/hosts/host-1"))
            && host["to"]
                .as_str()
                .is_some_and(|to| to.ends_with("/hosts/host-2")),
        "{record:#}"
    );
    assert_eq!(impact(&record).0, "downtime", "{record:#}");
    let verdict = record["verdict"]["text"].as_str().unwrap_or_default();
    assert!(
        verdict.ends_with("moved to dedicated host host-2"),
        "{verdict}"
    );
    let shown = forewarn_cli(&["events", "show", event], &daemon.admin_address(WAIT));
    assert!(shown.contains("host-2"), "{shown}");
}

/// The ids of the records `/status/events` lists, oldest first.
fn listed_ids(admin: &str) -> Result<Vec<String>, String> {
    let view = events_view(admin)?;
    Ok(view["records"]
        .as_array()
        .map(|records| {
            records
                .iter()
                .map(|record| record["event_id"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default())
}

/// Python, in the venv `tests/install-cloudevents.sh` made with the CloudEvents SDK.
fn cloudevents_python() -> PathBuf {
    let python = repository_root().join("tests/.tools/cloudevents-venv/bin/python3");
    assert!(
        python.exists(),
        "{} is missing: run tests/install-cloudevents.sh (tests/run.sh does)",
        python.display()
    );
    python
}

/// Reads each line of stdin with the SDK's JSON format, writes it back and reads that
/// again; prints what it read, as JSON, or exits non-zero.
const ROUND_TRIP: &str = r#"
import json, sys
from cloudevents.core.formats.json import JSONFormat
fmt = JSONFormat()
seen = []
for line in sys.stdin.read().splitlines():
    event = fmt.read(None, line)
    again = fmt.read(None, fmt.write(event))
    assert again.get_attributes() == event.get_attributes(), (again.get_attributes(), event.get_attributes())
    assert again.get_data() == event.get_data()
    assert event.get_time() is not None
    seen.append({
        "specversion": event.get_specversion(),
        "id": event.get_id(),
        "source": event.get_source(),
        "type": event.get_type(),
        "subject": event.get_subject(),
        "datacontenttype": event.get_datacontenttype(),
        "data_event_id": event.get_data()["event_id"],
        "data_verdict": event.get_data()["verdict"]["text"],
    })
print(json.dumps(seen))
"#;

#[test]
fn records_survive_a_restart_the_bound_evicts_the_oldest_and_export_as_cloudevents() {
    let env = TestEnv::builder(forewarn_binary!())
        .scenario("idle")
        .wait(WAIT)
        .prepare();
    let mut config = std::fs::read_to_string(&env.config).expect("read the config");
    config.push_str("\n[outcomes]\nkeep = 2\n");
    std::fs::write(&env.config, config).expect("write the config");
    let state_dir = env.dir.path().join("state");
    let mut daemon = env.start_daemon();
    let generate = |setup: &Setup| {
        setup
            .simulator
            .generate_event("{\"type\": \"Reboot\", \"not_before_seconds\": 3600}")
    };

    let first = generate(&env);
    wait_for_record_file(&state_dir, &first, "the first record on disk", |_| true);
    daemon.kill();
    daemon = env.start_daemon();
    let admin = daemon.admin_address(WAIT);
    wait_for(WAIT, "the first record read back after the restart", || {
        let ids = listed_ids(&admin)?;
        match ids.iter().any(|id| same_id(id, &first)) {
            true => Ok(()),
            false => Err(format!("{ids:?}")),
        }
    });

    let second = generate(&env);
    let third = generate(&env);
    wait_for(
        WAIT,
        "the first record evicted, from the endpoint and the disk",
        || {
            let ids = listed_ids(&admin)?;
            let on_disk = record_files(&state_dir).len();
            // The two may be seen in one poll: the same first sight, listed in either order.
            let listed = |want: &str| ids.iter().any(|id| same_id(id, want));
            match ids.len() == 2 && listed(&second) && listed(&third) && on_disk == 2 {
                true => Ok(()),
                false => Err(format!("listed {ids:?}, {on_disk} files")),
            }
        },
    );
    assert!(
        record_files(&state_dir)
            .iter()
            .all(|record| !same_id(record["event_id"].as_str().unwrap_or_default(), &first)),
        "the oldest record's file is gone"
    );

    // JSON Lines: one record a line.
    let lines = forewarn_cli(&["events", "export", "--since", "1h"], &admin);
    let exported: Vec<Value> = lines
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(exported.len(), 2, "{lines}");

    // CloudEvents 1.0, read and written back by the SDK.
    let cloudevents = forewarn_cli(&["events", "export", "--format", "cloudevents"], &admin);
    let mut python = Command::new(cloudevents_python())
        .args(["-c", ROUND_TRIP])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python");
    std::io::Write::write_all(
        python.stdin.as_mut().expect("stdin"),
        cloudevents.as_bytes(),
    )
    .expect("write to python");
    drop(python.stdin.take());
    let output = python.wait_with_output().expect("python's output");
    assert!(
        output.status.success(),
        "the CloudEvents SDK refused the export: {}\n{cloudevents}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Vec<Value> = serde_json::from_slice(&output.stdout).expect("the script's JSON");
    assert_eq!(seen.len(), 2, "{seen:?}");
    for event in &seen {
        let subject = event["subject"].as_str().unwrap_or_default();
        let want = [&second, &third]
            .into_iter()
            .find(|want| same_id(subject, want))
            .unwrap_or_else(|| panic!("{event} is neither {second} nor {third}"));
        assert_eq!(event["specversion"], "1.0");
        assert_eq!(event["type"], "io.forewarn.scheduled-event.outcome");
        assert_eq!(event["source"], "/forewarn/vm/vm-a");
        assert_eq!(event["datacontenttype"], "application/json");
        assert!(
            same_id(event["data_event_id"].as_str().unwrap_or_default(), want),
            "{event}"
        );
        assert!(
            event["id"]
                .as_str()
                .is_some_and(|id| id.starts_with(want.as_str())),
            "{event}"
        );
        // No plugin subscribes: the record says the approval is held, and why.
        let verdict = event["data_verdict"].as_str().unwrap_or_default();
        assert!(
            verdict.contains("not approved: ") && verdict.ends_with("; not started yet"),
            "{event}"
        );
    }
}

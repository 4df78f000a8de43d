//! End-to-end tests of `forewarn demo`, the README's first command: each bundled plugin does
//! its job against the built-in workload, in order, and the terminal shows no raw log lines.

use std::process::Command;

use serde_json::Value;

use forewarn_test_support::forewarn_binary;

/// Runs `forewarn demo` with `args`; its stdout and stderr, after checking it exited 0.
fn demo(args: &[&str]) -> (String, String) {
    let output = Command::new(forewarn_binary!())
        .arg("demo")
        .args(args)
        .env_remove("FOREWARN_LOG")
        .output()
        .expect("forewarn demo runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "forewarn demo failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    (stdout, stderr)
}

/// The demo's JSON lines.
fn entries(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect()
}

fn position(entries: &[Value], what: impl Fn(&Value) -> bool) -> Option<usize> {
    entries.iter().position(what)
}

fn is(entry: &Value, kind: &str) -> bool {
    entry["kind"] == kind
}

fn workload(entry: &Value, what: &str) -> bool {
    is(entry, "workload") && entry["what"] == what
}

fn answered(entry: &Value, plugin: &str, phase: &str, outcome: &str) -> bool {
    is(entry, "plugin-answered")
        && entry["plugin"] == plugin
        && entry["phase"] == phase
        && entry["outcome"] == outcome
}

#[test]
fn every_bundled_plugin_does_its_job_before_the_approval_and_recovers_after() {
    let (stdout, _) = demo(&["--json"]);
    let entries = entries(&stdout);
    let at = |index: usize| entries[index]["at_ms"].as_u64().expect("at_ms");
    let approved = position(&entries, |e| is(e, "approved")).expect("an approval at IMDS");

    // lb-drain holds the VM out of rotation until the demo's load balancer has taken it out
    // (3 failed probes of /readyz, 250 ms apart), gives open connections a second, and
    // approves: before the 3 s window it is configured with.
    let first_drain = position(&entries, |e| answered(e, "lb-drain", "prepare", "defer"))
        .expect("lb-drain defers while draining");
    let taken_out = position(&entries, |e| workload(e, "out-of-rotation"))
        .expect("the demo's load balancer took the VM out of rotation");
    let drained = position(&entries, |e| answered(e, "lb-drain", "prepare", "approve"))
        .expect("lb-drain approves after draining");
    assert!(
        first_drain < taken_out && taken_out < drained && drained < approved,
        "drain {first_drain}, out of rotation {taken_out}, drained {drained}, approved {approved}"
    );
    assert!(
        at(drained) - at(taken_out) >= 900,
        "lb-drain approved {} ms after the load balancer took the VM out; open connections get \
         1 s",
        at(drained) - at(taken_out)
    );
    assert!(
        entries
            .iter()
            .any(|e| answered(e, "lb-drain", "prepare", "defer")
                && e["reason"]
                    .as_str()
                    .is_some_and(|reason| reason.contains("every load balancer took the VM out"))),
        "lb-drain said the load balancer noticed"
    );
    let back = position(&entries, |e| workload(e, "back-in-rotation"))
        .expect("the load balancer put the VM back after the event");
    assert!(taken_out < back);
    assert!(
        position(&entries, |e| is(e, "plugin-log")
            && e["plugin"] == "lb-drain")
        .is_some(),
        "lb-drain's own log lines reach the timeline"
    );

    // checkpoint: the workload wrote a checkpoint before the approval, restored after the start.
    let written = position(&entries, |e| workload(e, "checkpoint-written"))
        .expect("the workload wrote a checkpoint");
    assert!(written < approved, "checkpoint written before the approval");
    let started = position(&entries, |e| {
        is(e, "transition") && e["transition"] == "started"
    })
    .expect("the event started");
    let restored = position(&entries, |e| workload(e, "restored")).expect("the workload restored");
    assert!(started < restored, "restore after the event started");

    // graceful-shutdown: the stop action stopped the app before the approval; the start
    // action started a new app process after the event.
    let stopped = position(&entries, |e| workload(e, "app-stopped")).expect("the stop action ran");
    assert!(stopped < approved, "app stopped before the approval");
    let restarted = entries
        .iter()
        .enumerate()
        .skip(started)
        .find(|(_, e)| workload(e, "app-started"))
        .map(|(index, _)| index)
        .expect("the start action ran after the event started");
    assert!(stopped < restarted);

    let summary = entries.last().expect("a summary line");
    assert!(is(summary, "summary"), "{summary}");
    let facts = &summary["workload"];
    assert!(
        facts["checkpoints_completed"].as_u64() >= Some(1),
        "{facts}"
    );
    assert!(facts["restores"].as_u64() >= Some(1), "{facts}");
    assert!(facts["app_stops"].as_u64() >= Some(1), "{facts}");
    assert!(facts["app_starts"].as_u64() >= Some(1), "{facts}");
    let pids: Vec<u64> = facts["app_pids"]
        .as_array()
        .expect("pids")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    assert!(
        pids.len() >= 2 && pids[0] != pids[1],
        "a new app process: {pids:?}"
    );
    assert_eq!(facts["app_running_at_end"], true, "{facts}");
    assert_eq!(summary["warnings"], 0, "no warnings or errors: {stdout}");
    assert!(summary["approved_at_imds"].as_u64() >= Some(1), "{summary}");

    // What each event cost: one outcome record per event seen, its verdict line.
    let outcomes = summary["outcomes"].as_array().expect("the outcomes");
    assert_eq!(
        outcomes.len(),
        summary["events"].as_array().map_or(0, Vec::len),
        "{summary}"
    );
    let reboot = outcomes
        .iter()
        .find(|outcome| outcome["event_type"] == "Reboot")
        .unwrap_or_else(|| panic!("the Reboot's outcome: {summary}"));
    let verdict = reboot["verdict"].as_str().unwrap_or_default();
    assert!(verdict.starts_with("prepared "), "{summary}");
}

#[test]
fn the_human_timeline_has_no_raw_log_lines() {
    let (stdout, stderr) = demo(&[]);
    assert!(!stdout.contains('\u{1b}'), "no ANSI escapes:\n{stdout}");
    assert!(
        stderr.trim().is_empty(),
        "nothing on stderr (raw tracing output goes there):\n{stderr}"
    );
    assert!(stdout.contains("APPROVED at IMDS"), "{stdout}");
}

//! End to end: `forewarn drill spot-eviction | reboot | redeploy` against the simulator as
//! IMDS and as Azure Resource Manager, with a running daemon. Each drill takes the VM's
//! resource id from the compute metadata and a token of its managed identity, POSTs the
//! documented action (api-version 2024-07-01) and gets Azure's 204 or 202; the simulator
//! announces the matching Scheduled Event, the daemon's plugin approves it at IMDS, and the
//! drill prints the event's outcome record once it is finished. Without a managed identity,
//! without the role, or for a regular VM's eviction, the drill is refused with the fix and
//! nothing (or only the refused call) reaches Resource Manager. Effects are read at the
//! simulator (its request log, its approvals) and at the daemon's `/status/events`.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{ProbePlugin, TestEnv, http_get};
use serde_json::Value;

/// Generous: a drill's event runs for 20 s, a Preempt's notice is 30 s.
const WAIT: Duration = Duration::from_secs(90);

/// A VM with nothing scheduled: the drill's call makes the event.
fn scenario(priority: &str, identity: &str) -> String {
    format!(
        "name = \"drill\"\ndescription = \"A quiet VM to drill on.\"\nopen_ended = true\npriority = {priority:?}\n{identity}"
    )
}

fn start(priority: &str, identity: &str) -> TestEnv {
    TestEnv::builder(forewarn_binary!())
        .scenario_text(&scenario(priority, identity))
        .plugins(&[ProbePlugin::new("ready", "approve")])
        .wait(WAIT)
        .start()
}

/// `forewarn drill KIND --imds-url SIM --arm-url SIM --admin ADMIN EXTRA`, stdin closed.
fn drill(env: &TestEnv, kind: &str, extra: &[&str]) -> Output {
    let base = env.simulator().base_url.clone();
    let admin = env.daemon.admin_address(WAIT);
    Command::new(forewarn_binary!())
        .args([
            "drill",
            kind,
            "--imds-url",
            &base,
            "--arm-url",
            &base,
            "--admin",
            &admin,
        ])
        .args(["--timeout", "3m"])
        .args(extra)
        .env_remove("FOREWARN_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("forewarn drill runs")
}

fn describe(output: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The POSTs Resource Manager got (path, query, status), from the simulator's request log.
fn arm_calls(env: &TestEnv) -> Vec<(String, String, u16)> {
    env.simulator()
        .state()
        .requests
        .iter()
        .filter(|request| request.path.starts_with("/subscriptions/"))
        .map(|request| {
            (
                request.path.clone(),
                request.query.clone().unwrap_or_default(),
                request.status,
            )
        })
        .collect()
}

/// The daemon's outcome records.
fn records(env: &TestEnv) -> Vec<Value> {
    let body =
        http_get(&env.daemon.admin_address(WAIT), "/status/events").expect("GET /status/events");
    let view: Value = serde_json::from_str(&body).expect("JSON");
    view["records"].as_array().cloned().unwrap_or_default()
}

/// The drill `kind` goes from the command to the printed record: the documented call,
/// Azure's status, the event of `event_type` approved at IMDS, its finished record printed.
fn assert_drill_runs_to_the_record(kind: &str, action: &str, status: u16, event_type: &str) {
    let env = start("Spot", "");
    let output = drill(&env, kind, &["--yes"]);
    assert!(output.status.success(), "{}", describe(&output));
    let calls = arm_calls(&env);
    assert_eq!(calls.len(), 1, "{calls:?}");
    let (path, query, answered) = &calls[0];
    assert!(
        path.starts_with("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/")
            && path.ends_with(&format!(
                "/providers/Microsoft.Compute/virtualMachines/vm-a/{action}"
            )),
        "{calls:?}"
    );
    assert_eq!(query, "api-version=2024-07-01", "{calls:?}");
    assert_eq!(*answered, status, "{calls:?}");
    let state = env.simulator().state();
    let approved: Vec<&str> = state
        .approvals
        .iter()
        .filter(|approval| approval.accepted)
        .map(|approval| approval.event_id.as_str())
        .collect();
    let records = records(&env);
    let record = records
        .iter()
        .find(|record| record["event_type"] == event_type)
        .unwrap_or_else(|| panic!("no {event_type} record: {records:?}\n{}", describe(&output)));
    let id = record["event_id"].as_str().unwrap_or_default();
    assert!(
        approved.contains(&id),
        "the {event_type} approved at IMDS: {approved:?}"
    );
    assert_eq!(record["stage"], "finished", "{record:#}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("IMDS announced {event_type} {id}")),
        "{}",
        describe(&output)
    );
    let verdict = record["verdict"]["text"].as_str().unwrap_or_default();
    assert!(
        !verdict.is_empty() && stdout.contains(verdict),
        "the record printed: {}",
        describe(&output)
    );
}

#[test]
fn a_spot_eviction_drill_runs_from_the_command_to_the_printed_record() {
    assert_drill_runs_to_the_record("spot-eviction", "simulateEviction", 204, "Preempt");
}

#[test]
fn a_reboot_drill_runs_from_the_command_to_the_printed_record() {
    assert_drill_runs_to_the_record("reboot", "restart", 202, "Reboot");
}

#[test]
fn a_redeploy_drill_runs_from_the_command_to_the_printed_record() {
    assert_drill_runs_to_the_record("redeploy", "redeploy", 202, "Redeploy");
}

/// Refusals: each says the fix, and Azure is not asked (or only refuses).
#[test]
fn a_drill_is_refused_without_confirmation_identity_role_or_spot_priority() {
    let env = start("Spot", "");
    let output = drill(&env, "reboot", &[]);
    assert!(!output.status.success(), "{}", describe(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("pass --yes"),
        "{}",
        describe(&output)
    );
    assert_eq!(arm_calls(&env), [], "nothing asked before it is confirmed");

    let env = start("Regular", "");
    let output = drill(&env, "spot-eviction", &["--yes"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("only Spot VMs can be evicted"),
        "{}",
        describe(&output)
    );
    assert_eq!(arm_calls(&env), []);

    let env = start("Spot", "[identity]\nassigned = false\n");
    let output = drill(&env, "reboot", &["--yes"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success()
            && stderr.contains("has no managed identity")
            && stderr.contains("az vm identity assign"),
        "{}",
        describe(&output)
    );
    assert_eq!(arm_calls(&env), []);

    let env = start("Spot", "[identity]\nmanages_vm = false\n");
    let output = drill(&env, "redeploy", &["--yes"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success()
            && stderr.contains("AuthorizationFailed")
            && stderr.contains("Microsoft.Compute/virtualMachines/redeploy/action")
            && stderr.contains("Virtual Machine Contributor"),
        "{}",
        describe(&output)
    );
    let calls = arm_calls(&env);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].2, 403, "{calls:?}");
    assert!(
        env.simulator().state().events.is_empty(),
        "a refused call announces no event"
    );
}

/// On a real VM the reboot takes the daemon down with it: once the event is announced, a
/// daemon that stops answering ends the drill successfully, saying where the record will be.
#[test]
fn a_reboot_drill_ends_saying_where_the_record_is_when_the_daemon_goes_down_with_the_vm() {
    let mut env = start("Regular", "");
    let base = env.simulator().base_url.clone();
    let admin = env.daemon.admin_address(WAIT);
    let child = Command::new(forewarn_binary!())
        .args([
            "drill",
            "reboot",
            "--yes",
            "--imds-url",
            &base,
            "--arm-url",
            &base,
        ])
        .args(["--admin", &admin, "--timeout", "3m"])
        .env_remove("FOREWARN_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("forewarn drill starts");
    // The Reboot runs for 20 s once approved: the daemon goes down while it is under way.
    env.simulator()
        .wait_for_state(WAIT, "the drill's Reboot approved at IMDS", |state| {
            state.approvals.iter().any(|approval| approval.accepted)
        });
    env.daemon.kill();
    let output = child.wait_with_output().expect("the drill ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let event_id = env.simulator().state().approvals[0].event_id.clone();
    assert!(output.status.success(), "{}", describe(&output));
    // Whether the drill saw the record before the daemon went is a race: either way it says
    // where to find it.
    assert!(
        stdout.contains("the daemon stopped answering")
            && (stdout.contains(&format!("forewarn events show {event_id}"))
                || stdout.contains("`forewarn events list` shows the Reboot's record")),
        "{}",
        describe(&output)
    );
}

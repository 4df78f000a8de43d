//! End-to-end tests of the plugin failure policy (`on-failure`) and the crash-loop
//! quarantine: the real `forewarn run` with a probe plugin that traps on every call
//! ("count-then-panic") against `forewarn simulate` at real speed.
//!
//! Each test asserts at the simulator (whether and when the event was approved) and at the
//! plugin (how many calls it received, counted in its own state file, which the daemon only
//! stores); `/status` and `/metrics` are checked for the quarantine itself.

use std::path::Path;
use std::time::Duration;

use forewarn_simulator::{StateSnapshot, Transition, stable_event_id};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    ProbePlugin, TestEnv, accepted_approvals, http_get, transition_at, wait_for,
};

/// The scenario's name, from which the simulator derives its event's id.
const SCENARIO: &str = "failure-policy";
/// The event appears this far into the run (scenario time is wall time: speed 1).
const APPEAR_MS: u64 = 1_000;
/// Long enough for anything these tests wait for (the longest, NotBefore, is 21 s away).
const WAIT: Duration = Duration::from_secs(45);
/// The quarantine count the tests configure: a plugin is asked again 5 s after a failure,
/// so two failures take about 5 s, three about 10 s.
const QUARANTINE_AFTER: u32 = 3;

/// A Reboot for vm-a appearing at 1 s with `notice`, running 2 s once started.
fn scenario(notice_s: u64) -> String {
    format!(
        "name = \"{SCENARIO}\"\nend_after = \"5s\"\n\n[[events]]\ntype = \"Reboot\"\n\
         appear_at = \"1s\"\nnotice = \"{notice_s}s\"\nruns_for = \"2s\"\n"
    )
}

/// The simulator playing [`scenario`], `plugins`, and a quarantine after `after` failures in
/// a minute, with a small safety margin.
fn start(notice_s: u64, plugins: &[ProbePlugin], after: u32) -> TestEnv {
    start_playing(&scenario(notice_s), plugins, after)
}

/// [`start`] with the scenario `text`.
fn start_playing(text: &str, plugins: &[ProbePlugin], after: u32) -> TestEnv {
    TestEnv::builder(forewarn_binary!())
        .scenario_text(text)
        .plugins(plugins)
        .policy(&[
            "safety-margin-ms = 300",
            &format!("quarantine-after-failures = {after}"),
            "quarantine-window = \"60s\"",
        ])
        .wait(WAIT)
        .start()
}

fn event_id() -> String {
    stable_event_id(SCENARIO, 0)
}

/// The calls the "count-then-panic" probe `plugin` counted in its own state file (the
/// decimal text stored under "calls", hex-encoded by the state store); 0 before the first.
fn calls_counted(world: &TestEnv, plugin: &str) -> u64 {
    let path = world
        .setup
        .dir
        .path()
        .join("state/plugin-state")
        .join(format!("{plugin}.json"));
    read_counter(&path)
}

fn read_counter(path: &Path) -> u64 {
    let Ok(text) = std::fs::read_to_string(path) else {
        return 0;
    };
    let map: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|error| panic!("{} is not JSON ({error}): {text}", path.display()));
    let Some(hex) = map["calls"].as_str() else {
        return 0;
    };
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("hex"))
        .collect();
    String::from_utf8(bytes)
        .expect("decimal text")
        .parse()
        .expect("a number")
}

/// `GET /status` of the daemon, parsed.
fn get_status(world: &TestEnv) -> serde_json::Value {
    let admin = world.daemon.admin_address(WAIT);
    let body = http_get(&admin, "/status").unwrap_or_else(|error| panic!("GET /status: {error}"));
    serde_json::from_str(&body).expect("/status is JSON")
}

/// Waits until `/status` lists `plugin` among the quarantined plugins; returns that entry.
fn wait_for_quarantine(world: &TestEnv, plugin: &str) -> serde_json::Value {
    wait_for(WAIT, &format!("{plugin} quarantined in /status"), || {
        let status = get_status(world);
        let listed = status["quarantined_plugins"]
            .as_array()
            .and_then(|list| list.iter().find(|entry| entry["plugin"] == plugin).cloned());
        listed.ok_or_else(|| format!("{}\n{}", status, world.context()))
    })
}

/// The value of the series `name` (with its labels) in `/metrics`, if exported.
fn metric(world: &TestEnv, series: &str) -> Option<f64> {
    let admin = world.daemon.admin_address(WAIT);
    let text = http_get(&admin, "/metrics").expect("GET /metrics");
    text.lines()
        .find(|line| line.starts_with(series) && line[series.len()..].starts_with(' '))
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

fn not_before_ms(notice_s: u64) -> u64 {
    APPEAR_MS + notice_s * 1000
}

/// Waits until the simulator accepted the event's approval, and checks it came once and
/// early: at least 30 s before the NotBefore `notice_s` after its appearance.
fn assert_approved_early(world: &TestEnv, notice_s: u64) {
    let id = event_id();
    let state = world.setup.simulator.wait_for_state(
        WAIT,
        "the event's approval at the simulator",
        |state: &StateSnapshot| !accepted_approvals(state, &id).is_empty(),
    );
    let context = world.context();
    let approved = accepted_approvals(&state, &id);
    assert_eq!(approved.len(), 1, "{context}");
    assert!(
        approved[0].at_scenario_ms < not_before_ms(notice_s) - 30_000,
        "approved early, not near NotBefore; {context}"
    );
}

/// (a) A plugin that traps on every call, under the default `on-failure = "hold"`, holds
/// the event until NotBefore, and after N failures it is quarantined: no more calls (one
/// recovery call once the event is over), shown in `/status` and `/metrics`.
#[test]
fn a_plugin_trapping_under_hold_is_quarantined_and_holds_the_event_until_not_before() {
    let notice_s = 20;
    let plugins = [
        ProbePlugin::new("crashy", "count-then-panic"),
        ProbePlugin::new("probe", "approve"),
    ];
    let world = start(notice_s, &plugins, QUARANTINE_AFTER);
    let id = event_id();
    let quarantined = wait_for_quarantine(&world, "crashy");
    let context = world.context();
    assert_eq!(quarantined["on_failure"], "hold", "{context}");
    assert_eq!(quarantined["failures"], QUARANTINE_AFTER, "{context}");
    assert_eq!(quarantined["last_failure"], "trap", "{context}");
    assert_eq!(
        calls_counted(&world, "crashy"),
        u64::from(QUARANTINE_AFTER),
        "the plugin counted its calls; {context}"
    );
    let status = get_status(&world);
    let event = &status["events"][0];
    assert_eq!(event["held_by_quarantined"][0], "crashy", "{status}");
    assert!(
        event["approval"]
            .as_str()
            .is_some_and(|text| text.starts_with("pending: held by quarantined plugin crashy")),
        "{status}"
    );
    assert_eq!(
        metric(&world, "forewarn_plugin_quarantined{plugin=\"crashy\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &world,
            "forewarn_plugin_quarantines_total{plugin=\"crashy\"}"
        ),
        Some(1.0)
    );

    // Held: Azure starts the event at NotBefore, and the plugin was not called meanwhile.
    let state = world.wait_for_transition(&id, Transition::Started);
    let context = world.context();
    assert!(accepted_approvals(&state, &id).is_empty(), "{context}");
    let started = transition_at(&state, &id, Transition::Started).expect("started");
    assert!(started >= not_before_ms(notice_s), "{context}");
    assert_eq!(
        calls_counted(&world, "crashy"),
        u64::from(QUARANTINE_AFTER),
        "no call while quarantined; {context}"
    );

    // Once the event is over, the quarantined plugin gets one recovery call, not retried.
    world.wait_for_transition(&id, Transition::Removed);
    wait_for(WAIT, "the event's recovery to finish", || {
        let status = get_status(&world);
        match status["events"].as_array().is_some_and(Vec::is_empty) {
            true => Ok(()),
            false => Err(status.to_string()),
        }
    });
    assert_eq!(
        calls_counted(&world, "crashy"),
        u64::from(QUARANTINE_AFTER) + 1,
        "one recovery call; {}",
        world.context()
    );
}

/// (b) The same plugin under `on-failure = "approve"` is advisory: its failed call counts as
/// consent, and the event is approved at IMDS long before NotBefore.
#[test]
fn a_plugin_trapping_under_approve_lets_the_event_be_approved_early() {
    let notice_s = 60;
    let plugins = [
        ProbePlugin::new("crashy", "count-then-panic").on_failure("approve"),
        ProbePlugin::new("probe", "approve"),
    ];
    // The event starts 20 s after the approval (NotBefore is 60 s away): until then the
    // daemon has no other phase to call the plugin for, so every call the plugin counted
    // by then was a prepare.
    let text = scenario(notice_s).replace(
        "runs_for = \"2s\"\n",
        "runs_for = \"2s\"\nstart_after_approval = \"20s\"\n",
    );
    assert!(text.contains("start_after_approval"), "{text}");
    let world = start_playing(&text, &plugins, QUARANTINE_AFTER);
    assert_approved_early(&world, notice_s);
    // It ran, and was asked to prepare once only (its own count, read while the event has
    // not started: the simulator, read after the count, shows it still Scheduled).
    let counted = calls_counted(&world, "crashy");
    let state = world.state();
    let context = world.context();
    assert!(
        transition_at(&state, &event_id(), Transition::Started).is_none(),
        "the event started within 20 s of its approval, before the plugin's calls were \
         read; {context}"
    );
    assert_eq!(
        counted, 1,
        "one failed prepare was its consent, by the plugin's count; {context}"
    );
}

/// (c) Replacing the quarantined plugin's file (here its manifest, renamed into place) lifts
/// the quarantine: the new version is called, approves, and the event is approved early.
#[test]
fn replacing_a_quarantined_plugin_lifts_the_quarantine() {
    let notice_s = 60;
    let crashy = ProbePlugin::new("crashy", "count-then-panic");
    let world = start(notice_s, std::slice::from_ref(&crashy), 2);
    let id = event_id();
    wait_for_quarantine(&world, "crashy");
    let context = world.context();
    assert!(
        accepted_approvals(&world.state(), &id).is_empty(),
        "held while quarantined; {context}"
    );
    assert_eq!(calls_counted(&world, "crashy"), 2, "{context}");

    let plugin_dir = world.setup.dir.path().join("plugins");
    let fixed = ProbePlugin::new("crashy", "approve").manifest();
    std::fs::write(plugin_dir.join(".crashy.toml.new"), fixed).expect("write the new manifest");
    std::fs::rename(
        plugin_dir.join(".crashy.toml.new"),
        plugin_dir.join("crashy.toml"),
    )
    .expect("rename it into place");

    assert_approved_early(&world, notice_s);
    let status = get_status(&world);
    assert_eq!(
        status["quarantined_plugins"],
        serde_json::json!([]),
        "{status}"
    );
    assert_eq!(
        metric(&world, "forewarn_plugin_quarantined{plugin=\"crashy\"}"),
        Some(0.0)
    );
}

/// `forewarn plugin check` shows the policy the manifest beside the component sets (the
/// default "hold" without one).
#[test]
fn plugin_check_shows_the_failure_policy() {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = dir.path().join("notify.wasm");
    std::fs::copy(forewarn_test_support::guests::PROBE, &wasm).expect("copy the probe");
    let check = || {
        let output = std::process::Command::new(forewarn_binary!())
            .args(["plugin", "check"])
            .arg(&wasm)
            .output()
            .expect("run forewarn plugin check");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{stdout}");
        stdout
    };
    let stdout = check();
    assert!(
        stdout.contains("  on-failure: hold (a failed call holds"),
        "{stdout}"
    );
    std::fs::write(dir.path().join("notify.toml"), "on-failure = \"approve\"\n")
        .expect("write the manifest");
    let stdout = check();
    assert!(
        stdout.contains("  on-failure: approve (a failed call counts as consent"),
        "{stdout}"
    );
}

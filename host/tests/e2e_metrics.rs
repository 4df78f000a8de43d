//! `/metrics` and `/status` of the real daemon after the situations that move them: each
//! metric documented in docs/operations.md ("Metrics") that no other end-to-end test reads,
//! and plugin load errors (in `/status`, the log and the metrics) until the file is fixed.
//!
//! Every test brings the situation about at the simulator or in the plugin directory, waits
//! for it there, and then reads the endpoint.

use std::path::Path;
use std::time::Duration;

use forewarn_simulator::{RequestRecord, StateSnapshot, Transition, stable_event_id};
use forewarn_test_support::harness::{
    ProbePlugin, Setup, TestEnv, accepted_approvals, http_get, install_bundled_plugin,
    summarize_state, wait_for,
};
use forewarn_test_support::{forewarn_binary, guests};

const WAIT: Duration = Duration::from_secs(60);

fn forewarn() -> &'static Path {
    forewarn_binary!()
}

fn scrape(admin: &str) -> String {
    http_get(admin, "/metrics").unwrap_or_else(|error| panic!("GET /metrics: {error}"))
}

/// The value of exactly `series` (name and labels) in a Prometheus text body.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// `series`' value, or a panic showing the whole scrape.
fn metric(text: &str, series: &str) -> f64 {
    value(text, series).unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}"))
}

/// Scrapes until `series` has `wanted`; the scrape.
fn wait_for_metric(admin: &str, series: &str, wanted: f64) -> String {
    wait_for(WAIT, &format!("{series} = {wanted}"), || {
        let text = scrape(admin);
        match value(&text, series) {
            Some(seen) if seen == wanted => Ok(text),
            seen => Err(format!("{series} = {seen:?}")),
        }
    })
}

fn readyz(admin: &str) -> Result<String, String> {
    http_get(admin, "/readyz")
}

/// A scenario of one event of `event_type` for vm-a, named `name`, with more `keys`.
fn one_event(name: &str, event_type: &str, keys: &str) -> String {
    format!(
        "name = \"{name}\"\nend_after = \"1s\"\n\n[[events]]\ntype = \"{event_type}\"\n{keys}\n"
    )
}

/// The GETs of scheduledevents the simulator answered.
fn polls(state: &StateSnapshot) -> impl Iterator<Item = &RequestRecord> {
    state
        .requests
        .iter()
        .filter(|request| request.method == "GET" && request.path.ends_with("/scheduledevents"))
}

/// The environment prepared (simulator running, config written), the daemon not started.
fn prepare(scenario: &str, speed: f64, plugins: &[ProbePlugin], policy: &[&str]) -> Setup {
    TestEnv::builder(forewarn())
        .scenario_text(scenario)
        .speed(speed)
        .plugins(plugins)
        .policy(policy)
        .prepare()
}

/// `forewarn_ready`, `forewarn_events_current`, `forewarn_events_finished_total` move with an
/// event that lb-drain drains for (the VM out of rotation, one event handled) and that ends
/// (back in rotation, none handled, one finished); `forewarn_build_info` names the version and
/// `forewarn_timeline_missed_total` stays 0.
#[test]
fn ready_current_and_finished_follow_an_event_from_its_drain_to_its_end() {
    let setup = prepare(
        &one_event(
            "drained",
            "Reboot",
            "appear_at = \"1s\"\nnotice = \"15m\"\nruns_for = \"20s\"",
        ),
        10.0,
        &[],
        &[],
    );
    install_bundled_plugin(
        &setup.dir.path().join("plugins"),
        "lb-drain",
        Some(
            "subscribe = [\"Reboot\"]\nbudget = \"5s\"\n[config]\ndrain-seconds = 2\n\
             [capabilities]\nreadiness = true\n",
        ),
    );
    let daemon = setup.start_daemon();
    let admin = daemon.admin_address(WAIT);
    let id = stable_event_id("drained", 0);

    wait_for(WAIT, "/readyz 503 while lb-drain drains", || {
        match readyz(&admin) {
            Err(error) if error.contains(" 503") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    let draining = scrape(&admin);
    assert_eq!(metric(&draining, "forewarn_ready"), 0.0, "{draining}");
    assert_eq!(
        metric(&draining, "forewarn_events_current"),
        1.0,
        "{draining}"
    );
    assert_eq!(
        metric(&draining, "forewarn_events_finished_total"),
        0.0,
        "{draining}"
    );
    let version = format!(
        "forewarn_build_info{{version=\"{}\"}}",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(metric(&draining, &version), 1.0, "{draining}");

    setup
        .simulator
        .wait_for_transition(WAIT, &id, Transition::Removed);
    wait_for_metric(&admin, "forewarn_events_finished_total", 1.0);
    // The counter follows the timeline, the gauge the daemon's published state: a scrape
    // between the two may see the event finished and still current (the fresh run of
    // cd28ed5 did), so the gauge is waited for too.
    let over = wait_for_metric(&admin, "forewarn_events_current", 0.0);
    assert_eq!(
        metric(&over, "forewarn_events_finished_total"),
        1.0,
        "{over}"
    );
    assert_eq!(metric(&over, "forewarn_ready"), 1.0, "{over}");
    assert_eq!(readyz(&admin), Ok("ready\n".to_owned()));
    assert_eq!(
        metric(&over, "forewarn_timeline_missed_total"),
        0.0,
        "{over}"
    );
    assert_eq!(
        accepted_approvals(&setup.simulator.state(), &id).len(),
        1,
        "lb-drain approved after its drain"
    );
}

/// `forewarn_approval_failures_total` counts the approval POSTs IMDS refused: as many as the
/// simulator answered 500, and the approval then goes through once.
#[test]
fn approval_failures_count_the_posts_imds_refused() {
    let scenario = format!(
        "{}\n[[faults]]\nkind = \"status\"\nstatus = 500\nmethods = [\"POST\"]\nuntil = \"8s\"\n",
        one_event(
            "refused-posts",
            "Reboot",
            "appear_at = \"1s\"\nnotice = \"15m\"\nruns_for = \"2s\""
        )
    );
    let setup = prepare(&scenario, 2.0, &[ProbePlugin::new("ok", "approve")], &[]);
    let daemon = setup.start_daemon();
    let admin = daemon.admin_address(WAIT);
    let id = stable_event_id("refused-posts", 0);
    let state =
        setup
            .simulator
            .wait_for_state(WAIT, "the approval accepted after the 500s", |state| {
                !accepted_approvals(state, &id).is_empty()
            });
    let refused = state
        .requests
        .iter()
        .filter(|request| request.method == "POST" && request.status == 500)
        .count();
    assert!(
        refused >= 1,
        "the simulator refused no POST: the test tests nothing; {}",
        summarize_state(&state)
    );
    let text = wait_for_metric(&admin, "forewarn_approvals_total", 1.0);
    assert_eq!(
        metric(&text, "forewarn_approval_failures_total"),
        refused as f64,
        "{}\n{text}",
        summarize_state(&state)
    );
}

/// `forewarn_events_not_approved_total` counts an event every plugin approved that the
/// policy (here `dry-run`) does not approve; IMDS gets no POST.
#[test]
fn an_event_the_policy_holds_back_counts_as_not_approved() {
    let setup = prepare(
        &one_event(
            "dry-run",
            "Reboot",
            "appear_at = \"1s\"\nnotice = \"15m\"\nruns_for = \"2s\"",
        ),
        10.0,
        &[ProbePlugin::new("ok", "approve")],
        &["dry-run = true"],
    );
    let daemon = setup.start_daemon();
    let admin = daemon.admin_address(WAIT);
    wait_for_metric(&admin, "forewarn_events_not_approved_total", 1.0);
    let state = setup.simulator.state();
    assert!(
        state.approvals.is_empty(),
        "dry run sent an approval: {}",
        summarize_state(&state)
    );
}

/// A 3 s Preempt for a chain that needs 20 s: `second` starts before `first` (which keeps
/// deferring) approved, once (`forewarn_plugin_turns_shortened_total`), and NotBefore minus
/// the safety margin passes with `first` still preparing, once
/// (`forewarn_events_prepared_late_total`). The event stays Scheduled 10 s past NotBefore so
/// that however late the daemon starts, it sees it prepare.
#[test]
fn a_short_notice_counts_the_shortened_turn_and_the_late_preparation_once() {
    let setup = prepare(
        &one_event(
            "short-chain",
            "Preempt",
            "appear_at = \"2s\"\nnotice = \"3s\"\nstarts_late_by = \"10s\"\nruns_for = \"1s\"",
        ),
        1.0,
        &[
            ProbePlugin::new("first", "defer").budget("10s"),
            ProbePlugin::new("second", "approve")
                .budget("10s")
                .after(&["first"]),
        ],
        &[],
    );
    let daemon = setup.start_daemon();
    let admin = daemon.admin_address(WAIT);
    let id = stable_event_id("short-chain", 0);
    setup
        .simulator
        .wait_for_transition(WAIT, &id, Transition::Removed);
    let text = wait_for_metric(&admin, "forewarn_events_finished_total", 1.0);
    assert_eq!(
        metric(&text, "forewarn_plugin_turns_shortened_total"),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "forewarn_events_prepared_late_total"),
        1.0,
        "{text}"
    );
    assert!(
        setup.simulator.state().approvals.is_empty(),
        "first never approved, so nothing is"
    );
}

/// A plugin file that fails to load shows in `/status` (`load_errors`: the file and why), in
/// the log (an error naming the file), and in `forewarn_plugin_load_errors` (1) and
/// `forewarn_plugin_load_failures_total` (1); once a good component replaces it, `/status`
/// lists it, the gauge drops to 0, the counter stays 1 and `forewarn_plugin_reloads_total`
/// counts the new set.
#[test]
fn a_plugin_that_fails_to_load_shows_in_status_the_log_and_the_metrics_until_fixed() {
    let setup = prepare(
        &one_event("load-errors", "Reboot", "appear_at = \"1h\""),
        1.0,
        &[ProbePlugin::new("good", "approve")],
        &[],
    );
    let plugins = setup.dir.path().join("plugins");
    let broken = plugins.join("broken.wasm");
    std::fs::write(&broken, b"garbage\n").expect("plant a broken plugin");
    let daemon = setup.start_daemon();
    let admin = daemon.admin_address(WAIT);

    let status = wait_for(WAIT, "the load error in /status", || {
        let body = http_get(&admin, "/status")?;
        let status: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        match status["load_errors"].as_array() {
            Some(errors) if !errors.is_empty() => Ok(status),
            _ => Err(body),
        }
    });
    let errors = status["load_errors"].as_array().expect("checked");
    assert_eq!(errors.len(), 1, "{status}");
    assert_eq!(errors[0]["file"], broken.display().to_string(), "{status}");
    let reason = errors[0]["error"].as_str().unwrap_or_default();
    assert!(reason.contains("not a WebAssembly file"), "{reason}");
    let names: Vec<&str> = status["plugins"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|plugin| plugin["name"].as_str())
        .collect();
    assert_eq!(names, ["good"], "{status}");
    let logged = daemon.lines().into_iter().any(|line| {
        line.text("level") == "ERROR" && line.text("file") == broken.display().to_string()
    });
    assert!(
        logged,
        "no error naming the file: {}",
        daemon.describe_for_failure()
    );
    let text = wait_for_metric(&admin, "forewarn_plugin_load_errors", 1.0);
    assert_eq!(
        metric(&text, "forewarn_plugin_load_failures_total"),
        1.0,
        "{text}"
    );
    assert_eq!(metric(&text, "forewarn_plugins_loaded"), 1.0, "{text}");
    let reloads_before = metric(&text, "forewarn_plugin_reloads_total");

    // Fixed the documented way: the good component renamed into place.
    let staged = setup.dir.path().join(".broken.wasm.tmp");
    std::fs::copy(guests::PROBE, &staged).expect("stage the fixed plugin");
    std::fs::rename(&staged, &broken).expect("rename it into place");
    let text = wait_for_metric(&admin, "forewarn_plugin_load_errors", 0.0);
    assert_eq!(
        metric(&text, "forewarn_plugin_load_failures_total"),
        1.0,
        "{text}"
    );
    assert_eq!(metric(&text, "forewarn_plugins_loaded"), 2.0, "{text}");
    assert!(
        metric(&text, "forewarn_plugin_reloads_total") > reloads_before,
        "{text}"
    );
    let body = http_get(&admin, "/status").expect("/status");
    let status: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(status["load_errors"], serde_json::json!([]), "{body}");
}

/// `forewarn_imds_poll_errors_total{kind="server"}` counts the polls IMDS answered 503 (as
/// many as the simulator served) and `forewarn_imds_consecutive_failures` is back to 0 once
/// a poll succeeds.
#[test]
fn failed_polls_are_counted_by_kind_and_the_streak_ends_with_a_success() {
    let scenario = format!(
        "{}\n[[faults]]\nkind = \"status\"\nstatus = 503\nfirst_requests = 3\n",
        one_event("failed-polls", "Reboot", "appear_at = \"1h\"")
    );
    let setup = prepare(&scenario, 1.0, &[], &[]);
    let daemon = setup.start_daemon();
    let admin = daemon.admin_address(WAIT);
    let state = setup
        .simulator
        .wait_for_state(WAIT, "a document served after the 503s", |state| {
            polls(state).any(|request| request.status == 200)
        });
    let refused = polls(&state)
        .filter(|request| request.status == 503)
        .count();
    assert_eq!(refused, 3, "{}", summarize_state(&state));
    let text = wait_for_metric(&admin, "forewarn_imds_documents_total", 1.0);
    assert_eq!(
        metric(&text, "forewarn_imds_poll_errors_total{kind=\"server\"}"),
        3.0,
        "{text}"
    );
    assert_eq!(
        metric(&text, "forewarn_imds_consecutive_failures"),
        0.0,
        "{text}"
    );
}

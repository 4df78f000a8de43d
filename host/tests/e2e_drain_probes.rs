//! Drains that end when the load balancer has noticed, tried from outside: a real HAProxy
//! balances two app servers, vm-a health-checked on its forewarn's `/readyz` (`inter 1s fall 3
//! rise 2`), vm-b on its own; a client sends requests through HAProxy without retries for the
//! whole of a Reboot, a Redeploy and a 10 s Spot eviction, with lb-drain exactly as shipped and
//! graceful-shutdown's stop action killing vm-a's app. Every request must succeed; the approval
//! must follow HAProxy's own DOWN (read from its stats socket) by the connection drain, not a
//! fixed window; vm-a comes back only after its app started again. And with nothing probing
//! `/readyz`, the drain says so and waits out its window.

use std::time::Duration;

use forewarn_simulator::Transition;
use forewarn_test_support::drain_drill::{DrillOutcome, LbDrain, run_drill, scenario};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, Simulator, http_get, install_bundled_plugin, summarize_state,
    transition_at_unix_ms, wait_for,
};

/// lb-drain.toml's shipped `connection-drain-seconds`, in ms.
const CONNECTION_DRAIN_MS: u64 = 2_000;
/// How far after HAProxy's DOWN plus the connection drain the approval may come: lb-drain
/// looks every 200 ms, the daemon then calls graceful-shutdown, whose stop action is a `kill`
/// (about 0.2 s on a quiet machine: bench-drain in BENCHMARKS.md has the figure). Generous,
/// so a loaded machine does not fail it (5.6 s after the DOWN was seen once with a Rust
/// build beside it), and still far inside the fixed window (15 s, bench-drain): an approval
/// that waited the window out fails it.
const APPROVAL_SLACK_MS: u64 = 5_000;
/// HAProxy's `rise 2` at `inter 1s`: how long vm-a takes to come back once `/readyz` passes.
const RISE_MS: u64 = 2_000;

fn drill(event_type: &str, notice: &str) -> DrillOutcome {
    run_drill(forewarn_binary!(), event_type, notice, &LbDrain::shipped())
}

/// Checks what the issue asks of a drain and returns the figures: appearance to DOWN, to the
/// stop action, to the approval (ms).
fn check_drill(drill: &DrillOutcome, name: &str) -> (u64, u64, u64) {
    let appeared_at = drill.at(Transition::Appeared);
    let relative = |unix_ms: u64| unix_ms as i64 - appeared_at as i64;
    let failed = drill.failed();
    assert!(
        failed.is_empty(),
        "{name}: {} of {} requests through HAProxy failed (times from the event's appearance): \
         {failed:?}; HAProxy saw vm-a {:?}",
        failed.len(),
        drill.sent.len(),
        drill.haproxy_history
    );
    let down_at = drill.down_at().unwrap_or_else(|| {
        panic!(
            "{name}: HAProxy never saw vm-a DOWN: {:?}",
            drill.haproxy_history
        )
    });
    let approved_at = drill.approved_at().unwrap_or_else(|| {
        panic!(
            "{name}: no approval at IMDS: {}",
            drill.daemon.describe_for_failure()
        )
    });
    assert!(
        down_at <= drill.stopped_at,
        "{name}: the app was stopped at {} ms, before HAProxy took vm-a out at {} ms",
        relative(drill.stopped_at),
        relative(down_at)
    );
    assert!(
        down_at <= approved_at && approved_at <= down_at + CONNECTION_DRAIN_MS + APPROVAL_SLACK_MS,
        "{name}: approved at {} ms; HAProxy's DOWN at {} ms plus the {CONNECTION_DRAIN_MS} ms \
         connection drain is {} ms (allowed {APPROVAL_SLACK_MS} ms after): {}",
        relative(approved_at),
        relative(down_at),
        relative(down_at + CONNECTION_DRAIN_MS),
        drill.daemon.describe_for_failure()
    );
    let first_pass_after_down = drill
        .haproxy_history
        .iter()
        .find(|(at, status)| *at > down_at && status != "DOWN")
        .map(|(at, _)| *at)
        .expect("vm-a came back UP (waited for)");
    assert!(
        drill.started_at <= first_pass_after_down,
        "{name}: HAProxy saw /readyz pass at {} ms, before the start action ran at {} ms",
        relative(first_pass_after_down),
        relative(drill.started_at)
    );
    let answered_again = drill
        .sent
        .iter()
        .find(|sent| sent.at > down_at && sent.outcome.as_deref() == Ok("vm-a"))
        .map(|sent| sent.at)
        .expect("vm-a answered again (waited for)");
    assert!(
        answered_again <= first_pass_after_down + RISE_MS + APPROVAL_SLACK_MS,
        "{name}: vm-a answered requests again {} ms after HAProxy's first passing check, more \
         than its rise time ({RISE_MS} ms) allows",
        answered_again - first_pass_after_down
    );
    assert!(
        drill.metrics.contains("forewarn_readyz_probers 1\n")
            && drill
                .metrics
                .contains("forewarn_drains_without_probes_total 0\n"),
        "{name}: the metrics should show HAProxy as the one prober: {}",
        drill.metrics
    );
    let figures = (
        down_at - appeared_at,
        drill.stopped_at - appeared_at,
        approved_at - appeared_at,
    );
    eprintln!(
        "{name}: {} requests, 0 failed; from the event's appearance: HAProxy DOWN {} ms, stop \
         action {} ms, approval {} ms",
        drill.sent.len(),
        figures.0,
        figures.1,
        figures.2
    );
    figures
}

#[test]
fn a_reboot_behind_haproxy_loses_no_request_and_ends_the_drain_when_haproxy_noticed() {
    let drill = drill("Reboot", "5m");
    check_drill(&drill, "Reboot");
}

#[test]
fn a_redeploy_behind_haproxy_loses_no_request_and_ends_the_drain_when_haproxy_noticed() {
    let drill = drill("Redeploy", "5m");
    check_drill(&drill, "Redeploy");
}

#[test]
fn a_spot_eviction_with_ten_seconds_notice_loses_no_request_behind_haproxy() {
    let drill = drill("Preempt", "10s");
    let (_, stop_ms, approval_ms) = check_drill(&drill, "Preempt");
    assert!(
        stop_ms < 10_000 && approval_ms < 10_000,
        "the app must be stopped and the eviction approved inside the 10 s notice: stop {stop_ms} \
         ms, approval {approval_ms} ms"
    );
}

/// With nothing probing `/readyz`, lb-drain says so (`/status`, the deferral, the metric) and
/// approves only once its window has passed.
#[test]
fn with_no_load_balancer_probing_the_drain_says_so_and_waits_out_its_window() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir_all(&plugin_dir).expect("plugin dir");
    install_bundled_plugin(
        &plugin_dir,
        "lb-drain",
        Some(
            "subscribe = [\"Reboot\"]\nbudget = \"5s\"\n[config]\ndrain-seconds = 3\n\
             [capabilities]\nreadiness = true\n",
        ),
    );
    let simulator = Simulator::builder(forewarn_binary!())
        .scenario_text(&scenario("Reboot", "5m", "1s"))
        .speed(1.0)
        .start_on_first_poll()
        .start();
    let config = DaemonConfig::vm_a(dir.path(), plugin_dir, &simulator.base_url);
    let config_path = dir.path().join("forewarn.toml");
    config.write(&config_path);
    let daemon = Daemon::start(forewarn_binary!(), &config_path);
    let admin = daemon.admin_address(Duration::from_secs(30));

    let status = wait_for(
        Duration::from_secs(60),
        "/status to warn of no probe",
        || {
            let status = http_get(&admin, "/status")?;
            let json: serde_json::Value =
                serde_json::from_str(&status).map_err(|error| format!("{error}: {status}"))?;
            if json["readiness"]["warning"].as_str().is_some() {
                Ok(json)
            } else {
                Err(status)
            }
        },
    );
    assert!(
        status["readiness"]["warning"]
            .as_str()
            .is_some_and(|warning| warning.contains("no load balancer probe seen on /readyz")),
        "{status}"
    );
    assert_eq!(status["readiness"]["probers"], 0, "{status}");
    let deferral = daemon
        .wait_for_phase(Duration::from_secs(30), None, "lb-drain", "prepare")
        .into_iter()
        .find(|decision| decision.plugin == "lb-drain" && decision.decision == "defer")
        .expect("lb-drain deferred");
    assert!(
        deferral
            .reason
            .contains("is the health probe pointed at forewarn?"),
        "{deferral:?}"
    );
    let state = wait_for(Duration::from_secs(60), "an approval at IMDS", || {
        let state = simulator.state();
        if state.approvals.iter().any(|approval| approval.accepted) {
            Ok(state)
        } else {
            Err(summarize_state(&state))
        }
    });
    let appeared_at =
        transition_at_unix_ms(&state, &deferral.event_id, Transition::Appeared).expect("appeared");
    let approved_at = state
        .approvals
        .iter()
        .find(|approval| approval.accepted)
        .map(|approval| approval.at_unix_ms)
        .expect("checked");
    assert!(
        approved_at >= appeared_at + 3_000,
        "approved {} ms after the event appeared, inside the 3 s window no prober shortened",
        approved_at - appeared_at
    );
    let metrics = http_get(&admin, "/metrics").unwrap_or_else(|error| error);
    assert!(
        metrics.contains("forewarn_drains_without_probes_total 1\n")
            && metrics.contains("forewarn_readyz_probers 0\n"),
        "{metrics}"
    );
}

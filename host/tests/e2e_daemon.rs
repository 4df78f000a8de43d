//! End-to-end tests of the daemon: the real `forewarn run` with probe plugins against
//! `forewarn simulate`, for every built-in scenario, policies, SIGKILL restarts and faults.
//!
//! Each test asserts at the simulator (what was approved, by which VM, and when) and at the
//! plugins (the "plugin decision" lines of the daemon's JSON log: which phases, in which
//! order). Scenarios run sped up; NotBefore-based checks compare scenario milliseconds.

use std::time::Duration;

use forewarn_daemon::log_messages::{APPROVAL_HELD, EVENT_TRANSITION, PLUGIN_DECISION};
use forewarn_simulator::{FaultKind, MalformedBody, StateSnapshot, Transition, stable_event_id};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, PluginDecision, ProbePlugin, TestEnv, TestEnvBuilder, accepted_approvals,
    assert_polite, same_id, summarize_state, transition_at, wait_until,
};
/// Every built-in event appears 5 s (scenario time) into the run.
const APPEAR_MS: u64 = 5_000;
const MINUTE_MS: u64 = 60_000;
/// Generous bound for any single wait; the scenarios take a few seconds.
const WAIT: Duration = Duration::from_secs(20);
/// The safety margin the tests configure: small, since scenarios run sped up.
const SAFETY_MARGIN: &str = "safety-margin-ms = 300";

/// One test's world: a temp dir with plugins, config and state; the simulator; the daemon.
type World = TestEnv;

/// The simulator on `scenario` at `speed`, `plugins`, and a config for vm-a with `policy`
/// lines plus the small safety margin; the daemon not yet started. The scenario's clock
/// starts at the daemon's first poll, so a notice of a few seconds (wall) is not eaten by a
/// slow start on a busy machine.
fn world_builder(
    scenario: &str,
    speed: f64,
    plugins: &[ProbePlugin],
    policy: &[&str],
) -> TestEnvBuilder {
    TestEnv::builder(forewarn_binary!())
        .scenario(scenario)
        .speed(speed)
        .plugins(plugins)
        .policy(policy)
        .policy(&[SAFETY_MARGIN])
        .wait(WAIT)
        .start_on_first_poll()
}

/// [`world_builder`], started.
fn start_world(scenario: &str, speed: f64, plugins: &[ProbePlugin], policy: &[&str]) -> World {
    world_builder(scenario, speed, plugins, policy).start()
}

/// The id the simulator gives the `index`-th event of a built-in scenario.
fn event_of(scenario: &str, index: usize) -> String {
    stable_event_id(scenario, index)
}

/// The phases `plugin` answered for `event_id`, repeated answers of a phase collapsed.
fn phases(decisions: &[PluginDecision], event_id: &str, plugin: &str) -> Vec<String> {
    let mut phases: Vec<String> = Vec::new();
    for decision in decisions {
        if !same_id(&decision.event_id, event_id) || decision.plugin != plugin {
            continue;
        }
        if phases.last() != Some(&decision.phase) {
            phases.push(decision.phase.clone());
        }
    }
    phases
}

/// Index of the first decision matching, for ordering checks.
fn first_index(
    decisions: &[PluginDecision],
    plugin: &str,
    phase: &str,
    decision: Option<&str>,
) -> Option<usize> {
    decisions.iter().position(|d| {
        d.plugin == plugin && d.phase == phase && decision.is_none_or(|want| d.decision == want)
    })
}

/// The lifecycle every approving plugin sees for an event it approves: prepare (approved at
/// IMDS by vm-a, exactly once, before NotBefore), then started, then ended-after-start.
/// `speed` leaves the event at least 3 s (wall) Started, so the plugin hears `started`
/// whatever the machine's load (a one-minute Freeze runs at speed 10, not 100).
fn assert_approved_lifecycle(scenario: &str, speed: f64, notice_ms: u64) {
    let world = start_world(
        scenario,
        speed,
        &[ProbePlugin::new("probe", "approve")],
        &[],
    );
    let id = event_of(scenario, 0);
    let decisions = world.wait_for_phase(&id, "probe", "ended-after-start");
    let state = world.state();
    let context = world.context();
    let approvals = accepted_approvals(&state, &id);
    assert_eq!(approvals.len(), 1, "one approval expected; {context}");
    assert_eq!(approvals[0].vm, "vm-a", "{context}");
    let not_before_ms = APPEAR_MS + notice_ms;
    assert!(
        approvals[0].at_scenario_ms < not_before_ms,
        "approved at {} ms, NotBefore at {not_before_ms} ms; {context}",
        approvals[0].at_scenario_ms
    );
    let started = transition_at(&state, &id, Transition::Started).expect("started");
    assert!(
        started < not_before_ms,
        "started by the approval; {context}"
    );
    assert_eq!(
        phases(&decisions, &id, "probe"),
        ["prepare", "started", "ended-after-start"],
        "{context}"
    );
    assert_eq!(
        state.transitions_of(&id),
        [
            Transition::Appeared,
            Transition::Started,
            Transition::Removed
        ]
    );
    assert_polite(&state);
}

#[test]
fn live_migration_is_prepared_approved_and_recovered() {
    assert_approved_lifecycle("live-migration", 10.0, 15 * MINUTE_MS);
}

#[test]
fn host_agent_maintenance_is_prepared_approved_and_recovered() {
    assert_approved_lifecycle("host-agent-maintenance", 10.0, 15 * MINUTE_MS);
}

#[test]
fn user_reboot_is_prepared_approved_and_recovered() {
    assert_approved_lifecycle("user-reboot", 100.0, 15 * MINUTE_MS);
}

#[test]
fn platform_redeploy_is_prepared_approved_and_recovered() {
    assert_approved_lifecycle("platform-redeploy", 100.0, 10 * MINUTE_MS);
}

#[test]
fn user_redeploy_is_prepared_approved_and_recovered() {
    assert_approved_lifecycle("user-redeploy", 100.0, 10 * MINUTE_MS);
}

#[test]
fn scaleset_terminate_is_prepared_approved_and_recovered() {
    assert_approved_lifecycle("scaleset-terminate", 100.0, 5 * MINUTE_MS);
}

/// Preempt has 30 s notice: at speed 10 that is 3 s of wall time, enough for a few polls.
/// The eviction then runs 2 min (12 s), so this test stops at the started phase.
#[test]
fn spot_preemption_is_approved_within_its_short_notice() {
    let world = start_world(
        "spot-preemption",
        10.0,
        &[ProbePlugin::new("probe", "approve")],
        &[],
    );
    let id = event_of("spot-preemption", 0);
    let decisions = world.wait_for_phase(&id, "probe", "started");
    let state = world.state();
    let context = world.context();
    let approvals = accepted_approvals(&state, &id);
    assert_eq!(approvals.len(), 1, "{context}");
    assert_eq!(approvals[0].vm, "vm-a");
    assert!(
        approvals[0].at_scenario_ms < APPEAR_MS + 30_000,
        "{context}"
    );
    assert_eq!(
        phases(&decisions, &id, "probe"),
        ["prepare", "started"],
        "{context}"
    );
    assert_polite(&state);
}

#[test]
fn hardware_failure_gets_started_and_recovery_but_no_prepare() {
    let world = start_world(
        "hardware-failure",
        100.0,
        &[ProbePlugin::new("probe", "approve")],
        &[],
    );
    let id = event_of("hardware-failure", 0);
    let decisions = world.wait_for_phase(&id, "probe", "ended-after-start");
    let state = world.state();
    let context = world.context();
    assert_eq!(
        phases(&decisions, &id, "probe"),
        ["started", "ended-after-start"],
        "{context}"
    );
    assert!(state.approvals.is_empty(), "nothing to approve; {context}");
    assert_eq!(
        state.transitions_of(&id),
        [Transition::Appeared, Transition::Removed]
    );
    assert_polite(&state);
}

#[test]
fn canceled_maintenance_is_not_approved_and_plugins_undo() {
    let world = start_world(
        "canceled-maintenance",
        100.0,
        &[ProbePlugin::new("probe", "defer")],
        &[],
    );
    let id = event_of("canceled-maintenance", 0);
    let decisions = world.wait_for_phase(&id, "probe", "ended-without-start");
    let state = world.state();
    let context = world.context();
    assert!(state.approvals.is_empty(), "{context}");
    assert_eq!(
        phases(&decisions, &id, "probe"),
        ["prepare", "ended-without-start"],
        "{context}"
    );
    assert_eq!(
        state.transitions_of(&id),
        [Transition::Appeared, Transition::Canceled]
    );
    assert_polite(&state);
}

/// Without `group-approval`, vm-a's plugins prepare but vm-a does not release an event
/// that also names vm-b and vm-c: it starts at NotBefore.
#[test]
fn multi_vm_event_is_not_approved_without_group_permission() {
    let world = start_world(
        "multi-vm",
        200.0,
        &[ProbePlugin::new("probe", "approve")],
        &[],
    );
    let id = event_of("multi-vm", 0);
    let state = world.wait_for_transition(&id, Transition::Started);
    let decisions = world.wait_for_phase(&id, "probe", "started");
    let context = world.context();
    assert!(state.approvals.is_empty(), "{context}");
    let started = transition_at(&state, &id, Transition::Started).expect("started");
    assert!(
        started >= APPEAR_MS + 15 * MINUTE_MS,
        "started at {started} ms, before NotBefore; {context}"
    );
    assert_eq!(
        phases(&decisions, &id, "probe"),
        ["prepare", "started"],
        "{context}"
    );
    let explained = world
        .daemon
        .lines()
        .iter()
        .any(|line| line.message() == APPROVAL_HELD && line.text("rule") == "group-approval");
    assert!(explained, "the log says why it did not approve; {context}");
    assert_polite(&state);
}

#[test]
fn multi_vm_event_is_approved_by_the_first_listed_vm_when_allowed() {
    let world = start_world(
        "multi-vm",
        100.0,
        &[ProbePlugin::new("probe", "approve")],
        &["group-approval = \"first-listed\""],
    );
    let id = event_of("multi-vm", 0);
    let state = world.wait_for_transition(&id, Transition::Started);
    let context = world.context();
    let approvals = accepted_approvals(&state, &id);
    assert_eq!(approvals.len(), 1, "{context}");
    assert_eq!(approvals[0].vm, "vm-a");
    assert!(
        approvals[0].at_scenario_ms < APPEAR_MS + 15 * MINUTE_MS,
        "{context}"
    );
    assert_polite(&state);
}

/// The reschedule restarts preparation: the plugin is asked to prepare again (attempt 1)
/// and sees the new NotBefore.
#[test]
fn rescheduled_event_is_prepared_again() {
    let world = start_world(
        "rescheduled",
        30.0,
        &[ProbePlugin::new("probe", "echo")],
        &[],
    );
    let id = event_of("rescheduled", 0);
    world.wait_for_transition(&id, Transition::Rescheduled);
    let echoes = |daemon: &Daemon| -> Vec<serde_json::Value> {
        daemon
            .decisions()
            .iter()
            .filter(|d| d.phase == "prepare" && same_id(&d.event_id, &id))
            .filter_map(|d| serde_json::from_str(&d.reason).ok())
            .collect()
    };
    let not_before_of = |echo: &serde_json::Value| echo["not_before_unix_ms"].as_u64();
    let first_not_before =
        forewarn_test_support::harness::wait_for(WAIT, "a first prepare", || {
            echoes(&world.daemon)
                .first()
                .and_then(not_before_of)
                .ok_or_else(|| world.context())
        });
    let after =
        forewarn_test_support::harness::wait_for(WAIT, "a prepare with the new NotBefore", || {
            echoes(&world.daemon)
                .into_iter()
                .find(|echo| not_before_of(echo) != Some(first_not_before))
                .ok_or_else(|| world.context())
        });
    let context = world.context();
    let moved_by = not_before_of(&after).expect("not before") as i64 - first_not_before as i64;
    // 2 min + 30 min instead of 5 s + 15 min: 16 min 55 s later, at speed 30 about 34 s.
    assert!(
        (30_000..38_000).contains(&moved_by),
        "moved by {moved_by} ms; {context}"
    );
    assert_eq!(after["attempt"], 1, "preparation starts over; {context}");
    assert!(world.state().approvals.is_empty(), "{context}");
}

/// `two-events`, with the Freeze running 10 minutes like the Reboot: at speed 100 its
/// built-in minute is 0.6 s of wall time, too short to be sure the plugin hears `started`
/// (it is one plugin, busy with the Reboot's calls meanwhile) on a loaded machine.
#[test]
fn two_events_at_once_are_handled_independently() {
    let scenario = include_str!("../simulator/scenarios/two-events.toml").replacen(
        "runs_for = \"1m\"",
        "runs_for = \"10m\"",
        1,
    );
    let world = world_builder(
        "two-events",
        100.0,
        &[ProbePlugin::new("probe", "approve")],
        &[],
    )
    .scenario_text(&scenario)
    .start();
    let freeze = event_of("two-events", 0);
    let reboot = event_of("two-events", 1);
    world.wait_for_phase(&freeze, "probe", "ended-after-start");
    let decisions = world.wait_for_phase(&reboot, "probe", "ended-after-start");
    let state = world.state();
    let context = world.context();
    for (id, appear_ms) in [(&freeze, APPEAR_MS), (&reboot, 10_000)] {
        let approvals = accepted_approvals(&state, id);
        assert_eq!(approvals.len(), 1, "{id}; {context}");
        assert!(approvals[0].at_scenario_ms < appear_ms + 15 * MINUTE_MS);
        assert_eq!(
            phases(&decisions, id, "probe"),
            ["prepare", "started", "ended-after-start"],
            "{id}; {context}"
        );
    }
    assert_polite(&state);
}

/// The demo scenario: the Reboot is approved and runs its course; the Redeploy, whose
/// plugin keeps deferring, is canceled and its plugin told so. At speed 10 the Reboot's
/// minute is 6 s of wall time: long enough to be sure the plugin hears `started`.
#[test]
fn full_lifecycle_approves_the_reboot_and_undoes_the_canceled_redeploy() {
    let world = start_world(
        "full-lifecycle",
        10.0,
        &[
            ProbePlugin::new("reboot-ok", "approve").subscribe(&["Reboot"]),
            ProbePlugin::new("redeploy-wait", "defer").subscribe(&["Redeploy"]),
        ],
        &[],
    );
    let reboot = event_of("full-lifecycle", 0);
    let redeploy = event_of("full-lifecycle", 1);
    world.wait_for_phase(&reboot, "reboot-ok", "ended-after-start");
    let decisions = world.wait_for_phase(&redeploy, "redeploy-wait", "ended-without-start");
    let state = world.state();
    let context = world.context();
    assert_eq!(accepted_approvals(&state, &reboot).len(), 1, "{context}");
    assert!(
        accepted_approvals(&state, &redeploy).is_empty(),
        "{context}"
    );
    assert_eq!(
        phases(&decisions, &reboot, "reboot-ok"),
        ["prepare", "started", "ended-after-start"]
    );
    assert_eq!(
        phases(&decisions, &redeploy, "redeploy-wait"),
        ["prepare", "ended-without-start"]
    );
    assert!(
        phases(&decisions, &reboot, "redeploy-wait").is_empty(),
        "subscriptions"
    );
    assert!(
        phases(&decisions, &redeploy, "reboot-ok").is_empty(),
        "subscriptions"
    );
    assert_polite(&state);
}

/// Nobody subscribed is not consent: a Freeze no plugin subscribes to starts at NotBefore,
/// unless `approve-unsubscribed` says to approve such events at once.
#[test]
fn an_event_no_plugin_subscribes_to_is_approved_only_when_configured() {
    let reboot_only = [ProbePlugin::new("probe", "approve").subscribe(&["Reboot"])];
    let id = event_of("live-migration", 0);
    let held = start_world("live-migration", 200.0, &reboot_only, &[]);
    let state = held.wait_for_transition(&id, Transition::Started);
    let context = held.context();
    assert!(state.approvals.is_empty(), "{context}");
    let started = transition_at(&state, &id, Transition::Started).expect("started");
    assert!(started >= APPEAR_MS + 15 * MINUTE_MS, "{context}");

    let allowed = start_world(
        "live-migration",
        200.0,
        &reboot_only,
        &["approve-unsubscribed = true"],
    );
    let state = allowed.wait_for_transition(&id, Transition::Started);
    let context = allowed.context();
    assert_eq!(accepted_approvals(&state, &id).len(), 1, "{context}");
    assert!(
        allowed.daemon.decisions().is_empty(),
        "no plugin calls; {context}"
    );
}

/// A plugin file that failed to load counts as a subscriber that has not approved: the
/// working plugin approves, and still nothing is approved at IMDS.
#[test]
fn a_plugin_that_failed_to_load_holds_the_approval_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let plugin_dir = dir.path().join("plugins");
    std::fs::create_dir_all(&plugin_dir).expect("plugin dir");
    std::fs::write(plugin_dir.join("broken.wasm"), b"not a component").expect("broken file");
    let world = world_builder(
        "live-migration",
        200.0,
        &[ProbePlugin::new("probe", "approve")],
        &[],
    )
    .in_dir(dir)
    .start();
    let id = event_of("live-migration", 0);
    let state = world.wait_for_transition(&id, Transition::Started);
    let decisions = world.wait_for_phase(&id, "probe", "started");
    let context = world.context();
    assert_eq!(
        phases(&decisions, &id, "probe"),
        ["prepare", "started"],
        "{context}"
    );
    assert!(state.approvals.is_empty(), "{context}");
    let started = transition_at(&state, &id, Transition::Started).expect("started");
    assert!(started >= APPEAR_MS + 15 * MINUTE_MS, "{context}");
}

/// The address space `ulimit -v` leaves the daemon in the next test: plenty for the daemon
/// and an instance or two allocated on demand (each reserves about 4 GiB), far too little
/// for a plugin's instance pool (about 258 GiB reserved at once).
const ADDRESS_SPACE_LIMIT_KIB: u64 = 64 * 1024 * 1024;

/// Where `ulimit -v` (systemd's `LimitAS=`) refuses the instance pool's address space, each
/// plugin's engine allocates on demand, and still loads what its compiler child compiled:
/// the plugin prepares and the event is approved at IMDS before its NotBefore.
#[test]
fn under_an_address_space_limit_plugins_still_load_prepare_and_approve() {
    let setup = world_builder(
        "live-migration",
        10.0,
        &[ProbePlugin::new("probe", "approve")],
        &[],
    )
    .prepare();
    let daemon = Daemon::start_with_address_space_limit(
        forewarn_binary!(),
        &setup.config,
        ADDRESS_SPACE_LIMIT_KIB,
    );
    let world = TestEnv {
        setup,
        daemon,
        earlier: Vec::new(),
    };
    let id = event_of("live-migration", 0);
    let decisions = world.wait_for_phase(&id, "probe", "prepare");
    let context = world.context();
    // The plugin's first answer is its prepare (a `started` may follow at once).
    assert_eq!(
        phases(&decisions, &id, "probe").first().map(String::as_str),
        Some("prepare"),
        "{context}"
    );
    let state = world.wait_for_transition(&id, Transition::Started);
    let approvals = accepted_approvals(&state, &id);
    assert_eq!(approvals.len(), 1, "one approval expected; {context}");
    assert!(
        approvals[0].at_scenario_ms < APPEAR_MS + 15 * MINUTE_MS,
        "approved at {} ms, after NotBefore; {context}",
        approvals[0].at_scenario_ms
    );
}

#[test]
fn observe_only_prepares_but_never_approves() {
    let world = start_world(
        "live-migration",
        200.0,
        &[ProbePlugin::new("probe", "approve")],
        &["observe-only = true"],
    );
    let id = event_of("live-migration", 0);
    let state = world.wait_for_transition(&id, Transition::Started);
    let decisions = world.wait_for_phase(&id, "probe", "started");
    let context = world.context();
    assert!(state.approvals.is_empty(), "{context}");
    let started = transition_at(&state, &id, Transition::Started).expect("started");
    assert!(
        started >= APPEAR_MS + 15 * MINUTE_MS,
        "started at NotBefore; {context}"
    );
    assert_eq!(
        phases(&decisions, &id, "probe"),
        ["prepare", "started"],
        "{context}"
    );
    assert_polite(&state);
}

#[test]
fn dry_run_prepares_and_logs_but_never_approves() {
    let world = start_world(
        "live-migration",
        200.0,
        &[ProbePlugin::new("probe", "approve")],
        &["dry-run = true"],
    );
    let id = event_of("live-migration", 0);
    let state = world.wait_for_transition(&id, Transition::Started);
    let context = world.context();
    assert!(state.approvals.is_empty(), "{context}");
    let started = transition_at(&state, &id, Transition::Started).expect("started");
    assert!(
        started >= APPEAR_MS + 15 * MINUTE_MS,
        "started at NotBefore; {context}"
    );
    // Waited for: the log is read on a thread, and the simulator said the event started.
    wait_until(
        WAIT,
        "the log to say what would be approved",
        || {
            world
                .daemon
                .lines()
                .iter()
                .any(|line| line.message() == APPROVAL_HELD && line.text("rule") == "dry-run")
        },
        || format!("the log says what would be approved; {context}"),
    );
    assert_polite(&state);
}

/// A built-in rule approves at once; the (deferring) plugin is never called.
fn assert_rule_approves_without_plugins(scenario: &str, policy: &str) {
    let world = start_world(
        scenario,
        100.0,
        &[ProbePlugin::new("probe", "defer")],
        &[policy],
    );
    let id = event_of(scenario, 0);
    let state = world.wait_for_transition(&id, Transition::Removed);
    // The daemon has seen the event end once it logs the transition; by then every call
    // it would make has been made.
    world
        .daemon
        .wait_for_decisions(WAIT, "the daemon to see the event end", |_| {
            world
                .daemon
                .lines_with_message(EVENT_TRANSITION)
                .iter()
                .any(|line| line.text("transition").contains("ended"))
        });
    let context = world.context();
    let approvals = accepted_approvals(&state, &id);
    assert_eq!(approvals.len(), 1, "{context}");
    assert!(
        approvals[0].at_scenario_ms < APPEAR_MS + 10 * MINUTE_MS,
        "{context}"
    );
    assert!(
        world.daemon.decisions().is_empty(),
        "no plugin calls; {context}"
    );
}

#[test]
fn approve_user_initiated_rule_approves_without_plugins() {
    assert_rule_approves_without_plugins("user-redeploy", "approve-user-initiated = true");
}

#[test]
fn approve_short_freeze_rule_approves_without_plugins() {
    assert_rule_approves_without_plugins("live-migration", "approve-freeze-shorter-than = 10");
}

/// A plugin that defers is asked again, attempt after attempt, and the event is approved
/// (once) only after it approves.
#[test]
fn deferring_plugin_is_asked_again_until_it_approves() {
    let world = start_world(
        "user-reboot",
        100.0,
        &[ProbePlugin::new("slow", "defer-until-attempt").config("attempts", "4")],
        &[],
    );
    let id = event_of("user-reboot", 0);
    let state = world.wait_for_transition(&id, Transition::Started);
    let decisions = world.wait_for_phase(&id, "slow", "started");
    let context = world.context();
    let prepares: Vec<(&str, &str)> = decisions
        .iter()
        .filter(|d| d.phase == "prepare")
        .map(|d| (d.decision.as_str(), d.reason.as_str()))
        .collect();
    assert_eq!(
        prepares,
        [
            ("defer", "attempt=1"),
            ("defer", "attempt=2"),
            ("defer", "attempt=3"),
            ("approve", "")
        ],
        "{context}"
    );
    let approvals = accepted_approvals(&state, &id);
    assert_eq!(approvals.len(), 1, "{context}");
    let approved_by_plugin = decisions
        .iter()
        .find(|d| d.decision == "approve")
        .expect("approve")
        .at_unix_ms;
    assert!(approvals[0].at_unix_ms >= approved_by_plugin, "{context}");
    assert_polite(&state);
}

/// `second` runs after `first`: it is asked only once `first` approved, and recovers first.
#[test]
fn plugins_prepare_in_dependency_order_and_recover_in_reverse() {
    let world = start_world(
        "user-reboot",
        100.0,
        // Short budgets: at 100x the notice is 9 s, and with the default 10 s each the
        // chain would not fit, so `second` would get its turn without waiting for `first`.
        &[
            ProbePlugin::new("first", "defer-until-attempt")
                .config("attempts", "3")
                .budget("2s"),
            ProbePlugin::new("second", "approve")
                .after(&["first"])
                .budget("2s"),
        ],
        &[],
    );
    let id = event_of("user-reboot", 0);
    world.wait_for_phase(&id, "first", "ended-after-start");
    let decisions = world.wait_for_phase(&id, "second", "ended-after-start");
    let context = world.context();
    let first_approved =
        first_index(&decisions, "first", "prepare", Some("approve")).expect("first approved");
    let second_asked = first_index(&decisions, "second", "prepare", None).expect("second asked");
    assert!(
        first_approved < second_asked,
        "second asked before first approved; {context}"
    );
    let second_recovered = first_index(&decisions, "second", "ended-after-start", None).unwrap();
    let first_recovered = first_index(&decisions, "first", "ended-after-start", None).unwrap();
    assert!(
        second_recovered < first_recovered,
        "recovery in reverse order; {context}"
    );
    let state = world.state();
    assert_eq!(accepted_approvals(&state, &id).len(), 1, "{context}");
    assert_polite(&state);
}

/// A Reboot that runs for one minute after it starts, for the restart test.
const CRASH_SCENARIO: &str = r#"
name = "crash"
end_after = "1s"

[[events]]
id = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
type = "Reboot"
appear_at = "5s"
notice = "15m"
runs_for = "1m"
"#;

/// SIGKILL while `second` (after `first`) still defers; the restart resumes: `first` is
/// not asked to prepare again, `second` goes on counting attempts from the journal (from
/// its first attempt at least: re-asks are journaled in groups), the
/// event is approved once. Then SIGKILL again after the start, let the event end while the
/// daemon is down, and the next daemon delivers the recovery phase (in reverse order).
#[test]
fn restart_after_sigkill_resumes_the_event() {
    let mut world = world_builder(
        "crash",
        20.0,
        &[
            ProbePlugin::new("first", "approve"),
            ProbePlugin::new("second", "defer-until-attempt")
                .after(&["first"])
                .config("attempts", "8"),
        ],
        &[],
    )
    .scenario_text(CRASH_SCENARIO)
    .start();
    let id = "C7061BAC-AFDC-4513-B24B-AA5F13A16123";
    world
        .daemon
        .wait_for_decisions(WAIT, "second to defer twice", |decisions| {
            decisions
                .iter()
                .filter(|d| d.plugin == "second" && d.decision == "defer")
                .count()
                >= 2
        });
    world.kill_daemon();
    let before = world.daemon.decisions();
    let last_attempt_before = last_attempt(&before, "second");
    assert_eq!(phases(&before, id, "first"), ["prepare"]);
    assert!(world.state().approvals.is_empty(), "{}", world.context());

    world.restart_daemon();
    let decisions = world.wait_for_phase(id, "second", "started");
    world.wait_for_phase(id, "first", "started");
    let context = world.context();
    assert!(
        first_index(&decisions, "first", "prepare", None).is_none(),
        "first prepared again after the restart; {context}"
    );
    let first_attempt_after = decisions
        .iter()
        .find(|d| d.plugin == "second" && d.phase == "prepare")
        .map(|d| attempt_of(&d.reason).unwrap_or(u32::MAX))
        .expect("second asked again");
    // Attempts go on from the journal, not from 1: a first attempt is on disk before its
    // call. Asking again a plugin that deferred is journaled in groups (within a second,
    // docs/operations.md "Disk writes have a rate"), so a SIGKILL may lose the last few
    // re-asks; they are asked again.
    assert!(
        first_attempt_after >= 2 && first_attempt_after <= last_attempt_before + 1,
        "attempts continue from the journal ({last_attempt_before} before, {first_attempt_after} after); {context}"
    );
    assert_eq!(
        phases(&decisions, id, "second"),
        ["prepare", "started"],
        "{context}"
    );

    world.kill_daemon();
    world.wait_for_transition(id, Transition::Removed);
    world.restart_daemon();
    world.wait_for_phase(id, "first", "ended-after-start");
    let decisions = world.daemon.decisions();
    let context = world.context();
    assert_eq!(
        phases(&decisions, id, "second"),
        ["ended-after-start"],
        "{context}"
    );
    assert_eq!(
        phases(&decisions, id, "first"),
        ["ended-after-start"],
        "{context}"
    );
    let second = first_index(&decisions, "second", "ended-after-start", None).unwrap();
    let first = first_index(&decisions, "first", "ended-after-start", None).unwrap();
    assert!(second < first, "recovery in reverse order; {context}");
    let state = world.state();
    assert_eq!(
        accepted_approvals(&state, id).len(),
        1,
        "approved exactly once; {context}"
    );
    assert_eq!(state.approvals.len(), 1, "{context}");
}

/// A Reboot whose GETs are held 30 s from just before it appears until 12 s, so the daemon
/// approves it and no document shows it Started for at least 10 s: the test kills the
/// daemon in that time (as when the VM reboots right after the approval); it ends while the
/// daemon is down. A GET from 12 s on is answered at once.
const UNSEEN_START_SCENARIO: &str = r#"
name = "unseen-start"
end_after = "1s"

[[events]]
id = "5EE00000-0000-0000-0000-000000000001"
type = "Reboot"
appear_at = "2s"
notice = "15m"
runs_for = "1s"

[[faults]]
kind = "delay"
delay = "30s"
after_approval = true
until = "12s"
"#;
/// When the GETs of [`UNSEEN_START_SCENARIO`] are answered at once again (scenario ms).
const UNSEEN_START_HELD_UNTIL_MS: u64 = 12_000;

/// The daemon approves, dies before it sees the event Started, and the event is gone when
/// it comes back. IMDS accepted the approval, and an approved event starts (the docs allow a
/// rare cancel while other tenants are still to approve), so the recovery the plugins get
/// should be ended-after-start (the VM went through the Reboot), not ended-without-start
/// (which tells them nothing happened).
#[test]
fn approved_event_that_ended_while_down_is_recovered_as_started() {
    let mut world = world_builder(
        "unseen-start",
        1.0,
        &[ProbePlugin::new("probe", "approve")],
        &[],
    )
    .scenario_text(UNSEEN_START_SCENARIO)
    .start();
    let id = "5EE00000-0000-0000-0000-000000000001";
    world
        .simulator()
        .wait_for_state(WAIT, "the approval", |state| {
            !accepted_approvals(state, id).is_empty()
        });
    world.kill_daemon();
    // The negative check below keys on the transition lines; that the daemon logged the
    // event's appearance with the same message and field shows the check can fail.
    assert!(
        world
            .daemon
            .transitions("scheduled")
            .iter()
            .any(|line| same_id(line.text("event_id"), id)),
        "the daemon logged the event's appearance; {}",
        world.daemon.describe_for_failure()
    );
    assert!(
        world.daemon.transitions("started").is_empty(),
        "the test needs the daemon killed before it saw the start; {}",
        world.daemon.describe_for_failure()
    );
    assert_eq!(phases(&world.daemon.decisions(), id, "probe"), ["prepare"]);
    world.wait_for_transition(id, Transition::Removed);
    // The next daemon's GETs are answered at once (not held 30 s).
    world
        .simulator()
        .wait_for_state(WAIT, "the end of the held GETs", |state| {
            state.now_scenario_ms >= UNSEEN_START_HELD_UNTIL_MS
        });
    world.restart_daemon();
    let decisions = world
        .daemon
        .wait_for_decisions(WAIT, "a recovery phase", |decisions| {
            decisions.iter().any(|d| d.phase.starts_with("ended"))
        });
    let context = world.context();
    let recovery: Vec<&str> = decisions
        .iter()
        .filter(|d| d.phase.starts_with("ended"))
        .map(|d| d.phase.as_str())
        .collect();
    assert_eq!(
        recovery,
        ["ended-after-start"],
        "an accepted approval means the event started; {context}"
    );
}

/// The `N` of a "attempt=N" reason.
fn attempt_of(reason: &str) -> Option<u32> {
    reason.strip_prefix("attempt=")?.parse().ok()
}

/// The last attempt number `plugin` reported deferring.
fn last_attempt(decisions: &[PluginDecision], plugin: &str) -> u32 {
    decisions
        .iter()
        .filter(|d| d.plugin == plugin)
        .filter_map(|d| attempt_of(&d.reason))
        .max()
        .unwrap_or(0)
}

/// Speed of the fault scenarios.
const FAULT_SPEED: f64 = 10.0;

/// A scenario for the fault tests: one Reboot appearing at 30 s with 15 min notice that
/// runs `runs_for` once started (at speed 10: appears 3 s after the daemon's first poll,
/// 90 s of notice), plus `extra` (`[[faults]]` tables, further events; the windowed ones
/// open at 25 s, after the daemon polled a few times).
fn fault_scenario(name: &str, runs_for: &str, extra: &str) -> String {
    format!(
        r#"
name = "{name}"
end_after = "1s"

[[events]]
id = "{FAULT_EVENT}"
type = "Reboot"
appear_at = "30s"
notice = "15m"
runs_for = "{runs_for}"

{extra}
"#
    )
}

const FAULT_EVENT: &str = "FA000000-0000-0000-0000-000000000001";

/// Runs a fault scenario with an approving plugin and checks that every event in `ids` is
/// approved once and recovered, that the daemon kept running, and that it stayed within 5
/// requests per second (arrivals at the simulator).
fn assert_survives_fault(name: &str, extra: &str, ids: &[&str]) -> StateSnapshot {
    let scenario = fault_scenario(name, "20s", extra);
    let probe = ProbePlugin::new("probe", "approve");
    assert_survives_fault_with(&scenario, probe, ids)
}

/// [`assert_survives_fault`] with a whole scenario text and the plugin named "probe".
fn assert_survives_fault_with(scenario: &str, probe: ProbePlugin, ids: &[&str]) -> StateSnapshot {
    let mut world = world_builder("faults", FAULT_SPEED, &[probe], &[])
        .scenario_text(scenario)
        .start();
    for id in ids {
        world.wait_for_phase(id, "probe", "ended-after-start");
    }
    let decisions = world.daemon.decisions();
    let state = world.state();
    let context = world.context();
    for id in ids {
        assert_eq!(accepted_approvals(&state, id).len(), 1, "{id}; {context}");
        assert_eq!(
            phases(&decisions, id, "probe"),
            ["prepare", "started", "ended-after-start"],
            "{id}; {context}"
        );
    }
    assert_polite(&state);
    assert!(
        !world.daemon.has_exited(),
        "the daemon kept running; {context}"
    );
    state
}

/// Faulty answers happened at the simulator (so the test did test something): it served
/// the status fault, and the request log shows the answer.
fn assert_status_seen(state: &StateSnapshot, status: u16) {
    assert!(
        state
            .faults_of(FaultKind::Status)
            .iter()
            .any(|fault| fault.status == Some(status)),
        "the simulator served no {status} fault: {:?}",
        state.faults
    );
    assert!(
        state
            .requests
            .iter()
            .any(|request| request.status == status),
        "no {status} answer in the request log: {}",
        summarize_state(state)
    );
}

/// 429 for 2 s (wall) while the event appears: the daemon slows down, then sees it.
#[test]
fn fault_429_burst_loses_nothing() {
    let faults = "[[faults]]\nkind = \"status\"\nstatus = 429\nfrom = \"25s\"\nuntil = \"45s\"\n";
    let state = assert_survives_fault("f429", faults, &[FAULT_EVENT]);
    assert_status_seen(&state, 429);
}

#[test]
fn fault_410_for_a_while_loses_nothing() {
    let faults = "[[faults]]\nkind = \"status\"\nstatus = 410\nfrom = \"25s\"\nuntil = \"45s\"\n";
    let state = assert_survives_fault("f410", faults, &[FAULT_EVENT]);
    assert_status_seen(&state, 410);
}

/// 500s on GET while the event appears, and on POST a while longer: polls back off, the
/// approval is retried.
#[test]
fn fault_500s_lose_nothing() {
    let faults = "[[faults]]\nkind = \"status\"\nstatus = 500\nfrom = \"25s\"\nuntil = \"40s\"\n\n[[faults]]\nkind = \"status\"\nstatus = 500\nfrom = \"25s\"\nuntil = \"55s\"\nmethods = [\"POST\"]\n";
    let state = assert_survives_fault("f500", faults, &[FAULT_EVENT]);
    assert_status_seen(&state, 500);
}

/// Every answer, GET and POST, held 400 ms.
#[test]
fn fault_slow_responses_lose_nothing() {
    let faults = "[[faults]]\nkind = \"delay\"\ndelay = \"400ms\"\nmethods = [\"GET\", \"POST\"]\n";
    let state = assert_survives_fault("fslow", faults, &[FAULT_EVENT]);
    let delayed = state.faults_of(FaultKind::Delay);
    for method in ["GET", "POST"] {
        assert!(
            delayed
                .iter()
                .any(|fault| fault.method == method && fault.delay_ms == Some(400)),
            "the simulator held no {method} for 400 ms: {:?}",
            state.faults
        );
    }
}

/// The first GET held 3 s (the docs: "expect a delayed response in your first call").
#[test]
fn fault_slow_first_call_loses_nothing() {
    let faults = "[[faults]]\nkind = \"slow-first-call\"\ndelay = \"3s\"\n";
    let state = assert_survives_fault("ffirst", faults, &[FAULT_EVENT]);
    let held = state.faults_of(FaultKind::SlowFirstCall);
    assert_eq!(
        held.len(),
        1,
        "only the first GET is held: {:?}",
        state.faults
    );
    assert_eq!(held[0].delay_ms, Some(3_000));
    assert_eq!(held[0].method, "GET");
}

/// Garbage, then truncated JSON, while the event is known and still Scheduled (the plugin
/// defers until its 12th attempt, 2.2 s after it first sees the event, after the faults):
/// the daemon keeps the event through the unreadable documents, then approves it. The event
/// runs 6 s so that the daemon, backing off after the failures, sees it Started.
#[test]
fn fault_malformed_json_loses_nothing() {
    let faults = "[[faults]]\nkind = \"malformed\"\nbody = \"garbage\"\nfrom = \"33s\"\nuntil = \"40s\"\n\n[[faults]]\nkind = \"malformed\"\nbody = \"truncated\"\nfrom = \"40s\"\nuntil = \"48s\"\n";
    let probe = ProbePlugin::new("probe", "defer-until-attempt").config("attempts", "12");
    let scenario = fault_scenario("fjson", "60s", faults);
    let state = assert_survives_fault_with(&scenario, probe, &[FAULT_EVENT]);
    let served = state.faults_of(FaultKind::Malformed);
    for (body, from_ms) in [
        (MalformedBody::Garbage, 33_000),
        (MalformedBody::Truncated, 40_000),
    ] {
        let while_known: Vec<_> = served
            .iter()
            .filter(|fault| fault.body == Some(body) && fault.at_scenario_ms >= from_ms)
            .collect();
        assert!(
            !while_known.is_empty(),
            "the simulator served no {body:?} document: {:?}",
            state.faults
        );
    }
    let appeared = transition_at(&state, FAULT_EVENT, Transition::Appeared).expect("appeared");
    let started = transition_at(&state, FAULT_EVENT, Transition::Started).expect("started");
    assert!(
        served
            .iter()
            .all(|fault| appeared <= fault.at_scenario_ms && fault.at_scenario_ms < started),
        "the malformed documents were served while the event was known and Scheduled \
         (appeared {appeared} ms, started {started} ms): {:?}",
        state.faults
    );
}

/// DocumentIncarnation drops to 1 while the first event is known; a second event appears
/// after the reset (with an incarnation lower than one already seen): both are handled.
#[test]
fn fault_incarnation_reset_loses_nothing() {
    let extra = "[[events]]\nid = \"FA000000-0000-0000-0000-000000000002\"\ntype = \"Freeze\"\nappear_at = \"45s\"\nnotice = \"15m\"\nduration_seconds = 5\nruns_for = \"20s\"\n\n[[faults]]\nkind = \"incarnation-reset\"\nat = \"40s\"\n";
    let second = "FA000000-0000-0000-0000-000000000002";
    let state = assert_survives_fault("freset", extra, &[FAULT_EVENT, second]);
    let resets = state.faults_of(FaultKind::IncarnationReset);
    assert_eq!(
        resets.len(),
        1,
        "the reset was served once: {:?}",
        state.faults
    );
    let first_appeared =
        transition_at(&state, FAULT_EVENT, Transition::Appeared).expect("appeared");
    let second_appeared = transition_at(&state, second, Transition::Appeared).expect("appeared");
    assert!(
        first_appeared <= resets[0].at_scenario_ms && resets[0].at_scenario_ms <= second_appeared,
        "the daemon read the reset document while the first event was known and before the \
         second appeared: {:?}",
        resets[0]
    );
    assert!(
        resets[0]
            .incarnation
            .is_some_and(|incarnation| incarnation < 3),
        "the document served after the reset had a low incarnation: {:?}",
        resets[0]
    );
}

/// Latency figures for the report (not asserted): from the simulator publishing a new
/// event to the first plugin call, and from the last plugin approval to the POST.
/// Run with `cargo test -p forewarn-host --test e2e_daemon -- --ignored --nocapture measure`.
#[test]
#[ignore = "measurement, prints figures"]
fn measure_latencies() {
    let mut scenario = String::from("name = \"measure\"\nend_after = \"1s\"\n");
    for index in 0..10 {
        scenario.push_str(&format!(
            "\n[[events]]\nid = \"AE000000-0000-0000-0000-{index:012}\"\ntype = \"Freeze\"\nappear_at = \"{}ms\"\nnotice = \"15m\"\nduration_seconds = 5\nruns_for = \"1500ms\"\n",
            2_000 + index * 1_130
        ));
    }
    for poll_interval in ["250ms", "1s"] {
        measure_with(&scenario, poll_interval);
    }
}

fn measure_with(scenario: &str, poll_interval: &str) {
    let world = world_builder("measure", 1.0, &[ProbePlugin::new("probe", "approve")], &[])
        .scenario_text(scenario)
        .poll_interval(poll_interval)
        .start();
    let ids: Vec<String> = (0..10)
        .map(|i| format!("AE000000-0000-0000-0000-{i:012}"))
        .collect();
    for id in &ids {
        world.wait_for_phase(id, "probe", "ended-after-start");
    }
    let state = world.state();
    let decisions = world.daemon.decisions();
    let mut to_call = Vec::new();
    let mut to_post = Vec::new();
    for id in &ids {
        let appeared = state
            .history
            .iter()
            .find(|r| same_id(&r.event_id, id) && r.transition == Transition::Appeared)
            .expect("appeared")
            .at_unix_ms;
        let approved = decisions
            .iter()
            .find(|d| same_id(&d.event_id, id) && d.phase == "prepare" && d.decision == "approve")
            .expect("approved");
        let elapsed_ms: u64 = world
            .daemon
            .lines_with_message(PLUGIN_DECISION)
            .iter()
            .find(|l| same_id(l.text("event_id"), id) && l.text("phase") == "prepare")
            .and_then(|l| l.fields["elapsed_ms"].as_u64())
            .unwrap_or(0);
        let call_started = approved.at_unix_ms.saturating_sub(elapsed_ms);
        let posted = accepted_approvals(&state, id)[0].at_unix_ms;
        to_call.push(call_started as i64 - appeared as i64);
        to_post.push(posted as i64 - approved.at_unix_ms as i64);
    }
    eprintln!("poll interval {poll_interval}, 10 events, speed 1");
    eprintln!("appeared -> first plugin call (ms): {to_call:?}");
    eprintln!("last plugin approval -> approval POST at the simulator (ms): {to_post:?}");
}

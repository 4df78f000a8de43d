//! Reliability suites against the real `forewarn run`: hostile plugins beside a good one, a
//! long run through every kind of IMDS fault, and SIGKILL at random points (seeded).
//!
//! Each test is bounded (scenarios run sped up, every wait has a deadline) and asserts at the
//! simulator (approvals, requests, history) and in the daemon's JSON log (plugin decisions).
//! Set FOREWARN_CRASH_SEED=N to replay a crash-safety run; the seed used is always printed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use forewarn_daemon::log_messages::{
    CHANGE_LOG_QUARANTINED, EVENT_TRANSITION, JOURNAL_QUARANTINED, PREPARING_LATE,
};
use forewarn_daemon::ops::status::StatusSnapshot;
use forewarn_daemon::pipeline::state::ApprovalKind;
use forewarn_simulator::{FaultKind, StateSnapshot, Transition, stable_event_id};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, PluginDecision, ProbePlugin, Setup, TestEnv, accepted_approvals, assert_polite,
    http_get, now_unix_ms, same_id, summarize_state, transition_at, transition_at_unix_ms,
    wait_for,
};

/// A temp dir with the scenario `scenario_text` played at `speed` from the daemon's first
/// poll, `plugins`, and a config for vm-a polling every `poll_interval` with `policy` lines;
/// the daemon not yet started.
fn new_setup(
    scenario_text: &str,
    speed: f64,
    plugins: &[ProbePlugin],
    poll_interval: &str,
    policy: &[&str],
) -> Setup {
    TestEnv::builder(forewarn_binary!())
        .scenario_text(scenario_text)
        .speed(speed)
        .plugins(plugins)
        .poll_interval(poll_interval)
        .policy(policy)
        .start_on_first_poll()
        .prepare()
}

fn accepted_approvals_of(state: &StateSnapshot, id: &str) -> usize {
    accepted_approvals(state, id).len()
}

/// Every EventId with an accepted approval, upper-cased, with how many times.
fn accepted_approval_counts(state: &StateSnapshot) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for record in state.approvals.iter().filter(|record| record.accepted) {
        *counts
            .entry(record.event_id.to_ascii_uppercase())
            .or_insert(0) += 1;
    }
    counts
}

fn decisions_of<'a>(
    decisions: &'a [PluginDecision],
    id: &str,
    plugin: &str,
) -> Vec<&'a PluginDecision> {
    decisions
        .iter()
        .filter(|decision| same_id(&decision.event_id, id) && decision.plugin == plugin)
        .collect()
}

// ---- hostile plugins ------------------------------------------------------------------

/// A Reboot (every plugin subscribes) whose NotBefore comes 20 s of wall time after it
/// appears and that stays Scheduled past it until the test starts it (the console's start,
/// once the daemon was seen asking past NotBefore − margin; `starts_late_by` is only a
/// backstop 5 minutes of wall time on), so the late window lasts as long as a loaded
/// machine needs; and a Freeze (only the good plugin subscribes) appearing 2 s later.
const HOSTILE_SCENARIO: &str = r#"
name = "hostile"
end_after = "1s"

[[events]]
type = "Reboot"
appear_at = "2s"
notice = "40s"
starts_late_by = "10m"
runs_for = "4s"

[[events]]
type = "Freeze"
appear_at = "6s"
notice = "10m"
runs_for = "2s"
"#;
const HOSTILE_SPEED: f64 = 2.0;
const HOSTILE_MARGIN_MS: u64 = 2_000;

/// The hostile scenario with `plugins`, polled every 300 ms, with the hostile safety margin.
fn hostile_setup(plugins: &[ProbePlugin]) -> Setup {
    let margin = format!("safety-margin-ms = {HOSTILE_MARGIN_MS}");
    new_setup(
        HOSTILE_SCENARIO,
        HOSTILE_SPEED,
        plugins,
        "300ms",
        &[&margin],
    )
}

#[test]
fn hostile_plugins_leave_the_daemon_and_a_good_plugin_unaffected() {
    let plugins = [
        ProbePlugin::new("good", "approve"),
        // Calls the host's `config` in a tight loop until cut off.
        ProbePlugin::new("hammer", "host-call-loop")
            .subscribe(&["Reboot"])
            .budget("1s"),
        // Defers with an 8 MiB reason.
        ProbePlugin::new("huge", "huge-reason").subscribe(&["Reboot"]),
        // Defers forever.
        ProbePlugin::new("stubborn", "defer").subscribe(&["Reboot"]),
        // Sits in a WASI sleep (a host call) for an hour.
        ProbePlugin::new("sleeper", "sleep")
            .subscribe(&["Reboot"])
            .budget("1s"),
    ];
    let setup = hostile_setup(&plugins);
    let mut daemon = setup.start_daemon();
    let reboot = stable_event_id("hostile", 0);
    let freeze = stable_event_id("hostile", 1);

    // The Freeze is prepared and approved while the Reboot's hostile plugins misbehave.
    let state = setup.simulator.wait_for_state(
        Duration::from_secs(30),
        "the Freeze to be approved",
        |state| accepted_approvals_of(state, &freeze) == 1,
    );
    let freeze_approved_ms = state
        .approvals
        .iter()
        .find(|record| record.accepted && same_id(&record.event_id, &freeze))
        .map(|record| record.at_scenario_ms)
        .unwrap_or(u64::MAX);
    let reboot_not_before_ms = 2_000 + 40_000;
    assert!(
        freeze_approved_ms < reboot_not_before_ms,
        "the Freeze waited for the Reboot's NotBefore: approved at {freeze_approved_ms} ms"
    );

    // Past NotBefore − margin the daemon keeps asking the deferring plugin (the VM runs
    // until Azure acts): wait until it was seen doing so twice, however long that takes.
    let unix_ms_of = |state: &StateSnapshot, transition: Transition| {
        state
            .history
            .iter()
            .find(|record| same_id(&record.event_id, &reboot) && record.transition == transition)
            .map(|record| record.at_unix_ms)
    };
    let appeared_unix_ms = unix_ms_of(&state, Transition::Appeared)
        .unwrap_or_else(|| panic!("the Reboot never appeared: {}", summarize_state(&state)));
    let not_before_unix_ms = appeared_unix_ms + (40_000.0 / HOSTILE_SPEED) as u64;
    let deadline_unix_ms = not_before_unix_ms - HOSTILE_MARGIN_MS;
    let late_prepares_in = |decisions: &[PluginDecision]| {
        decisions
            .iter()
            .filter(|decision| same_id(&decision.event_id, &reboot) && decision.phase == "prepare")
            .filter(|decision| decision.plugin == "stubborn")
            .filter(|decision| decision.at_unix_ms > deadline_unix_ms + 500)
            .count()
    };
    daemon.wait_for_decisions(
        Duration::from_secs(120),
        "two prepare answers of `stubborn` past NotBefore − margin",
        |decisions| late_prepares_in(decisions) >= 2,
    );

    // Azure acts: the Reboot starts (never approved by forewarn), and the good plugin is
    // told it started and then recovers: nothing is stuck.
    let answer = setup
        .simulator
        .console_post(&format!("/simulator/events/{reboot}/start"))
        .unwrap_or_else(|error| panic!("starting the Reboot: {error}"));
    assert!(answer.contains(" 200"), "starting the Reboot: {answer}");
    let decisions = daemon.wait_for_decisions(
        Duration::from_secs(60),
        "the good plugin to recover from the Reboot",
        |decisions| {
            decisions_of(decisions, &reboot, "good")
                .iter()
                .any(|decision| decision.phase == "ended-after-start")
        },
    );
    let state = setup.simulator.state();
    let context = format!(
        "{}\n{}",
        summarize_state(&state),
        daemon.describe_for_failure()
    );
    assert_eq!(
        accepted_approvals_of(&state, &reboot),
        0,
        "the Reboot was approved though a plugin deferred it; {context}"
    );
    let started_ms = transition_at(&state, &reboot, Transition::Started)
        .unwrap_or_else(|| panic!("the Reboot never started; {context}"));
    assert!(
        started_ms >= reboot_not_before_ms,
        "the Reboot started at {started_ms} ms, before its NotBefore; {context}"
    );

    // It asked at most about once a second (LATE_RETRY), not in a tight loop: a bound a slow
    // machine meets more easily, not less.
    let started_unix_ms = unix_ms_of(&state, Transition::Started)
        .unwrap_or_else(|| panic!("no Started of the Reboot; {context}"));
    let late_prepares = late_prepares_in(&decisions);
    let late_window_s = started_unix_ms.saturating_sub(deadline_unix_ms) / 1000;
    assert!(
        late_prepares >= 2 && late_prepares as u64 <= late_window_s + 2,
        "{late_prepares} prepare answers of `stubborn` after NotBefore − margin, in a window of \
         {late_window_s} s; {context}"
    );
    let late = daemon.lines_with_message(PREPARING_LATE);
    assert!(
        late.len() == 1 && late[0].text("still_preparing").contains("stubborn"),
        "the daemon did not say once that it prepares past NotBefore − margin: {:?}; {context}",
        late.iter().map(|line| &line.fields).collect::<Vec<_>>()
    );

    // Each hostile plugin was contained the way it should be.
    let stubborn = decisions_of(&decisions, &reboot, "stubborn");
    assert!(
        stubborn.len() >= 3
            && stubborn
                .iter()
                .filter(|decision| decision.phase == "prepare")
                .all(|decision| decision.decision == "defer"),
        "the deferring plugin was not asked again and again: {stubborn:?}"
    );
    for plugin in ["hammer", "sleeper"] {
        let prepares: Vec<_> = decisions_of(&decisions, &reboot, plugin)
            .into_iter()
            .filter(|decision| decision.phase == "prepare")
            .collect();
        assert!(
            !prepares.is_empty() && prepares.iter().all(|d| d.failure == "budget-exceeded"),
            "{plugin} was not cut off at its budget: {prepares:?}; {context}"
        );
    }
    let huge: Vec<_> = decisions_of(&decisions, &reboot, "huge")
        .into_iter()
        .filter(|decision| decision.phase == "prepare")
        .collect();
    assert!(
        !huge.is_empty()
            && huge
                .iter()
                .all(|d| d.decision == "defer" && d.reason.len() <= 1024),
        "the 8 MiB reason was not cut to 1 KiB: {:?}",
        huge.iter().map(|d| d.reason.len()).collect::<Vec<_>>()
    );

    // The good plugin saw every phase of both events, and the daemon is still running.
    for (id, phases) in [
        (&reboot, ["prepare", "started", "ended-after-start"]),
        (&freeze, ["prepare", "started", "ended-after-start"]),
    ] {
        let seen: Vec<&str> = decisions_of(&decisions, id, "good")
            .iter()
            .map(|decision| decision.phase.as_str())
            .collect();
        for phase in phases {
            assert!(
                seen.contains(&phase),
                "the good plugin missed {phase} of {id}: {seen:?}; {context}"
            );
        }
    }
    assert!(!daemon.has_exited(), "the daemon exited; {context}");
    assert_polite(&state);
}

// ---- plugins hammering durable state ---------------------------------------------------

/// Longest a `/healthz` answer may take while plugins hammer their state, on a machine
/// where the idle daemon answers in a few ms; on a loaded one, [`SLOWDOWN_ALLOWED`] times
/// the same run's idle baseline if that is more.
const HEALTHZ_MAX: Duration = Duration::from_millis(1000);
/// Longest gap between two IMDS polls (every 300 ms) while plugins hammer their state;
/// likewise at most [`SLOWDOWN_ALLOWED`] times the idle baseline's widest gap if that is more.
const POLL_GAP_MAX_MS: u64 = 1500;
/// How much slower than its idle baseline (measured in the same run, before the writers
/// start) the daemon may answer while they hammer. A runtime blocked by their writes would
/// stall for their whole 3 s budget, one after another: far beyond this on any machine
/// whose idle daemon answers within 0.7 s.
const SLOWDOWN_ALLOWED: u32 = 4;

/// The hostile scenario's events later: the Reboot (which the writers hammer their state
/// for) appears 5 s (wall) after the daemon's first poll, leaving time to measure the
/// daemon idle first; the Freeze 2 s after it.
const HAMMER_SCENARIO: &str = r#"
name = "hammer"
end_after = "1s"

[[events]]
type = "Reboot"
appear_at = "10s"
notice = "40s"
runs_for = "4s"

[[events]]
type = "Freeze"
appear_at = "14s"
notice = "10m"
runs_for = "2s"
"#;

/// The arrival times (Unix ms) of the GETs of scheduledevents at the simulator.
fn poll_times(state: &StateSnapshot) -> Vec<u64> {
    state
        .requests
        .iter()
        .filter(|request| request.method == "GET" && request.path.contains("scheduledevents"))
        .map(|request| request.at_unix_ms)
        .collect()
}

/// The widest gap between consecutive `times` (0 for fewer than two).
fn widest_gap(times: &[u64]) -> u64 {
    times
        .windows(2)
        .map(|pair| pair[1].saturating_sub(pair[0]))
        .max()
        .unwrap_or(0)
}

#[test]
fn plugins_looping_state_set_leave_polling_healthz_and_a_good_plugin_unaffected() {
    let plugins = [
        ProbePlugin::new("good", "approve"),
        ProbePlugin::new("writer-a", "state-loop")
            .subscribe(&["Reboot"])
            .budget("3s"),
        ProbePlugin::new("writer-b", "state-loop")
            .subscribe(&["Reboot"])
            .budget("3s"),
        ProbePlugin::new("writer-c", "state-loop")
            .subscribe(&["Reboot"])
            .budget("3s"),
    ];
    let margin = format!("safety-margin-ms = {HOSTILE_MARGIN_MS}");
    let setup = new_setup(
        HAMMER_SCENARIO,
        HOSTILE_SPEED,
        &plugins,
        "300ms",
        &[&margin],
    );
    let mut daemon = setup.start_daemon();
    let admin = daemon.admin_address(Duration::from_secs(30));
    let freeze = stable_event_id("hammer", 1);
    let reboot = stable_event_id("hammer", 0);
    let time_healthz = || {
        let asked = Instant::now();
        let healthz = forewarn_test_support::harness::http_get(&admin, "/healthz");
        assert!(healthz.is_ok(), "/healthz failed: {healthz:?}");
        asked.elapsed()
    };

    // The baseline: the daemon idle (no event yet, so no writer runs), on this machine as
    // loaded as it is now.
    let mut idle_slowest = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(40);
    let idle_until = loop {
        idle_slowest = idle_slowest.max(time_healthz());
        let state = setup.simulator.state();
        if let Some(appeared) = transition_at_unix_ms(&state, &reboot, Transition::Appeared) {
            break appeared;
        }
        assert!(!daemon.has_exited(), "{}", daemon.describe_for_failure());
        assert!(
            Instant::now() < deadline,
            "the Reboot never appeared; {}",
            summarize_state(&state)
        );
    };

    // Until the Freeze is approved and every writer has been cut off at its budget once
    // (they hammer their state meanwhile), time every /healthz answer.
    let mut slowest = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(40);
    let state = loop {
        assert!(!daemon.has_exited(), "{}", daemon.describe_for_failure());
        slowest = slowest.max(time_healthz());
        let state = setup.simulator.state();
        let decisions = daemon.decisions();
        let writers_cut_off = ["writer-a", "writer-b", "writer-c"].iter().all(|writer| {
            decisions_of(&decisions, &reboot, writer)
                .iter()
                .any(|d| d.failure == "budget-exceeded")
        });
        if accepted_approvals_of(&state, &freeze) == 1 && writers_cut_off {
            break state;
        }
        assert!(
            Instant::now() < deadline,
            "the Freeze was not approved or a writer was not cut off; {}\n{}",
            summarize_state(&state),
            daemon.describe_for_failure()
        );
    };
    let context = format!(
        "{}\n{}",
        summarize_state(&state),
        daemon.describe_for_failure()
    );
    let polls = poll_times(&state);
    let idle_polls: Vec<u64> = polls
        .iter()
        .copied()
        .filter(|at| *at <= idle_until)
        .collect();
    let busy_polls: Vec<u64> = polls
        .iter()
        .copied()
        .filter(|at| *at >= idle_until)
        .collect();
    let idle_widest = widest_gap(&idle_polls);
    eprintln!(
        "idle baseline: /healthz at most {idle_slowest:?}, polls at most {idle_widest} ms apart \
         ({} polls); while the writers hammer: {slowest:?}, {} ms",
        idle_polls.len(),
        widest_gap(&busy_polls)
    );
    let healthz_bound = HEALTHZ_MAX.max(idle_slowest * SLOWDOWN_ALLOWED);
    assert!(
        slowest <= healthz_bound,
        "/healthz took {slowest:?} while plugins wrote state (idle: {idle_slowest:?}); {context}"
    );

    // The writers really ran (and were cut off at their budget) while the good plugin answered.
    // The Freeze's approval can reach the simulator before the test has read the good
    // plugin's decision from the daemon's output: wait for it, do not read once.
    let decisions = daemon.wait_for_decisions(
        Duration::from_secs(30),
        "the good plugin's approval of the Freeze",
        |decisions| {
            decisions_of(decisions, &freeze, "good")
                .iter()
                .any(|d| d.decision == "approve")
        },
    );
    for writer in ["writer-a", "writer-b", "writer-c"] {
        let prepares = decisions_of(&decisions, &reboot, writer);
        assert!(
            prepares.iter().any(|d| d.failure == "budget-exceeded"),
            "{writer} was not cut off at its budget: {prepares:?}; {context}"
        );
    }
    assert!(
        decisions_of(&decisions, &freeze, "good")
            .iter()
            .any(|d| d.decision == "approve"),
        "the good plugin did not approve the Freeze; {context}"
    );

    // IMDS was polled on cadence the whole time, seen at the simulator.
    let widest = widest_gap(&busy_polls);
    let gap_bound = POLL_GAP_MAX_MS.max(idle_widest * u64::from(SLOWDOWN_ALLOWED));
    assert!(
        busy_polls.len() >= 2 && widest <= gap_bound,
        "{widest} ms between two IMDS polls (every 300 ms; idle: {idle_widest} ms) while \
         plugins wrote state; {context}"
    );
    assert_polite(&state);
}

// ---- a long mixed run through IMDS faults ---------------------------------------------

const MIXED_EVENTS: usize = 80;
/// The fault windows repeat with this period (scenario time), four times over the run.
const FAULT_CYCLE_MS: u64 = 65_000;
const MIXED_SPEED: f64 = 2.0;

/// Events of every type, one every 3 s (scenario time) from 5 s, each with a 3-minute
/// notice, gone 4 s after it starts; four cycles of fault windows of every kind among them.
fn mixed_scenario() -> String {
    let types = ["Reboot", "Redeploy", "Freeze", "Preempt", "Terminate"];
    let mut text = String::from("name = \"mixed\"\nend_after = \"2s\"\n");
    for index in 0..MIXED_EVENTS {
        let _ = write!(
            text,
            "\n[[events]]\ntype = \"{}\"\nappear_at = \"{}ms\"\nnotice = \"3m\"\nruns_for = \"4s\"\n",
            types[index % types.len()],
            5_000 + 3_000 * index
        );
    }
    for cycle in 0..4 {
        for fault in fault_cycle(cycle * FAULT_CYCLE_MS) {
            let _ = write!(text, "\n[[faults]]\n{fault}\n");
        }
    }
    text
}

/// One cycle of fault windows of every kind, starting `offset_ms` into the scenario.
fn fault_cycle(offset_ms: u64) -> Vec<String> {
    let at = |ms: u64| format!("{}ms", offset_ms + ms);
    let mut faults = vec![
        format!(
            "kind = \"status\"\nstatus = 429\nfrom = \"{}\"\nuntil = \"{}\"",
            at(8_000),
            at(12_000)
        ),
        format!(
            "kind = \"status\"\nstatus = 410\nfrom = \"{}\"\nuntil = \"{}\"",
            at(16_000),
            at(20_000)
        ),
        format!(
            "kind = \"status\"\nstatus = 500\nmethods = [\"GET\", \"POST\"]\nfrom = \"{}\"\nuntil = \"{}\"",
            at(24_000),
            at(27_000)
        ),
        format!(
            "kind = \"status\"\nstatus = 503\nmethods = [\"POST\"]\nfrom = \"{}\"\nuntil = \"{}\"",
            at(30_000),
            at(35_000)
        ),
        format!(
            "kind = \"delay\"\ndelay = \"1500ms\"\nfrom = \"{}\"\nuntil = \"{}\"",
            at(38_000),
            at(44_000)
        ),
        format!(
            "kind = \"malformed\"\nbody = \"garbage\"\nfrom = \"{}\"\nuntil = \"{}\"",
            at(47_000),
            at(50_000)
        ),
        format!(
            "kind = \"malformed\"\nbody = \"truncated\"\nfrom = \"{}\"\nuntil = \"{}\"",
            at(53_000),
            at(56_000)
        ),
        format!("kind = \"incarnation-reset\"\nat = \"{}\"", at(59_000)),
        format!(
            "kind = \"delay\"\ndelay = \"700ms\"\nmethods = [\"POST\"]\nfrom = \"{}\"\nuntil = \"{}\"",
            at(60_000),
            at(63_000)
        ),
    ];
    if offset_ms == 0 {
        faults.push("kind = \"slow-first-call\"\ndelay = \"1500ms\"".to_owned());
    }
    faults
}

#[test]
fn long_mixed_run_through_imds_faults_misses_nothing_and_approves_once() {
    let plugins = [
        ProbePlugin::new("good", "approve"),
        ProbePlugin::new("twice", "defer-until-attempt")
            .config("attempts", "2")
            .config("retry-ms", "300"),
    ];
    let setup = new_setup(
        &mixed_scenario(),
        MIXED_SPEED,
        &plugins,
        "250ms",
        &["safety-margin-ms = 300"],
    );
    let mut daemon = setup.start_daemon();
    let state = setup.wait_finished(&mut daemon, Duration::from_secs(240));
    // The simulator can finish before the daemon has seen the last removals (it may be
    // backing off through a fault window): wait for every recovery to be delivered. Every
    // event's, not the last one's only: two removals seen in one poll need not be recovered
    // in the order of the events.
    let ids: Vec<String> = (0..MIXED_EVENTS)
        .map(|index| stable_event_id("mixed", index))
        .collect();
    daemon.wait_for_decisions(
        Duration::from_secs(30),
        "the recovery of every event by both plugins",
        |decisions| {
            ids.iter().all(|id| {
                ["good", "twice"].iter().all(|plugin| {
                    decisions.iter().any(|decision| {
                        decision.event_id.eq_ignore_ascii_case(id)
                            && decision.plugin == *plugin
                            && decision.phase == "ended-after-start"
                    })
                })
            })
        },
    );
    let context = format!(
        "{}\n{}",
        summarize_state(&state),
        daemon.describe_for_failure()
    );
    let decisions = daemon.decisions();
    let counts = accepted_approval_counts(&state);
    for index in 0..MIXED_EVENTS {
        let id = stable_event_id("mixed", index);
        assert_eq!(
            counts.get(&id.to_ascii_uppercase()).copied().unwrap_or(0),
            1,
            "event {index} ({id}) was not approved exactly once; {context}"
        );
        let appeared = transition_at(&state, &id, Transition::Appeared).unwrap_or(0);
        let started = transition_at(&state, &id, Transition::Started)
            .unwrap_or_else(|| panic!("event {index} never started; {context}"));
        assert!(
            started < appeared + 180_000,
            "event {index} started at NotBefore, not by the approval; {context}"
        );
        for plugin in ["good", "twice"] {
            let phases: BTreeSet<&str> = decisions_of(&decisions, &id, plugin)
                .iter()
                .map(|decision| decision.phase.as_str())
                .collect();
            assert!(
                phases.contains("prepare") && phases.contains("ended-after-start"),
                "{plugin} missed phases of event {index}: {phases:?}; {context}"
            );
        }
    }
    assert_eq!(
        counts.len(),
        MIXED_EVENTS,
        "approvals for unknown events: {counts:?}"
    );
    assert_polite(&state);
    let gets = state
        .requests
        .iter()
        .filter(|request| request.method == "GET")
        .count();
    assert!(
        gets >= 200,
        "only {gets} documents were fetched; the run is meant to be long"
    );
    let fault_statuses: BTreeSet<u16> = state
        .requests
        .iter()
        .map(|request| request.status)
        .filter(|status| *status != 200)
        .collect();
    for status in [410, 429, 500, 503] {
        assert!(
            fault_statuses.contains(&status),
            "no request was answered {status}: the fault windows were missed; {fault_statuses:?}"
        );
    }
    // Every kind of fault the scenario configures was served at least once.
    let served: BTreeSet<String> = state
        .faults
        .iter()
        .map(|fault| format!("{:?}", fault.kind))
        .collect();
    for kind in [
        FaultKind::Status,
        FaultKind::Delay,
        FaultKind::Malformed,
        FaultKind::IncarnationReset,
        FaultKind::SlowFirstCall,
    ] {
        assert!(
            !state.faults_of(kind).is_empty(),
            "the simulator never served a {kind:?} fault; served: {served:?}"
        );
    }
    eprintln!(
        "mixed run: {MIXED_EVENTS} events, {gets} GETs, {} requests, statuses seen {fault_statuses:?}",
        state.requests.len()
    );
}

// ---- SIGKILL at random points -------------------------------------------------------------

const CRASH_EVENTS: usize = 10;
const CRASH_SPEED: f64 = 2.0;
/// The seed of the kill points unless FOREWARN_CRASH_SEED names another: a fixed one, so
/// that a failure replays as it came.
const CRASH_SEED: u64 = 0x05EE_D0FC_4A5E;
/// The longest wait (ms, wall) between an event's appearance and the kill that follows it.
const KILL_WITHIN_MS: u64 = 1_500;

/// Reboots and Redeploys, one every 3 s (scenario time) from 4 s, 2-minute notice.
fn crash_scenario() -> String {
    let mut text = String::from("name = \"crash\"\nend_after = \"2s\"\n");
    for index in 0..CRASH_EVENTS {
        let event_type = if index % 2 == 0 { "Reboot" } else { "Redeploy" };
        let _ = write!(
            text,
            "\n[[events]]\ntype = \"{event_type}\"\nappear_at = \"{}ms\"\nnotice = \"2m\"\nruns_for = \"3s\"\n",
            4_000 + 3_000 * index
        );
    }
    text
}

fn crash_plugins() -> Vec<ProbePlugin> {
    vec![
        ProbePlugin::new("good", "approve"),
        ProbePlugin::new("twice", "defer-until-attempt")
            .config("attempts", "2")
            .config("retry-ms", "200"),
    ]
}

/// xorshift64*: small, seeded, good enough to pick kill instants.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn millis_between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high - low)
    }
}

fn crash_seed() -> u64 {
    std::env::var("FOREWARN_CRASH_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(CRASH_SEED)
        | 1
}

/// Waits until the simulator has answered a request made after `since_unix_ms`: the daemon
/// started, read its journal and polls.
fn wait_for_a_poll_since(setup: &Setup, daemon: &mut Daemon, since_unix_ms: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = setup.simulator.state();
        if state
            .requests
            .iter()
            .any(|request| request.at_unix_ms >= since_unix_ms)
        {
            return;
        }
        assert!(
            !daemon.has_exited(),
            "the daemon exited after a restart: {}",
            daemon.describe_for_failure()
        );
        assert!(
            Instant::now() < deadline,
            "the restarted daemon did not poll within 20 s: {}",
            daemon.describe_for_failure()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigkill_at_random_points_changes_no_approval() {
    let seed = crash_seed();
    eprintln!("crash-safety seed: {seed} (replay with FOREWARN_CRASH_SEED={seed})");
    let mut rng = Rng(seed);
    let scenario = crash_scenario();
    let clean = new_setup(&scenario, CRASH_SPEED, &crash_plugins(), "250ms", &[]);
    let mut clean_daemon = clean.start_daemon();
    let crashed = new_setup(&scenario, CRASH_SPEED, &crash_plugins(), "250ms", &[]);

    // One kill per event, at a seeded point up to 1.5 s (wall) after it appears, once the
    // daemon then running has read its journal and polled: as many kills however loaded the
    // machine (a slow one only moves them later in the event's life).
    let mut killed: Vec<Daemon> = Vec::new();
    let mut daemon = crashed.start_daemon();
    let mut kills = 0;
    for index in 0..CRASH_EVENTS {
        wait_for_a_poll_since(&crashed, &mut daemon, now_unix_ms());
        let id = stable_event_id("crash", index);
        crashed
            .simulator
            .wait_for_transition(Duration::from_secs(60), &id, Transition::Appeared);
        // The kill point, not a synchronisation: the pause is the point of the test.
        std::thread::sleep(Duration::from_millis(rng.millis_between(0, KILL_WITHIN_MS)));
        daemon.kill();
        kills += 1;
        killed.push(daemon);
        daemon = crashed.start_daemon();
    }
    wait_for_a_poll_since(&crashed, &mut daemon, now_unix_ms());
    let crashed_state = crashed.wait_finished(&mut daemon, Duration::from_secs(90));
    let clean_state = clean.wait_finished(&mut clean_daemon, Duration::from_secs(30));

    let daemons: Vec<&Daemon> = killed.iter().chain(std::iter::once(&daemon)).collect();
    let quarantined: Vec<String> = daemons
        .iter()
        .flat_map(|daemon| {
            let mut lines = daemon.lines_with_message(JOURNAL_QUARANTINED);
            lines.extend(daemon.lines_with_message(CHANGE_LOG_QUARANTINED));
            lines
        })
        .map(|line| line.fields.to_string())
        .collect();
    assert!(
        quarantined.is_empty(),
        "a journal file was unreadable after a SIGKILL (seed {seed}): {quarantined:?}"
    );
    // And on disk: a quarantined snapshot or change log is a `*.corrupt-*` file beside them.
    let moved_aside = corrupt_files(&crashed.dir.path().join("state"));
    assert!(
        moved_aside.is_empty(),
        "journal files were moved aside after a SIGKILL (seed {seed}): {moved_aside:?}"
    );
    // The check above reads the same structured log as this: the daemons' lines were
    // captured and parsed, so a quarantine line would have been seen.
    let transitions = daemons
        .iter()
        .map(|daemon| daemon.lines_with_message(EVENT_TRANSITION).len())
        .sum::<usize>();
    assert!(
        transitions > 0,
        "no event transition in the logs of {} daemons (seed {seed})",
        daemons.len()
    );
    let clean_counts = accepted_approval_counts(&clean_state);
    let crashed_counts = accepted_approval_counts(&crashed_state);
    assert_eq!(
        clean_counts.len(),
        CRASH_EVENTS,
        "the clean run did not approve every event: {}",
        summarize_state(&clean_state)
    );
    assert_eq!(
        crashed_counts,
        clean_counts,
        "after {kills} kills (seed {seed}) the approvals differ from a clean run's\ncrashed: {}\nclean: {}",
        summarize_state(&crashed_state),
        summarize_state(&clean_state)
    );
    eprintln!(
        "crash safety: {kills} kills (seed {seed}), {CRASH_EVENTS} events approved once each"
    );
    let _keep = (&clean.dir, &crashed.dir);
}

// ---- damaged journal files ------------------------------------------------------------------

/// The files the journal moved aside in `state_dir` (`journal.json.corrupt-…`,
/// `journal.log.corrupt-…`), sorted.
fn corrupt_files(state_dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return Vec::new();
    };
    let mut found: Vec<std::path::PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().contains(".corrupt-"))
        })
        .collect();
    found.sort();
    found
}

/// A private state directory (0700, as the daemon makes it) for files a test plants.
fn private_state_dir(setup: &Setup) -> std::path::PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let state_dir = setup.dir.path().join("state");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&state_dir)
        .expect("create the state directory");
    state_dir
}

/// The one file moved aside in `state_dir` whose name starts with `stem`, and its bytes.
fn moved_aside(state_dir: &std::path::Path, stem: &str) -> (std::path::PathBuf, Vec<u8>) {
    let moved: Vec<_> = corrupt_files(state_dir)
        .into_iter()
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(stem))
        })
        .collect();
    assert_eq!(moved.len(), 1, "one {stem}* file: {moved:?}");
    let bytes = std::fs::read(&moved[0]).expect("read the file moved aside");
    (moved[0].clone(), bytes)
}

/// One Reboot for vm-a, appearing 1 s (scenario) in, 15 minutes' notice.
const ONE_REBOOT: &str = "name = \"damaged-journal\"\nend_after = \"1s\"\n\n[[events]]\ntype = \"Reboot\"\nappear_at = \"1s\"\nnotice = \"15m\"\nruns_for = \"2s\"\n";

/// `journal.json` that is not JSON: the daemon moves it aside (the bytes kept for a person
/// to read), says so, starts without it, and handles events: the Reboot is approved at IMDS.
#[test]
fn an_unreadable_journal_snapshot_is_moved_aside_and_the_daemon_starts_without_it() {
    let setup = new_setup(
        ONE_REBOOT,
        10.0,
        &[ProbePlugin::new("good", "approve")],
        "250ms",
        &[],
    );
    let state_dir = private_state_dir(&setup);
    let damage = b"{\"version\": 3, \"state\": {\"events\": {\"cut off by a bad disk";
    std::fs::write(state_dir.join("journal.json"), damage).expect("plant the damaged snapshot");
    let mut daemon = setup.start_daemon();
    let id = stable_event_id("damaged-journal", 0);
    let state = setup.simulator.wait_for_state(
        Duration::from_secs(60),
        "the Reboot approved by the daemon that started without its journal",
        |state| !accepted_approvals(state, &id).is_empty(),
    );
    assert!(!daemon.has_exited(), "{}", daemon.describe_for_failure());
    assert_eq!(
        accepted_approvals(&state, &id).len(),
        1,
        "{}",
        summarize_state(&state)
    );

    let (path, bytes) = moved_aside(&state_dir, "journal.json.corrupt-");
    assert_eq!(bytes, damage, "the damaged snapshot is kept as it was");
    // The daemon journals anew: its changes since the start are in the change log.
    let log = std::fs::read(state_dir.join("journal.log")).expect("a change log");
    assert!(
        log.split(|&byte| byte == b'\n')
            .filter(|line| !line.is_empty())
            .all(|line| serde_json::from_slice::<serde_json::Value>(line).is_ok())
            && !log.is_empty(),
        "the new change log holds JSON lines: {}",
        String::from_utf8_lossy(&log)
    );
    let said = daemon.wait_for_message(Duration::from_secs(30), JOURNAL_QUARANTINED);
    assert_eq!(said.len(), 1, "{}", daemon.describe_for_failure());
    assert_eq!(said[0].text("moved_to"), path.display().to_string());
}

/// One Reboot for vm-a whose approval leaves it Scheduled for 10 minutes (scenario), so a
/// restarted daemon that forgot the approval would prepare and approve it again.
const APPROVED_NOT_STARTED: &str = "name = \"damaged-change-log\"\nend_after = \"1s\"\n\n[[events]]\ntype = \"Reboot\"\nappear_at = \"1s\"\nnotice = \"15m\"\nstart_after_approval = \"10m\"\nruns_for = \"2s\"\n";

/// `journal.log` damaged before its end (a garbage line with a good one after it, as a bad
/// sector would leave it): the daemon uses the changes before the damage, moves the log
/// aside, says so, and resumes where it was: the approval it already sent is known, so the
/// event is not prepared or approved again.
#[test]
fn a_change_log_damaged_before_its_end_is_moved_aside_and_the_changes_before_it_are_kept() {
    let mut env = TestEnv::builder(forewarn_binary!())
        .scenario_text(APPROVED_NOT_STARTED)
        .speed(10.0)
        .plugins(&[ProbePlugin::new("good", "approve")])
        .start();
    let id = stable_event_id("damaged-change-log", 0);
    env.setup
        .simulator
        .wait_for_state(Duration::from_secs(60), "the Reboot approved", |state| {
            !accepted_approvals(state, &id).is_empty()
        });
    let admin = env.daemon.admin_address(Duration::from_secs(30));
    wait_for_approval_state(&admin, &id, ApprovalKind::Sent);
    env.kill_daemon();

    let state_dir = env.setup.dir.path().join("state");
    let log_path = state_dir.join("journal.log");
    let log = std::fs::read(&log_path).expect("the change log");
    let lines: Vec<&[u8]> = log
        .split(|&byte| byte == b'\n')
        .filter(|line| !line.is_empty())
        .collect();
    let last = *lines.last().expect("the run committed changes to the log");
    let mut damaged = log.clone();
    damaged.extend_from_slice(b"{\"generation\": \x01garbage\n");
    damaged.extend_from_slice(last);
    damaged.push(b'\n');
    std::fs::write(&log_path, &damaged).expect("damage the change log");

    env.restart_daemon();
    let admin = env.daemon.admin_address(Duration::from_secs(30));
    wait_for_approval_state(&admin, &id, ApprovalKind::Sent);
    let state = env.state();
    let posts: Vec<_> = state
        .approvals
        .iter()
        .filter(|approval| same_id(&approval.event_id, &id))
        .collect();
    assert_eq!(
        posts.len(),
        1,
        "the restarted daemon forgot the approval it had sent and sent it again: {posts:?}; {}",
        env.context()
    );
    assert!(!env.daemon.has_exited(), "{}", env.context());

    let (path, bytes) = moved_aside(&state_dir, "journal.log.corrupt-");
    assert_eq!(bytes, damaged, "the damaged change log is kept as it was");
    let said = env
        .daemon
        .wait_for_message(Duration::from_secs(30), CHANGE_LOG_QUARANTINED);
    assert_eq!(said.len(), 1, "{}", env.context());
    assert_eq!(said[0].text("moved_to"), path.display().to_string());
}

/// Waits until `/status` shows `event_id` with this approval state.
fn wait_for_approval_state(admin: &str, event_id: &str, wanted: ApprovalKind) {
    wait_for(
        Duration::from_secs(30),
        &format!("{event_id} {wanted:?} in /status"),
        || {
            let body = http_get(admin, "/status")?;
            let status: StatusSnapshot =
                serde_json::from_str(&body).map_err(|error| format!("{error}: {body}"))?;
            match status
                .events
                .iter()
                .find(|event| same_id(event.id.as_str(), event_id))
            {
                Some(event) if event.approval_state == wanted => Ok(()),
                _ => Err(body),
            }
        },
    );
}

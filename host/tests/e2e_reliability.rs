//! Reliability suites against the real `forewarn run`: hostile plugins beside a good one, a
//! long run through every kind of IMDS fault, and SIGKILL at random points (seeded).
//!
//! Each test is bounded (scenarios run sped up, every wait has a deadline) and asserts at the
//! simulator (approvals, requests, history) and in the daemon's JSON log (plugin decisions).
//! Set FOREWARN_CRASH_SEED=N to replay a crash-safety run; the seed used is always printed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use forewarn_host::log_messages::{EVENT_TRANSITION, JOURNAL_QUARANTINED, PREPARING_LATE};
use forewarn_simulator::{FaultKind, StateSnapshot, Transition, stable_event_id};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, PluginDecision, ProbePlugin, Setup, TestEnv, accepted_approvals, assert_polite,
    now_unix_ms, same_id, summarize_state, transition_at,
};

/// A temp dir with the scenario `scenario_text` played at `speed`, `plugins`, and a config
/// for vm-a polling every `poll_interval` with `policy` lines; the daemon not yet started.
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
/// appears, and a Freeze (only the good plugin subscribes) appearing 2 s later.
const HOSTILE_SCENARIO: &str = r#"
name = "hostile"
end_after = "1s"

[[events]]
type = "Reboot"
appear_at = "2s"
notice = "40s"
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

    // The Reboot is never approved by forewarn: it starts on its own at NotBefore, and the
    // good plugin is told it started and then recovers: nothing is stuck.
    let decisions = daemon.wait_for_decisions(
        Duration::from_secs(45),
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

    // Past NotBefore − margin the daemon kept asking the deferring plugin (the VM runs until
    // Azure acts), said so once, and asked at most about once a second (LATE_RETRY), not in
    // a tight loop.
    let unix_ms_of = |transition: Transition| {
        state
            .history
            .iter()
            .find(|record| same_id(&record.event_id, &reboot) && record.transition == transition)
            .map(|record| record.at_unix_ms)
            .unwrap_or_else(|| panic!("no {transition:?} of the Reboot; {context}"))
    };
    let appeared_unix_ms = unix_ms_of(Transition::Appeared);
    let started_unix_ms = unix_ms_of(Transition::Started);
    let not_before_unix_ms = appeared_unix_ms + (40_000.0 / HOSTILE_SPEED) as u64;
    let deadline_unix_ms = not_before_unix_ms - HOSTILE_MARGIN_MS;
    let late_prepares = decisions
        .iter()
        .filter(|decision| same_id(&decision.event_id, &reboot) && decision.phase == "prepare")
        .filter(|decision| decision.plugin == "stubborn")
        .filter(|decision| decision.at_unix_ms > deadline_unix_ms + 500)
        .count();
    let late_window_s = started_unix_ms.saturating_sub(deadline_unix_ms) / 1000;
    assert!(
        late_prepares >= 1 && late_prepares as u64 <= late_window_s + 2,
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

/// Longest a `/healthz` answer may take while plugins hammer their state.
const HEALTHZ_MAX: Duration = Duration::from_millis(1000);
/// Longest gap between two IMDS polls (every 300 ms) while plugins hammer their state.
const POLL_GAP_MAX_MS: u64 = 1500;

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
    let setup = hostile_setup(&plugins);
    let mut daemon = setup.start_daemon();
    let admin = daemon.admin_address(Duration::from_secs(30));
    let freeze = stable_event_id("hostile", 1);
    let reboot = stable_event_id("hostile", 0);

    // Until the Freeze is approved and every writer has been cut off at its budget once
    // (they hammer their state meanwhile), time every /healthz answer.
    let mut slowest = Duration::ZERO;
    let deadline = Instant::now() + Duration::from_secs(40);
    let state = loop {
        assert!(!daemon.has_exited(), "{}", daemon.describe_for_failure());
        let asked = Instant::now();
        let healthz = forewarn_test_support::harness::http_get(&admin, "/healthz");
        slowest = slowest.max(asked.elapsed());
        assert!(healthz.is_ok(), "/healthz failed: {healthz:?}");
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
    assert!(
        slowest <= HEALTHZ_MAX,
        "/healthz took {slowest:?} while plugins wrote state; {context}"
    );

    // The writers really ran (and were cut off at their budget) while the good plugin answered.
    let decisions = daemon.decisions();
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
    let polls: Vec<u64> = state
        .requests
        .iter()
        .filter(|request| request.method == "GET" && request.path.contains("scheduledevents"))
        .map(|request| request.at_unix_ms)
        .collect();
    let widest = polls
        .windows(2)
        .map(|pair| pair[1].saturating_sub(pair[0]))
        .max()
        .unwrap_or(u64::MAX);
    assert!(
        widest <= POLL_GAP_MAX_MS,
        "{widest} ms between two IMDS polls (every 300 ms) while plugins wrote state; {context}"
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
    // backing off through a fault window): wait for every recovery to be delivered.
    let last = stable_event_id("mixed", MIXED_EVENTS - 1);
    daemon.wait_for_decisions(
        Duration::from_secs(30),
        "the recovery of the last event by both plugins",
        |decisions| {
            ["good", "twice"].iter().all(|plugin| {
                decisions.iter().any(|decision| {
                    decision.event_id.eq_ignore_ascii_case(&last)
                        && decision.plugin == *plugin
                        && decision.phase == "ended-after-start"
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
const MAX_KILLS: usize = 16;

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
    if let Some(seed) = std::env::var("FOREWARN_CRASH_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
    {
        return seed;
    }
    now_unix_ms() | 1
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

    let mut killed: Vec<Daemon> = Vec::new();
    let mut daemon = crashed.start_daemon();
    let mut kills = 0;
    while kills < MAX_KILLS && !crashed.simulator.state().finished {
        wait_for_a_poll_since(&crashed, &mut daemon, now_unix_ms());
        std::thread::sleep(Duration::from_millis(rng.millis_between(100, 1_800)));
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
        .flat_map(|daemon| daemon.lines_with_message(JOURNAL_QUARANTINED))
        .map(|line| line.fields.to_string())
        .collect();
    assert!(
        quarantined.is_empty(),
        "a journal was unreadable after a SIGKILL (seed {seed}): {quarantined:?}"
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
    assert!(
        kills >= 8,
        "only {kills} kills happened; the run is meant to kill the daemon many times"
    );
    eprintln!(
        "crash safety: {kills} kills (seed {seed}), {CRASH_EVENTS} events approved once each"
    );
    let _keep = (&clean.dir, &crashed.dir);
}

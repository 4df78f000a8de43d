//! Notices end to end, the real binary with the bundled plugins against the simulator: short
//! ones (the stop action runs before the event) and long ones (prepared at the lead time).

use std::path::{Path, PathBuf};
use std::time::Duration;

use forewarn_daemon::log_messages::{PREPARATION_WAITS, PREPARING_LATE, TURN_SHORTENED};
use forewarn_daemon::ops::status::StatusSnapshot;
use forewarn_simulator::{FaultKind, StateSnapshot, Transition};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::guests::PROBE;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, ProbePlugin, Simulator, accepted_approvals, http_get,
    install_bundled_plugin, wait_for, wait_until, write_plugin_dir,
};

/// Scenario time is wall time here: the notices are the point.
const REAL_TIME: f64 = 1.0;
/// How long a test waits for a line the daemon logged before what the test saw elsewhere
/// (the log is read on a thread).
const LOG_WAIT: Duration = Duration::from_secs(30);

/// Everything one test runs: a temporary directory, the simulator, the daemon.
struct Setup {
    dir: tempfile::TempDir,
    simulator: Simulator,
}

impl Setup {
    /// A simulator playing one Preempt for vm-a that appears 5 s in with `notice`.
    fn preempt(notice: &str) -> Setup {
        Setup::event("Preempt", notice, REAL_TIME)
    }

    /// A simulator playing one `event_type` for vm-a that appears 5 s (scenario) in with
    /// `notice`, at `speed`.
    fn event(event_type: &str, notice: &str, speed: f64) -> Setup {
        Setup::event_with(event_type, notice, "", speed)
    }

    /// [`Setup::event`] with more keys for the event (`starts_late_by = "6s"`).
    fn event_with(event_type: &str, notice: &str, keys: &str, speed: f64) -> Setup {
        let scenario = format!(
            "name = \"{event_type}-{notice}\"\nend_after = \"2s\"\n\n[[events]]\n\
             type = \"{event_type}\"\nappear_at = \"5s\"\nnotice = \"{notice}\"\nruns_for = \"3s\"\n{keys}\n"
        );
        Setup::scenario(&scenario, speed)
    }

    /// A simulator playing `scenario` (TOML) at `speed`, its clock started by the daemon's
    /// first poll (so the daemon's start-up never eats into a notice).
    fn scenario(scenario: &str, speed: f64) -> Setup {
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir_all(dir.path().join("plugins")).expect("create the plugin dir");
        let simulator = Simulator::builder(forewarn_binary!())
            .scenario_text(scenario)
            .speed(speed)
            .start_on_first_poll()
            .start();
        Setup { dir, simulator }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Installs the bundled plugin `name` with `manifest`, or its bundled manifest.
    fn install(&self, name: &str, manifest: Option<&str>) {
        install_bundled_plugin(&self.path("plugins"), name, manifest);
    }

    /// Starts `forewarn run` with the default policy and these `[actions]`.
    fn start_daemon(&self, actions: &str) -> Daemon {
        // The daemon's own default lead time ("auto"): a short notice is inside it.
        self.start_daemon_with_lead(None, actions)
    }

    /// Starts `forewarn run` with `policy.prepare-lead-time = lead` (None: the default).
    fn start_daemon_with_lead(&self, lead: Option<&str>, actions: &str) -> Daemon {
        self.start_daemon_with(lead, &[], actions)
    }

    /// Starts `forewarn run` with `policy.prepare-lead-time = lead` (None: the default),
    /// these lines in `[policy]` and these `[actions]`.
    fn start_daemon_with(&self, lead: Option<&str>, policy: &[&str], actions: &str) -> Daemon {
        let config = DaemonConfig {
            extra: actions.to_owned(),
            prepare_lead_time: lead.map(str::to_owned),
            policy: policy.iter().map(|line| (*line).to_owned()).collect(),
            ..DaemonConfig::vm_a(
                self.dir.path(),
                self.path("plugins"),
                &self.simulator.base_url,
            )
        };
        let path = self.path("forewarn.toml");
        config.write(&path);
        Daemon::start(forewarn_binary!(), &path)
    }

    /// Starts `forewarn run` polling every `interval` with the default policy and these
    /// `[actions]`.
    fn start_daemon_polling(&self, interval: &str, actions: &str) -> Daemon {
        let config = DaemonConfig {
            extra: actions.to_owned(),
            poll_interval: interval.to_owned(),
            prepare_lead_time: None,
            ..DaemonConfig::vm_a(
                self.dir.path(),
                self.path("plugins"),
                &self.simulator.base_url,
            )
        };
        let path = self.path("forewarn.toml");
        config.write(&path);
        Daemon::start(forewarn_binary!(), &path)
    }

    /// Waits until the event started and was removed, and returns the simulator's state.
    fn wait_for_the_end(&self, daemon: &Daemon) -> StateSnapshot {
        self.wait_for_the_end_of(daemon, None)
    }

    /// Waits until `event_id` (any event when None) started and was removed, and returns
    /// the simulator's state.
    fn wait_for_the_end_of(&self, daemon: &Daemon, event_id: Option<&str>) -> StateSnapshot {
        wait_for(
            Duration::from_secs(90),
            "the Preempt to start and end",
            || {
                let state = self.simulator.state();
                let done = state.history.iter().any(|r| {
                    r.transition == Transition::Removed
                        && event_id.is_none_or(|id| r.event_id == id)
                });
                match done {
                    true => Ok(state),
                    false => Err(daemon.describe_for_failure()),
                }
            },
        )
    }
}

/// The stop action: writes the instant it ran (Unix ms) to `file`.
fn stop_action(file: &Path) -> String {
    format!(
        "[actions.stop-app]\nargv = [\"sh\", \"-c\", \"date +%s%3N > {}\"]\ntimeout = \"5s\"\n",
        file.display()
    )
}

/// The types the bundled checkpoint and graceful-shutdown subscribe to.
const DOWN_EVENTS: &str = "subscribe = [\"Reboot\", \"Redeploy\", \"Preempt\", \"Terminate\"]\n";

/// graceful-shutdown for Preempts alone, on its own (no `after`), with the stop action.
const PREEMPT_STOP_MANIFEST: &str = "subscribe = [\"Preempt\"]\nbudget = \"10s\"\n[config]\n\
     stop-action = \"stop-app\"\n[capabilities]\nactions = [\"stop-app\"]\n";

/// graceful-shutdown's bundled manifest with the stop action granted and configured.
fn graceful_shutdown_manifest() -> String {
    format!(
        "{DOWN_EVENTS}after = [\"lb-drain\", \"checkpoint\"]\nbudget = \"10s\"\n[config]\n\
         stop-action = \"stop-app\"\n[capabilities]\nactions = [\"stop-app\"]\n"
    )
}

/// The Unix ms written to `file` by an action.
fn instant_in(file: &Path) -> u64 {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|error| panic!("{} was not written: {error}", file.display()));
    text.trim()
        .parse()
        .unwrap_or_else(|error| panic!("{} holds {text:?}: {error}", file.display()))
}

/// When `transition` first happened at the simulator (Unix ms).
fn at(state: &StateSnapshot, transition: Transition) -> u64 {
    state
        .history
        .iter()
        .find(|record| record.transition == transition)
        .map(|record| record.at_unix_ms)
        .unwrap_or_else(|| panic!("no {transition:?} in the simulator's history"))
}

/// When `transition` first happened to `event_id` at the simulator (Unix ms).
fn at_of(state: &StateSnapshot, event_id: &str, transition: Transition) -> u64 {
    state
        .history
        .iter()
        .find(|record| record.event_id == event_id && record.transition == transition)
        .map(|record| record.at_unix_ms)
        .unwrap_or_else(|| panic!("no {transition:?} of {event_id} in the simulator's history"))
}

/// The event's NotBefore at the simulator: appearance plus `notice`.
fn not_before(state: &StateSnapshot, notice: Duration) -> u64 {
    at(state, Transition::Appeared) + u64::try_from(notice.as_millis()).unwrap_or(u64::MAX)
}

/// The simulator must have held a request with `method` (a delay fault), or the test tests
/// nothing.
fn assert_held_a(state: &StateSnapshot, method: &str) {
    let held = state
        .faults
        .iter()
        .any(|fault| fault.kind == FaultKind::Delay && fault.method == method);
    assert!(
        held,
        "the simulator never held a {method}: the test tests nothing"
    );
}

/// The daemon must have polled before the event appeared, or the test measures startup.
fn assert_polled_before_the_event(state: &StateSnapshot) {
    let appeared = at(state, Transition::Appeared);
    let polled = state
        .requests
        .iter()
        .any(|request| request.method == "GET" && request.at_unix_ms < appeared);
    assert!(
        polled,
        "the daemon had not polled before the event appeared"
    );
}

/// Runs the bundled chain as shipped (a 15 s drain, then checkpoint, then the stop action)
/// through the scenario: the daemon, the simulator's final state, and when the stop ran.
fn run_the_bundled_chain(setup: &Setup) -> (Daemon, StateSnapshot, u64) {
    setup.install("lb-drain", None);
    setup.install("checkpoint", None);
    setup.install("graceful-shutdown", Some(&graceful_shutdown_manifest()));
    let stopped = setup.path("stopped");
    let daemon = setup.start_daemon(&stop_action(&stopped));
    let state = setup.wait_for_the_end(&daemon);
    assert_polled_before_the_event(&state);
    let stop = instant_in(&stopped);
    (daemon, state, stop)
}

#[test]
fn a_three_second_preempt_runs_the_stop_action_before_the_event_starts() {
    let setup = Setup::preempt("3s");
    let (daemon, state, stop) = run_the_bundled_chain(&setup);
    let appeared = at(&state, Transition::Appeared);
    let started = at(&state, Transition::Started);
    eprintln!(
        "3 s Preempt: stop action {} ms after the event appeared, {} ms before it started",
        stop.saturating_sub(appeared),
        started.saturating_sub(stop)
    );
    // The behaviour, as the simulator saw it: the app was stopped before the VM was gone.
    // (How much time was left is a figure, `bench-goals preempt` in BENCHMARKS.md; a margin
    // asserted here would be met by a fast machine only.)
    assert!(
        stop < started,
        "the stop action ran at {stop}, after the event started at {started}: {}",
        daemon.describe_for_failure()
    );
    // Waited for: the log is read on a thread, and the simulator saw the event end first.
    wait_for(
        LOG_WAIT,
        "the log to say graceful-shutdown's turn was shortened",
        || {
            let shortened: Vec<String> = daemon
                .lines_with_message(TURN_SHORTENED)
                .iter()
                .map(|line| line.text("plugin").to_owned())
                .collect();
            match shortened.contains(&"graceful-shutdown".to_owned()) {
                true => Ok(()),
                false => Err(format!(
                    "graceful-shutdown did not wait for lb-drain's 15 s drain, and the log \
                     says so: {shortened:?}"
                )),
            }
        },
    );
}

#[test]
fn a_preempt_first_seen_after_its_not_before_is_still_prepared_and_stopped() {
    // NotBefore is the instant the event appears; Azure leaves it Scheduled 6 s longer.
    let setup = Setup::event_with("Preempt", "0s", "starts_late_by = \"6s\"", REAL_TIME);
    let (daemon, state, stop) = run_the_bundled_chain(&setup);
    let not_before = not_before(&state, Duration::ZERO);
    let started = at(&state, Transition::Started);
    eprintln!(
        "Preempt seen after NotBefore: stop action {} ms after NotBefore, {} ms before it started",
        stop.saturating_sub(not_before),
        started.saturating_sub(stop)
    );
    assert!(
        stop < started,
        "the stop action ran at {stop}, after the event started at {started}: {}",
        daemon.describe_for_failure()
    );
    // Waited for: the log is read on a thread, and the simulator saw the event end first.
    wait_until(
        LOG_WAIT,
        "graceful-shutdown's prepare after NotBefore in the log",
        || {
            daemon.decisions().iter().any(|d| {
                d.plugin == "graceful-shutdown"
                    && d.phase == "prepare"
                    && d.at_unix_ms >= not_before
            })
        },
        || daemon.describe_for_failure(),
    );
    assert_eq!(daemon.wait_for_message(LOG_WAIT, PREPARING_LATE).len(), 1);
}

#[test]
fn a_thirty_second_preempt_fits_a_drain_a_twelve_second_checkpoint_and_the_stop() {
    let setup = Setup::preempt("30s");
    setup.install("lb-drain", None);
    // The operator's checkpoint takes 12 s: the action answers 75 (still running) until then.
    // The manifest declares 15 s (what it takes, with room to spare), so the checkpoint is
    // asked at 28 − 15 − 10 = 3 s and done before graceful-shutdown's turn at 18 s.
    let begun = setup.path("checkpoint-begun");
    let done = setup.path("checkpoint-done");
    let checkpoint_script = format!(
        "[ -f {b} ] || date +%s%3N > {b}; now=$(date +%s%3N); \
         if [ $((now - $(cat {b}))) -ge 12000 ]; then date +%s%3N > {d}; exit 0; fi; exit 75",
        b = begun.display(),
        d = done.display()
    );
    let checkpoint = format!(
        "{DOWN_EVENTS}after = [\"lb-drain\"]\nbudget = \"10s\"\nprepare-time = \"15s\"\n\
         [config]\ncheckpoint-action = \"checkpoint-app\"\nretry-seconds = 1\n\
         [capabilities]\nactions = [\"checkpoint-app\"]\n"
    );
    setup.install("checkpoint", Some(&checkpoint));
    setup.install("graceful-shutdown", Some(&graceful_shutdown_manifest()));
    let stopped = setup.path("stopped");
    let actions = format!(
        "{}\n[actions.checkpoint-app]\nargv = [\"sh\", \"-c\", {checkpoint_script:?}]\n\
         timeout = \"5s\"\n",
        stop_action(&stopped)
    );
    let daemon = setup.start_daemon(&actions);
    let state = setup.wait_for_the_end(&daemon);
    assert_polled_before_the_event(&state);

    let appeared = at(&state, Transition::Appeared);
    let deadline = not_before(&state, Duration::from_secs(30));
    let checkpointed = instant_in(&done);
    let stop = instant_in(&stopped);
    eprintln!(
        "30 s Preempt: checkpoint done {} ms and stop action {} ms after the event appeared; \
         NotBefore {} ms after it",
        checkpointed.saturating_sub(appeared),
        stop.saturating_sub(appeared),
        deadline.saturating_sub(appeared)
    );
    assert!(
        checkpointed <= stop,
        "the app was stopped at {stop}, before its checkpoint was done at {checkpointed}"
    );
    assert!(
        stop < deadline,
        "the stop action ran at {stop}, after NotBefore {deadline}: {}",
        daemon.describe_for_failure()
    );
    assert!(stop < at(&state, Transition::Started));
    // The drain (15 s) did not fit beside a 12 s checkpoint: it was cut short, and said so.
    // Waited for: the log is read on a thread, and the simulator saw the event end first.
    wait_for(LOG_WAIT, "the log to say lb-drain was cut short", || {
        let shortened = daemon.lines_with_message(TURN_SHORTENED);
        match shortened
            .iter()
            .any(|line| line.text("plugin") == "checkpoint" && line.text("cut_short") == "lb-drain")
        {
            true => Ok(()),
            false => Err(format!(
                "{:?}",
                shortened
                    .iter()
                    .map(|line| &line.fields)
                    .collect::<Vec<_>>()
            )),
        }
    });
}

#[test]
fn an_event_announced_further_ahead_than_the_lead_time_is_prepared_only_from_then() {
    // 15 min of notice at 30x: NotBefore is 30 s (wall) after the event appears; with a
    // 20 s lead time, lb-drain is first asked about 10 s after it appeared.
    let setup = Setup::event("Reboot", "15m", 30.0);
    setup.install(
        "lb-drain",
        Some(
            "subscribe = [\"Reboot\"]\nbudget = \"5s\"\nprepare-time = \"1s\"\n[config]\n\
             drain-seconds = 1\n[capabilities]\nreadiness = true\n",
        ),
    );
    let daemon = setup.start_daemon_with_lead(Some("20s"), "");
    let admin = daemon.admin_address(Duration::from_secs(30));
    let waiting = wait_for(Duration::from_secs(30), "the event in /status", || {
        let body = http_get(&admin, "/status")?;
        let snapshot: StatusSnapshot = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        match snapshot.events.first() {
            Some(event) => Ok(event.clone()),
            None => Err(format!("no event yet: {body}")),
        }
    });
    assert_eq!(waiting.lifecycle, "scheduled, waiting for the lead time");
    assert_eq!(waiting.preparing_since, None);
    assert!(
        daemon.decisions().is_empty(),
        "a plugin was asked before the lead time"
    );
    let announced = daemon.wait_for_message(LOG_WAIT, PREPARATION_WAITS);
    assert_eq!(announced.len(), 1, "{}", daemon.describe_for_failure());

    let first = daemon
        .wait_for_phase(Duration::from_secs(60), None, "lb-drain", "prepare")
        .remove(0);
    let state = setup.simulator.state();
    let appeared = at(&state, Transition::Appeared);
    let after = first.at_unix_ms.saturating_sub(appeared);
    eprintln!(
        "lead time 20 s, NotBefore 30 s after the event appeared: first prepare {after} ms after it"
    );
    // NotBefore in the document is cut to whole seconds: 29–30 s after the appearance, so
    // the lead time begins 9–10 s after it. No earlier than that; and in time for the
    // plugin's turn: before NotBefore minus its 1 s prepare-time and the 2 s safety margin
    // (a bound the product sets, not the machine's speed; the fake-clock scheduler tests
    // pin the instant itself).
    assert!(
        (8_700..=26_000).contains(&after),
        "lb-drain was first asked {after} ms after the event appeared: not from the lead \
         time (~10 s), or too late for its turn (26 s)"
    );
    let done = setup.wait_for_the_end(&daemon);
    assert_eq!(accepted_approvals(&done, &first.event_id).len(), 1);
}

#[test]
fn a_request_that_hangs_when_a_preempt_appears_does_not_hide_it() {
    // From 4 s the first GET is held 30 s, longer than the client's 10 s time-out; the
    // Preempt appears at 5 s with 8 s of notice. Waiting for that request alone would see
    // the event only after it started; the polls sent beside it see it at once.
    let setup = Setup::scenario(
        "name = \"hanging-get\"\nend_after = \"2s\"\n\n[[events]]\nid = \"preempt\"\n\
         type = \"Preempt\"\nappear_at = \"5s\"\nnotice = \"8s\"\nruns_for = \"3s\"\n\n\
         [[faults]]\nkind = \"delay\"\ndelay = \"30s\"\nfrom = \"4s\"\nfirst_requests = 1\n",
        REAL_TIME,
    );
    setup.install("graceful-shutdown", Some(PREEMPT_STOP_MANIFEST));
    let stopped = setup.path("stopped");
    let daemon = setup.start_daemon(&stop_action(&stopped));
    let state = setup.wait_for_the_end(&daemon);
    assert_polled_before_the_event(&state);
    assert_held_a(&state, "GET");
    let stop = instant_in(&stopped);
    let started = at(&state, Transition::Started);
    assert!(
        stop < started,
        "the stop action ran at {stop}, after the Preempt started at {started}: {}",
        daemon.describe_for_failure()
    );
}

#[test]
fn a_slow_approval_post_does_not_hold_up_a_preempt_that_appears_meanwhile() {
    // The Reboot (no plugin subscribes; approved at once) is approved at 2 s with a POST
    // that IMDS holds 9 s. The Preempt appears at 4 s with 6 s of notice: its stop action
    // must run while that POST is still in flight, not after it returned at about 11 s.
    let setup = Setup::scenario(
        "name = \"slow-approval\"\nend_after = \"2s\"\n\n\
         [[events]]\nid = \"reboot\"\ntype = \"Reboot\"\nappear_at = \"2s\"\nnotice = \"5m\"\n\
         runs_for = \"1s\"\n\n\
         [[events]]\nid = \"preempt\"\ntype = \"Preempt\"\nappear_at = \"4s\"\nnotice = \"6s\"\n\
         runs_for = \"3s\"\n\n\
         [[faults]]\nkind = \"delay\"\ndelay = \"9s\"\nuntil = \"4s\"\nmethods = [\"POST\"]\n",
        REAL_TIME,
    );
    setup.install("graceful-shutdown", Some(PREEMPT_STOP_MANIFEST));
    let stopped = setup.path("stopped");
    let daemon = setup.start_daemon_with(
        None,
        &["approve-unsubscribed = true"],
        &stop_action(&stopped),
    );
    let state = setup.wait_for_the_end_of(&daemon, Some("preempt"));
    assert_polled_before_the_event(&state);
    assert_held_a(&state, "POST");
    let reboot_approved = state
        .approvals
        .iter()
        .any(|approval| approval.event_id == "reboot" && approval.accepted);
    assert!(reboot_approved, "{}", daemon.describe_for_failure());
    let stop = instant_in(&stopped);
    let started = at_of(&state, "preempt", Transition::Started);
    assert!(
        stop < started,
        "the stop action ran at {stop}, after the Preempt started at {started}: {}",
        daemon.describe_for_failure()
    );
}

// ---- a document of 7 500 events (issue 32) ----------------------------------------------

/// How many Reboots the large document lists.
const LARGE_DOCUMENT_EVENTS: usize = 7_500;
/// The Preempt's notice among them (the scenario's `notice = "30s"`), in ms.
const LARGE_DOCUMENT_PREEMPT_NOTICE_MS: u64 = 30_000;
/// No gap between two polls may reach ten poll intervals, however loaded the machine.
const LARGE_DOCUMENT_MAX_GAP_MS: u64 = 10_000;

/// 7 500 Reboots for vm-a, 15 minutes ahead, appearing at 2 s, in the shape of a trimmed
/// IMDS answer (2017-08-01 fields, no ResourceType, short ids): 0.99 MB, under the 1 MiB
/// forewarn reads. A Preempt with 30 s of notice appears among them at 14 s.
fn large_document_scenario() -> String {
    let mut text = String::from(
        "name = \"large-document\"\nend_after = \"1s\"\nshape = \"2017-08-01\"\n\
         omit_fields = [\"ResourceType\"]\n",
    );
    for index in 0..LARGE_DOCUMENT_EVENTS {
        text.push_str(&format!(
            "\n[[events]]\nid = \"e{index:05}\"\ntype = \"Reboot\"\nresources = [\"vm-a\"]\n\
             appear_at = \"2s\"\nnotice = \"15m\"\n"
        ));
    }
    text.push_str(
        "\n[[events]]\nid = \"preempt\"\ntype = \"Preempt\"\nresources = [\"vm-a\"]\n\
         appear_at = \"14s\"\nnotice = \"30s\"\nruns_for = \"3s\"\n",
    );
    text
}

/// The gaps between the GETs of the document the simulator saw from `from` to `until`
/// (Unix ms), the last one to `until` included.
fn poll_gaps(state: &StateSnapshot, from: u64, until: u64) -> Vec<u64> {
    let gets: Vec<u64> = state
        .requests
        .iter()
        .filter(|request| {
            request.method == "GET" && request.path.ends_with("/metadata/scheduledevents")
        })
        .map(|request| request.at_unix_ms)
        .filter(|at| (from..until).contains(at))
        .collect();
    let mut gaps: Vec<u64> = gets.windows(2).map(|pair| pair[1] - pair[0]).collect();
    gaps.extend(gets.last().map(|last| until - last));
    gaps
}

#[test]
fn a_7500_event_document_keeps_the_poll_cadence_and_a_preempt_in_it_is_stopped_at_once() {
    let setup = Setup::scenario(&large_document_scenario(), REAL_TIME);
    // A plugin that defers every Reboot: its answers stream into the daemon all along.
    write_plugin_dir(
        &setup.path("plugins"),
        Path::new(PROBE),
        &[ProbePlugin::new("busy", "defer").subscribe(&["Reboot"])],
    );
    setup.install("graceful-shutdown", Some(PREEMPT_STOP_MANIFEST));
    let stopped = setup.path("stopped");
    let daemon = setup.start_daemon_polling("1s", &stop_action(&stopped));
    // The action's shell creates the file, then writes the instant: wait for the instant.
    let stop = wait_for(Duration::from_secs(90), "the Preempt's stop action", || {
        let written = std::fs::read_to_string(&stopped).unwrap_or_default();
        written
            .trim()
            .parse::<u64>()
            .map_err(|_| daemon.describe_for_failure())
    });
    let state = setup.simulator.state();
    let appeared = at_of(&state, "preempt", Transition::Appeared);
    let reboots_appeared = at_of(&state, "e00000", Transition::Appeared);
    let gaps = poll_gaps(&state, reboots_appeared, stop);
    let mut sorted = gaps.clone();
    sorted.sort_unstable();
    let longest = sorted.last().copied().unwrap_or_default();
    let p99 = sorted
        .get((sorted.len() * 99).div_ceil(100).saturating_sub(1))
        .copied()
        .unwrap_or_default();
    eprintln!(
        "7 500 events: stop action {} ms after the Preempt appeared; {} polls, gap p99 {p99} ms, max {longest} ms",
        stop.saturating_sub(appeared),
        gaps.len()
    );
    let seen = daemon
        .transitions("scheduled")
        .iter()
        .find(|line| line.text("event_id") == "preempt")
        .map(|line| line.at_unix_ms);
    let gets_after: Vec<u64> = state
        .requests
        .iter()
        .filter(|request| request.method == "GET" && request.at_unix_ms + 2_000 >= appeared)
        .map(|request| request.at_unix_ms.saturating_sub(appeared))
        .take(4)
        .collect();
    eprintln!(
        "Preempt seen by the daemon {:?} ms after it appeared; GETs at {gets_after:?} ms after",
        seen.map(|at| at.saturating_sub(appeared))
    );
    // What must hold whatever the machine's speed (the figures, gaps and the stop's delay
    // against a 10-event baseline, are `bench-goals preempt` in BENCHMARKS.md): the poller
    // went on (no gap of ten intervals; before issue 32 the polls stopped for 10 to 29 s)
    // and the Preempt's stop action ran before its NotBefore and before it started (before
    // issue 32 it had not run 90 s later).
    assert!(
        gaps.len() >= 2,
        "too few polls to judge the cadence: {gaps:?}"
    );
    assert!(
        longest < LARGE_DOCUMENT_MAX_GAP_MS,
        "a poll came {longest} ms after the one before (the interval is 1 s): {gaps:?}"
    );
    let preempt_not_before = appeared + LARGE_DOCUMENT_PREEMPT_NOTICE_MS;
    let started = state
        .history
        .iter()
        .find(|record| record.event_id == "preempt" && record.transition == Transition::Started)
        .map_or(u64::MAX, |record| record.at_unix_ms);
    assert!(
        stop < preempt_not_before && stop < started,
        "the stop action ran {} ms after the Preempt appeared, after its NotBefore ({} ms) \
         or its start: {}",
        stop.saturating_sub(appeared),
        LARGE_DOCUMENT_PREEMPT_NOTICE_MS,
        daemon.describe_for_failure()
    );
}

// ---- the VM's clock against Azure's (issue 32) ------------------------------------------

/// lb-drain draining for longer than any notice here, then graceful-shutdown with the stop
/// action, whose turn comes 5 s (its prepare-time) before the deadline (NotBefore - 2 s):
/// when the stop action runs depends on NotBefore and the clock it is read on.
fn install_drain_then_stop(setup: &Setup) {
    setup.install(
        "lb-drain",
        Some(
            "subscribe = [\"Preempt\"]\nbudget = \"5s\"\nprepare-time = \"1s\"\n[config]\n\
             drain-seconds = 120\n[capabilities]\nreadiness = true\n",
        ),
    );
    setup.install(
        "graceful-shutdown",
        Some(
            "subscribe = [\"Preempt\"]\nafter = [\"lb-drain\"]\nbudget = \"10s\"\n\
             prepare-time = \"5s\"\n[config]\nstop-action = \"stop-app\"\n[capabilities]\n\
             actions = [\"stop-app\"]\n",
        ),
    );
}

/// The stop action: appends the instant it ran (Unix ms) to `file`, one line a run.
fn counted_stop_action(file: &Path) -> String {
    format!(
        "[actions.stop-app]\nargv = [\"sh\", \"-c\", \"date +%s%3N >> {}\"]\ntimeout = \"5s\"\n",
        file.display()
    )
}

/// The instants (Unix ms) an appending action wrote to `file`.
fn runs_in(file: &Path) -> Vec<u64> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|line| line.trim().parse().expect("a Unix ms"))
        .collect()
}

#[test]
fn a_vm_clock_ten_seconds_behind_still_stops_before_a_fifteen_second_preempt() {
    // Azure's clock (IMDS's Date, NotBefore, the start) is 10 s ahead of this VM's: read on
    // the VM's clock, the Preempt would start 10 s later than it does, and the stop action
    // (its turn 7 s before NotBefore) would come after the start.
    let setup = Setup::scenario(
        "name = \"clock-behind\"\nend_after = \"1s\"\n\n[[events]]\nid = \"preempt\"\n\
         type = \"Preempt\"\nappear_at = \"5s\"\nnotice = \"15s\"\nruns_for = \"3s\"\n\n\
         [[faults]]\nkind = \"vm-clock\"\noffset = \"-10s\"\n",
        REAL_TIME,
    );
    install_drain_then_stop(&setup);
    let stopped = setup.path("stopped");
    let daemon = setup.start_daemon(&counted_stop_action(&stopped));
    let admin = daemon.admin_address(Duration::from_secs(30));
    let state = setup.wait_for_the_end_of(&daemon, Some("preempt"));
    assert_polled_before_the_event(&state);
    let runs = runs_in(&stopped);
    let started = at_of(&state, "preempt", Transition::Started);
    let appeared = at_of(&state, "preempt", Transition::Appeared);
    eprintln!(
        "VM clock 10 s behind, 15 s Preempt: stop action {:?} ms after it appeared, started {} ms after",
        runs.iter()
            .map(|run| run.saturating_sub(appeared))
            .collect::<Vec<_>>(),
        started.saturating_sub(appeared)
    );
    assert_eq!(runs.len(), 1, "{}", daemon.describe_for_failure());
    assert!(
        runs[0] < started,
        "the stop action ran at {}, after the Preempt started at {started}: {}",
        runs[0],
        daemon.describe_for_failure()
    );
    let body = http_get(&admin, "/status").expect("/status");
    let status: StatusSnapshot = serde_json::from_str(&body).expect("a status snapshot");
    let clock = status.imds.clock.expect("IMDS's clock in /status");
    assert!(
        (9_000..=10_500).contains(&clock.offset_ms),
        "IMDS's clock is 10 s ahead: {clock:?}"
    );
}

#[test]
fn a_step_of_the_vm_clock_neither_loses_nor_repeats_a_plugin_call() {
    // The Preempt appears at 5 s with 40 s of notice. At 10 s the VM's clock steps 20 s
    // behind Azure's (as after a Freeze): the event starts 20 s sooner than the VM's clock
    // says, and a daemon reading that clock would make the stop action after the start. At
    // 40 s (Azure's) it steps 5 s back (as NTP corrects part of it): Azure's clock stands
    // still 5 s, and nothing may be asked twice.
    let setup = Setup::scenario(
        "name = \"clock-steps\"\nend_after = \"1s\"\n\n[[events]]\nid = \"preempt\"\n\
         type = \"Preempt\"\nappear_at = \"5s\"\nnotice = \"40s\"\nruns_for = \"3s\"\n\n\
         [[faults]]\nkind = \"vm-clock\"\noffset = \"-20s\"\nat = \"10s\"\n\n\
         [[faults]]\nkind = \"vm-clock\"\noffset = \"-15s\"\nat = \"40s\"\n",
        REAL_TIME,
    );
    install_drain_then_stop(&setup);
    let stopped = setup.path("stopped");
    let daemon = setup.start_daemon(&counted_stop_action(&stopped));
    let state = setup.wait_for_the_end_of(&daemon, Some("preempt"));
    let steps = state.faults_of(FaultKind::VmClock);
    assert_eq!(steps.len(), 2, "both steps taken: {:?}", state.faults);
    let runs = runs_in(&stopped);
    let started = at_of(&state, "preempt", Transition::Started);
    assert_eq!(
        runs.len(),
        1,
        "the stop action ran {runs:?}: {}",
        daemon.describe_for_failure()
    );
    assert!(
        runs[0] < started,
        "the stop action ran at {}, after the Preempt started at {started}: {}",
        runs[0],
        daemon.describe_for_failure()
    );
    // graceful-shutdown prepared (stopped the app) once; each plugin was told of the start
    // once and of the end once.
    for plugin in ["lb-drain", "graceful-shutdown"] {
        daemon.wait_for_phase(
            Duration::from_secs(30),
            Some("preempt"),
            plugin,
            "ended-after-start",
        );
    }
    let decisions = daemon.decisions();
    let count = |plugin: &str, phase: &str| {
        decisions
            .iter()
            .filter(|decision| decision.plugin == plugin && decision.phase == phase)
            .count()
    };
    assert_eq!(
        count("graceful-shutdown", "prepare"),
        1,
        "{}",
        daemon.describe_for_failure()
    );
    for plugin in ["lb-drain", "graceful-shutdown"] {
        assert_eq!(count(plugin, "started"), 1, "{plugin} told of the start");
        assert_eq!(
            count(plugin, "ended-after-start"),
            1,
            "{plugin} told of the end"
        );
    }
    assert!(
        accepted_approvals(&state, "preempt").is_empty(),
        "lb-drain never approved"
    );
}

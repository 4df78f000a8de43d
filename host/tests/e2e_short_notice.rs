//! Notices end to end, the real binary with the bundled plugins against the simulator: short
//! ones (the stop action runs before the event) and long ones (prepared at the lead time).

use std::path::{Path, PathBuf};
use std::time::Duration;

use forewarn_host::log_messages::{PREPARATION_WAITS, PREPARING_LATE, TURN_SHORTENED};
use forewarn_host::ops::status::StatusSnapshot;
use forewarn_simulator::{FaultKind, StateSnapshot, Transition};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, Simulator, accepted_approvals, http_get, install_bundled_plugin, wait_for,
};

/// Scenario time is wall time here: the notices are the point.
const REAL_TIME: f64 = 1.0;

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
    assert!(
        stop < started,
        "the stop action ran at {stop}, after the event started at {started}: {}",
        daemon.describe_for_failure()
    );
    assert!(stop <= not_before(&state, Duration::from_secs(3)));
    let shortened: Vec<String> = daemon
        .lines_with_message(TURN_SHORTENED)
        .iter()
        .map(|line| line.text("plugin").to_owned())
        .collect();
    assert!(
        shortened.contains(&"graceful-shutdown".to_owned()),
        "graceful-shutdown did not wait for lb-drain's 15 s drain, and the log says so: \
         {shortened:?}"
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
    let prepared_late = daemon.decisions().iter().any(|d| {
        d.plugin == "graceful-shutdown" && d.phase == "prepare" && d.at_unix_ms >= not_before
    });
    assert!(prepared_late, "{}", daemon.describe_for_failure());
    assert_eq!(daemon.lines_with_message(PREPARING_LATE).len(), 1);
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
    let shortened = daemon.lines_with_message(TURN_SHORTENED);
    assert!(
        shortened
            .iter()
            .any(|line| line.text("plugin") == "checkpoint"
                && line.text("cut_short") == "lb-drain"),
        "{:?}",
        shortened.iter().map(|line| &line.fields).collect::<Vec<_>>()
    );
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
    let announced = daemon.lines_with_message(PREPARATION_WAITS);
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

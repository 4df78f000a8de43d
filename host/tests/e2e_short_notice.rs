//! Spot evictions and other short notices, end to end: the real binary with the bundled
//! plugins against the simulator at real speed; the stop action must run before the event.

use std::path::{Path, PathBuf};
use std::time::Duration;

use forewarn_host::log_messages::TURN_SHORTENED;
use forewarn_simulator::{StateSnapshot, Transition};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, Simulator, install_bundled_plugin, wait_for,
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
        let scenario = format!(
            "name = \"preempt-{notice}\"\nend_after = \"2s\"\n\n[[events]]\ntype = \"Preempt\"\n\
             appear_at = \"5s\"\nnotice = \"{notice}\"\nruns_for = \"3s\"\n"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        std::fs::create_dir_all(dir.path().join("plugins")).expect("create the plugin dir");
        let simulator = Simulator::builder(forewarn_binary!())
            .scenario_text(&scenario)
            .speed(REAL_TIME)
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
        let config = DaemonConfig {
            extra: actions.to_owned(),
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
        wait_for(
            Duration::from_secs(90),
            "the Preempt to start and end",
            || {
                let state = self.simulator.state();
                let done = state
                    .history
                    .iter()
                    .any(|r| r.transition == Transition::Removed);
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

/// The event's NotBefore at the simulator: appearance plus `notice`.
fn not_before(state: &StateSnapshot, notice: Duration) -> u64 {
    at(state, Transition::Appeared) + u64::try_from(notice.as_millis()).unwrap_or(u64::MAX)
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

#[test]
fn a_three_second_preempt_runs_the_stop_action_before_the_event_starts() {
    let setup = Setup::preempt("3s");
    // The bundled chain as shipped: a 15 s drain, then checkpoint, then the stop action.
    setup.install("lb-drain", None);
    setup.install("checkpoint", None);
    setup.install("graceful-shutdown", Some(&graceful_shutdown_manifest()));
    let stopped = setup.path("stopped");
    let daemon = setup.start_daemon(&stop_action(&stopped));
    let state = setup.wait_for_the_end(&daemon);
    assert_polled_before_the_event(&state);

    let stop = instant_in(&stopped);
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
fn a_thirty_second_preempt_fits_a_drain_a_twelve_second_checkpoint_and_the_stop() {
    let setup = Setup::preempt("30s");
    setup.install("lb-drain", None);
    // The operator's checkpoint takes 12 s: the action answers 75 (still running) until then.
    let begun = setup.path("checkpoint-begun");
    let done = setup.path("checkpoint-done");
    let checkpoint_script = format!(
        "[ -f {b} ] || date +%s%3N > {b}; now=$(date +%s%3N); \
         if [ $((now - $(cat {b}))) -ge 12000 ]; then date +%s%3N > {d}; exit 0; fi; exit 75",
        b = begun.display(),
        d = done.display()
    );
    let checkpoint = format!(
        "{DOWN_EVENTS}after = [\"lb-drain\"]\nbudget = \"10s\"\nprepare-time = \"13s\"\n\
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

//! A last chance when no event came (docs/operations.md): the operating system shuts down
//! with no Scheduled Event, and forewarn, holding systemd-logind's delay inhibitor, runs the
//! plugins' preparation for its own Shutdown event before it lets the shutdown go on.
//! logind is a stand-in serving its documented Manager interface on a private, real
//! `dbus-daemon` (`tests/src/logind.rs` says why not elogind); every check reads the effect:
//! the lock's release on the bus, HAProxy's state, the actions' own records, IMDS's
//! approvals at the simulator.

use std::path::{Path, PathBuf};
use std::time::Duration;

use forewarn_test_support::drain_drill::{graceful_shutdown_manifest, run_shutdown_drill};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::guests::PROBE;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, ProbePlugin, Simulator, accepted_approvals, install_bundled_plugin,
    now_unix_ms, wait_for, write_plugin_dir,
};
use forewarn_test_support::logind::FakeLogind;

/// Far from anything the tests wait for.
const WAIT: Duration = Duration::from_secs(120);
/// logind's `InhibitDelayMaxUSec` in the tests: room for a budget of several seconds.
const LOGIND_MAX: Duration = Duration::from_secs(40);

#[test]
fn a_shutdown_with_no_event_drains_behind_haproxy_and_stops_the_app_before_the_release() {
    let logind = FakeLogind::start(LOGIND_MAX);
    let drill = run_shutdown_drill(forewarn_binary!(), &logind, "30s");
    let failed: Vec<_> = drill
        .sent
        .iter()
        .filter(|sent| sent.outcome.is_err())
        .collect();
    eprintln!(
        "shutdown drill: {} requests, {} failed; HAProxy DOWN {} ms after the signal, the app \
         stopped at {:?}, the lock released {} ms after the signal",
        drill.sent.len(),
        failed.len(),
        drill.down_at.saturating_sub(drill.signalled_at),
        drill
            .stopped_at
            .iter()
            .map(|at| at.saturating_sub(drill.signalled_at))
            .collect::<Vec<_>>(),
        drill.released_at.saturating_sub(drill.signalled_at),
    );
    assert!(
        failed.is_empty(),
        "{} of {} requests failed through HAProxy: {failed:?}",
        failed.len(),
        drill.sent.len()
    );
    assert_eq!(
        drill.stopped_at.len(),
        1,
        "the stop action ran {} times; {}",
        drill.stopped_at.len(),
        drill.daemon.describe_for_failure()
    );
    let stopped_at = drill.stopped_at[0];
    assert!(
        drill.down_at <= stopped_at,
        "the app was stopped at {stopped_at}, before HAProxy took vm-a out at {}",
        drill.down_at
    );
    assert!(
        stopped_at <= drill.released_at,
        "the shutdown was let go on at {} before the app was stopped at {stopped_at}",
        drill.released_at
    );
    // The lock was released by forewarn, not by its exit: the daemon still runs.
    let mut daemon = drill.daemon;
    assert!(!daemon.has_exited(), "{}", daemon.describe_for_failure());
}

/// A daemon with graceful-shutdown (its actions record their runs in files) and `probes`,
/// on `logind`'s bus, against a simulator playing `scenario`.
struct Setup {
    dir: tempfile::TempDir,
    simulator: Simulator,
    config: PathBuf,
    logind: FakeLogind,
}

impl Setup {
    fn new(scenario: &str, probes: &[ProbePlugin], budget: &str) -> Setup {
        let logind = FakeLogind::start(LOGIND_MAX);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let plugin_dir = dir.path().join("plugins");
        write_plugin_dir(&plugin_dir, Path::new(PROBE), probes);
        install_bundled_plugin(
            &plugin_dir,
            "graceful-shutdown",
            Some(&graceful_shutdown_manifest()),
        );
        let simulator = Simulator::builder(forewarn_binary!())
            .scenario_text(scenario)
            .start_on_first_poll()
            .start();
        let record = |name: &str| {
            let file = dir.path().join(name);
            format!("[\"sh\", \"-c\", \"date +%s%3N >> {}\"]", file.display())
        };
        let extra = format!(
            "[actions.stop-app]\nargv = {}\n\n[actions.start-app]\nargv = {}\n\n[shutdown]\n\
             budget = \"{budget}\"\n",
            record("stopped"),
            record("started"),
        );
        let config = dir.path().join("forewarn.toml");
        DaemonConfig {
            extra,
            ..DaemonConfig::vm_a(dir.path(), plugin_dir, &simulator.base_url)
        }
        .write(&config);
        Setup {
            dir,
            simulator,
            config,
            logind,
        }
    }

    fn start_daemon(&self) -> Daemon {
        let daemon = Daemon::start_with_env(
            forewarn_binary!(),
            &self.config,
            &[("DBUS_SYSTEM_BUS_ADDRESS", self.logind.address())],
        );
        self.logind.wait_for_delay_lock("forewarn", WAIT);
        daemon
    }

    /// The times the action recorded (`stopped` or `started`).
    fn runs(&self, action: &str) -> Vec<u64> {
        std::fs::read_to_string(self.dir.path().join(action))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect()
    }

    fn wait_runs(&self, action: &str, count: usize, daemon: &Daemon) -> Vec<u64> {
        wait_for(
            WAIT,
            &format!("the {action} action to run {count} times"),
            || {
                let runs = self.runs(action);
                match runs.len() >= count {
                    true => Ok(runs),
                    false => Err(format!("{runs:?}; {}", daemon.describe_for_failure())),
                }
            },
        )
    }
}

/// Nothing happens at IMDS for a long while.
const IDLE: &str = r#"
name = "quiet"
description = "No event at all."
end_after = "1h"
"#;

/// A Reboot announced 10 minutes ahead that, once approved, runs for 10 minutes.
const LONG_REBOOT: &str = r#"
name = "long-reboot"
description = "A Reboot that stays under way."
end_after = "1h"

[[events]]
type = "Reboot"
source = "Platform"
appear_at = "1s"
notice = "10m"
runs_for = "10m"
"#;

fn terminate(daemon: &mut Daemon) {
    let pid = daemon.pid();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM {pid}: {status}");
    wait_for(WAIT, "the daemon to exit after SIGTERM", || {
        match daemon.has_exited() {
            true => Ok(()),
            false => Err(daemon.describe_for_failure()),
        }
    });
}

#[test]
fn a_shutdown_during_an_event_already_prepared_runs_nothing_twice() {
    let setup = Setup::new(LONG_REBOOT, &[], "10s");
    let daemon = setup.start_daemon();
    let approved = wait_for(WAIT, "the Reboot approved at IMDS", || {
        let state = setup.simulator.state();
        let approved = state
            .history
            .first()
            .map(|entry| entry.event_id.clone())
            .filter(|id| !accepted_approvals(&state, id).is_empty());
        approved.ok_or_else(|| daemon.describe_for_failure())
    });
    assert_eq!(
        setup.runs("stopped").len(),
        1,
        "the app stopped once for {approved}"
    );
    let signalled_at = setup.logind.prepare_for_shutdown(true);
    let released_at = setup.logind.wait_all_released(WAIT);
    assert!(released_at >= signalled_at);
    assert_eq!(
        setup.runs("stopped").len(),
        1,
        "the stop action ran again for the shutdown; {}",
        daemon.describe_for_failure()
    );
    let approvals = setup.simulator.state().approvals.len();
    assert_eq!(approvals, 1, "IMDS heard {approvals} approvals");
}

#[test]
fn a_plain_stop_of_forewarn_is_not_a_shutdown() {
    let setup = Setup::new(IDLE, &[], "10s");
    let mut daemon = setup.start_daemon();
    // `systemctl stop forewarn`: SIGTERM, no PrepareForShutdown.
    terminate(&mut daemon);
    assert!(
        setup.runs("stopped").is_empty(),
        "the stop action ran on a plain stop of forewarn"
    );
    assert!(
        setup.logind.held().is_empty(),
        "the lock outlived the daemon: {:?}",
        setup.logind.locks()
    );
    // The next start finds nothing to recover.
    let daemon = setup.start_daemon();
    wait_for(WAIT, "the restarted daemon to poll IMDS", || {
        match setup.simulator.state().requests.len() > 10 {
            true => Ok(()),
            false => Err(daemon.describe_for_failure()),
        }
    });
    assert!(setup.runs("started").is_empty(), "the start action ran");
}

#[test]
fn a_hanging_plugin_is_given_up_on_when_the_budget_ends() {
    let hold = ProbePlugin::new("hold", "defer").subscribe(&["Reboot"]);
    let setup = Setup::new(IDLE, &[hold], "4s");
    let daemon = setup.start_daemon();
    let signalled_at = setup.logind.prepare_for_shutdown(true);
    let released_at = setup.logind.wait_all_released(WAIT);
    let held_for = released_at.saturating_sub(signalled_at);
    eprintln!("the lock was released {held_for} ms after the signal (budget 4 s)");
    assert!(
        held_for >= 3_500,
        "released {held_for} ms after the signal, before the 4 s budget ended, while `hold` \
         still deferred; {}",
        daemon.describe_for_failure()
    );
    // The plugins that could prepare did: graceful-shutdown is not ordered after `hold`.
    assert_eq!(
        setup.runs("stopped").len(),
        1,
        "{}",
        daemon.describe_for_failure()
    );
}

#[test]
fn a_cancelled_shutdown_starts_the_app_again_and_takes_a_new_lock() {
    let setup = Setup::new(IDLE, &[], "10s");
    let daemon = setup.start_daemon();
    setup.logind.prepare_for_shutdown(true);
    setup.logind.wait_all_released(WAIT);
    setup.wait_runs("stopped", 1, &daemon);
    setup.logind.prepare_for_shutdown(false);
    let started = setup.wait_runs("started", 1, &daemon);
    assert!(started[0] >= setup.runs("stopped")[0]);
    setup.logind.wait_for_delay_lock("forewarn", WAIT);
    assert_eq!(setup.logind.locks().len(), 2, "{:?}", setup.logind.locks());
}

#[test]
fn after_the_shutdown_the_next_start_recovers_the_app_and_records_the_outcome() {
    let setup = Setup::new(IDLE, &[], "10s");
    let mut daemon = setup.start_daemon();
    setup.logind.prepare_for_shutdown(true);
    setup.logind.wait_all_released(WAIT);
    let stopped = setup.wait_runs("stopped", 1, &daemon);
    assert!(
        setup.runs("started").is_empty(),
        "started before the VM came back"
    );
    // systemd stops the unit after the release; the VM comes back.
    terminate(&mut daemon);
    let restarted_at = now_unix_ms();
    let daemon = setup.start_daemon();
    let started = setup.wait_runs("started", 1, &daemon);
    assert!(
        started[0] >= restarted_at && started[0] >= stopped[0],
        "started at {started:?}, restarted at {restarted_at}"
    );
    // The outcome record says what it was: not from IMDS, handled, nothing approved.
    let outcomes = setup.dir.path().join("state").join("outcomes");
    let record = wait_for(WAIT, "the Shutdown event's outcome record", || {
        let records: Vec<String> = std::fs::read_dir(&outcomes)
            .map_err(|error| format!("{}: {error}", outcomes.display()))?
            .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
            .filter(|text| text.contains("\"Shutdown\"") && text.contains("finished"))
            .collect();
        records
            .into_iter()
            .next()
            .ok_or_else(|| daemon.describe_for_failure())
    });
    assert!(record.contains("OperatingSystem"), "{record}");
    assert!(
        setup.simulator.state().approvals.is_empty(),
        "something was approved at IMDS"
    );
}

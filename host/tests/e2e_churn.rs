//! End-to-end tests of event churn with the real `forewarn` binary and the bundled lb-drain:
//! reschedules that drop this VM, ids swapped in one document, new ids on start.
//!
//! The oracle is `/readyz`, sampled on a background thread and compared with the times the
//! simulator recorded for each event's transitions and with the daemon's structured log.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use forewarn_host::bundled::bundled_plugins;
use forewarn_simulator::{StateSnapshot, Transition};
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{
    Daemon, ProbePlugin, Setup, TestEnv, http_get, now_unix_ms, same_id, wait_until,
};

/// Scenario time runs this many times faster than the wall clock.
const SPEED: f64 = 10.0;
/// Generous bound for one wait.
const WAIT: Duration = Duration::from_secs(30);

/// lb-drain for Reboots with a drain window far longer than any test: it marks the VM not
/// ready on its first prepare call and keeps deferring, so nothing is approved (and the
/// simulator starts nothing early) while events come and go.
const LB_DRAIN: &str = "subscribe = [\"Reboot\"]\nbudget = \"5s\"\n\n[config]\ndrain-seconds = 3600\n\n[capabilities]\nreadiness = true\n";

/// One `GET /readyz`: sent and answered (Unix ms), and whether it answered 200.
#[derive(Debug, Clone, Copy)]
struct Sample {
    sent_ms: u64,
    answered_ms: u64,
    ready: bool,
}

/// Samples `/readyz` on a thread until dropped.
struct ReadyzSampler {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ReadyzSampler {
    fn start(admin: String) -> ReadyzSampler {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (samples, stop) = (samples.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let sent_ms = now_unix_ms();
                    let answer = http_get(&admin, "/readyz");
                    let answered_ms = now_unix_ms();
                    let ready = match answer {
                        Ok(_) => Some(true),
                        Err(error) if error.contains(" 503") => Some(false),
                        // Not an answer (connection refused while stopping): no sample.
                        Err(_) => None,
                    };
                    if let Some(ready) = ready {
                        let sample = Sample {
                            sent_ms,
                            answered_ms,
                            ready,
                        };
                        samples.lock().expect("samples lock").push(sample);
                    }
                    // Pacing only, not synchronisation: about 100 samples a second.
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        ReadyzSampler {
            samples,
            stop,
            thread: Some(thread),
        }
    }

    fn samples(&self) -> Vec<Sample> {
        self.samples.lock().expect("samples lock").clone()
    }

    fn latest(&self) -> Option<Sample> {
        self.samples.lock().expect("samples lock").last().copied()
    }
}

impl Drop for ReadyzSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ignored = thread.join();
        }
    }
}

/// The simulator on `scenario`, the bundled lb-drain installed, the daemon running, and
/// `/readyz` sampled.
struct Churn {
    setup: Setup,
    daemon: Daemon,
    readyz: ReadyzSampler,
}

impl Churn {
    fn start(scenario: &str) -> Churn {
        Churn::start_at(scenario, SPEED)
    }

    /// [`Churn::start`] at `speed`; the scenario's clock starts at the daemon's first poll.
    fn start_at(scenario: &str, speed: f64) -> Churn {
        // The sampler below probes /readyz, so lb-drain's drain ends after its threshold of
        // 503s and it approves; `hold` never does, so no event is approved early and each
        // keeps the course its scenario gives it (approved, it would start).
        let setup = TestEnv::builder(forewarn_binary!())
            .scenario_text(scenario)
            .speed(speed)
            .start_on_first_poll()
            .plugins(&[ProbePlugin::new("hold", "defer").subscribe(&["Reboot"])])
            .prepare();
        let lb_drain = bundled_plugins()
            .into_iter()
            .find(|plugin| plugin.name == "lb-drain")
            .expect("lb-drain is bundled");
        let plugins = setup.dir.path().join("plugins");
        std::fs::write(plugins.join("lb-drain.wasm"), lb_drain.wasm).expect("write lb-drain");
        std::fs::write(plugins.join("lb-drain.toml"), LB_DRAIN).expect("write its manifest");
        let daemon = setup.start_daemon();
        let readyz = ReadyzSampler::start(daemon.admin_address(WAIT));
        Churn {
            setup,
            daemon,
            readyz,
        }
    }

    /// When the simulator recorded `transition` of `event_id` (Unix ms), waiting for it.
    fn transition_ms(&self, event_id: &str, transition: Transition) -> u64 {
        let state = self
            .setup
            .simulator
            .wait_for_transition(WAIT * 4, event_id, transition);
        record_ms(&state, event_id, transition).expect("waited for it")
    }

    /// When lb-drain first answered `phase` for `event_id` (Unix ms), waiting for it.
    fn decided_ms(&self, event_id: &str, phase: &str) -> u64 {
        self.daemon
            .wait_for_phase(WAIT * 2, Some(event_id), "lb-drain", phase)
            .into_iter()
            .find(|d| same_id(&d.event_id, event_id) && d.plugin == "lb-drain" && d.phase == phase)
            .map(|d| d.at_unix_ms)
            .expect("waited for it")
    }

    fn wait_ready(&self, ready: bool) {
        wait_until(
            WAIT,
            &format!("/readyz ready = {ready}"),
            || {
                self.readyz
                    .latest()
                    .is_some_and(|sample| sample.ready == ready)
            },
            || self.daemon.describe_for_failure(),
        );
    }

    /// Asserts every sample wholly inside `[from_ms, until_ms)` answered 503, and that there
    /// were some.
    fn assert_held(&self, what: &str, from_ms: u64, until_ms: u64) {
        self.assert_every_sample(what, from_ms, until_ms, false);
    }

    /// Asserts every sample wholly inside `[from_ms, until_ms)` answered 200, and that there
    /// were some.
    fn assert_ready(&self, what: &str, from_ms: u64, until_ms: u64) {
        self.assert_every_sample(what, from_ms, until_ms, true);
    }

    fn assert_every_sample(&self, what: &str, from_ms: u64, until_ms: u64, ready: bool) {
        let inside: Vec<Sample> = self
            .readyz
            .samples()
            .into_iter()
            .filter(|s| s.sent_ms >= from_ms && s.answered_ms <= until_ms)
            .collect();
        assert!(
            !inside.is_empty(),
            "{what}: no /readyz sample between {from_ms} and {until_ms}"
        );
        let wrong: Vec<u64> = inside
            .iter()
            .filter(|s| s.ready != ready)
            .map(|s| s.sent_ms)
            .collect();
        let (expected, answered) = if ready {
            ("200", "503")
        } else {
            ("503", "200")
        };
        assert!(
            wrong.is_empty(),
            "{what}: /readyz answered {answered} at {wrong:?} where it should answer {expected} \
             (from {from_ms} until {until_ms})\n{}",
            self.daemon.describe_for_failure()
        );
    }
}

fn record_ms(state: &StateSnapshot, event_id: &str, transition: Transition) -> Option<u64> {
    state
        .history
        .iter()
        .find(|record| same_id(&record.event_id, event_id) && record.transition == transition)
        .map(|record| record.at_unix_ms)
}

#[test]
fn a_reschedule_that_drops_this_vm_puts_it_back_in_rotation() {
    let churn = Churn::start(
        r#"
name = "rescheduled-off-this-vm"
vms = ["vm-a", "vm-b"]
end_after = "1s"

[[events]]
id = "DROP-1"
type = "Reboot"
resources = ["vm-a", "vm-b"]
appear_at = "5s"
cancel_at = "80s"

[[events.reschedule]]
at = "40s"
resources = ["vm-b"]
"#,
    );
    let drained = churn.decided_ms("DROP-1", "prepare");
    churn.wait_ready(false);
    let released = churn.decided_ms("DROP-1", "ended-without-start");
    churn.wait_ready(true);
    let canceled = churn.transition_ms("DROP-1", Transition::Canceled);
    assert!(
        released < canceled,
        "lb-drain heard the end only at the cancel ({released} ≥ {canceled}), not at the \
         reschedule"
    );
    let rescheduled = churn
        .daemon
        .transitions("rescheduled")
        .first()
        .map(|line| line.at_unix_ms)
        .expect("the daemon logged the reschedule before lb-drain heard the end");
    churn.assert_held("while vm-a was named", drained, rescheduled);
    // Back in rotation because of the reschedule, before the cancel, and it stays there.
    let back = churn
        .readyz
        .samples()
        .into_iter()
        .find(|sample| sample.ready && sample.sent_ms >= drained)
        .expect("waited for /readyz 200 above");
    assert!(
        back.answered_ms < canceled,
        "vm-a came back in rotation only at the cancel ({} ≥ {canceled}), not at the reschedule",
        back.answered_ms
    );
    churn.assert_ready(
        "from the reschedule's release until the cancel",
        back.sent_ms,
        canceled,
    );
}

/// Events `CHURN-00` … `CHURN-50`: each appears as the one before it is canceled, in the
/// same document (scenario step `STEP_S` seconds).
fn swap_scenario(count: usize) -> String {
    const STEP_S: usize = 6;
    let mut text = String::from("name = \"id-churn\"\nend_after = \"1s\"\n");
    for index in 0..count {
        let appear = 5 + STEP_S * index;
        let _ = write!(
            text,
            "\n[[events]]\nid = \"CHURN-{index:02}\"\ntype = \"Reboot\"\nappear_at = \"{appear}s\"\n\
             cancel_at = \"{}s\"\n",
            appear + STEP_S
        );
    }
    text
}

/// Each event lives one 6 s step: at speed 5 that is 1.2 s of wall time, about five polls,
/// so the daemon sees every one of them even when the machine is loaded (at speed 10 it
/// would be two polls).
#[test]
fn the_vm_stays_drained_when_one_event_is_swapped_for_another_fifty_times() {
    const EVENTS: usize = 51;
    let churn = Churn::start_at(&swap_scenario(EVENTS), 5.0);
    let id = |index: usize| format!("CHURN-{index:02}");
    let last_ended = churn.transition_ms(&id(EVENTS - 1), Transition::Canceled);
    churn.wait_ready(true);
    for index in 1..EVENTS {
        // Swap `index`: in one document CHURN-(index-1) is canceled and CHURN-index appears.
        let drained = churn.decided_ms(&id(index), "prepare");
        let released = churn.decided_ms(&id(index - 1), "ended-without-start");
        assert!(
            drained <= released,
            "swap {index}: lb-drain heard {} end before it heard of {}",
            id(index - 1),
            id(index)
        );
    }
    // Each event is held from its first preparation until it ends, and each swap hands the
    // hold over without a gap: so from the first swap's drain until the last event ends.
    let first_drained = churn.decided_ms(&id(1), "prepare");
    churn.assert_held("across 50 swaps", first_drained, last_ended);
}

#[test]
fn a_new_id_on_start_keeps_the_vm_drained_until_the_started_event_ends() {
    let churn = Churn::start(
        r#"
name = "new-id-on-start"
end_after = "1s"

[[events]]
id = "SCHEDULED-X"
type = "Reboot"
resources = ["vm-a"]
appear_at = "5s"
cancel_at = "40s"

[[events]]
id = "STARTED-Y"
type = "Reboot"
resources = ["vm-a"]
status = "Started"
appear_at = "40s"
runs_for = "40s"
"#,
    );
    let drained = churn.decided_ms("SCHEDULED-X", "prepare");
    churn.decided_ms("STARTED-Y", "started");
    churn.decided_ms("SCHEDULED-X", "ended-without-start");
    let ended = churn.transition_ms("STARTED-Y", Transition::Removed);
    churn.decided_ms("STARTED-Y", "ended-after-start");
    churn.wait_ready(true);
    churn.assert_held("from X's drain until Y ends", drained, ended);
}

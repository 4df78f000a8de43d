//! The event loop in-process, in the style of mini-redis's `tests/server.rs`: an IMDS
//! simulator on a free port, documents sent over the test's own watch channel (the
//! [`Documents`] the loop takes), no plugins (`approve-unsubscribed`), and, for events naming
//! several VMs, a coordinator the test plays itself ([`CoordinatorHandle::from_channels`]).
//! Outcomes are asserted where they land: the simulator's approval records and the journal.

use std::time::UNIX_EPOCH;

use forewarn_imds::{ClientConfig, Document, EventId};
use forewarn_simulator::{Scenario, SimulatorConfig, SimulatorHandle};
use tokio::sync::mpsc;
use tokio::time::timeout;

use super::*;
use crate::coordination::CoordinationStatus;
use crate::daemon::timeline_broadcast::new_timeline;
use crate::pipeline::approval::BarrierRequest;
use crate::pipeline::state::Approval;
use crate::plugins::set::PluginSet;

/// The longest any wait below may take; each ends as soon as its condition holds.
const DEADLINE: Duration = Duration::from_secs(10);
/// How long the test holds the barrier's verdict: a POST sent early would reach the local
/// simulator within a few milliseconds of the Join.
const HOLD: Duration = Duration::from_millis(300);
/// How long the simulator holds an approval POST when asked to: the test stops the loop
/// meanwhile.
const SLOW_POST: &str = "300ms";

/// `count` Reboots of `resources`, listed from the start, NotBefore 5 minutes on; every
/// approval POST held for `post_delay` if given.
fn scenario(resources: &[&str], count: usize, post_delay: Option<&str>) -> Scenario {
    let quoted: Vec<String> = resources.iter().map(|vm| format!("\"{vm}\"")).collect();
    let event = format!(
        "[[events]]\n\
         type = \"Reboot\"\n\
         resources = [{}]\n\
         appear_at = \"0s\"\n\
         notice = \"5m\"\n\
         runs_for = \"30s\"\n\n",
        quoted.join(", ")
    );
    let fault = post_delay.map_or(String::new(), |delay| {
        format!("[[faults]]\nkind = \"delay\"\ndelay = \"{delay}\"\nmethods = [\"POST\"]\n")
    });
    let text = format!(
        "name = \"event-loop\"\nvms = [\"vm-a\", \"vm-b\"]\n\n{}{fault}",
        event.repeat(count)
    );
    Scenario::from_toml(&text, "event-loop.toml").expect("the test's scenario is valid")
}

/// A daemon for vm-a running its loop against a simulator, fed documents by the test.
struct RunningLoop {
    simulator: SimulatorHandle,
    client: ImdsClient,
    documents: watch::Sender<Option<Arc<Document>>>,
    shutdown: CancellationToken,
    running: tokio::task::JoinHandle<Result<(), DaemonError>>,
    /// Kept so the plugin set never closes.
    _plugins: watch::Sender<Arc<PluginSet>>,
    state_dir: tempfile::TempDir,
}

impl RunningLoop {
    async fn start(
        scenario: Scenario,
        coordination: Option<(CoordinatorHandle, Verdicts)>,
    ) -> Self {
        let simulator = forewarn_simulator::spawn(SimulatorConfig {
            listen: "127.0.0.1:0".parse().expect("an address"),
            scenario,
            speed: 1.0,
        })
        .await
        .expect("the simulator starts");
        let client = ImdsClient::new(ClientConfig {
            base_url: simulator.vm_base_url("vm-a"),
            ..ClientConfig::default()
        })
        .expect("the IMDS client builds");
        let state_dir = tempfile::tempdir().expect("a temporary directory");
        let (plugins_tx, plugins) = watch::channel(Arc::new(PluginSet::default()));
        let settings = DaemonSettings {
            vm_name: "vm-a".into(),
            vm: Default::default(),
            policy: PolicyConfig {
                approve_unsubscribed: true,
                ..PolicyConfig::default()
            },
            state_dir: state_dir.path().to_path_buf(),
        };
        let mut daemon = Daemon::open(
            settings,
            client.clone(),
            plugins,
            new_timeline(),
            Arc::default(),
        )
        .expect("the journal opens");
        if let Some((coordinator, verdicts)) = coordination {
            daemon = daemon.with_coordination(coordinator, verdicts);
        }
        let (documents, documents_rx) = watch::channel(None);
        let shutdown = CancellationToken::new();
        let running = tokio::spawn(daemon.run(documents_rx, shutdown.clone()));
        RunningLoop {
            simulator,
            client,
            documents,
            shutdown,
            running,
            _plugins: plugins_tx,
            state_dir,
        }
    }

    /// GETs the document from the simulator and hands the loop its first `listed` events
    /// (as if IMDS listed only those); returns their ids.
    async fn send_document(&self, listed: usize) -> Vec<EventId> {
        let fetched = self
            .client
            .fetch_events()
            .await
            .expect("the simulator answers");
        let mut document = fetched.document;
        document.events.truncate(listed);
        let ids: Vec<EventId> = document
            .events
            .iter()
            .map(|event| event.id.clone())
            .collect();
        assert_eq!(ids.len(), listed, "the simulator lists the events");
        self.documents.send_replace(Some(Arc::new(document)));
        ids
    }

    /// The approvals of `event_id` the simulator received from vm-a.
    fn approvals(&self, event_id: &str) -> usize {
        self.simulator
            .snapshot()
            .approvals
            .iter()
            .filter(|approval| approval.event_id == event_id && approval.vm == "vm-a")
            .count()
    }

    /// Waits until the simulator received an approval of `event_id` from vm-a.
    async fn approved(&self, event_id: &str) {
        until(|| self.approvals(event_id) > 0).await;
    }

    /// Waits until an approval POST reached the simulator, which holds it (`SLOW_POST`).
    async fn post_held(&self) {
        let held = || {
            let faults = self.simulator.snapshot().faults;
            faults.iter().any(|fault| fault.method == "POST")
        };
        until(held).await;
    }

    /// Cancels the loop, which must stop cleanly, and returns the simulator and the state
    /// the journal in the state directory holds.
    async fn stop(self) -> (SimulatorHandle, DaemonState) {
        self.shutdown.cancel();
        let stopped = timeout(DEADLINE, self.running)
            .await
            .expect("the loop stops promptly")
            .expect("the loop's task did not panic");
        assert!(stopped.is_ok(), "the loop stopped with {stopped:?}");
        let (_journal, opened) = Journal::open(self.state_dir.path()).expect("the journal reads");
        (self.simulator, journal_schema::resume(opened.record))
    }
}

/// Looks every 5 ms until `holds` does; the caller bounds the wait with a deadline.
async fn until(holds: impl Fn() -> bool) {
    while !holds() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Every approval the simulator received: (event, from which VM, accepted), oldest first.
fn approvals_at(simulator: &SimulatorHandle) -> Vec<(String, String, bool)> {
    let approvals = simulator.snapshot().approvals;
    approvals
        .into_iter()
        .map(|approval| (approval.event_id, approval.vm, approval.accepted))
        .collect()
}

fn assert_recorded_sent(state: &DaemonState, event_id: &str) {
    let approval = &state
        .events
        .get(event_id)
        .expect("the event is journaled")
        .approval;
    assert!(
        matches!(approval, Approval::Sent { .. }),
        "the journal says {approval:?}, not that the approval was sent"
    );
}

/// Without coordination: a plain event is approved at IMDS once; a second one, listed after
/// the first POST came back, gets a POST of its own, once (the loop took the first outcome).
#[tokio::test]
async fn plain_events_are_each_approved_once_at_imds() {
    let running = RunningLoop::start(scenario(&["vm-a"], 2, None), None).await;
    let first = running.send_document(1).await.remove(0);
    timeout(DEADLINE, running.approved(first.as_str()))
        .await
        .expect("the first event is approved at IMDS");
    let second = running.send_document(2).await.remove(1);
    timeout(DEADLINE, running.approved(second.as_str()))
        .await
        .expect("the second event is approved at IMDS");

    let (simulator, journal) = running.stop().await;
    assert_eq!(
        approvals_at(&simulator),
        [
            (first.to_string(), "vm-a".into(), true),
            (second.to_string(), "vm-a".into(), true)
        ],
        "each event approved once, in turn, and accepted"
    );
    assert_recorded_sent(&journal, first.as_str());
    assert_recorded_sent(&journal, second.as_str());
}

/// With coordination: an event naming vm-a and vm-b joins the barrier and is not POSTed
/// while the barrier (the test) holds its verdict. After Approve the POST goes out, and the
/// loop is stopped while IMDS holds it: the stop waits for it, so IMDS has one approval from
/// vm-a, the barrier hears it was sent, and the journal records it.
#[tokio::test]
async fn a_coordinated_event_waits_for_the_barrier_and_its_post_outlives_the_shutdown() {
    let (requests_tx, mut requests) = mpsc::unbounded_channel();
    let (verdicts_tx, verdicts) = mpsc::unbounded_channel();
    let status = watch::channel(CoordinationStatus::default()).1;
    let coordinator = CoordinatorHandle::from_channels("vm-a", requests_tx, status);
    let coordination = Some((coordinator, verdicts));
    let scenario = scenario(&["vm-a", "vm-b"], 1, Some(SLOW_POST));
    let running = RunningLoop::start(scenario, coordination).await;
    let event_id = running.send_document(1).await.remove(0);

    let joined = timeout(DEADLINE, requests.recv())
        .await
        .expect("a request to the barrier");
    assert!(
        matches!(&joined, Some(BarrierRequest::Join(event)) if event.id == event_id),
        "the loop joins the barrier for the event, not {joined:?}"
    );
    // The barrier has not answered: nothing reaches IMDS.
    assert!(
        timeout(HOLD, running.post_held()).await.is_err(),
        "an approval was sent before the barrier approved"
    );

    let verdict = BarrierVerdict::Approve {
        why: "the test's barrier approves".into(),
    };
    verdicts_tx
        .send((event_id.clone(), verdict))
        .expect("the loop takes verdicts");
    timeout(DEADLINE, running.post_held())
        .await
        .expect("the approval is POSTed once the barrier approves");
    let (simulator, journal) = running.stop().await;

    assert_eq!(
        approvals_at(&simulator),
        [(event_id.to_string(), "vm-a".into(), true)],
        "one approval, from vm-a, accepted"
    );
    assert_recorded_sent(&journal, event_id.as_str());
    assert_eq!(
        requests.try_recv().ok(),
        Some(BarrierRequest::Sent(vec![event_id.clone()])),
        "the barrier hears the approval was sent"
    );
    assert_eq!(
        requests.try_recv().ok(),
        None,
        "no other request to the barrier"
    );
}

#[test]
fn plugins_see_not_before_on_the_vm_clock() {
    let at = |secs: u64| UNIX_EPOCH + Duration::from_secs(secs);
    let event = |not_before| ScheduledEvent {
        not_before,
        ..ScheduledEvent::new(
            "e",
            forewarn_imds::EventType::Preempt,
            forewarn_imds::EventStatus::Scheduled,
        )
    };
    // IMDS 10 s ahead (the VM's clock behind): NotBefore comes 10 s sooner on the VM's.
    assert_eq!(
        on_vm_clock(event(Some(at(100))), 10_000).not_before,
        Some(at(90))
    );
    assert_eq!(
        on_vm_clock(event(Some(at(100))), -5_000).not_before,
        Some(at(105))
    );
    assert_eq!(on_vm_clock(event(None), 10_000).not_before, None);
}

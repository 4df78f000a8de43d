//! `plugin test`'s scenario clock: a stretch of a scenario where the daemon only waits
//! (every event it took up is running or done, and no plugin call is in flight) is skipped
//! at the simulator, so a 10-minute Reboot run costs no wall time. Wherever the plugin is
//! busy, or an event has a NotBefore ahead, the scenario plays at its speed: the plugin's
//! own timing stays real time.

use forewarn_imds::EventId;
use forewarn_simulator::SimulatorHandle;
use std::collections::{BTreeMap, BTreeSet};
use tokio::sync::broadcast;

use forewarn_pipeline::timeline::TimelineEntry;
use forewarn_pipeline::tracker::TransitionKind;

/// What the daemon is busy with, as its timeline tells.
#[derive(Debug, Default)]
pub(crate) struct DaemonActivity {
    /// Each event the daemon took up and not yet finished, with its last transition.
    events: BTreeMap<EventId, TransitionKind>,
    /// The calls made and not yet answered: (event, plugin).
    calls: BTreeSet<(EventId, String)>,
}

impl DaemonActivity {
    /// Takes in one timeline entry.
    pub(crate) fn note(&mut self, entry: &TimelineEntry) {
        match entry {
            TimelineEntry::Transition {
                event_id,
                transition,
                ..
            } => {
                self.events.insert(event_id.clone(), *transition);
            }
            TimelineEntry::Finished { event_id } => {
                self.events.remove(event_id);
            }
            TimelineEntry::PluginCalled {
                event_id, plugin, ..
            } => {
                self.calls.insert((event_id.clone(), plugin.to_string()));
            }
            TimelineEntry::PluginAnswered {
                event_id, plugin, ..
            } => {
                self.calls.remove(&(event_id.clone(), plugin.to_string()));
            }
            _ => {}
        }
    }

    /// Whether the daemon only waits for time to pass: no call in flight, and every event
    /// it has not finished is running (a Scheduled one has a deadline ahead; an ended one
    /// is being recovered).
    pub(crate) fn only_waits(&self) -> bool {
        self.calls.is_empty()
            && self
                .events
                .values()
                .all(|transition| *transition == TransitionKind::Started)
    }
}

/// Lets the simulator skip each quiet stretch of the scenario while the daemon only waits
/// (it skips at the daemon's next poll, once the daemon has fetched the current document
/// twice: by then the daemon's entries for it are on the timeline). Runs until the
/// timeline closes, then waits forever (the caller ends it). A timeline read too slowly to
/// keep up (entries lost) stops the skipping: the rest plays at the scenario's speed.
pub(crate) async fn skip_quiet_stretches(
    simulator: &SimulatorHandle,
    mut entries: broadcast::Receiver<TimelineEntry>,
) {
    let mut activity = DaemonActivity::default();
    simulator.allow_skipping(activity.only_waits());
    while let Ok(entry) = entries.recv().await {
        activity.note(&entry);
        simulator.allow_skipping(activity.only_waits());
    }
    simulator.allow_skipping(false);
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use forewarn_pipeline::state::{AnswerOutcome, CallPhase};
    use forewarn_pipeline::test_harness;

    fn transition(id: &str, transition: TransitionKind) -> TimelineEntry {
        TimelineEntry::Transition {
            event_id: EventId::from(id),
            event_type: forewarn_imds::EventType::Reboot,
            event_type_raw: "Reboot".to_owned(),
            transition,
            detail: String::new(),
            announced: Box::new(test_harness::event(
                id,
                forewarn_imds::EventType::Reboot,
                test_harness::t0(),
                Duration::from_secs(60),
            )),
        }
    }

    fn called(id: &str) -> TimelineEntry {
        TimelineEntry::PluginCalled {
            event_id: EventId::from(id),
            plugin: "probe".into(),
            phase: CallPhase::Started,
            attempt: 1,
            budget_ms: 1_000,
        }
    }

    #[test]
    fn the_daemon_only_waits_while_every_event_runs_and_no_call_is_in_flight() {
        let mut activity = DaemonActivity::default();
        assert!(activity.only_waits(), "nothing taken up");
        activity.note(&transition("EV", TransitionKind::Scheduled));
        assert!(!activity.only_waits(), "a deadline ahead");
        activity.note(&transition("EV", TransitionKind::Started));
        assert!(activity.only_waits());
        activity.note(&called("EV"));
        assert!(!activity.only_waits(), "a call in flight");
        activity.note(&TimelineEntry::PluginAnswered {
            event_id: EventId::from("EV"),
            plugin: "probe".into(),
            phase: CallPhase::Started,
            outcome: AnswerOutcome::Approve,
            reason: String::new(),
            elapsed_ms: 3,
        });
        assert!(activity.only_waits());
        activity.note(&transition("EV", TransitionKind::EndedAfterStart));
        assert!(!activity.only_waits(), "being recovered");
        activity.note(&TimelineEntry::Finished {
            event_id: EventId::from("EV"),
        });
        assert!(activity.only_waits());
    }
}

//! `plugin test`'s verdict on one plugin, read from the daemon's timeline entries: passed,
//! not concerned, or the typed reason it would fail in production (trap, budget, memory, late).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use forewarn_imds::{EventId, PluginName};

use forewarn_pipeline::state::{AnswerOutcome, CallPhase};
use forewarn_pipeline::timeline::TimelineEntry;
use forewarn_pipeline::tracker::TransitionKind;

/// How a plugin did in one scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "kebab-case")]
pub enum Verdict {
    /// Every call answered, and it had approved every event before the event started.
    Passed {
        /// How many times the plugin was called.
        calls: u32,
    },
    /// The scenario never called the plugin (no event of a type it subscribes to).
    NotConcerned,
    /// A call trapped (a panic, an unreachable, a bad host call).
    Trapped {
        /// The event of the call.
        event_id: EventId,
        /// Prepare or recover.
        phase: CallPhase,
        /// The trap, as the runtime reported it.
        reason: String,
    },
    /// A call ran past its budget and was cut off.
    OutOfBudget {
        /// The event of the call.
        event_id: EventId,
        /// Prepare or recover.
        phase: CallPhase,
        /// The runtime's explanation.
        reason: String,
    },
    /// A call went past the plugin's memory limit.
    OutOfMemory {
        /// The event of the call.
        event_id: EventId,
        /// Prepare or recover.
        phase: CallPhase,
        /// The runtime's explanation.
        reason: String,
    },
    /// The plugin could not be instantiated for a call.
    DidNotStart {
        /// The event of the call.
        event_id: EventId,
        /// The runtime's explanation.
        reason: String,
    },
    /// The event started (NotBefore passed) while the plugin was still deferring, so
    /// forewarn could not approve it early.
    StillDeferringAtNotBefore {
        /// The event that started without the plugin's approval.
        event_id: EventId,
        /// The plugin's last reason for deferring.
        reason: String,
    },
    /// The scenario did not finish within `plugin test`'s limit: what the plugin would do
    /// in the rest of it is not known, so the calls made so far cannot pass it.
    ScenarioUnfinished {
        /// The limit, in seconds.
        after_seconds: u64,
        /// How many times the plugin was called before it.
        calls: u32,
    },
}

impl Verdict {
    /// Whether the verdict fails `plugin test` (and so a plugin's CI).
    pub fn is_failure(&self) -> bool {
        !matches!(self, Verdict::Passed { .. } | Verdict::NotConcerned)
    }

    /// The phase of the call that failed, when the failure was a call's.
    pub fn phase(&self) -> Option<CallPhase> {
        match self {
            Verdict::Trapped { phase, .. }
            | Verdict::OutOfBudget { phase, .. }
            | Verdict::OutOfMemory { phase, .. } => Some(*phase),
            Verdict::StillDeferringAtNotBefore { .. } => Some(CallPhase::Prepare),
            Verdict::Passed { .. }
            | Verdict::NotConcerned
            | Verdict::DidNotStart { .. }
            | Verdict::ScenarioUnfinished { .. } => None,
        }
    }

    /// The verdict in a few words, for the one-line summary.
    pub fn describe(&self) -> String {
        match self {
            Verdict::Passed { calls } => format!("ok ({calls} call(s) answered in time)"),
            Verdict::NotConcerned => {
                "skipped: no event of this scenario concerns the plugin".to_owned()
            }
            Verdict::Trapped {
                event_id,
                phase,
                reason,
            } => format!("FAILED: trapped in {phase} of event {event_id}: {reason}"),
            Verdict::OutOfBudget {
                event_id,
                phase,
                reason,
            } => format!("FAILED: ran out of budget in {phase} of event {event_id}: {reason}"),
            Verdict::OutOfMemory {
                event_id,
                phase,
                reason,
            } => format!("FAILED: ran out of memory in {phase} of event {event_id}: {reason}"),
            Verdict::DidNotStart { event_id, reason } => {
                format!("FAILED: could not be instantiated for event {event_id}: {reason}")
            }
            Verdict::StillDeferringAtNotBefore { event_id, reason } => format!(
                "FAILED: still deferring when event {event_id} started at NotBefore \
                 (last reason: {reason}); forewarn could not approve it early"
            ),
            Verdict::ScenarioUnfinished {
                after_seconds,
                calls,
            } => format!(
                "FAILED: the scenario did not finish within {after_seconds} s, so the rest of it \
                 is not judged ({calls} call(s) answered before); rerun it alone with \
                 --scenario NAME --timeline to see where it stopped moving"
            ),
        }
    }
}

/// What the timeline showed of each plugin, by name.
#[derive(Debug, Clone, Default)]
pub struct PluginVerdicts {
    plugins: BTreeMap<PluginName, Record>,
}

#[derive(Debug, Clone, Default)]
struct Record {
    calls: u32,
    /// The first failure seen; it decides the verdict.
    failure: Option<Verdict>,
    /// The last prepare answer per event: (approved, reason).
    last_prepare: BTreeMap<EventId, (bool, String)>,
}

impl PluginVerdicts {
    /// Takes one timeline entry into account.
    pub fn observe(&mut self, entry: &TimelineEntry) {
        match entry {
            TimelineEntry::PluginAnswered {
                event_id,
                plugin,
                phase,
                outcome,
                reason,
                ..
            } => {
                let record = self.plugins.entry(plugin.clone()).or_default();
                record.calls += 1;
                if *phase == CallPhase::Prepare {
                    let approved = *outcome == AnswerOutcome::Approve;
                    record
                        .last_prepare
                        .insert(event_id.clone(), (approved, reason.clone()));
                }
                if record.failure.is_none() {
                    record.failure = failure_of(event_id, *phase, *outcome, reason);
                }
            }
            TimelineEntry::Transition {
                event_id,
                transition: TransitionKind::Started,
                ..
            } => {
                for record in self.plugins.values_mut() {
                    let deferring = record.last_prepare.get(event_id).filter(|(ok, _)| !ok);
                    if let (None, Some((_, reason))) = (&record.failure, deferring) {
                        record.failure = Some(Verdict::StillDeferringAtNotBefore {
                            event_id: event_id.clone(),
                            reason: reason.clone(),
                        });
                    }
                }
            }
            _ => {}
        }
    }

    /// The verdict of a run that `finished` or was cut at `limit`: a failure seen before
    /// the cut stands; without one, a cut run is [`Verdict::ScenarioUnfinished`], never a pass.
    pub fn verdict_of_run(&self, plugin: &str, finished: bool, limit: Duration) -> Verdict {
        let verdict = self.verdict(plugin);
        if finished || verdict.is_failure() {
            return verdict;
        }
        Verdict::ScenarioUnfinished {
            after_seconds: limit.as_secs(),
            calls: self.plugins.get(plugin).map_or(0, |record| record.calls),
        }
    }

    /// The verdict on `plugin`.
    pub fn verdict(&self, plugin: &str) -> Verdict {
        match self.plugins.get(plugin) {
            None => Verdict::NotConcerned,
            Some(record) => record.failure.clone().unwrap_or(Verdict::Passed {
                calls: record.calls,
            }),
        }
    }
}

fn failure_of(
    event_id: &EventId,
    phase: CallPhase,
    outcome: AnswerOutcome,
    reason: &str,
) -> Option<Verdict> {
    let (event_id, reason) = (event_id.clone(), reason.to_owned());
    match outcome {
        AnswerOutcome::Approve | AnswerOutcome::Defer => None,
        AnswerOutcome::Trap => Some(Verdict::Trapped {
            event_id,
            phase,
            reason,
        }),
        AnswerOutcome::BudgetExceeded => Some(Verdict::OutOfBudget {
            event_id,
            phase,
            reason,
        }),
        AnswerOutcome::MemoryExceeded => Some(Verdict::OutOfMemory {
            event_id,
            phase,
            reason,
        }),
        AnswerOutcome::Instantiation => Some(Verdict::DidNotStart { event_id, reason }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_run_cut_at_the_limit_does_not_pass_but_a_failure_before_the_cut_stands() {
        let limit = std::time::Duration::from_secs(300);
        let none = super::PluginVerdicts::default();
        assert_eq!(
            none.verdict_of_run("p", false, limit),
            super::Verdict::ScenarioUnfinished {
                after_seconds: 300,
                calls: 0
            }
        );
        assert!(none.verdict_of_run("p", false, limit).is_failure());
        assert_eq!(
            none.verdict_of_run("p", true, limit),
            super::Verdict::NotConcerned
        );
        let description = none.verdict_of_run("p", false, limit).describe();
        assert!(
            description.contains("did not finish within 300 s"),
            "{description}"
        );
    }

    use super::*;

    fn answered(event: &str, phase: CallPhase, outcome: AnswerOutcome) -> TimelineEntry {
        TimelineEntry::PluginAnswered {
            event_id: event.into(),
            plugin: "p".into(),
            phase,
            outcome,
            reason: format!("{outcome:?}"),
            elapsed_ms: 1,
        }
    }

    fn started(event: &str) -> TimelineEntry {
        TimelineEntry::Transition {
            event_id: event.into(),
            event_type: forewarn_imds::EventType::Reboot,
            event_type_raw: "Reboot".into(),
            transition: TransitionKind::Started,
            detail: String::new(),
            announced: Box::new(forewarn_pipeline::test_harness::event(
                event,
                forewarn_imds::EventType::Reboot,
                forewarn_pipeline::test_harness::t0(),
                std::time::Duration::from_secs(60),
            )),
        }
    }

    fn verdict_of(entries: &[TimelineEntry]) -> Verdict {
        let mut verdicts = PluginVerdicts::default();
        for entry in entries {
            verdicts.observe(entry);
        }
        verdicts.verdict("p")
    }

    #[test]
    fn approving_before_the_start_passes_and_silence_is_not_concerned() {
        let entries = [
            answered("e1", CallPhase::Prepare, AnswerOutcome::Defer),
            answered("e1", CallPhase::Prepare, AnswerOutcome::Approve),
            started("e1"),
        ];
        assert_eq!(verdict_of(&entries), Verdict::Passed { calls: 2 });
        assert_eq!(verdict_of(&[started("e1")]), Verdict::NotConcerned);
        assert!(!Verdict::NotConcerned.is_failure());
    }

    #[test]
    fn deferring_when_the_event_starts_fails() {
        let entries = [
            answered("e1", CallPhase::Prepare, AnswerOutcome::Defer),
            started("e1"),
        ];
        let verdict = verdict_of(&entries);
        assert_eq!(
            verdict,
            Verdict::StillDeferringAtNotBefore {
                event_id: "e1".into(),
                reason: "Defer".into()
            }
        );
        assert!(verdict.is_failure());
    }

    #[test]
    fn the_first_failure_decides() {
        let entries = [
            answered("e1", CallPhase::Prepare, AnswerOutcome::BudgetExceeded),
            answered("e1", CallPhase::Prepare, AnswerOutcome::Trap),
            started("e1"),
        ];
        assert!(matches!(verdict_of(&entries), Verdict::OutOfBudget { .. }));
        let memory = [answered(
            "e1",
            CallPhase::Prepare,
            AnswerOutcome::MemoryExceeded,
        )];
        assert!(matches!(verdict_of(&memory), Verdict::OutOfMemory { .. }));
    }
}

//! The Scheduled Events state machine: events appear, start (approved or NotBefore
//! passed), get rescheduled, canceled or removed, all in scenario time passed in by the caller.

use std::time::Duration;

use forewarn_imds::{
    Document, EventField, EventId, EventSource, EventStatus, EventType, ScheduledEvent,
    UnreadableField,
};
use serde::{Deserialize, Serialize};

use crate::faults::incarnation_resets;
use crate::scenario::{EventSpec, InitialStatus, Scenario, Source};
use crate::scenario_clock::ScenarioClock;

/// Where one event is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Not yet in the document.
    Pending,
    Scheduled {
        not_before: Duration,
        /// When an approval arrived, if the event waits to start after one
        /// (`start_after_approval`); it still shows as Scheduled meanwhile.
        approved_at: Option<Duration>,
    },
    Started {
        since: Duration,
    },
    /// Removed from the document (ended after start, or canceled).
    Gone {
        at: Duration,
    },
}

/// A change of one event, as recorded in the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transition {
    /// The event entered the document.
    Appeared,
    /// The event started (approved, or NotBefore passed).
    Started,
    /// The event's NotBefore moved.
    Rescheduled,
    /// Disappeared after it had started.
    Removed,
    /// Disappeared without starting.
    Canceled,
}

/// One history entry, in scenario time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub event_id: String,
    pub transition: Transition,
    pub at: Duration,
}

/// What an approval did to one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApprovalEffect {
    /// The event was Scheduled and is now Started.
    StartedNow,
    /// The event had already started; nothing changed (still a 200, as at IMDS).
    AlreadyStarted,
    /// The event stays Scheduled and starts `start_after_approval` later.
    StartsLater,
    /// The event was approved before and is still waiting to start; nothing changed.
    AlreadyApproved,
}

/// An approval named an event that is not in the current document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("EventId \"{0}\" is not in the current document")]
pub(crate) struct UnknownEvent(pub String);

#[derive(Debug, Clone)]
struct EventState {
    spec: EventSpec,
    phase: Phase,
    resources: Vec<String>,
    next_reschedule: usize,
}

/// The next step due for one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Appear,
    Cancel,
    Reschedule,
    Start,
    Remove,
}

/// The whole simulated IMDS state. Time only moves forward, through [`Simulation::advance`].
#[derive(Debug, Clone)]
pub(crate) struct Simulation {
    events: Vec<EventState>,
    incarnation: u64,
    pending_resets: Vec<Duration>,
    history: Vec<Change>,
    end_after: Duration,
    /// Never finishes on its own (the scenario's `open_ended`, or once the console
    /// changed it).
    open_ended: bool,
    now: Duration,
}

/// Why the console could not change an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EventChangeError {
    /// No event with that id is in the current document.
    #[error(transparent)]
    Unknown(#[from] UnknownEvent),
    /// The change does not apply to an event in this status.
    #[error("event \"{event_id}\" is {status}: {hint}")]
    WrongStatus {
        event_id: String,
        status: &'static str,
        hint: &'static str,
    },
}

/// What the console does to one event of the current document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventChange {
    /// A Scheduled event starts now, as when NotBefore passes.
    Start,
    /// A Scheduled event disappears without starting (canceled maintenance).
    Cancel,
    /// A Started event is over and disappears.
    End,
}

impl Simulation {
    /// A simulation at scenario time 0: no events yet, DocumentIncarnation 1.
    pub(crate) fn new(scenario: &Scenario) -> Simulation {
        let events = scenario
            .events
            .iter()
            .map(|spec| EventState {
                spec: spec.clone(),
                phase: Phase::Pending,
                resources: spec
                    .resources
                    .clone()
                    .unwrap_or_else(|| scenario.vms.clone()),
                next_reschedule: 0,
            })
            .collect();
        Simulation {
            events,
            incarnation: 1,
            pending_resets: incarnation_resets(&scenario.faults),
            history: Vec::new(),
            end_after: scenario.end_after.unwrap_or_default(),
            open_ended: scenario.open_ended,
            now: Duration::ZERO,
        }
    }

    pub(crate) fn now(&self) -> Duration {
        self.now
    }

    pub(crate) fn incarnation(&self) -> u64 {
        self.incarnation
    }

    pub(crate) fn history(&self) -> &[Change] {
        &self.history
    }

    /// The phase of the event with this id, if the scenario has it.
    #[cfg(test)]
    pub(crate) fn phase_of(&self, event_id: &str) -> Option<Phase> {
        self.find(event_id).map(|event| event.phase)
    }

    /// Applies every change due up to `now`, in time order. Changes due at the same
    /// instant make one new incarnation. A `now` in the past is ignored.
    pub(crate) fn advance(&mut self, now: Duration) {
        while let Some(due) = self.next_due().filter(|due| *due <= now) {
            self.apply_due_at(due);
        }
        self.now = self.now.max(now);
    }

    /// Approves the named events at `now` (advancing first). All ids must be in the
    /// current document, or nothing happens.
    pub(crate) fn approve(
        &mut self,
        now: Duration,
        event_ids: &[EventId],
    ) -> Result<Vec<ApprovalEffect>, UnknownEvent> {
        self.advance(now);
        let now = self.now;
        if let Some(unknown) = event_ids.iter().find(|id| !self.is_current(id)) {
            return Err(UnknownEvent(unknown.to_string()));
        }
        let mut effects = Vec::with_capacity(event_ids.len());
        for id in event_ids {
            effects.push(self.approve_one(id, now));
        }
        if effects.contains(&ApprovalEffect::StartedNow) {
            self.incarnation += 1;
        }
        Ok(effects)
    }

    /// When every event has appeared and disappeared, plus `end_after`, the instant the
    /// scenario finishes; None while an event is still to come or in the document.
    pub(crate) fn finishes_at(&self) -> Option<Duration> {
        if self.open_ended {
            return None;
        }
        let mut last_gone = Duration::ZERO;
        for event in &self.events {
            let Phase::Gone { at } = event.phase else {
                return None;
            };
            last_gone = last_gone.max(at);
        }
        Some(last_gone.saturating_add(self.end_after))
    }

    /// Until when nothing but time passes for a client that has seen the current document:
    /// no event in it is Scheduled (none has a NotBefore ahead or waits for an approval),
    /// so the next instant anything changes is the next step due (an event appears or
    /// ends), or the scenario's end. None while an event is Scheduled, or for a simulation
    /// that never ends on its own.
    pub(crate) fn quiet_until(&self) -> Option<Duration> {
        if self.open_ended {
            return None;
        }
        let scheduled = self
            .events
            .iter()
            .any(|event| matches!(event.phase, Phase::Scheduled { .. }));
        if scheduled {
            return None;
        }
        self.next_due().or_else(|| self.finishes_at())
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finishes_at().is_some_and(|at| self.now >= at)
    }

    /// The current document, with NotBefore as real wall-clock instants.
    pub(crate) fn document(&self, clock: &ScenarioClock) -> Document {
        let events = self
            .events
            .iter()
            .filter_map(|event| wire_event(event, clock))
            .collect();
        Document {
            incarnation: Some(self.incarnation),
            events,
            rejected: Vec::new(),
        }
    }

    /// Adds an event (already validated, with its id and resources) that appears now, and
    /// keeps the simulation running until it is interrupted: the console drives it now.
    pub(crate) fn add_event(&mut self, mut spec: EventSpec) {
        spec.appear_at = self.now;
        let resources = spec.resources.clone().unwrap_or_default();
        self.events.push(EventState {
            spec,
            phase: Phase::Pending,
            resources,
            next_reschedule: 0,
        });
        self.open_ended = true;
        self.advance(self.now);
    }

    /// Starts, cancels or ends one event of the current document now (one new incarnation).
    pub(crate) fn change_event(
        &mut self,
        event_id: &str,
        change: EventChange,
    ) -> Result<(), EventChangeError> {
        let index = self
            .events
            .iter()
            .position(|event| {
                event.spec.id().eq_ignore_ascii_case(event_id)
                    && matches!(event.phase, Phase::Scheduled { .. } | Phase::Started { .. })
            })
            .ok_or_else(|| UnknownEvent(event_id.to_string()))?;
        let now = self.now;
        let started = matches!(self.events[index].phase, Phase::Started { .. });
        let (phase, transition) = match (change, started) {
            (EventChange::Start, false) => (Phase::Started { since: now }, Transition::Started),
            (EventChange::Cancel, false) => (Phase::Gone { at: now }, Transition::Canceled),
            (EventChange::End, true) => (Phase::Gone { at: now }, Transition::Removed),
            (EventChange::Start | EventChange::Cancel, true) => {
                return Err(wrong_status(event_id, "Started", "end it instead"));
            }
            (EventChange::End, false) => {
                return Err(wrong_status(
                    event_id,
                    "Scheduled",
                    "start or cancel it instead",
                ));
            }
        };
        self.events[index].phase = phase;
        self.record(index, transition, now);
        self.incarnation += 1;
        self.open_ended = true;
        Ok(())
    }

    /// DocumentIncarnation drops back to 1 now, as a scenario's `incarnation-reset` does.
    pub(crate) fn reset_incarnation_now(&mut self) {
        self.incarnation = 1;
        self.keep_running();
    }

    /// The simulation no longer finishes by itself: the console is driving it.
    pub(crate) fn keep_running(&mut self) {
        self.open_ended = true;
    }

    /// How many events the simulation has had (appeared or not).
    pub(crate) fn event_count(&self) -> usize {
        self.events.len()
    }

    /// Whether an event with this id was ever part of the simulation.
    pub(crate) fn has_event(&self, event_id: &str) -> bool {
        self.find(event_id).is_some()
    }

    /// How many Redeploy events naming `vm` have started so far (each moves it to another
    /// host).
    pub(crate) fn redeploys_started(&self, vm: &str) -> usize {
        self.history
            .iter()
            .filter(|change| change.transition == Transition::Started)
            .filter_map(|change| self.find(&change.event_id))
            .filter(|event| event.spec.event_type.eq_ignore_ascii_case("Redeploy"))
            .filter(|event| event.resources.iter().any(|name| name == vm))
            .count()
    }

    fn find(&self, event_id: &str) -> Option<&EventState> {
        self.events
            .iter()
            .find(|event| event.spec.id().eq_ignore_ascii_case(event_id))
    }

    fn is_current(&self, event_id: &EventId) -> bool {
        self.find(event_id.as_str()).is_some_and(|event| {
            matches!(event.phase, Phase::Scheduled { .. } | Phase::Started { .. })
        })
    }

    fn approve_one(&mut self, event_id: &EventId, now: Duration) -> ApprovalEffect {
        let Some(index) = self
            .events
            .iter()
            .position(|event| event.spec.id().eq_ignore_ascii_case(event_id.as_str()))
        else {
            return ApprovalEffect::AlreadyStarted;
        };
        let Phase::Scheduled {
            not_before,
            approved_at,
        } = self.events[index].phase
        else {
            return ApprovalEffect::AlreadyStarted;
        };
        if approved_at.is_some() {
            return ApprovalEffect::AlreadyApproved;
        }
        if let Some(group) = self.events[index].spec.delete_group.clone() {
            return self.approve_in_delete_group(index, &group, not_before, now);
        }
        if self.events[index].spec.start_after_approval.is_some() {
            self.events[index].phase = Phase::Scheduled {
                not_before,
                approved_at: Some(now),
            };
            return ApprovalEffect::StartsLater;
        }
        self.events[index].phase = Phase::Started { since: now };
        self.record(index, Transition::Started, now);
        ApprovalEffect::StartedNow
    }

    /// An approval of one event of a scale-set delete: the instance waits, approved, until
    /// every event of the same delete is approved; the last approval starts them all.
    fn approve_in_delete_group(
        &mut self,
        index: usize,
        group: &str,
        not_before: Duration,
        now: Duration,
    ) -> ApprovalEffect {
        self.events[index].phase = Phase::Scheduled {
            not_before,
            approved_at: Some(now),
        };
        let members: Vec<usize> = (0..self.events.len())
            .filter(|member| self.events[*member].spec.delete_group.as_deref() == Some(group))
            .collect();
        let all_approved = members.iter().all(|member| {
            matches!(
                self.events[*member].phase,
                Phase::Scheduled {
                    approved_at: Some(_),
                    ..
                } | Phase::Started { .. }
                    | Phase::Gone { .. }
            )
        });
        if !all_approved {
            return ApprovalEffect::StartsLater;
        }
        for member in members {
            if matches!(self.events[member].phase, Phase::Scheduled { .. }) {
                self.events[member].phase = Phase::Started { since: now };
                self.record(member, Transition::Started, now);
            }
        }
        ApprovalEffect::StartedNow
    }

    fn next_due(&self) -> Option<Duration> {
        let next_event = self
            .events
            .iter()
            .filter_map(|event| due_step(event).map(|(at, _)| at))
            .min();
        let next_reset = self.pending_resets.first().copied();
        [next_event, next_reset].into_iter().flatten().min()
    }

    fn apply_due_at(&mut self, due: Duration) {
        while self.pending_resets.first() == Some(&due) {
            self.pending_resets.remove(0);
            self.incarnation = 1;
        }
        let mut changed = false;
        for index in 0..self.events.len() {
            let Some((at, step)) = due_step(&self.events[index]) else {
                continue;
            };
            if at == due {
                self.apply_step(index, step, due);
                changed = true;
            }
        }
        if changed {
            self.incarnation += 1;
        }
    }

    fn apply_step(&mut self, index: usize, step: Step, at: Duration) {
        let event = &mut self.events[index];
        let transition = match step {
            Step::Appear => {
                event.phase = appeared_phase(&event.spec);
                Transition::Appeared
            }
            Step::Cancel => {
                event.phase = Phase::Gone { at };
                Transition::Canceled
            }
            Step::Reschedule => {
                reschedule(event, at);
                Transition::Rescheduled
            }
            Step::Start => {
                event.phase = Phase::Started { since: at };
                Transition::Started
            }
            Step::Remove => {
                event.phase = Phase::Gone { at };
                Transition::Removed
            }
        };
        self.record(index, transition, at);
    }

    fn record(&mut self, index: usize, transition: Transition, at: Duration) {
        self.history.push(Change {
            event_id: self.events[index].spec.id().to_string(),
            transition,
            at,
        });
    }
}

fn wrong_status(event_id: &str, status: &'static str, hint: &'static str) -> EventChangeError {
    EventChangeError::WrongStatus {
        event_id: event_id.to_string(),
        status,
        hint,
    }
}

fn appeared_phase(spec: &EventSpec) -> Phase {
    match spec.status {
        InitialStatus::Started => Phase::Started {
            since: spec.appear_at,
        },
        InitialStatus::Scheduled => Phase::Scheduled {
            not_before: spec.appear_at.saturating_add(spec.notice_or_default()),
            approved_at: None,
        },
    }
}

fn reschedule(event: &mut EventState, at: Duration) {
    let Some(change) = event.spec.reschedule.get(event.next_reschedule) else {
        return;
    };
    event.next_reschedule += 1;
    if let (Some(notice), Phase::Scheduled { approved_at, .. }) = (change.notice, event.phase) {
        event.phase = Phase::Scheduled {
            not_before: at.saturating_add(notice),
            approved_at,
        };
    }
    if let Some(resources) = &change.resources {
        event.resources = resources.clone();
    }
}

/// The next step of one event and when it is due. At the same instant a cancel wins
/// over a reschedule, and a reschedule over the start. A Scheduled event starts at
/// NotBefore (plus `starts_late_by`), or `start_after_approval` after its approval,
/// whichever is first.
fn due_step(event: &EventState) -> Option<(Duration, Step)> {
    match event.phase {
        Phase::Pending => Some((event.spec.appear_at, Step::Appear)),
        Phase::Scheduled {
            not_before,
            approved_at,
        } => {
            let cancel = event.spec.cancel_at.map(|at| (at, Step::Cancel));
            let reschedule = event
                .spec
                .reschedule
                .get(event.next_reschedule)
                .map(|change| (change.at, Step::Reschedule));
            let on_its_own =
                not_before.saturating_add(event.spec.starts_late_by.unwrap_or_default());
            // An approved instance of a scale-set delete waits for the rest of the delete
            // (started by the last approval), or for NotBefore.
            let after_approval = approved_at
                .filter(|_| event.spec.delete_group.is_none())
                .map(|at| at.saturating_add(event.spec.start_after_approval.unwrap_or_default()))
                .unwrap_or(on_its_own);
            let start = Some((on_its_own.min(after_approval), Step::Start));
            [cancel, reschedule, start]
                .into_iter()
                .flatten()
                .min_by_key(|(at, _)| *at)
        }
        Phase::Started { since } => Some((
            since.saturating_add(event.spec.runs_for_or_default()),
            Step::Remove,
        )),
        Phase::Gone { .. } => None,
    }
}

fn wire_event(event: &EventState, clock: &ScenarioClock) -> Option<ScheduledEvent> {
    let (status, not_before) = match event.phase {
        Phase::Scheduled { not_before, .. } => {
            (EventStatus::Scheduled, Some(clock.wall_at(not_before)))
        }
        Phase::Started { .. } => (EventStatus::Started, None),
        Phase::Pending | Phase::Gone { .. } => return None,
    };
    let spec = &event.spec;
    let mut event = ScheduledEvent {
        id: spec.id().into(),
        event_type: EventType::from_wire(&spec.event_type),
        event_type_raw: spec.event_type.clone(),
        resource_type: "VirtualMachine".to_string(),
        resources: event.resources.clone(),
        status,
        not_before,
        description: spec.description.clone(),
        source: match spec.source {
            Source::Platform => EventSource::Platform,
            Source::User => EventSource::User,
        },
        duration_seconds: (spec.duration_seconds >= 0).then_some(spec.duration_seconds),
        unreadable: Vec::new(),
    };
    // A NotBefore shown as text the daemon cannot read: rendered verbatim.
    if let (Some(text), EventStatus::Scheduled) = (&spec.not_before_text, status) {
        event.not_before = None;
        event.unreadable.push(UnreadableField {
            field: EventField::NotBefore,
            raw: text.clone(),
        });
    }
    Some(event)
}

#[cfg(test)]
mod tests;

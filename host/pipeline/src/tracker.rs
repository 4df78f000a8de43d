//! The Tracker: compares each Scheduled Events document with what it saw before, event by
//! event (keyed by `EventId`), and turns the differences into lifecycle transitions.
//!
//! # Lifecycle
//!
//! Per `EventId`, the transitions follow this grammar:
//!
//! ```text
//! (Scheduled Rescheduled* (Started EndedAfterStart? | EndedWithoutStart)?)
//! | (Started EndedAfterStart?)
//! ```
//!
//! * **Scheduled**: a new id with status `Scheduled`. One listed without `NotBefore` (IMDS
//!   leaves it blank only once an event started) may start at any moment: its `NotBefore`
//!   is taken to be the instant it was first seen so (or the one it had before). So may one
//!   whose `NotBefore` forewarn cannot read (`ScheduledEvent::unreadable`): its `NotBefore` is
//!   the instant it was first seen so, or the one it had before if that is sooner.
//! * **Rescheduled**: a known, still-`Scheduled` event whose `NotBefore`, `Resources` or
//!   `EventType` changed (a new type means different plugins and rules may apply, so it is
//!   treated like a new schedule). Changes of any other field (`Description`,
//!   `DurationInSeconds`, `EventSource`, `ResourceType`, the raw type text) only update the
//!   stored event, with no transition.
//! * **Started**: `Scheduled` → `Started`, or a new id that is already `Started` (a hardware
//!   failure skips `Scheduled`; then `was_scheduled` is false). While Started, field changes
//!   only update the stored event.
//! * **EndedAfterStart** / **EndedWithoutStart**: the id is no longer listed; which one
//!   depends on whether it was ever seen `Started`. They carry the last known event.
//!
//! A `Started` event that is later listed as `Scheduled` again (IMDS should never do this) is
//! still treated as started: the maintenance may already have begun, so the event stays
//! started, no transition is emitted, the other fields are updated, and its disappearance
//! is an `EndedAfterStart` so plugins get to recover.
//!
//! An id is forgotten once it has ended. If the same id is listed again later, it starts a
//! new lifecycle (`Scheduled`, or `Started` with `was_scheduled: false`), so the grammar
//! above may repeat for one id. If a document lists an id twice, the first entry wins.
//!
//! `DocumentIncarnation` is never consulted: it resets after the service was idle for a day,
//! so every document is compared in full, and a document identical to the previous one
//! (whatever its incarnation) yields no transitions.

use forewarn_events::ImdsTime;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use forewarn_events::{Document, EventField, EventId, EventStatus, ScheduledEvent};
use serde::{Deserialize, Serialize};

/// One change in an event's lifecycle, as the daemon dispatches it to plugins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Transition {
    /// A new event with status `Scheduled`.
    Scheduled(ScheduledEvent),
    /// A still-`Scheduled` event whose `NotBefore`, `Resources` or `EventType` changed.
    Rescheduled {
        /// The event as the latest document lists it.
        event: ScheduledEvent,
        /// The event as it was listed before the change.
        previous: ScheduledEvent,
    },
    /// The event is now `Started`: it was seen `Scheduled` before (`was_scheduled`), or it
    /// appeared already started (hardware failure).
    Started {
        /// The event as the document lists it now.
        event: ScheduledEvent,
        /// True when the event was seen `Scheduled` first (plugins had the chance to
        /// prepare); false when it appeared already `Started`.
        was_scheduled: bool,
    },
    /// The event disappeared after it was seen `Started`: the maintenance is over.
    EndedAfterStart(ScheduledEvent),
    /// The event disappeared while still `Scheduled`: Azure canceled it.
    EndedWithoutStart(ScheduledEvent),
}

impl Transition {
    /// The event this transition is about (the newest version the tracker knows).
    pub fn event(&self) -> &ScheduledEvent {
        match self {
            Transition::Scheduled(event)
            | Transition::Rescheduled { event, .. }
            | Transition::Started { event, .. }
            | Transition::EndedAfterStart(event)
            | Transition::EndedWithoutStart(event) => event,
        }
    }

    /// Which kind of transition this is.
    pub fn kind(&self) -> TransitionKind {
        match self {
            Transition::Scheduled(_) => TransitionKind::Scheduled,
            Transition::Rescheduled { .. } => TransitionKind::Rescheduled,
            Transition::Started { .. } => TransitionKind::Started,
            Transition::EndedAfterStart(_) => TransitionKind::EndedAfterStart,
            Transition::EndedWithoutStart(_) => TransitionKind::EndedWithoutStart,
        }
    }
}

/// The kind of a [`Transition`], for logs, metrics labels and the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransitionKind {
    /// A new Scheduled event.
    Scheduled,
    /// A Scheduled event whose NotBefore, Resources or type changed.
    Rescheduled,
    /// The event started.
    Started,
    /// The event is gone after it started.
    EndedAfterStart,
    /// The event is gone without having started.
    EndedWithoutStart,
}

impl TransitionKind {
    /// A short stable name: "scheduled", "rescheduled", "started", "ended-after-start" or
    /// "ended-without-start".
    pub fn as_str(self) -> &'static str {
        match self {
            TransitionKind::Scheduled => "scheduled",
            TransitionKind::Rescheduled => "rescheduled",
            TransitionKind::Started => "started",
            TransitionKind::EndedAfterStart => "ended-after-start",
            TransitionKind::EndedWithoutStart => "ended-without-start",
        }
    }
}

impl std::fmt::Display for TransitionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// What the tracker remembers about one listed event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackedEvent {
    /// The event as last listed (status kept `Started` once it was seen started).
    pub event: ScheduledEvent,
    /// Whether the event was ever listed as `Started`.
    pub seen_started: bool,
    /// When the tracker first saw this id (the `now` passed to [`Tracker::observe`]);
    /// journaled in `SystemTime`'s form, as before it was an `ImdsTime`.
    #[serde(with = "forewarn_events::system_time_form")]
    pub first_seen: ImdsTime,
}

/// The per-event state carried from one document to the next. Serializable, so the daemon
/// can journal it and resume after a restart without repeating or losing a transition.
/// Each event is shared (`Arc`) with the tracker it was copied from until it changes, so a
/// copy costs little and the journal writes only the events a document changed
/// ([`Tracker::entries`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracker {
    events: BTreeMap<EventId, Arc<TrackedEvent>>,
}

impl Tracker {
    /// A tracker that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Compares `doc` with the previous state, updates the state, and returns the
    /// transitions: first those of listed events in document order, then the endings
    /// sorted by id. `now` is recorded as `first_seen` for new events.
    pub fn observe(&mut self, doc: &Document, now: ImdsTime) -> Vec<Transition> {
        let mut transitions = Vec::new();
        let mut listed: HashSet<&str> = HashSet::new();
        for event in &doc.events {
            if !listed.insert(event.id.as_str()) {
                continue;
            }
            let event = self.with_not_before(event, now);
            if let Some(transition) = self.observe_listed(&event, now) {
                transitions.push(transition);
            }
        }
        // An entry forewarn cannot read without an EventId could be any known event, so
        // nothing is taken as vanished from such a document.
        if !doc.rejected.is_empty() {
            return transitions;
        }
        transitions.extend(self.remove_unlisted(&listed));
        transitions
    }

    /// Every event currently tracked, sorted by id.
    pub fn events(&self) -> impl Iterator<Item = &TrackedEvent> {
        self.events.values().map(|tracked| &**tracked)
    }

    /// The tracked event with this id, if it is listed.
    pub fn get(&self, id: &EventId) -> Option<&TrackedEvent> {
        self.events.get(id).map(|tracked| &**tracked)
    }

    /// The tracked events by id, each shared with the tracker this one was copied from
    /// while it is unchanged (for the journal, which writes the changed ones).
    pub fn entries(&self) -> &BTreeMap<EventId, Arc<TrackedEvent>> {
        &self.events
    }

    /// Sets (Some) or forgets (None) the tracked event `id`, as the journal replays it.
    pub fn restore(&mut self, id: EventId, tracked: Option<Arc<TrackedEvent>>) {
        match tracked {
            Some(tracked) => self.events.insert(id, tracked),
            None => self.events.remove(&id),
        };
    }

    /// A Scheduled event without NotBefore (IMDS leaves it blank only once an event has
    /// started) may start at any moment: its NotBefore is taken to be the one it had, or the
    /// instant it was first seen so. Plugins then prepare at once, each in its turn come,
    /// and no reschedule is seen while it stays blank. One whose NotBefore forewarn cannot
    /// read may start at any moment too: its NotBefore is the instant it was first seen so,
    /// or the one it had if that is sooner (a readable NotBefore that turns unreadable is a
    /// reschedule to now); none is seen while it stays unreadable.
    fn with_not_before<'a>(
        &self,
        event: &'a ScheduledEvent,
        now: ImdsTime,
    ) -> Cow<'a, ScheduledEvent> {
        if event.status != EventStatus::Scheduled || event.not_before.is_some() {
            return Cow::Borrowed(event);
        }
        let known = self
            .events
            .get(&event.id)
            .and_then(|tracked| tracked.event.not_before);
        // `not_before` stays a SystemTime (its journaled form): one already known is kept
        // to the nanosecond, so a restored event is not taken for rescheduled.
        let now = now.system_time();
        let not_before = match event.unreadable(EventField::NotBefore) {
            Some(_) => known.map_or(now, |known| known.min(now)),
            None => known.unwrap_or(now),
        };
        Cow::Owned(ScheduledEvent {
            not_before: Some(not_before),
            ..event.clone()
        })
    }

    /// Handles one listed event: new, or known and possibly changed.
    fn observe_listed(&mut self, event: &ScheduledEvent, now: ImdsTime) -> Option<Transition> {
        let Some(shared) = self.events.get_mut(&event.id) else {
            return Some(self.track_new(event, now));
        };
        if lists_as_before(shared, event) {
            // Nothing is copied, and the event stays shared with the journaled tracker.
            return None;
        }
        let tracked = Arc::make_mut(shared);
        if tracked.seen_started {
            tracked.event = as_started(event);
            return None;
        }
        let previous = std::mem::replace(&mut tracked.event, event.clone());
        if event.status == EventStatus::Started {
            tracked.seen_started = true;
            return Some(Transition::Started {
                event: event.clone(),
                was_scheduled: true,
            });
        }
        if is_rescheduled(&previous, event) {
            return Some(Transition::Rescheduled {
                event: event.clone(),
                previous,
            });
        }
        None
    }

    /// Starts tracking an id not seen before (or seen and ended).
    fn track_new(&mut self, event: &ScheduledEvent, now: ImdsTime) -> Transition {
        let started = event.status == EventStatus::Started;
        self.events.insert(
            event.id.clone(),
            Arc::new(TrackedEvent {
                event: event.clone(),
                seen_started: started,
                first_seen: now,
            }),
        );
        if started {
            Transition::Started {
                event: event.clone(),
                was_scheduled: false,
            }
        } else {
            Transition::Scheduled(event.clone())
        }
    }

    /// Forgets every tracked event not in `listed` and returns their endings, by id.
    fn remove_unlisted(&mut self, listed: &HashSet<&str>) -> Vec<Transition> {
        let gone: Vec<EventId> = self
            .events
            .keys()
            .filter(|id| !listed.contains(id.as_str()))
            .cloned()
            .collect();
        gone.into_iter()
            .filter_map(|id| self.events.remove(&id))
            .map(Arc::unwrap_or_clone)
            .map(|tracked| {
                if tracked.seen_started {
                    Transition::EndedAfterStart(tracked.event)
                } else {
                    Transition::EndedWithoutStart(tracked.event)
                }
            })
            .collect()
    }
}

/// Whether `event`, as listed now, leaves `tracked` as it is (an event seen Started stays
/// Started).
fn lists_as_before(tracked: &TrackedEvent, event: &ScheduledEvent) -> bool {
    match (tracked.seen_started, event.status) {
        (true, EventStatus::Scheduled) => tracked.event == as_started(event),
        _ => tracked.event == *event,
    }
}

/// `event` kept as started: an event once seen Started stays so (IMDS should never list it
/// Scheduled again).
fn as_started(event: &ScheduledEvent) -> ScheduledEvent {
    ScheduledEvent {
        status: EventStatus::Started,
        ..event.clone()
    }
}

/// Whether a still-scheduled event changed in a way plugins must hear about.
fn is_rescheduled(previous: &ScheduledEvent, current: &ScheduledEvent) -> bool {
    previous.not_before != current.not_before
        || previous.resources != current.resources
        || previous.event_type != current.event_type
}

#[cfg(test)]
mod tests;

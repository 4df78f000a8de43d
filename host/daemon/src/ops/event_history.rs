//! The recent history of each event for the status page: every timeline entry that names
//! the event (transitions, plugin calls and answers, approvals), bounded, stamped, in order.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use forewarn_imds::EventId;

use crate::pipeline::timeline::TimelineEntry;
use crate::pipeline::tracker::TransitionKind;
use forewarn_imds::unix_ms;

/// How many events the history keeps (the most recently seen; finished ones included).
pub const HISTORY_EVENTS_KEPT: usize = 50;
/// How many entries it keeps per event (the newest; the count of dropped ones is kept).
pub const HISTORY_ENTRIES_PER_EVENT: usize = 300;
/// How many of those may be plugins' log lines: a chatty plugin drops its own oldest lines,
/// never the event's transitions, answers or approval.
pub const HISTORY_LOG_LINES_PER_EVENT: usize = 60;
/// The longest log line kept, in bytes (longer ones are cut, marked with `…`).
pub const HISTORY_LOG_LINE_MAX: usize = 500;

/// One timeline entry as the history keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    /// When the daemon reported it, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// The entry, tagged with its `kind` (`transition`, `plugin-called`, `plugin-answered`, …).
    #[serde(flatten)]
    pub entry: TimelineEntry,
}

/// One event's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventHistoryView {
    /// IMDS's EventId.
    pub event_id: EventId,
    /// IMDS's EventType, from its first transition ("" when that was dropped).
    pub event_type: String,
    /// Whether recovery is complete and the daemon forgot the event.
    pub finished: bool,
    /// Entries dropped because the event had more than [`HISTORY_ENTRIES_PER_EVENT`].
    pub dropped_entries: u64,
    /// The entries, oldest first.
    pub entries: Vec<HistoryEntry>,
}

/// What `GET /status/history` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HistoryView {
    /// The events, the most recently seen last.
    pub events: Vec<EventHistoryView>,
    /// Timeline entries the history could not keep up with (a burst larger than the
    /// timeline's buffer); 0 normally.
    pub missed_entries: u64,
}

/// The shared, bounded history; fed by [`spawn_recorder`], read by the admin endpoint.
#[derive(Debug, Default)]
pub struct EventHistory {
    inner: Mutex<HistoryView>,
}

impl EventHistory {
    /// An empty history.
    pub fn new() -> EventHistory {
        EventHistory::default()
    }

    /// Records one timeline entry under every event it names.
    pub fn record(&self, entry: &TimelineEntry, at: SystemTime) {
        let ids = event_ids(entry);
        if ids.is_empty() {
            return;
        }
        let entry = kept_form(entry);
        let mut inner = self.lock();
        for id in ids {
            let event = event_mut(&mut inner.events, id, starts_anew(&entry));
            if let TimelineEntry::Transition { event_type_raw, .. } = &entry
                && event.event_type.is_empty()
            {
                event.event_type.clone_from(event_type_raw);
            }
            if matches!(entry, TimelineEntry::Finished { .. }) {
                event.finished = true;
            }
            make_room(event, &entry);
            event.entries.push(HistoryEntry {
                at_unix_ms: unix_ms(at),
                entry: entry.clone(),
            });
        }
    }

    /// Counts entries the recorder missed.
    pub fn missed(&self, count: u64) {
        self.lock().missed_entries += count;
    }

    /// A copy of the history, for `GET /status/history`.
    pub fn view(&self) -> HistoryView {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, HistoryView> {
        // A poisoned history is still a history: the page shows what it has.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The history of `id`, created (and the oldest event forgotten) when new; moved last. A
/// finished event whose id is scheduled again (a new simulator run, Azure reusing an id)
/// starts a new history.
fn event_mut<'a>(
    events: &'a mut Vec<EventHistoryView>,
    id: &str,
    starts_anew: bool,
) -> &'a mut EventHistoryView {
    let position = events.iter().position(|event| event.event_id == id);
    let reusable = position.filter(|index| !(starts_anew && events[*index].finished));
    if let Some(stale) = position.filter(|_| reusable.is_none()) {
        events.remove(stale);
    }
    let event = match reusable {
        Some(index) => events.remove(index),
        None => EventHistoryView {
            event_id: EventId::from(id),
            event_type: String::new(),
            finished: false,
            dropped_entries: 0,
            entries: Vec::new(),
        },
    };
    if events.len() == HISTORY_EVENTS_KEPT {
        events.remove(0);
    }
    events.push(event);
    let last = events.len() - 1;
    &mut events[last]
}

/// Whether the entry begins an event's life (a new Scheduled event).
fn starts_anew(entry: &TimelineEntry) -> bool {
    matches!(
        entry,
        TimelineEntry::Transition {
            transition: TransitionKind::Scheduled,
            ..
        }
    )
}

/// The entry as kept: a plugin's log line cut to [`HISTORY_LOG_LINE_MAX`] bytes.
fn kept_form(entry: &TimelineEntry) -> TimelineEntry {
    let mut kept = entry.clone();
    if let TimelineEntry::PluginLog { message, .. } = &mut kept
        && message.len() > HISTORY_LOG_LINE_MAX
    {
        *message = forewarn_runtime::cut_to_bytes(message, HISTORY_LOG_LINE_MAX);
    }
    kept
}

/// Drops what must go before `entry` is added: the event's oldest log line when `entry` is
/// one and the lines are at their cap, else its oldest entry when the event is at its cap.
fn make_room(event: &mut EventHistoryView, entry: &TimelineEntry) {
    let is_log = |kept: &HistoryEntry| matches!(kept.entry, TimelineEntry::PluginLog { .. });
    if matches!(entry, TimelineEntry::PluginLog { .. })
        && event.entries.iter().filter(|kept| is_log(kept)).count() >= HISTORY_LOG_LINES_PER_EVENT
        && let Some(oldest) = event.entries.iter().position(is_log)
    {
        event.entries.remove(oldest);
        event.dropped_entries += 1;
        return;
    }
    if event.entries.len() >= HISTORY_ENTRIES_PER_EVENT {
        event.entries.remove(0);
        event.dropped_entries += 1;
    }
}

/// The events an entry is about.
fn event_ids(entry: &TimelineEntry) -> Vec<&str> {
    match entry {
        TimelineEntry::Transition { event_id, .. }
        | TimelineEntry::Handling { event_id, .. }
        | TimelineEntry::PreparationWaits { event_id, .. }
        | TimelineEntry::TurnShortened { event_id, .. }
        | TimelineEntry::PreparingLate { event_id, .. }
        | TimelineEntry::PluginCalled { event_id, .. }
        | TimelineEntry::PluginLog { event_id, .. }
        | TimelineEntry::PluginAnswered { event_id, .. }
        | TimelineEntry::NotApproved { event_id, .. }
        | TimelineEntry::HostShutdownReleased { event_id, .. }
        | TimelineEntry::Finished { event_id } => vec![event_id.as_str()],
        TimelineEntry::HostShutdownBegan { event_id, .. } => {
            event_id.iter().map(EventId::as_str).collect()
        }
        TimelineEntry::Approved { event_ids } | TimelineEntry::ApprovalFailed { event_ids, .. } => {
            event_ids.iter().map(EventId::as_str).collect()
        }
        // About a plugin, not an event: `/status` shows the plugins in quarantine.
        TimelineEntry::PluginQuarantined(_) | TimelineEntry::QuarantineLifted { .. } => Vec::new(),
    }
}

/// Records every entry of `timeline` into `history` until `stop`.
pub(crate) fn spawn_recorder(
    history: Arc<EventHistory>,
    mut timeline: broadcast::Receiver<TimelineEntry>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let received = tokio::select! {
                () = stop.cancelled() => return,
                received = timeline.recv() => received,
            };
            match received {
                Ok(entry) => history.record(&entry, SystemTime::now()),
                Err(broadcast::error::RecvError::Lagged(missed)) => history.missed(missed),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::pipeline::state::{AnswerOutcome, CallPhase};
    use crate::pipeline::tracker::TransitionKind;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn scheduled(id: &str) -> TimelineEntry {
        TimelineEntry::Transition {
            event_id: id.into(),
            event_type: forewarn_imds::EventType::Reboot,
            event_type_raw: "Reboot".into(),
            transition: TransitionKind::Scheduled,
            detail: String::new(),
            announced: Box::new(crate::pipeline::test_harness::event(
                id,
                forewarn_imds::EventType::Reboot,
                crate::pipeline::test_harness::t0(),
                Duration::from_secs(60),
            )),
        }
    }

    fn finished(id: &str) -> TimelineEntry {
        TimelineEntry::Finished {
            event_id: id.into(),
        }
    }

    fn answered(id: &str, plugin: &str, outcome: AnswerOutcome) -> TimelineEntry {
        TimelineEntry::PluginAnswered {
            event_id: id.into(),
            plugin: plugin.into(),
            phase: CallPhase::Prepare,
            outcome,
            reason: "because".into(),
            elapsed_ms: 7,
        }
    }

    #[test]
    fn entries_are_kept_per_event_in_order_with_typed_fields() {
        let history = EventHistory::new();
        history.record(&scheduled("A"), at(1));
        history.record(&answered("A", "drain", AnswerOutcome::Defer), at(2));
        history.record(&answered("A", "drain", AnswerOutcome::Approve), at(3));
        history.record(
            &TimelineEntry::Approved {
                event_ids: vec!["A".into(), "B".into()],
            },
            at(4),
        );
        let view = history.view();
        let a = &view.events[0];
        assert_eq!(
            (a.event_id.as_str(), a.event_type.as_str()),
            ("A", "Reboot")
        );
        assert_eq!(a.entries.len(), 4);
        assert_eq!(a.entries[3].at_unix_ms, 4);
        let json = serde_json::to_value(&a.entries[1]).unwrap();
        assert_eq!(json["kind"], "plugin-answered");
        assert_eq!(json["outcome"], "defer");
        assert_eq!(json["phase"], "prepare");
        assert_eq!(json["elapsed_ms"], 7);
        assert_eq!(json["at_unix_ms"], 2);
        // One approval POST for two events lands in both histories.
        assert_eq!(view.events[1].event_id, "B");
        assert_eq!(view.events[1].entries.len(), 1);
    }

    #[test]
    fn the_history_is_bounded_in_events_and_entries() {
        let history = EventHistory::new();
        for index in 0..=HISTORY_EVENTS_KEPT {
            history.record(&scheduled(&format!("E{index}")), at(1));
        }
        for _ in 0..HISTORY_ENTRIES_PER_EVENT + 5 {
            history.record(&answered("E1", "p", AnswerOutcome::Defer), at(2));
        }
        let view = history.view();
        assert_eq!(view.events.len(), HISTORY_EVENTS_KEPT);
        assert!(view.events.iter().all(|event| event.event_id != "E0"));
        let busy = view.events.last().unwrap();
        assert_eq!(busy.event_id, "E1");
        assert_eq!(busy.entries.len(), HISTORY_ENTRIES_PER_EVENT);
        assert_eq!(busy.dropped_entries, 6);
    }

    fn log_line(id: &str, message: &str) -> TimelineEntry {
        TimelineEntry::PluginLog {
            event_id: id.into(),
            plugin: "chatty".into(),
            level: crate::pipeline::timeline::LogLevel::Info,
            message: message.into(),
        }
    }

    #[test]
    fn a_chatty_plugin_drops_its_own_old_lines_not_the_events_story() {
        let history = EventHistory::new();
        history.record(&scheduled("A"), at(1));
        history.record(&answered("A", "drain", AnswerOutcome::Approve), at(2));
        for _ in 0..HISTORY_ENTRIES_PER_EVENT * 2 {
            history.record(&log_line("A", &"x".repeat(HISTORY_LOG_LINE_MAX * 4)), at(3));
        }
        history.record(
            &TimelineEntry::Approved {
                event_ids: vec!["A".into()],
            },
            at(4),
        );
        let event = &history.view().events[0];
        let kinds: Vec<&str> = event
            .entries
            .iter()
            .map(|kept| match kept.entry {
                TimelineEntry::PluginLog { .. } => "log",
                TimelineEntry::Transition { .. } => "transition",
                TimelineEntry::PluginAnswered { .. } => "answer",
                TimelineEntry::Approved { .. } => "approved",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds[..2], ["transition", "answer"]);
        assert_eq!(kinds.last(), Some(&"approved"));
        assert_eq!(
            kinds.iter().filter(|kind| **kind == "log").count(),
            HISTORY_LOG_LINES_PER_EVENT
        );
        let TimelineEntry::PluginLog { message, .. } = &event.entries[2].entry else {
            panic!("not a log line");
        };
        assert!(message.len() <= HISTORY_LOG_LINE_MAX + '…'.len_utf8());
    }

    #[test]
    fn a_finished_id_scheduled_again_starts_a_new_history() {
        let history = EventHistory::new();
        history.record(&scheduled("A"), at(1));
        history.record(&finished("A"), at(2));
        history.record(&scheduled("A"), at(3));
        let view = history.view();
        assert_eq!(view.events.len(), 1);
        assert!(!view.events[0].finished);
        assert_eq!(view.events[0].entries.len(), 1);
        assert_eq!(view.events[0].entries[0].at_unix_ms, 3);
    }

    #[test]
    fn a_finished_event_is_marked_and_kept() {
        let history = EventHistory::new();
        history.record(&scheduled("A"), at(1));
        history.record(&finished("A"), at(2));
        let view = history.view();
        assert!(view.events[0].finished);
    }
}

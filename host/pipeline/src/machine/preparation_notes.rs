//! What the pipeline says about an event's preparation: the wait for the lead time and a
//! late preparation (each once per event), and a plugin's turn cut short.

use std::collections::HashSet;

use forewarn_events::{EventId, ImdsTime, PluginName};

use crate::log_fields::{self, millis};
use crate::log_messages;
use crate::roster::Roster;
use crate::scheduler::ShortenedTurn;
use crate::state::EventProgress;
use crate::timeline::TimelineEntry;

/// The notes said once per event; not journaled (a restart says them again).
#[derive(Debug, Default)]
pub(super) struct PreparationNotes {
    announced: HashSet<(EventId, PreparationNote)>,
}

/// What was said once about an event's preparation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum PreparationNote {
    /// It waits for the lead time.
    Waits,
    /// Its deadline passed with plugins still preparing.
    Late,
}

impl PreparationNotes {
    /// Says once that `id` waits for the lead time before plugins prepare.
    pub(super) fn wait(&mut self, id: &EventId, starts_at: ImdsTime) -> Option<TimelineEntry> {
        if !self.announced.insert((id.clone(), PreparationNote::Waits)) {
            return None;
        }
        tracing::info!(
            event_id = %id,
            starts_at = %log_fields::rfc3339(starts_at),
            "{}",
            log_messages::PREPARATION_WAITS
        );
        Some(TimelineEntry::PreparationWaits {
            event_id: id.clone(),
            starts_at_unix_ms: starts_at,
        })
    }

    /// Says once that the deadline of `progress` passed with plugins still preparing.
    pub(super) fn late(
        &mut self,
        progress: &EventProgress,
        roster: &Roster,
        safety_margin_ms: u64,
    ) -> Option<TimelineEntry> {
        let id = &progress.event.id;
        if !self.announced.insert((id.clone(), PreparationNote::Late)) {
            return None;
        }
        let still_preparing: Vec<PluginName> = roster
            .subscribers(progress.event.event_type)
            .iter()
            .filter(|member| !progress.plugin(&member.name).prepared)
            .map(|member| member.name.clone())
            .collect();
        tracing::warn!(
            event_id = %id,
            still_preparing = %log_fields::list(&still_preparing),
            safety_margin_ms,
            "{}",
            log_messages::PREPARING_LATE
        );
        Some(TimelineEntry::PreparingLate {
            event_id: id.clone(),
            still_preparing,
        })
    }

    /// `id` has a new NotBefore: passing it late is worth saying again.
    pub(super) fn rescheduled(&mut self, id: &EventId) {
        self.announced.remove(&(id.clone(), PreparationNote::Late));
    }

    /// `id` is handled to the end.
    pub(super) fn forget(&mut self, id: &EventId) {
        self.announced.retain(|(announced, _)| announced != id);
    }
}

/// Says that a plugin starts without waiting for those it runs after (once per plugin and
/// event: it is its first prepare call).
pub(super) fn shortened(id: &EventId, turn: ShortenedTurn) -> TimelineEntry {
    let needed_ms = millis(turn.needed);
    let left_ms = millis(turn.left);
    tracing::warn!(
        event_id = %id,
        plugin = %turn.plugin,
        cut_short = %log_fields::list(&turn.cut_short),
        needed_ms,
        left_ms,
        "{}",
        log_messages::TURN_SHORTENED
    );
    TimelineEntry::TurnShortened {
        event_id: id.clone(),
        plugin: turn.plugin,
        cut_short: turn.cut_short,
        needed_ms,
        left_ms,
    }
}

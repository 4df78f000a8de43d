//! What the pipeline says about an event's preparation: the wait for the lead time and a
//! late preparation (each once per event), and a plugin's turn cut short.

use forewarn_events::ImdsTime;

use forewarn_events::{EventId, PluginName};

use super::Pipeline;
use crate::log_fields::{self, millis};
use crate::log_messages;
use crate::scheduler::ShortenedTurn;
use crate::timeline::TimelineEntry;

impl Pipeline {
    /// Says once that `id` waits for the lead time before plugins prepare.
    pub(super) fn announce_wait(&mut self, id: &EventId, starts_at: ImdsTime) {
        if !self
            .notes_announced
            .insert((EventId::from(id), PreparationNote::Waits))
        {
            return;
        }
        tracing::info!(
            event_id = %id,
            starts_at = %log_fields::rfc3339(starts_at),
            "{}",
            log_messages::PREPARATION_WAITS
        );
        self.emit(TimelineEntry::PreparationWaits {
            event_id: EventId::from(id),
            starts_at_unix_ms: starts_at,
        });
    }

    /// Says that a plugin starts without waiting for those it runs after (once per plugin
    /// and event: it is its first prepare call).
    pub(super) fn announce_shortened(&mut self, id: &EventId, turn: ShortenedTurn) {
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
        self.emit(TimelineEntry::TurnShortened {
            event_id: EventId::from(id),
            plugin: turn.plugin,
            cut_short: turn.cut_short,
            needed_ms,
            left_ms,
        });
    }

    /// Says once that the deadline passed with plugins still preparing.
    pub(super) fn announce_late(&mut self, id: &EventId) {
        if !self
            .notes_announced
            .insert((EventId::from(id), PreparationNote::Late))
        {
            return;
        }
        let Some(progress) = self.state.events.get(id) else {
            return;
        };
        let still_preparing: Vec<PluginName> = self
            .roster
            .subscribers(progress.event.event_type)
            .iter()
            .filter(|member| !progress.plugin(&member.name).prepared)
            .map(|member| member.name.clone())
            .collect();
        tracing::warn!(
            event_id = %id,
            still_preparing = %log_fields::list(&still_preparing),
            safety_margin_ms = self.settings.policy.safety_margin_ms,
            "{}",
            log_messages::PREPARING_LATE
        );
        self.emit(TimelineEntry::PreparingLate {
            event_id: EventId::from(id),
            still_preparing,
        });
    }
}

/// What was said once about an event's preparation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum PreparationNote {
    /// It waits for the lead time.
    Waits,
    /// Its deadline passed with plugins still preparing.
    Late,
}

//! The crash-loop quarantine, as the pipeline applies it.

use forewarn_events::{EventId, ImdsTime, PluginName};
use std::sync::Arc;

use super::Pipeline;
use crate::log_messages;
use crate::roster::Roster;
use crate::scheduler::CallReply;
use crate::timeline::TimelineEntry;

/// The crash-loop quarantine, as the pipeline applies it: failures counted, the roster
/// marked, and each start and end of a quarantine said once.
impl Pipeline {
    /// The plugin set changed: plugins loaded in a new version (or unloaded) leave
    /// quarantine, and the new roster is marked with those still in it.
    pub(super) fn plugins_changed(&mut self, roster: Arc<Roster>) {
        self.roster = roster;
        for lifted in self.quarantine.reconcile(&self.roster) {
            tracing::info!(
                plugin = %lifted.plugin,
                on_failure = %lifted.on_failure,
                "{}",
                log_messages::PLUGIN_QUARANTINE_LIFTED
            );
            self.emit(TimelineEntry::QuarantineLifted {
                plugin: lifted.plugin,
            });
        }
        self.mark_quarantined();
    }

    /// Counts a failed call of `plugin` at `now`; quarantines it when its failures reach the
    /// policy's count within the window.
    pub(super) fn count_failure(&mut self, plugin: &PluginName, reply: &CallReply, now: ImdsTime) {
        let Some(member) = self.roster.get(plugin) else {
            // Unloaded meanwhile: nothing is called any more to quarantine.
            return;
        };
        let Some(quarantined) =
            self.quarantine
                .record_failure(member, reply.outcome, &reply.reason, now)
        else {
            return;
        };
        tracing::error!(
            plugin = %quarantined.plugin,
            failures = quarantined.failures,
            window_ms = quarantined.window_ms,
            on_failure = %quarantined.on_failure,
            last_failure = %quarantined.last_failure,
            reason = %quarantined.reason,
            "{}",
            log_messages::PLUGIN_QUARANTINED
        );
        self.emit(TimelineEntry::PluginQuarantined(quarantined));
        self.mark_quarantined();
    }

    /// Marks the roster the scheduler reads with the plugins in quarantine.
    fn mark_quarantined(&mut self) {
        let names = self.quarantine.names();
        if *self.roster.quarantined() != names {
            Arc::make_mut(&mut self.roster).set_quarantined(names);
            // Who may be called, and who holds an approval, changed for every event.
            self.agenda.touch_everything();
        }
    }

    /// Says once per event that quarantined plugins hold it (see
    /// [`crate::approval::quarantine_hold`]).
    pub(super) fn announce_quarantine_hold(&mut self, id: &EventId) {
        if self.roster.quarantined().is_empty() {
            return;
        }
        self.with_approval(|approval, events, roster| {
            if let Some(progress) = events.get(id) {
                approval.note_quarantine_hold(progress, roster);
            }
        });
    }
}

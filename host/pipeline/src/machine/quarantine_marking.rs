//! The crash-loop quarantine, as the pipeline applies it: failures counted, the roster
//! marked, and each start and end of a quarantine said once.

use forewarn_events::{ImdsTime, PluginName};
use std::sync::Arc;

use crate::agenda::Agenda;
use crate::log_messages;
use crate::quarantine::{Quarantine, QuarantineRules, QuarantinedPlugin};
use crate::roster::Roster;
use crate::scheduler::CallReply;
use crate::timeline::TimelineEntry;

/// The plugin set's roster with the plugins in crash-loop quarantine marked, and the
/// failures that put them there.
pub(super) struct MarkedRoster {
    /// The roster the scheduler reads, marked.
    roster: Arc<Roster>,
    /// Each plugin's recent failures, and the plugins in quarantine.
    quarantine: Quarantine,
}

impl MarkedRoster {
    /// An empty roster; plugins are quarantined under `rules`.
    pub(super) fn new(rules: QuarantineRules) -> MarkedRoster {
        MarkedRoster {
            roster: Arc::default(),
            quarantine: Quarantine::new(rules),
        }
    }

    /// The roster, with the quarantined plugins marked.
    pub(super) fn roster(&self) -> &Arc<Roster> {
        &self.roster
    }

    /// The plugins in quarantine, by name.
    pub(super) fn quarantined(&self) -> Vec<QuarantinedPlugin> {
        self.quarantine.quarantined()
    }

    /// The plugin set changed: plugins loaded in a new version (or unloaded) leave
    /// quarantine, and the new roster is marked with those still in it. Returns what the
    /// timeline shows of it.
    pub(super) fn replace(
        &mut self,
        roster: Arc<Roster>,
        agenda: &mut Agenda,
    ) -> Vec<TimelineEntry> {
        self.roster = roster;
        let mut lifted_entries = Vec::new();
        for lifted in self.quarantine.reconcile(&self.roster) {
            tracing::info!(
                plugin = %lifted.plugin,
                on_failure = %lifted.on_failure,
                "{}",
                log_messages::PLUGIN_QUARANTINE_LIFTED
            );
            lifted_entries.push(TimelineEntry::QuarantineLifted {
                plugin: lifted.plugin,
            });
        }
        self.mark(agenda);
        lifted_entries
    }

    /// Counts a failed call of `plugin` at `now`; quarantines it when its failures reach the
    /// policy's count within the window, and returns what the timeline shows of it.
    pub(super) fn count_failure(
        &mut self,
        plugin: &PluginName,
        reply: &CallReply,
        now: ImdsTime,
        agenda: &mut Agenda,
    ) -> Option<TimelineEntry> {
        // Unloaded meanwhile: nothing is called any more to quarantine.
        let member = self.roster.get(plugin)?;
        let quarantined =
            self.quarantine
                .record_failure(member, reply.outcome, &reply.reason, now)?;
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
        self.mark(agenda);
        Some(TimelineEntry::PluginQuarantined(quarantined))
    }

    /// Marks the roster the scheduler reads with the plugins in quarantine.
    fn mark(&mut self, agenda: &mut Agenda) {
        let names = self.quarantine.names();
        if *self.roster.quarantined() != names {
            Arc::make_mut(&mut self.roster).set_quarantined(names);
            // Who may be called, and who holds an approval, changed for every event.
            agenda.touch_everything();
        }
    }
}

//! How the pipeline takes the operating system's shutdown ([`Input::HostShutdown`]): its own
//! Shutdown event prepared like a Scheduled Event (the same chain, order and budgets, planned
//! back from the budget's end), never approved at IMDS, and released to the service manager
//! ([`Action::ReleaseShutdown`]) when the plugins prepared or the budget ran out. After the
//! next start the event is over: the plugins recover (`ended-after-start`).
//!
//! [`Input::HostShutdown`]: super::Input::HostShutdown

use std::sync::Arc;
use std::time::Duration;

use forewarn_events::{EventId, ImdsTime, PluginName, ScheduledEvent};

use super::{Action, Pipeline};
use crate::host_shutdown::{AlreadyUnderWay, HostShutdown};
use crate::log_fields;
use crate::log_messages;
use crate::state::{Approval, EventProgress, Handling, Lifecycle};

use crate::timeline::TimelineEntry;
use crate::tracker::Transition;

impl Pipeline {
    /// The operating system said it is shutting down, with `budget` to prepare.
    pub(super) fn host_shutdown_began(&mut self, budget: Duration, now: ImdsTime) {
        let under_way = self.under_way_for_this_vm();
        let own = EventId::from(format!("shutdown-{}", now.unix_ms()));
        let Some(next) = self
            .host_shutdown
            .begin(now, budget, under_way, own.clone())
        else {
            return;
        };
        tracing::warn!(
            budget = %log_fields::duration(budget),
            waits_for = next.awaited_event().map_or("nothing", |id| id.as_str()),
            "{}",
            log_messages::HOST_SHUTDOWN_BEGAN
        );
        self.emit(TimelineEntry::HostShutdownBegan {
            budget_ms: log_fields::millis(budget),
            event_id: next.awaited_event().cloned(),
        });
        if next.awaited_event() == Some(&own) {
            self.make_own_shutdown_event(own, now + budget, now);
        }
        self.host_shutdown = next;
        if matches!(self.host_shutdown, HostShutdown::Released { .. }) {
            self.announce_release();
        }
    }

    /// The shutdown was called off: the plugins undo what they did for forewarn's own event.
    pub(super) fn host_shutdown_cancelled(&mut self, now: ImdsTime) {
        let (next, own) = self.host_shutdown.cancel();
        if self.host_shutdown == HostShutdown::Running {
            return;
        }
        self.host_shutdown = next;
        tracing::info!("{}", log_messages::HOST_SHUTDOWN_CANCELLED);
        let Some(event) = own.and_then(|id| self.state.events.get(&id)) else {
            return;
        };
        let ended = Transition::EndedWithoutStart(event.event.clone());
        self.apply_transition(&ended, now);
        self.unsaved = true;
    }

    /// Before every round: when the Scheduled Event the shutdown waits for went away
    /// unprepared (cancelled), forewarn makes its own Shutdown event for what is left of the
    /// budget, so that this round prepares it.
    pub(super) fn replace_a_cancelled_ridden_event(&mut self, now: ImdsTime) {
        let HostShutdown::RidingOn { event_id, .. } = &self.host_shutdown else {
            return;
        };
        let gone =
            self.state.events.get(event_id).is_none_or(|progress| {
                progress.lifecycle == (Lifecycle::Ended { after_start: false })
            });
        if !gone {
            return;
        }
        let own = EventId::from(format!("shutdown-{}", now.unix_ms()));
        if let Some(next) = self.host_shutdown.ridden_event_gone(own.clone()) {
            let deadline = next.deadline().unwrap_or(now);
            self.make_own_shutdown_event(own, deadline, now);
            self.host_shutdown = next;
        }
    }

    /// After every round: the shutdown is released once what it waits for is prepared, or
    /// its budget ran out.
    pub(super) fn settle_host_shutdown(&mut self, now: ImdsTime) {
        let Some(awaited) = self.host_shutdown.awaited_event().cloned() else {
            return;
        };
        let progress = self.state.events.get(&awaited).cloned();
        let prepared = progress.as_deref().is_some_and(is_prepared);
        let roster = Arc::clone(self.plugins.roster());
        let unprepared = || {
            progress
                .as_deref()
                .map(|progress| unprepared_plugins(progress, &roster))
                .unwrap_or_default()
        };
        let Some(next) = self.host_shutdown.settle(now, prepared, unprepared) else {
            return;
        };
        self.host_shutdown = next;
        self.announce_release();
    }

    /// The shutdown was just released: the log, the timeline and the service manager hear it.
    fn announce_release(&mut self) {
        let HostShutdown::Released { since, at, release } = &self.host_shutdown else {
            return;
        };
        let release = release.clone();
        let prepared_ms = log_fields::millis(at.duration_since(*since));
        tracing::warn!(
            outcome = release.as_str(),
            prepared_ms,
            "{}: {release}",
            log_messages::HOST_SHUTDOWN_RELEASED
        );
        self.emit(TimelineEntry::HostShutdownReleased {
            event_id: release.event_id().clone(),
            outcome: release.as_str(),
            prepared_ms,
        });
        self.actions.push_back(Action::ReleaseShutdown(release));
    }

    /// Which Scheduled Event taking this VM down is already being prepared, or was.
    fn under_way_for_this_vm(&self) -> AlreadyUnderWay {
        let mut found = AlreadyUnderWay::Nothing;
        for progress in self.state.events.values() {
            let for_this_vm = progress.handling
                == Handling::Prepare {
                    affects_this_vm: true,
                }
                || matches!(progress.handling, Handling::ApproveAtOnce { .. });
            if !for_this_vm
                || progress.is_ended()
                || !progress.event.event_type.takes_the_vm_down()
                || progress.event.is_from_operating_system()
            {
                continue;
            }
            let id = progress.event.id.clone();
            if is_prepared(progress) {
                return AlreadyUnderWay::Prepared(id);
            }
            found = AlreadyUnderWay::Preparing(id);
        }
        found
    }

    /// forewarn's own Shutdown event, handled from now as a Scheduled Event whose NotBefore
    /// is the budget's end.
    fn make_own_shutdown_event(&mut self, id: EventId, ends: ImdsTime, now: ImdsTime) {
        let event = ScheduledEvent::host_shutdown(id, &self.settings.vm_name, ends.system_time());
        self.apply_transition(&Transition::Scheduled(event), now);
        self.unsaved = true;
    }

    /// Every plugin prepared for forewarn's own Shutdown event: nothing is approved at IMDS.
    /// Returns whether it was so taken.
    pub(super) fn all_prepared_for_shutdown(&mut self, id: &EventId, now: ImdsTime) -> bool {
        let Some(progress) = self.state.events.get_mut(id).map(Arc::make_mut) else {
            return false;
        };
        if !progress.event.is_from_operating_system() {
            return false;
        }
        if progress.approval == Approval::Pending {
            progress.approval = Approval::NotAtImds {
                prepared_at_unix_ms: now,
            };
            self.unsaved = true;
        }
        true
    }

    /// The Shutdown events a journal from before this start holds, not yet recovering: the
    /// first round ends them ([`Pipeline::resume_after_host_shutdown`]).
    pub(super) fn journaled_shutdowns(&self) -> Vec<EventId> {
        self.state
            .events
            .values()
            .filter(|progress| progress.event.is_from_operating_system() && !progress.is_ended())
            .map(|progress| progress.event.id.clone())
            .collect()
    }

    /// At the first round: a Shutdown event journaled before this start is over (the VM shut
    /// down, or the daemon stopped with it): its plugins recover. Says when it was and how
    /// long it prepared.
    pub(super) fn resume_after_host_shutdown(&mut self, now: ImdsTime) {
        for id in std::mem::take(&mut self.shutdowns_to_resume) {
            let Some(progress) = self.state.events.get(&id).cloned() else {
                continue;
            };
            let prepared_ms = match (&progress.approval, progress.preparing_since_unix_ms) {
                (
                    Approval::NotAtImds {
                        prepared_at_unix_ms,
                    },
                    Some(since),
                ) => Some(log_fields::millis(
                    prepared_at_unix_ms.duration_since(since),
                )),
                _ => None,
            };
            tracing::warn!(
                event_id = %progress.event.id,
                shut_down_at = %log_fields::time(progress.preparing_since_unix_ms.map(ImdsTime::system_time)),
                prepared_ms,
                "{}",
                log_messages::HOST_SHUTDOWN_RESUMED
            );
            let ended = Transition::EndedAfterStart(progress.event.clone());
            self.apply_transition(&ended, now);
            self.unsaved = true;
        }
    }
}

/// Whether the event's preparation is done: every plugin prepared (approved, approved at
/// once, held by the policy or under way at IMDS), or the event started.
fn is_prepared(progress: &EventProgress) -> bool {
    progress.lifecycle == Lifecycle::Started || progress.approval != Approval::Pending
}

/// The subscribed plugins that had not prepared for the event.
fn unprepared_plugins(progress: &EventProgress, roster: &crate::roster::Roster) -> Vec<PluginName> {
    roster
        .subscribers(progress.event.event_type)
        .into_iter()
        .filter(|member| !progress.plugin(&member.name).prepared)
        .map(|member| member.name.clone())
        .collect()
}

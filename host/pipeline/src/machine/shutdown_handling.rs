//! How the pipeline takes the operating system's shutdown ([`Input::HostShutdown`]): its own
//! Shutdown event prepared like a Scheduled Event (the same chain, order and budgets, planned
//! back from the budget's end), never approved at IMDS, and released to the service manager
//! ([`Action::ReleaseShutdown`]) when the plugins prepared or the budget ran out. After the
//! next start the event is over: the plugins recover (`ended-after-start`).
//!
//! [`ShutdownHandling`] owns where the shutdown stands; it reads the events and returns the
//! [`ShutdownStep`]s the machine carries out in order.
//!
//! [`Input::HostShutdown`]: super::Input::HostShutdown
//! [`Action::ReleaseShutdown`]: super::Action::ReleaseShutdown

use std::time::Duration;

use forewarn_events::{EventId, ImdsTime, PluginName, ScheduledEvent};

use crate::approval::Events;
use crate::host_shutdown::{AlreadyUnderWay, HostShutdown, ShutdownRelease};
use crate::log_fields;
use crate::log_messages;
use crate::roster::Roster;
use crate::state::{Approval, EventProgress, Handling, Lifecycle};
use crate::timeline::TimelineEntry;
use crate::tracker::Transition;

/// The operating system's shutdown as the pipeline handles it.
pub(super) struct ShutdownHandling {
    /// Where the shutdown stands.
    shutdown: HostShutdown,
    /// Shutdown events journaled before this start, which the first round ends.
    to_resume: Vec<EventId>,
    /// This VM's name, which forewarn's own Shutdown event names.
    vm_name: String,
}

/// What the machine does for the shutdown, in order.
pub(super) enum ShutdownStep {
    /// Apply this transition to the events (and journal the state).
    Transition(Box<Transition>),
    /// Show this on the timeline.
    Emit(TimelineEntry),
    /// Let the operating system's shutdown go on.
    Release(ShutdownRelease),
}

impl ShutdownHandling {
    /// No shutdown under way; the Shutdown events `events` (journaled before this start)
    /// holds, not yet recovering, are ended by the first round ([`ShutdownHandling::resume`]).
    pub(super) fn resuming(events: &Events, vm_name: &str) -> ShutdownHandling {
        let to_resume = events
            .values()
            .filter(|progress| progress.event.is_from_operating_system() && !progress.is_ended())
            .map(|progress| progress.event.id.clone())
            .collect();
        ShutdownHandling {
            shutdown: HostShutdown::Running,
            to_resume,
            vm_name: vm_name.to_owned(),
        }
    }

    /// When the shutdown's budget runs out, while one is under way.
    pub(super) fn deadline(&self) -> Option<ImdsTime> {
        self.shutdown.deadline()
    }

    /// The operating system said it is shutting down, with `budget` to prepare.
    pub(super) fn began(
        &mut self,
        budget: Duration,
        now: ImdsTime,
        events: &Events,
    ) -> Vec<ShutdownStep> {
        let under_way = under_way_for_this_vm(events);
        let own = EventId::from(format!("shutdown-{}", now.unix_ms()));
        let Some(next) = self.shutdown.begin(now, budget, under_way, own.clone()) else {
            return Vec::new();
        };
        tracing::warn!(
            budget = %log_fields::duration(budget),
            waits_for = next.awaited_event().map_or("nothing", |id| id.as_str()),
            "{}",
            log_messages::HOST_SHUTDOWN_BEGAN
        );
        let mut steps = vec![ShutdownStep::Emit(TimelineEntry::HostShutdownBegan {
            budget_ms: log_fields::millis(budget),
            event_id: next.awaited_event().cloned(),
        })];
        if next.awaited_event() == Some(&own) {
            steps.push(self.own_shutdown_event(own, now + budget));
        }
        self.shutdown = next;
        if matches!(self.shutdown, HostShutdown::Released { .. }) {
            steps.extend(self.release());
        }
        steps
    }

    /// The shutdown was called off: the plugins undo what they did for forewarn's own event.
    pub(super) fn cancelled(&mut self, events: &Events) -> Vec<ShutdownStep> {
        let (next, own) = self.shutdown.cancel();
        if self.shutdown == HostShutdown::Running {
            return Vec::new();
        }
        self.shutdown = next;
        tracing::info!("{}", log_messages::HOST_SHUTDOWN_CANCELLED);
        let Some(event) = own.and_then(|id| events.get(&id)) else {
            return Vec::new();
        };
        let ended = Transition::EndedWithoutStart(event.event.clone());
        vec![ShutdownStep::Transition(Box::new(ended))]
    }

    /// Before every round: when the Scheduled Event the shutdown waits for went away
    /// unprepared (cancelled), forewarn makes its own Shutdown event for what is left of the
    /// budget, so that this round prepares it.
    pub(super) fn replace_a_cancelled_ridden_event(
        &mut self,
        now: ImdsTime,
        events: &Events,
    ) -> Vec<ShutdownStep> {
        let HostShutdown::RidingOn { event_id, .. } = &self.shutdown else {
            return Vec::new();
        };
        let gone = events
            .get(event_id)
            .is_none_or(|progress| progress.lifecycle == (Lifecycle::Ended { after_start: false }));
        if !gone {
            return Vec::new();
        }
        let own = EventId::from(format!("shutdown-{}", now.unix_ms()));
        let Some(next) = self.shutdown.ridden_event_gone(own.clone()) else {
            return Vec::new();
        };
        let deadline = next.deadline().unwrap_or(now);
        let step = self.own_shutdown_event(own, deadline);
        self.shutdown = next;
        vec![step]
    }

    /// After every round: the shutdown is released once what it waits for is prepared, or
    /// its budget ran out.
    pub(super) fn settle(
        &mut self,
        now: ImdsTime,
        events: &Events,
        roster: &Roster,
    ) -> Vec<ShutdownStep> {
        let Some(awaited) = self.shutdown.awaited_event() else {
            return Vec::new();
        };
        let progress = events.get(awaited);
        let prepared = progress.is_some_and(|progress| is_prepared(progress));
        let unprepared = || {
            progress
                .map(|progress| unprepared_plugins(progress, roster))
                .unwrap_or_default()
        };
        let Some(next) = self.shutdown.settle(now, prepared, unprepared) else {
            return Vec::new();
        };
        self.shutdown = next;
        self.release()
    }

    /// The shutdown was just released: the log, the timeline and the service manager hear it.
    fn release(&self) -> Vec<ShutdownStep> {
        let HostShutdown::Released { since, at, release } = &self.shutdown else {
            return Vec::new();
        };
        let release = release.clone();
        let prepared_ms = log_fields::millis(at.duration_since(*since));
        tracing::warn!(
            outcome = release.as_str(),
            prepared_ms,
            "{}: {release}",
            log_messages::HOST_SHUTDOWN_RELEASED
        );
        let entry = TimelineEntry::HostShutdownReleased {
            event_id: release.event_id().clone(),
            outcome: release.as_str(),
            prepared_ms,
        };
        vec![ShutdownStep::Emit(entry), ShutdownStep::Release(release)]
    }

    /// forewarn's own Shutdown event, handled from now as a Scheduled Event whose NotBefore
    /// is the budget's end.
    fn own_shutdown_event(&self, id: EventId, ends: ImdsTime) -> ShutdownStep {
        let event = ScheduledEvent::host_shutdown(id, &self.vm_name, ends.system_time());
        ShutdownStep::Transition(Box::new(Transition::Scheduled(event)))
    }

    /// At the first round: a Shutdown event journaled before this start is over (the VM shut
    /// down, or the daemon stopped with it): its plugins recover. Says when it was and how
    /// long it prepared.
    pub(super) fn resume(&mut self, events: &Events) -> Vec<ShutdownStep> {
        let mut steps = Vec::new();
        for id in std::mem::take(&mut self.to_resume) {
            let Some(progress) = events.get(&id) else {
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
            steps.push(ShutdownStep::Transition(Box::new(ended)));
        }
        steps
    }
}

/// Every plugin prepared for forewarn's own Shutdown event: nothing is approved at IMDS.
/// Returns whether `progress` changed.
pub(super) fn all_prepared(progress: &mut EventProgress, now: ImdsTime) -> bool {
    if progress.approval != Approval::Pending {
        return false;
    }
    progress.approval = Approval::NotAtImds {
        prepared_at_unix_ms: now,
    };
    true
}

/// Which Scheduled Event taking this VM down is already being prepared, or was.
fn under_way_for_this_vm(events: &Events) -> AlreadyUnderWay {
    let mut found = AlreadyUnderWay::Nothing;
    for progress in events.values() {
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

/// Whether the event's preparation is done: every plugin prepared (approved, approved at
/// once, held by the policy or under way at IMDS), or the event started.
fn is_prepared(progress: &EventProgress) -> bool {
    progress.lifecycle == Lifecycle::Started || progress.approval != Approval::Pending
}

/// The subscribed plugins that had not prepared for the event.
fn unprepared_plugins(progress: &EventProgress, roster: &Roster) -> Vec<PluginName> {
    roster
        .subscribers(progress.event.event_type)
        .into_iter()
        .filter(|member| !progress.plugin(&member.name).prepared)
        .map(|member| member.name.clone())
        .collect()
}

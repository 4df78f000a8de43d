//! How the pipeline takes the tracker's transitions: an event listed, rescheduled, started
//! or ended changes its record (and a relisting during a recovery waits for it).

use forewarn_events::ImdsTime;
use std::sync::Arc;

use forewarn_events::{Document, EventStatus, ScheduledEvent};

use super::Pipeline;
use crate::log_fields;
use crate::log_messages;
use crate::policy::{self, Plan};
use crate::state::{Approval, EventProgress, Handling, Lifecycle};
use crate::timeline::TimelineEntry;
use crate::tracker::Transition;

impl Pipeline {
    pub(super) fn observe(&mut self, document: &Document, now: ImdsTime) {
        // Copying a tracker shared with the journaled state copies its map, not its events
        // (each is shared until it changes).
        let transitions = Arc::make_mut(&mut self.state.tracker).observe(document, now);
        for transition in &transitions {
            self.apply_transition(transition, now);
        }
        if !transitions.is_empty() {
            self.unsaved = true;
        }
    }

    pub(super) fn apply_transition(&mut self, transition: &Transition, now: ImdsTime) {
        let event = transition.event().clone();
        self.agenda.touch(&event.id);
        tracing::info!(
            event_id = %event.id,
            event_type = %event.event_type_raw,
            transition = %transition.kind(),
            not_before = %log_fields::time(event.not_before),
            resources = %log_fields::names(&event.resources),
            "{}",
            log_messages::EVENT_TRANSITION
        );
        self.emit(TimelineEntry::Transition {
            event_id: event.id.clone(),
            event_type: event.event_type,
            event_type_raw: event.event_type_raw.clone(),
            transition: transition.kind(),
            detail: describe_event(&event, now),
            announced: Box::new(event.clone()),
        });
        if self.relist_during_recovery(transition) {
            return;
        }
        match transition {
            Transition::Scheduled(_) => self.start_handling(event, Lifecycle::Scheduled),
            Transition::Rescheduled { .. } => self.reschedule(event),
            Transition::Started { .. } => self.mark_started(event),
            Transition::EndedAfterStart(_) => self.mark_ended(event, true, now),
            Transition::EndedWithoutStart(_) => self.mark_ended(event, false, now),
        }
    }

    /// An id whose record is still recovering was listed again (a new listing, a
    /// reschedule or a start of it) or its new listing ended: the recovery is not
    /// overwritten; the new listing is kept and handled once the recovery is done.
    /// Returns whether the transition was taken so.
    fn relist_during_recovery(&mut self, transition: &Transition) -> bool {
        let event = transition.event();
        let Some(progress) = self.state.events.get_mut(&event.id).map(Arc::make_mut) else {
            return false;
        };
        if !progress.is_ended() {
            return false;
        }
        progress.relisted = match transition {
            Transition::EndedAfterStart(_) | Transition::EndedWithoutStart(_) => None,
            _ => Some(event.clone()),
        };
        tracing::info!(
            event_id = %event.id,
            relisted = progress.relisted.is_some(),
            "the event's id is listed again while its recovery runs; handled once it is done"
        );
        true
    }

    /// What the policy decides for `event` on this VM.
    fn handling_of(&self, event: &ScheduledEvent) -> Handling {
        match policy::plan(event, &self.settings.vm_name, &self.settings.policy) {
            Plan::Ignore { reason } => {
                tracing::info!(event_id = %event.id, "{reason}");
                Handling::Ignored { reason }
            }
            Plan::ApproveAtOnce { rule } => Handling::ApproveAtOnce { rule: rule.into() },
            Plan::Prepare { affects_this_vm } => Handling::Prepare { affects_this_vm },
        }
    }

    pub(super) fn start_handling(&mut self, event: ScheduledEvent, lifecycle: Lifecycle) {
        let handling = self.handling_of(&event);
        self.emit(TimelineEntry::Handling {
            event_id: event.id.clone(),
            handling: handling.sentence(),
        });
        let id = event.id.clone();
        let mut progress = EventProgress::new(event, handling, lifecycle);
        if lifecycle == Lifecycle::Started {
            progress.approval = Approval::Abandoned {
                reason: "the event appeared already started".into(),
            };
        }
        self.state.events.insert(id, Arc::new(progress));
    }

    /// A reschedule can change Resources, so the policy is asked again. Under the same plan
    /// plugins prepare again — except after a sent approval, which stands unless a plugin
    /// asks to be asked again (`prepare-again-on-reschedule`). Under a new plan (this VM no
    /// longer named, approved at once, only other VMs named) plugins that were asked
    /// recover first (`ended-without-start`, in reverse order); the event is then handled
    /// afresh.
    fn reschedule(&mut self, event: ScheduledEvent) {
        let id = event.id.clone();
        let handling = self.handling_of(&event);
        let Some(progress) = self.state.events.get_mut(&id).map(Arc::make_mut) else {
            self.start_handling(event, Lifecycle::Scheduled);
            return;
        };
        if progress.handling != handling {
            // This VM is no longer ready for the event as it was planned.
            self.approval.withdraw(&id);
            if matches!(progress.handling, Handling::Prepare { .. })
                && progress.plugins_were_asked()
            {
                let reason = format!("rescheduled, now {}", handling.sentence());
                recover_before_relisting(progress, event, reason);
            } else {
                self.state.events.remove(&id);
                self.start_handling(event, Lifecycle::Scheduled);
            }
            return;
        }
        progress.event = event;
        let roster = self.plugins.roster();
        let sent = matches!(progress.approval, Approval::Sent { .. });
        let asked_again = progress.restart_preparation(|name| {
            !sent
                || roster
                    .get(name)
                    .is_some_and(|member| member.terms.prepare_again_on_reschedule)
        });
        if asked_again || !sent {
            // This VM prepares again: it is no longer ready for the event.
            self.approval.withdraw(&id);
        }
        // A new NotBefore: passing it late is worth saying again.
        self.notes.rescheduled(&id);
        self.emit(TimelineEntry::Handling {
            event_id: id,
            handling: handling.sentence(),
        });
    }

    fn mark_started(&mut self, event: ScheduledEvent) {
        let Some(progress) = self.state.events.get_mut(&event.id).map(Arc::make_mut) else {
            // Straight to Started (a hardware failure): plugins are told it started.
            self.start_handling(event, Lifecycle::Started);
            return;
        };
        progress.event = event;
        progress.lifecycle = Lifecycle::Started;
        if matches!(progress.approval, Approval::Pending | Approval::Due { .. }) {
            progress.approval = Approval::Abandoned {
                reason: "the event started before it was approved".into(),
            };
        }
    }

    fn mark_ended(&mut self, event: ScheduledEvent, after_start: bool, now: ImdsTime) {
        let Some(progress) = self.state.events.get_mut(&event.id).map(Arc::make_mut) else {
            tracing::debug!(event_id = %event.id, "an event the daemon never handled ended");
            return;
        };
        let after_start = after_start || missed_the_start(progress, now);
        progress.event = event;
        progress.lifecycle = Lifecycle::Ended { after_start };
        // A deferral's wait was for preparation: recovery starts now, not when it ends.
        for own in progress.plugins.values_mut() {
            own.retry_at_unix_ms = None;
        }
        if matches!(progress.approval, Approval::Pending | Approval::Due { .. }) {
            progress.approval = Approval::Abandoned {
                reason: "the event ended before it was approved".into(),
            };
        }
    }
}

/// Marks `progress` ended without a start, so the plugins that prepared under its old plan
/// recover, and keeps `relisted` (the event under its new plan) for afterwards.
fn recover_before_relisting(
    progress: &mut EventProgress,
    relisted: ScheduledEvent,
    reason: String,
) {
    tracing::info!(
        event_id = %progress.event.id,
        %reason,
        "plugins prepared for the event's previous plan; they recover before it is handled again"
    );
    progress.lifecycle = Lifecycle::Ended { after_start: false };
    for own in progress.plugins.values_mut() {
        own.retry_at_unix_ms = None;
    }
    if matches!(
        progress.approval,
        Approval::Pending | Approval::Due { .. } | Approval::Coordinating { .. }
    ) {
        progress.approval = Approval::Abandoned { reason };
    }
    progress.relisted = Some(relisted);
}

/// Whether an event that vanished while the daemon last saw it Scheduled most likely ran:
/// our approval was sent (or was due: a crash between the POST and the journal write leaves
/// it so), or its NotBefore had passed. Either way the daemon missed the Started document
/// (it was down — perhaps rebooted by this very event — or IMDS was unreadable for longer
/// than the event lasted). A cancel happens before the start, so recovering as after a
/// start is the safe reading: plugins restore and restart.
fn missed_the_start(progress: &EventProgress, now: ImdsTime) -> bool {
    let approved = matches!(
        progress.approval,
        Approval::Sent { .. } | Approval::Due { .. }
    );
    let past_not_before = progress
        .event
        .not_before_time()
        .is_some_and(|not_before| not_before <= now);
    if approved || past_not_before {
        tracing::info!(
            event_id = %progress.event.id,
            approved,
            past_not_before,
            "event vanished without being seen Started; recovering as after a start"
        );
    }
    approved || past_not_before
}

fn describe_event(event: &ScheduledEvent, now: ImdsTime) -> String {
    let status = match event.status {
        EventStatus::Scheduled => "Scheduled",
        EventStatus::Started => "Started",
    };
    let mut parts = vec![
        format!("{} {}", event.event_type_raw, status),
        format!("for {}", log_fields::names(&event.resources)),
    ];
    if let Some(not_before) = event.not_before_time() {
        let seconds = not_before.duration_since(now).as_secs();
        parts.push(format!("NotBefore in {seconds}s"));
    }
    if let Some(duration) = event.duration_seconds {
        parts.push(format!("impact {duration}s"));
    }
    parts.join(", ")
}

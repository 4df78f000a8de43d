//! The approval stage: once this VM's plugins are all prepared, decides whether, and when,
//! the approval goes to IMDS — alone, by the group policy, or through the etcd barrier — and
//! sends it. One sub-machine in quinn's shape, [`ApprovalStage`]: the machine lends it the
//! events, feeds it [`ApprovalInput`]s, and drains what it reports ([`ApprovalStage::poll_emit`])
//! and the POST it asks for ([`ApprovalStage::poll_post`]).
//!
//! - `decide`: the rules (the policy's gate, the barrier's share of it, the holds);
//! - [`post`]: the POST queue (one in flight, retries, refused batches sent singly);
//! - `barrier_link`: the etcd barrier, pushed both ways: [`BarrierRequest`]s out (join,
//!   withdraw, leave, sent), [`BarrierVerdict`]s in — no lock, clock or wake-up in a round;
//! - this file: the stage that applies them in order, with the journal gate and the notes.

use forewarn_events::ImdsTime;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use forewarn_events::{EventId, ScheduledEvent};

use crate::log_fields;
use crate::log_messages;
use crate::policy::PolicyConfig;
use crate::roster::Roster;
use crate::state::{Approval, DaemonState, EventProgress};
use crate::timeline::TimelineEntry;

mod barrier_link;
mod decide;
mod hold;
pub mod post;

use barrier_link::BarrierLink;
pub use barrier_link::{BarrierRequest, BarrierVerdict};
pub use decide::{
    ApprovalRules, SHORT_NOTICE, SlotNeed, applies_to, held_by_quarantine, hold, quarantine_hold,
};
pub use hold::{Hold, HoldText};
use post::PostQueue;

/// The events the machine lends the stage, by id.
pub type Events = BTreeMap<EventId, Arc<EventProgress>>;

/// What the approval stage hears from outside the pipeline.
#[derive(Debug, Clone)]
pub enum ApprovalInput {
    /// IMDS accepted the approval of these events.
    Sent(Vec<EventId>),
    /// IMDS did not accept the approval of these events (`rejected`: it refused the request
    /// itself, a 4xx).
    Failed {
        /// The events whose approval failed.
        event_ids: Vec<EventId>,
        /// IMDS refused the request itself: the same batch would fail the same way.
        rejected: bool,
        /// What went wrong, for the log and the timeline.
        error: String,
    },
    /// The barrier's verdict on an event this VM joined.
    Verdict {
        /// The event's `EventId`.
        event_id: EventId,
        /// What the barrier says now.
        verdict: BarrierVerdict,
    },
}

/// The approval sub-machine: the rules, the POST queue, the barrier, and the notes said once.
pub struct ApprovalStage {
    rules: ApprovalRules,
    /// The events joined on the etcd barrier (`[coordination]`) and its verdicts.
    link: BarrierLink,
    posts: PostQueue,
    /// The events whose approval is journaled as due (to be POSTed), as their last visit
    /// left them ([`ApprovalStage::reconcile`]): what [`ApprovalStage::poll_post`] sends from.
    due: BTreeSet<EventId>,
    /// The approval holds already announced, by event; not journaled (a restart announces
    /// them again).
    holds_announced: HashMap<EventId, Hold>,
    /// Whether the journal's commits reach the disk ([`ApprovalStage::journal_durability`]).
    journal_durable: bool,
    /// Timeline entries for the machine to emit, in order.
    emitted: VecDeque<TimelineEntry>,
}

impl ApprovalStage {
    /// The stage for `vm_name` under `policy`, approving alone until told to coordinate.
    pub fn new(vm_name: &str, policy: &PolicyConfig) -> ApprovalStage {
        ApprovalStage {
            rules: ApprovalRules {
                vm_name: vm_name.to_owned(),
                policy: policy.clone(),
                coordinated: false,
                budgeted: false,
            },
            link: BarrierLink::default(),
            posts: PostQueue::default(),
            due: BTreeSet::new(),
            holds_announced: HashMap::new(),
            journal_durable: true,
            emitted: VecDeque::new(),
        }
    }

    /// Events naming this VM and others wait on the etcd barrier from now on.
    pub fn coordinate_with_barrier(&mut self) {
        self.rules.coordinated = true;
    }

    /// Early approvals of events naming only this VM take a slot of the fleet's disruption
    /// budget from now on (they wait for one, on the coordinator, as barrier events do).
    pub fn keep_to_disruption_budget(&mut self) {
        self.rules.budgeted = true;
    }

    /// Applies `input` at `now` to `events`; returns the events it touched.
    pub fn handle(
        &mut self,
        input: ApprovalInput,
        now: ImdsTime,
        events: &mut Events,
    ) -> Vec<EventId> {
        match input {
            ApprovalInput::Sent(event_ids) => {
                self.sent(&event_ids, now, events);
                event_ids
            }
            ApprovalInput::Failed {
                event_ids,
                rejected,
                error,
            } => {
                self.failed(&event_ids, rejected, error, now);
                event_ids
            }
            ApprovalInput::Verdict { event_id, verdict } => {
                match self.link.store(&event_id, verdict) {
                    true => vec![event_id],
                    false => Vec::new(),
                }
            }
        }
    }

    /// Every subscriber prepared `progress`: a hold (a plugin file that failed to load,
    /// nobody subscribing) is said once; otherwise the approval is decided. Returns whether
    /// `progress` changed.
    pub fn on_all_prepared(
        &mut self,
        progress: &mut EventProgress,
        subscribers: usize,
        roster: &Roster,
        now: ImdsTime,
    ) -> bool {
        match hold(&progress.event, subscribers, roster, &self.rules.policy) {
            Some(held) => {
                self.note_hold(&progress.event.id, held);
                false
            }
            None => self.decide(progress, now),
        }
    }

    /// Decides the approval of `progress`, whose plugins all approved (or none was needed),
    /// once the journal can record what it decides. Returns whether `progress` changed.
    pub fn decide(&mut self, progress: &mut EventProgress, now: ImdsTime) -> bool {
        if progress.approval != Approval::Pending {
            return false;
        }
        let id = progress.event.id.clone();
        if !self.journal_durable {
            self.note_hold(&id, Hold::JournalNotDurable);
            return false;
        }
        let approval = self.rules.decide(&progress.event, now);
        let occupies = self.rules.slot_need(&progress.event, now) == SlotNeed::Occupy;
        if occupies && matches!(approval, Approval::Due { .. }) {
            self.link.occupy(&progress.event);
        }
        let note = match &approval {
            Approval::DryRun { would } => Some((would.clone(), "dry-run")),
            Approval::Withheld { reason, rule } => Some((reason.clone(), rule.as_str())),
            _ => None,
        };
        progress.approval = approval;
        if let Some((reason, rule)) = note {
            tracing::info!(event_id = %id, rule, %reason, "{}", log_messages::APPROVAL_HELD);
            self.emitted.push_back(TimelineEntry::NotApproved {
                event_id: id,
                reason,
            });
        }
        true
    }

    /// Moves `progress`, waiting on the barrier, to Due when the barrier's last verdict says
    /// so — or, while it cannot be reached, when the single-VM policy lets this VM approve
    /// alone. Returns whether it changed.
    pub fn advance(&mut self, progress: &mut EventProgress, now: ImdsTime) -> bool {
        if !matches!(progress.approval, Approval::Coordinating { .. }) {
            return false;
        }
        let id = progress.event.id.clone();
        // Without `[coordination]` (a journal from a run that had it), nothing will answer:
        // the single-VM policy decides, as while the barrier cannot be reached.
        let verdict = match self.rules.coordinated {
            true => self.link.verdict(&id),
            false => BarrierVerdict::Unreachable,
        };
        match verdict {
            BarrierVerdict::Wait => return false,
            BarrierVerdict::Approve { why } => tracing::info!(event_id = %id, "{why}"),
            BarrierVerdict::Unreachable => {
                if !self.rules.approves_alone(&progress.event) {
                    return false;
                }
                tracing::warn!(
                    event_id = %id,
                    "etcd cannot be reached, and the single-VM policy (`policy.group-approval`) \
                     lets this VM approve event {id} on its own"
                );
            }
        }
        progress.approval = Approval::Due { since_unix_ms: now };
        true
    }

    /// Says once that quarantined plugins hold `progress` (see [`quarantine_hold`]).
    pub fn note_quarantine_hold(&mut self, progress: &EventProgress, roster: &Roster) {
        if let Some(held) = quarantine_hold(progress, roster) {
            self.note_hold(&progress.event.id, held);
        }
    }

    /// After a visit of `id` (None: it is gone): notes whether its approval is due, joins
    /// the barrier for an event that waits on it, leaves it for one no longer Scheduled (the
    /// barrier link's `reconcile`).
    pub fn reconcile(&mut self, id: &EventId, progress: Option<&EventProgress>) {
        let due =
            progress.is_some_and(|progress| matches!(progress.approval, Approval::Due { .. }));
        if !due {
            self.due.remove(id);
        } else if !self.due.contains(id) {
            self.due.insert(id.clone());
        }
        if self.rules.coordinated {
            self.link.reconcile(id, progress);
        }
    }

    /// The event was rescheduled: this VM prepares it again.
    pub fn withdraw(&mut self, id: &EventId) {
        self.link.withdraw(id);
    }

    /// The event is handled to the end (`event`: as last listed, when known). One that can
    /// hold a slot of the disruption budget here (naming only this VM) gives it back; other
    /// VMs' events cost etcd nothing.
    pub fn forget(&mut self, id: &EventId, event: Option<&ScheduledEvent>) {
        self.due.remove(id);
        self.holds_announced.remove(id);
        self.posts.forget(id);
        self.link.forget(id);
        if self.rules.budgeted && event.is_some_and(|event| self.rules.may_hold_a_slot(event)) {
            self.link.recovered(id);
        }
    }

    /// Whether the journal's commits reach the disk. While they do not, approvals are
    /// neither decided nor sent; when they stop, the POST handed out last and not sent yet is
    /// taken back, to go once the journal is durable again: `take_back_unsent` takes it out
    /// of where it waits to be sent and says whether it was still there.
    pub fn journal_durability(&mut self, durable: bool, take_back_unsent: impl FnOnce() -> bool) {
        self.journal_durable = durable;
        if !durable && take_back_unsent() {
            self.posts.taken_back();
        }
    }

    /// The next POST at `now` (see [`PostQueue::next_batch`]): the approvals journaled as
    /// due of events the latest document lists; none while `stopping` or while the journal
    /// cannot be written.
    #[must_use]
    pub fn poll_post(
        &mut self,
        state: &DaemonState,
        stopping: bool,
        now: ImdsTime,
    ) -> Option<Vec<EventId>> {
        let listed_and_due: BTreeSet<EventId> = self
            .due
            .iter()
            .filter(|id| is_due(&state.events, id))
            .filter(|id| state.tracker.get(id).is_some())
            .cloned()
            .collect();
        let paused = stopping || !self.journal_durable;
        self.posts.next_batch(listed_and_due, paused, now)
    }

    /// The next request for the coordinator.
    #[must_use]
    pub fn poll_request(&mut self) -> Option<BarrierRequest> {
        self.link.poll_request()
    }

    /// The next timeline entry the stage reports.
    #[must_use]
    pub fn poll_emit(&mut self) -> Option<TimelineEntry> {
        self.emitted.pop_front()
    }

    /// When an approval is next sent again without an input (a retry).
    #[must_use]
    pub fn poll_timeout(&self, events: &Events) -> Option<ImdsTime> {
        self.posts
            .next_retry(!self.journal_durable, |id| is_due(events, id))
    }

    fn sent(&mut self, event_ids: &[EventId], now: ImdsTime, events: &mut Events) {
        self.posts.sent(event_ids);
        for id in event_ids {
            if let Some(progress) = events.get_mut(id).map(Arc::make_mut) {
                progress.approval = Approval::Sent { at_unix_ms: now };
            }
        }
        self.link.sent(event_ids);
        tracing::info!(
            event_ids = %log_fields::names(event_ids),
            "{}",
            log_messages::APPROVED_AT_IMDS
        );
        self.emitted.push_back(TimelineEntry::Approved {
            event_ids: event_ids.to_vec(),
        });
    }

    fn failed(&mut self, event_ids: &[EventId], rejected: bool, error: String, now: ImdsTime) {
        let one_by_one = self.posts.failed(event_ids, rejected, now);
        tracing::warn!(
            event_ids = %log_fields::names(event_ids),
            %error,
            rejected,
            one_by_one,
            "{}",
            log_messages::APPROVAL_FAILED
        );
        self.emitted.push_back(TimelineEntry::ApprovalFailed {
            event_ids: event_ids.to_vec(),
            error,
        });
    }

    /// Logs and shows `held` once per event and hold (the hold is checked every round).
    fn note_hold(&mut self, id: &EventId, held: Hold) {
        if self.holds_announced.get(id) == Some(&held) {
            return;
        }
        let event_id = id.clone();
        let reason = held.describe(&event_id).to_string();
        tracing::warn!(event_id = %id, "{reason}");
        self.emitted.push_back(TimelineEntry::NotApproved {
            event_id: event_id.clone(),
            reason,
        });
        self.holds_announced.insert(event_id, held);
    }
}

fn is_due(events: &Events, id: &EventId) -> bool {
    events
        .get(id)
        .is_some_and(|progress| matches!(progress.approval, Approval::Due { .. }))
}

#[cfg(test)]
mod tests;

//! The approval stage's link to the etcd barrier, pushed both ways: the stage says which
//! events this VM is ready for ([`BarrierRequest`]s the machine hands the event loop as
//! `Action::Coordinate`), and the coordinator's verdicts come back as inputs
//! ([`BarrierVerdict`]), stored here until the event's next visit reads them. Nothing is
//! asked in a round, and nothing is forgotten for want of asking: an event stays joined
//! until it leaves Scheduled, is rescheduled (withdrawn) or is handled to the end.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use forewarn_events::{EventId, ScheduledEvent};

use crate::state::{Approval, EventProgress, Lifecycle};

/// What the barrier says about an event this VM joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BarrierVerdict {
    /// Keep waiting: for the other VMs, for leadership, or for etcd's first answer.
    Wait,
    /// This VM leads and claimed the approval in etcd: send it now. `why` is for the log.
    Approve {
        /// One line saying which VMs were ready and who leads.
        why: String,
    },
    /// The barrier cannot be reached: decide by the single-VM policy (`policy.group-approval`).
    Unreachable,
}

/// What the approval stage asks of the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BarrierRequest {
    /// This VM is ready for the event as listed: record it ready, campaign for leadership.
    Join(Arc<ScheduledEvent>),
    /// The event was rescheduled and this VM prepares again: release its ready key, its
    /// leadership and a claim not sent yet.
    Withdraw(EventId),
    /// The event left Scheduled or was handled to the end: release its ready key and
    /// leadership (a claim stays: its approval may be on its way).
    Leave(EventId),
    /// IMDS accepted these approvals: the leader records them for the other VMs.
    Sent(Vec<EventId>),
    /// The event is approved at once without waiting for a slot of the disruption budget (a
    /// Spot eviction, a notice too short): take one anyway, so that the budget counts it.
    Occupy(Arc<ScheduledEvent>),
    /// The event has ended and this VM's plugins have recovered: give its slot of the
    /// disruption budget back (sent for every event handled to the end while a budget is
    /// set: after a restart the slot taken before it is this VM's still).
    Recovered(EventId),
}

/// The events joined on the barrier, their last verdicts, and the requests not yet taken.
#[derive(Debug, Default)]
pub(crate) struct BarrierLink {
    joined: BTreeSet<EventId>,
    verdicts: BTreeMap<EventId, BarrierVerdict>,
    requests: VecDeque<BarrierRequest>,
}

impl BarrierLink {
    /// After a visit of `id` (None: it is gone): joins an event that waits on the barrier,
    /// and leaves one no longer Scheduled with an approval that waits, is due or was sent.
    pub(crate) fn reconcile(&mut self, id: &EventId, progress: Option<&EventProgress>) {
        let scheduled = progress.filter(|progress| progress.lifecycle == Lifecycle::Scheduled);
        let approval = scheduled.map(|progress| &progress.approval);
        let waits = matches!(approval, Some(Approval::Coordinating { .. }));
        let stays = matches!(
            approval,
            Some(Approval::Coordinating { .. } | Approval::Due { .. } | Approval::Sent { .. })
        );
        let joined = self.joined.contains(id);
        match (scheduled, joined) {
            (Some(progress), false) if waits => {
                self.joined.insert(id.clone());
                let event = Arc::new(progress.event.clone());
                self.requests.push_back(BarrierRequest::Join(event));
            }
            (_, true) if !stays => self.leave(id),
            _ => {}
        }
    }

    /// The event was rescheduled: this VM is no longer ready for it.
    pub(crate) fn withdraw(&mut self, id: &EventId) {
        if self.joined.remove(id) {
            self.verdicts.remove(id);
            self.requests
                .push_back(BarrierRequest::Withdraw(id.clone()));
        }
    }

    /// The event is handled to the end.
    pub(crate) fn forget(&mut self, id: &EventId) {
        if self.joined.contains(id) {
            self.leave(id);
        }
    }

    /// IMDS accepted the approval of `event_ids`: those joined are recorded sent.
    pub(crate) fn sent(&mut self, event_ids: &[EventId]) {
        let joined: Vec<EventId> = event_ids
            .iter()
            .filter(|id| self.joined.contains(*id))
            .cloned()
            .collect();
        if !joined.is_empty() {
            self.requests.push_back(BarrierRequest::Sent(joined));
        }
    }

    /// The event is approved at once and takes a slot of the budget without waiting.
    pub(crate) fn occupy(&mut self, event: &ScheduledEvent) {
        self.requests
            .push_back(BarrierRequest::Occupy(Arc::new(event.clone())));
    }

    /// The event is handled to the end: its slot of the budget, if any, goes back.
    pub(crate) fn recovered(&mut self, id: &EventId) {
        self.requests
            .push_back(BarrierRequest::Recovered(id.clone()));
    }

    /// Keeps `verdict` on `id` for its next visit; returns false (and drops it) when the
    /// event is not joined (a verdict sent before it left).
    pub(crate) fn store(&mut self, id: &EventId, verdict: BarrierVerdict) -> bool {
        if !self.joined.contains(id) {
            return false;
        }
        self.verdicts.insert(id.clone(), verdict);
        true
    }

    /// The last verdict on `id`: Wait until the first arrives.
    pub(crate) fn verdict(&self, id: &EventId) -> BarrierVerdict {
        self.verdicts
            .get(id)
            .cloned()
            .unwrap_or(BarrierVerdict::Wait)
    }

    /// The next request for the coordinator.
    #[must_use]
    pub(crate) fn poll_request(&mut self) -> Option<BarrierRequest> {
        self.requests.pop_front()
    }

    fn leave(&mut self, id: &EventId) {
        self.joined.remove(id);
        self.verdicts.remove(id);
        self.requests.push_back(BarrierRequest::Leave(id.clone()));
    }
}

//! The approval stage: once this VM's plugins are all prepared, decides whether, and when,
//! the approval goes to IMDS — alone, by the group policy, or through the etcd barrier.
//!
//! One trait, [`Approver`], stands for every way of approving: [`LocalApprover`] applies the
//! single-VM policy (`policy.group-approval`, dry run, observe-only); [`CoordinatedApprover`]
//! adds the barrier for events that name this VM and others, and falls back to the local
//! policy while the barrier is unreachable. The barrier itself is behind [`Barrier`], so the
//! etcd task (`crate::coordination`) is one implementation and a test fake is another. The
//! rules themselves (the policy's gate, the holds) are in [`decide`].

use std::time::SystemTime;

use forewarn_imds::ScheduledEvent;

use crate::pipeline::clock::unix_ms;
use crate::pipeline::policy::ApprovalGate;
use crate::pipeline::state::{Approval, EventProgress};

mod decide;
pub(crate) mod post;

pub(crate) use decide::{LocalApprover, applies_to, held_by_quarantine, hold, quarantine_hold};
use decide::{approval_of, coordinated_gate};

/// What the barrier says about an event waiting on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
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

/// A cross-VM approval barrier, as the approval stage sees it: non-blocking questions about
/// state another task keeps up to date.
pub(crate) trait Barrier: Send {
    /// The verdict on `event`, whose plugins all approved on this VM. The first question
    /// about an event starts coordinating it (this VM is recorded ready).
    fn verdict(&mut self, event: &ScheduledEvent) -> Verdict;
    /// This VM is no longer ready for the event (it was rescheduled and prepares again).
    fn withdraw(&mut self, event_id: &str);
    /// IMDS accepted these approvals; the barrier records them for the other VMs.
    fn approval_sent(&mut self, event_ids: &[String]);
}

/// Decides the approval of events whose plugins all approved.
pub(crate) trait Approver: Send {
    /// The approval an event gets when every plugin on this VM approved it at `now`.
    fn decide(&mut self, event: &ScheduledEvent, now: SystemTime) -> Approval;
    /// Moves an event in [`Approval::Coordinating`] forward; returns whether it changed.
    fn advance(&mut self, progress: &mut EventProgress, now: SystemTime) -> bool;
    /// The event was rescheduled: this VM prepares it again.
    fn withdraw(&mut self, event_id: &str);
    /// IMDS accepted these approvals.
    fn approval_sent(&mut self, event_ids: &[String]);
}

impl Approver for LocalApprover {
    fn decide(&mut self, event: &ScheduledEvent, now: SystemTime) -> Approval {
        approval_of(self.gate(event), now)
    }

    fn advance(&mut self, _progress: &mut EventProgress, _now: SystemTime) -> bool {
        false
    }

    fn withdraw(&mut self, _event_id: &str) {}

    fn approval_sent(&mut self, _event_ids: &[String]) {}
}

/// Approval through a barrier for events that name this VM and another one; the local
/// policy for every other event, and for coordinated ones while the barrier is unreachable.
pub(crate) struct CoordinatedApprover<B> {
    local: LocalApprover,
    barrier: B,
}

impl<B: Barrier> CoordinatedApprover<B> {
    /// Coordinates through `barrier`; `local` decides what the barrier does not.
    pub(crate) fn new(local: LocalApprover, barrier: B) -> CoordinatedApprover<B> {
        CoordinatedApprover { local, barrier }
    }
}

impl<B: Barrier> Approver for CoordinatedApprover<B> {
    fn decide(&mut self, event: &ScheduledEvent, now: SystemTime) -> Approval {
        if !applies_to(event, &self.local.vm_name) {
            return self.local.decide(event, now);
        }
        match coordinated_gate(event, &self.local.vm_name, &self.local.policy) {
            ApprovalGate::Approve => Approval::Coordinating {
                since_unix_ms: unix_ms(now),
            },
            gate => approval_of(gate, now),
        }
    }

    fn advance(&mut self, progress: &mut EventProgress, now: SystemTime) -> bool {
        let id = progress.event.id.clone();
        match self.barrier.verdict(&progress.event) {
            Verdict::Wait => false,
            Verdict::Approve { why } => {
                tracing::info!(event_id = %id, "{why}");
                progress.approval = Approval::Due {
                    since_unix_ms: unix_ms(now),
                };
                true
            }
            Verdict::Unreachable => {
                if self.local.gate(&progress.event) != ApprovalGate::Approve {
                    return false;
                }
                tracing::warn!(
                    event_id = %id,
                    "etcd cannot be reached, and the single-VM policy (`policy.group-approval`) \
                     lets this VM approve event {id} on its own"
                );
                progress.approval = Approval::Due {
                    since_unix_ms: unix_ms(now),
                };
                true
            }
        }
    }

    fn withdraw(&mut self, event_id: &str) {
        self.barrier.withdraw(event_id);
    }

    fn approval_sent(&mut self, event_ids: &[String]) {
        self.barrier.approval_sent(event_ids);
    }
}

#[cfg(test)]
mod tests;

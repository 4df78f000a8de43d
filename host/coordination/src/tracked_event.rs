//! One event the coordinator is coordinating, as the etcd rounds keep it: its verdict, the
//! leases of its keys, this VM's leadership, claim and sent approval (each an enum changed
//! only by the methods here), what this VM wrote of its shared keys, and the shared keys it
//! ignores (shown in its status, each logged once).

use std::collections::BTreeSet;

use forewarn_imds::{EventId, ScheduledEvent};

use crate::coordination_status::{BarrierState, EventBarrier};
use crate::fleet_record::bounded_text;
use crate::records::EventKeys;
use forewarn_pipeline::approval::BarrierVerdict;
use forewarn_pipeline::barrier::{Revision, Shared, SharedKey, VmStanding};

/// Logged once per event and key (fields `event_id`, `key`, `names`, `why`) when a shared
/// `leader` or `approval` key is not obeyed: the VM it names did not write it.
pub const IGNORED_KEY_MESSAGE: &str = "a leader or approval key in etcd was not written by \
     the VM it names; ignoring it (the next campaign or claim replaces it). If it is not left \
     by a daemon of a version before the per-VM key layout, someone who may write under \
     `coordination.prefix` forged it: give each VM an etcd role of its own \
     (docs/coordination.md, \"A role per VM\")";

/// One event being coordinated.
pub(super) struct Tracked {
    pub(super) event: ScheduledEvent,
    pub(super) verdict: BarrierVerdict,
    /// The lease the ready key was last written under.
    pub(super) ready_in_lease: Option<i64>,
    /// The lease of this event's lasting records.
    pub(super) record_lease: Option<i64>,
    /// Whether this VM holds the event's election (logged once, when it begins).
    leadership: Leadership,
    /// This VM's claim of the approval: only a claim makes the verdict an approval.
    claim: Claim,
    /// The approval the daemon sent, and whether its lasting record is in etcd.
    sent: SentApproval,
    /// The shared keys as this VM last wrote them: what it trusts as its own on read.
    pub(super) held: Held,
    /// The leader key another VM wrote, as last found genuine: the VM and the revision of
    /// its write (a round that finds the same write may skip reading every subtree).
    pub(super) leader_seen: Option<(String, Revision)>,
    /// The revision of an approval key found not genuine (ignored), if one is there.
    pub(super) approval_ignored: Option<Revision>,
    /// The shared keys found forged and logged for this event (one warning per key and
    /// event, however many rounds find it).
    pub(super) warned: BTreeSet<SharedKey>,
    pub(super) barrier: EventBarrier,
}

/// What this VM wrote of an event's shared keys: the revision etcd answered each of its own
/// transactions with. A shared key naming this VM is trusted only at exactly that revision —
/// never for the lease it carries (a lease id can be read by anyone).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Held {
    /// The revision of this VM's winning campaign (the leader key).
    pub(super) campaign: Option<Revision>,
    /// The revision of this VM's claim of the approval, or of its record once sent.
    pub(super) claim: Option<Revision>,
    /// Whether the claim's approval was sent (a sent claim is never withdrawn).
    pub(super) sent: bool,
}

impl Tracked {
    /// `event`, joined now: nothing recorded yet.
    pub(super) fn new(event: &ScheduledEvent) -> Tracked {
        Tracked {
            event: event.clone(),
            verdict: BarrierVerdict::Wait,
            ready_in_lease: None,
            record_lease: None,
            leadership: Leadership::Following,
            claim: Claim::Unclaimed,
            sent: SentApproval::NotSent,
            held: Held::default(),
            leader_seen: None,
            approval_ignored: None,
            warned: BTreeSet::new(),
            barrier: EventBarrier {
                event_id: event.id.clone(),
                state: BarrierState::RecordingReady,
                ..EventBarrier::default()
            },
        }
    }

    /// This VM won the event's election: true the first time (to say so once).
    pub(super) fn begin_leading(&mut self) -> bool {
        let first = self.leadership == Leadership::Following;
        self.leadership = Leadership::Leading;
        first
    }

    /// This VM holds the claim of the approval: the verdict is to approve, `why`.
    pub(super) fn claim(&mut self, why: String) {
        self.claim = Claim::Claimed;
        self.verdict = BarrierVerdict::Approve { why };
    }

    /// Whether this VM claimed the approval (a claim approves even while etcd cannot be
    /// reached, and no later read replaces its verdict).
    pub(super) fn is_claimed(&self) -> bool {
        self.claim == Claim::Claimed
    }

    /// The daemon sent the approval (a record already written stays written).
    pub(super) fn mark_sent(&mut self) {
        if self.sent == SentApproval::NotSent {
            self.sent = SentApproval::Sent;
        }
    }

    /// Whether the daemon sent the approval (a sent claim is never withdrawn).
    pub(super) fn was_sent(&self) -> bool {
        self.sent != SentApproval::NotSent
    }

    /// Whether the approval was sent and its lasting record is not written yet.
    pub(super) fn awaits_sent_record(&self) -> bool {
        self.sent == SentApproval::Sent
    }

    /// The sent approval's lasting record is written.
    pub(super) fn sent_recorded(&mut self) {
        if self.sent == SentApproval::Sent {
            self.sent = SentApproval::Recorded;
        }
    }

    /// Keeps the shared keys not obeyed in the event's status, and logs each once per event.
    pub(super) fn note_ignored(
        &mut self,
        id: &EventId,
        keys: &EventKeys,
        judged: &[(SharedKey, &Shared)],
    ) {
        self.barrier.ignored.clear();
        self.approval_ignored = None;
        for (key, shared) in judged {
            let Shared::Ignored {
                names,
                revision,
                why,
            } = shared
            else {
                continue;
            };
            if *key == SharedKey::Approval {
                self.approval_ignored = Some(*revision);
            }
            // The value is anyone's text: cut (the log and `/status` escape it too).
            let names = bounded_text(names);
            self.barrier.ignored.push(format!(
                "{} names {names} (revision {}), but {}: ignored",
                keys.shared(*key),
                revision.0,
                why.describe()
            ));
            if self.warned.insert(*key) {
                tracing::warn!(
                    event_id = %id,
                    key = %keys.shared(*key),
                    names = %names,
                    why = why.describe(),
                    "{IGNORED_KEY_MESSAGE}"
                );
            }
        }
    }

    /// The event's status and verdict as this round found them (a claim's verdict stays),
    /// keeping the shared keys ignored.
    pub(super) fn update(
        &mut self,
        leader: Option<String>,
        vms: Vec<(String, VmStanding)>,
        state: BarrierState,
        verdict: BarrierVerdict,
    ) {
        let ignored = std::mem::take(&mut self.barrier.ignored);
        self.barrier = EventBarrier {
            event_id: self.event.id.clone(),
            leader,
            vms,
            state,
            ignored,
        };
        if !self.is_claimed() {
            self.verdict = verdict;
        }
    }
}

/// Whether this VM holds an event's election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leadership {
    /// Another VM leads, or nobody yet.
    Following,
    /// This VM won the election.
    Leading,
}

/// This VM's claim of an event's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// Not claimed by this VM.
    Unclaimed,
    /// This VM's claim is in etcd (found there, or written in this run).
    Claimed,
}

/// The approval the daemon sent for an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SentApproval {
    /// Not sent.
    NotSent,
    /// Sent; its lasting record is not in etcd yet.
    Sent,
    /// Sent, and recorded in etcd under a record lease (a new leader never approves again).
    Recorded,
}

//! One round of the barrier against etcd, as the coordinator's actor runs it: keep the
//! lease (`daemon_lease.rs`), release what this VM left or withdrew (`key_releases.rs`),
//! then move each event forward — record
//! ready, campaign, and, leading, claim the approval once every VM is ready or the deadline
//! came; record a sent approval so that no new leader approves the event again.
//!
//! What is trusted: a VM's standing only from its own subtree under its own live lease
//! (`barrier::view_of`); a shared `leader` or `approval` key only when the VM it names wrote
//! it (`barrier::judge_shared`): for this VM, the revision its own transaction returned; for
//! another, its marker of the same revision in its subtree. Any other such key is ignored,
//! replaced by the next campaign or claim, shown in `/status` and logged once per event.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use forewarn_etcd::{Compare, EtcdError, Write};
use forewarn_imds::{EventId, ImdsClock, ScheduledEvent};

use crate::coordination_status::{BarrierState, EventBarrier};
use crate::daemon_lease::DaemonLease;
use crate::disruption_slots::{BudgetStatus, SlotKeeper};
use crate::etcd_access::EtcdAccess;
use crate::key_releases::KeyReleases;
use crate::records::{
    EventKeys, EventRecords, reads_everything, ready_marker, resources_list, stated_not_before,
};
use crate::tracked_event::{Held, Tracked};
use forewarn_pipeline::approval::BarrierVerdict;
use forewarn_pipeline::approval::{BarrierRequest, applies_to};
use forewarn_pipeline::barrier::{
    self, BarrierView, Revision, Shared, SharedKey, VmStanding, judge_shared,
};
use forewarn_pipeline::log_messages;

/// How long records that must outlive a daemon (`was-ready`, a sent `approval`) are kept.
const RECORD_TTL: Duration = Duration::from_secs(24 * 3600);

/// The barrier's view of one event, as one full read found it.
struct EventRead {
    standings: Vec<(String, VmStanding)>,
    leader: Shared,
    approval: Shared,
    /// The revision of each VM's ready key counted (for the claim's conditions).
    ready_revisions: Vec<(String, Revision)>,
    /// The leader key's revision, when it is another VM's.
    leader_revision: Option<Revision>,
}

/// This VM's side of the barrier in etcd, which the coordinator's rounds move forward.
pub(super) struct EtcdBarrier {
    access: Arc<EtcdAccess>,
    /// Now on IMDS's clock (NotBefore's), for the barrier's deadline.
    clock: ImdsClock,
    /// The events joined, by id.
    events: BTreeMap<EventId, Tracked>,
    /// The keys of events withdrawn or left, still to release.
    releases: KeyReleases,
    /// This daemon's lease, once granted.
    lease: DaemonLease,
    /// The disruption budget's claims, when `coordination.disruption-budget` is set.
    slots: Option<SlotKeeper>,
}

impl EtcdBarrier {
    /// Nothing joined yet, over `access`.
    pub(super) fn new(access: Arc<EtcdAccess>, clock: ImdsClock) -> EtcdBarrier {
        EtcdBarrier {
            slots: SlotKeeper::for_config(&access),
            access,
            clock,
            events: BTreeMap::new(),
            releases: KeyReleases::default(),
            lease: DaemonLease::default(),
        }
    }

    /// Applies what the pipeline asks: a Join starts coordinating the event (the next round
    /// records this VM ready and campaigns), a Withdraw or a Leave stops it (releasing its
    /// keys), a Sent has the leader record the approval. Returns the event a Withdraw or a
    /// Leave names (its verdict is no longer sent).
    pub(super) fn apply(&mut self, request: BarrierRequest) -> Option<EventId> {
        if let Some(slots) = self.slots.as_mut() {
            let now = self.clock.now();
            match &request {
                BarrierRequest::Join(event) if !applies_to(event, &self.access.vm) => {
                    slots.queue(event, now);
                    return None;
                }
                BarrierRequest::Occupy(event) => slots.occupy(event),
                BarrierRequest::Recovered(id) => slots.recovered(id),
                BarrierRequest::Withdraw(id) => slots.withdraw(id),
                BarrierRequest::Leave(id) => slots.leave(id),
                BarrierRequest::Join(_) | BarrierRequest::Sent(_) => {}
            }
        }
        match request {
            BarrierRequest::Occupy(_) | BarrierRequest::Recovered(_) => None,
            BarrierRequest::Join(event) => {
                // Joined again before its keys were released: they are this VM's again.
                let held = self.releases.rejoin(&event.id);
                let tracked = self.events.entry(event.id.clone()).or_insert_with(|| {
                    let mut tracked = Tracked::new(&event);
                    tracked.held = held.unwrap_or_default();
                    tracked
                });
                tracked.event = (*event).clone();
                None
            }
            BarrierRequest::Withdraw(id) => {
                if let Some(tracked) = self.events.remove(&id) {
                    let held = Held {
                        sent: tracked.was_sent(),
                        ..tracked.held
                    };
                    self.releases.withdraw(id.clone(), held);
                }
                Some(id)
            }
            BarrierRequest::Leave(id) => {
                if let Some(tracked) = self.events.remove(&id) {
                    self.releases.leave(id.clone(), tracked.held);
                }
                Some(id)
            }
            BarrierRequest::Sent(ids) => {
                for id in ids {
                    if let Some(tracked) = self.events.get_mut(&id) {
                        tracked.mark_sent();
                    }
                }
                None
            }
        }
    }

    /// Each event's effective verdict: a claim approves; otherwise, while etcd falls back
    /// (`unreachable`), Unreachable; otherwise the last read. Then the budget's.
    pub(super) fn verdicts(&self, unreachable: bool) -> Vec<(EventId, BarrierVerdict)> {
        let mut verdicts: Vec<(EventId, BarrierVerdict)> = self
            .events
            .iter()
            .map(|(id, tracked)| {
                let verdict = match tracked.is_claimed() || !unreachable {
                    true => tracked.verdict.clone(),
                    false => BarrierVerdict::Unreachable,
                };
                (id.clone(), verdict)
            })
            .collect();
        if let Some(slots) = self.slots.as_ref() {
            verdicts.extend(slots.verdicts(unreachable));
        }
        verdicts
    }

    /// Whether nothing is coordinated, left to release or claimed of the budget (the rounds
    /// may slow down).
    pub(super) fn is_idle(&self) -> bool {
        let slots_busy = self.slots.as_ref().is_some_and(SlotKeeper::busy);
        self.events.is_empty() && self.releases.nothing_leaving() && !slots_busy
    }

    /// The events joined, by id.
    pub(super) fn joined(&self) -> Vec<EventId> {
        self.events.keys().cloned().collect()
    }

    /// This daemon's lease, once granted.
    pub(super) fn lease_id(&self) -> Option<i64> {
        self.lease.id()
    }

    /// What `/status` shows of each event joined.
    pub(super) fn event_barriers(&self) -> Vec<EventBarrier> {
        self.events.values().map(|t| t.barrier.clone()).collect()
    }

    /// What `/status` shows of the disruption budget, when one is kept.
    pub(super) fn budget_status(&self, falls_back: bool) -> Option<BudgetStatus> {
        self.slots.as_ref().map(|slots| slots.status(falls_back))
    }

    /// The event joined as `id`, to change (a test plays a round's outcome with it).
    #[cfg(test)]
    pub(super) fn tracked_mut(&mut self, id: &str) -> Option<&mut Tracked> {
        self.events.get_mut(id)
    }

    /// Whether `id`'s keys wait to be released after this VM left it.
    #[cfg(test)]
    pub(super) fn is_leaving(&self, id: &str) -> bool {
        self.releases.is_leaving(id)
    }

    /// The events withdrawn whose keys are not released yet.
    #[cfg(test)]
    pub(super) fn withdrawn(&self) -> &[(EventId, Held)] {
        self.releases.withdrawn()
    }

    /// The start of a round: keep the lease, release what this VM withdrew or left.
    /// Returns the lease.
    pub(super) async fn keep_lease_and_release(&mut self) -> Result<i64, EtcdError> {
        let lease_id = self.lease.ensure(&self.access).await?;
        self.releases.release_due(&self.access).await?;
        Ok(lease_id)
    }

    /// The end of a round: the disruption budget's claims, under `lease`.
    pub(super) async fn budget_round(&mut self, lease: i64) -> Result<(), EtcdError> {
        if let Some(slots) = self.slots.as_mut() {
            slots.round(&self.access, lease, self.clock.now()).await?;
        }
        Ok(())
    }

    /// Moves one event forward: record ready, campaign, and — leading — claim the approval
    /// when every VM is ready or the deadline came. Returns whether this VM claimed it (its
    /// verdict is sent at once).
    pub(super) async fn step(&mut self, id: &EventId, lease: i64) -> Result<bool, EtcdError> {
        let Some((event, ready_in_lease, claimed)) = self.snapshot(id) else {
            return Ok(false);
        };
        let keys = self.access.keys(id);
        if ready_in_lease != Some(lease) {
            self.record_ready(id, &keys, lease).await?;
        }
        if claimed {
            self.record_sent(id, &keys).await?;
            return Ok(false);
        }
        if self.another_still_leads(id, &keys).await? {
            return Ok(false);
        }
        let read = self.read_event(id, &event, &keys).await?;
        match &read.approval {
            Shared::Mine => {
                let why = format!("this VM claimed the approval of event {id}; sending it");
                self.claimed(id, why);
                return Ok(true);
            }
            Shared::Theirs(by) => {
                let state = BarrierState::ApprovedBy { vm: by.clone() };
                let leader = self.leader_named(&read.leader);
                self.update(id, leader, read.standings, state, BarrierVerdict::Wait);
                return Ok(false);
            }
            Shared::Absent | Shared::Ignored { .. } => {}
        }
        let leader = match &read.leader {
            Shared::Mine => Some(self.access.vm.clone()),
            Shared::Theirs(vm) => Some(vm.clone()),
            Shared::Absent | Shared::Ignored { .. } => {
                self.campaign(id, &keys, lease, &read.leader).await?
            }
        };
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.leader_seen = match (&read.leader, read.leader_revision) {
                (Shared::Theirs(vm), Some(revision)) => Some((vm.clone(), revision)),
                _ => None,
            };
        }
        let Some(leader) = leader else {
            // Another VM campaigned between the read and this VM's campaign.
            let state = BarrierState::Electing;
            self.update(id, None, read.standings, state, BarrierVerdict::Wait);
            return Ok(false);
        };
        if leader != self.access.vm {
            let state = BarrierState::OtherLeads {
                leader: leader.clone(),
            };
            self.update(
                id,
                Some(leader),
                read.standings,
                state,
                BarrierVerdict::Wait,
            );
            return Ok(false);
        }
        self.note_leading(id);
        self.lead(id, &event, &keys, lease, read).await
    }

    /// The VM a leader key names, when it is obeyed.
    fn leader_named(&self, leader: &Shared) -> Option<String> {
        match leader {
            Shared::Mine => Some(self.access.vm.clone()),
            Shared::Theirs(vm) => Some(vm.clone()),
            Shared::Absent | Shared::Ignored { .. } => None,
        }
    }

    /// Reads the event's shared keys and every VM's subtree, and judges them: the standings
    /// from each VM's own keys, the shared keys by who wrote them. Ignored keys are shown in
    /// the event's status and logged once per event.
    async fn read_event(
        &mut self,
        id: &EventId,
        event: &ScheduledEvent,
        keys: &EventKeys,
    ) -> Result<EventRead, EtcdError> {
        let shared = self.access.client.list(&keys.shared_prefix).await?;
        let vms_prefix = self.access.vms_prefix();
        let vms = self.access.client.list(&vms_prefix).await?;
        let records = EventRecords::read(&shared, &keys.shared_prefix, &vms, &vms_prefix, id);
        let marker = ready_marker(event);
        let view: BarrierView = barrier::view_of(&records.subtrees, &marker);
        let resources: Vec<String> = event
            .resources
            .iter()
            .map(|vm| vm.to_ascii_lowercase())
            .collect();
        let standings = barrier::standings(&resources, &view, self.access.config.dead_vm);
        let ready_revisions = standings
            .iter()
            .filter(|(_, standing)| *standing == VmStanding::Ready)
            .filter_map(|(vm, _)| {
                let revision = records.subtrees.get(vm)?.ready_for(&marker)?;
                Some((vm.clone(), revision))
            })
            .collect();
        let held = self.events.get(id).map(|t| t.held).unwrap_or_default();
        let me = self.access.vm.as_str();
        let judge = |key: SharedKey, mine| {
            judge_shared(key, me, records.shared(key), mine, &records.subtrees)
        };
        let leader = judge(SharedKey::Leader, held.campaign);
        let approval = judge(SharedKey::Approval, held.claim);
        let leader_revision = records.leader.as_ref().map(|record| record.stamp.revision);
        self.note_ignored(
            id,
            keys,
            &[
                (SharedKey::Leader, &leader),
                (SharedKey::Approval, &approval),
            ],
        );
        Ok(EventRead {
            standings,
            leader,
            approval,
            ready_revisions,
            leader_revision,
        })
    }

    /// Keeps the shared keys not obeyed in the event's status, and logs each once per event.
    fn note_ignored(&mut self, id: &EventId, keys: &EventKeys, judged: &[(SharedKey, &Shared)]) {
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.note_ignored(id, keys, judged);
        }
    }

    /// Whether a VM another VM leads may end its round after reading the `leader` and
    /// `approval` keys (two ranges of one key each): see [`reads_everything`]. Its view of the
    /// others' standings then stays as last read in full.
    async fn another_still_leads(
        &mut self,
        id: &EventId,
        keys: &EventKeys,
    ) -> Result<bool, EtcdError> {
        let Some(tracked) = self.events.get(id) else {
            return Ok(false);
        };
        let Some((seen, seen_revision)) = tracked.leader_seen.clone() else {
            return Ok(false);
        };
        let ignored = tracked.approval_ignored;
        let leader = self.access.client.list(&keys.leader).await?;
        let leader_now = leader
            .iter()
            .find(|kv| kv.key == keys.leader)
            .map(|kv| (kv.value.as_str(), Revision(kv.mod_revision)));
        let seen = Some((seen.as_str(), seen_revision));
        if reads_everything(&self.access.vm, seen, leader_now, false) {
            return Ok(false);
        }
        let approval = self.access.client.list(&keys.approval).await?;
        let claimed = approval
            .iter()
            .any(|kv| kv.key == keys.approval && Some(Revision(kv.mod_revision)) != ignored);
        Ok(!reads_everything(
            &self.access.vm,
            seen,
            leader_now,
            claimed,
        ))
    }

    fn snapshot(&self, id: &EventId) -> Option<(ScheduledEvent, Option<i64>, bool)> {
        let tracked = self.events.get(id)?;
        Some((
            tracked.event.clone(),
            tracked.ready_in_lease,
            tracked.is_claimed(),
        ))
    }

    async fn record_ready(
        &mut self,
        id: &EventId,
        keys: &EventKeys,
        lease: i64,
    ) -> Result<(), EtcdError> {
        let record_lease = self.record_lease(id).await?;
        self.access
            .client
            .put(&keys.was_ready, &self.access.vm, record_lease)
            .await?;
        let marker = self
            .events
            .get(id)
            .map(|tracked| ready_marker(&tracked.event))
            .unwrap_or_default();
        self.access.client.put(&keys.ready, &marker, lease).await?;
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.ready_in_lease = Some(lease);
        }
        tracing::info!(event_id = %id, vm = %self.access.vm, "{}", log_messages::COORDINATION_READY);
        Ok(())
    }

    /// The lease of this event's lasting records, granted on first use.
    async fn record_lease(&mut self, id: &EventId) -> Result<i64, EtcdError> {
        if let Some(lease) = self.events.get(id).and_then(|t| t.record_lease) {
            return Ok(lease);
        }
        let lease = self.access.client.grant_lease(RECORD_TTL).await?;
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.record_lease = Some(lease);
        }
        Ok(lease)
    }

    /// At shutdown: the approvals this VM sent whose record is not written yet (a POST that
    /// finished while the daemon was stopping) become lasting records, so that the claim
    /// does not expire with this daemon's lease and a new leader approve the event again.
    pub(super) async fn record_sent_approvals(&mut self) -> Result<(), EtcdError> {
        let due: Vec<EventId> = self
            .events
            .iter()
            .filter(|(_, tracked)| tracked.awaits_sent_record())
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let keys = self.access.keys(&id);
            self.record_sent(&id, &keys).await?;
        }
        Ok(())
    }

    /// After the daemon sent the approval: the claim (the approval key and this VM's claim
    /// marker, in one transaction: one revision) becomes a lasting record, so that a new
    /// leader never approves the event again.
    async fn record_sent(&mut self, id: &EventId, keys: &EventKeys) -> Result<(), EtcdError> {
        let due = self.events.get(id).is_some_and(Tracked::awaits_sent_record);
        if !due {
            return Ok(());
        }
        let record_lease = self.record_lease(id).await?;
        let revision = self
            .access
            .client
            .commit(&[], &self.claim_writes(keys, record_lease))
            .await?;
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.held.claim = revision.map(Revision).or(tracked.held.claim);
            tracked.sent_recorded();
            tracked.barrier.state = BarrierState::ApprovedByThisVm;
        }
        Ok(())
    }

    /// The approval key naming this VM and its claim marker, under `lease`.
    fn claim_writes(&self, keys: &EventKeys, lease: i64) -> [Write; 2] {
        [
            Write::Put {
                key: keys.approval.clone(),
                value: self.access.vm.clone(),
                lease,
            },
            Write::Put {
                key: keys.claim.clone(),
                value: self.access.vm.clone(),
                lease,
            },
        ]
    }

    /// Writes the leader key (and this VM's `leads` marker, in the same transaction) if it is
    /// absent or still the ignored write read; returns the leader, this VM, or `None` when
    /// another write came first (the next round reads again).
    async fn campaign(
        &mut self,
        id: &EventId,
        keys: &EventKeys,
        lease: i64,
        leader: &Shared,
    ) -> Result<Option<String>, EtcdError> {
        let Some(Revision(replaced)) = leader.replaceable() else {
            return Ok(None);
        };
        let writes = [
            Write::Put {
                key: keys.leader.clone(),
                value: self.access.vm.clone(),
                lease,
            },
            Write::Put {
                key: keys.leads.clone(),
                value: self.access.vm.clone(),
                lease,
            },
        ];
        let compares = [Compare::ModRevisionIs(keys.leader.clone(), replaced)];
        let Some(revision) = self.access.client.commit(&compares, &writes).await? else {
            return Ok(None);
        };
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.held.campaign = Some(Revision(revision));
        }
        Ok(Some(self.access.vm.clone()))
    }

    fn note_leading(&mut self, id: &EventId) {
        let Some(tracked) = self.events.get_mut(id) else {
            return;
        };
        if tracked.begin_leading() {
            tracing::info!(event_id = %id, vm = %self.access.vm, "{}", log_messages::COORDINATION_LEADS);
        }
    }

    /// As the leader: claim the approval when the barrier is down or the deadline came.
    /// Returns whether this VM claimed it.
    async fn lead(
        &mut self,
        id: &EventId,
        event: &ScheduledEvent,
        keys: &EventKeys,
        lease: i64,
        read: EventRead,
    ) -> Result<bool, EtcdError> {
        let standings = read.standings.clone();
        let waiting: Vec<String> = standings
            .iter()
            .filter(|(_, standing)| !standing.releases())
            .map(|(vm, _)| vm.clone())
            .collect();
        let all_ready = waiting.is_empty();
        let deadline = barrier::deadline_came(
            stated_not_before(event),
            self.access.config.deadline,
            self.clock.now(),
        );
        if !all_ready && !deadline {
            let state = BarrierState::ThisVmLeads {
                waiting: waiting.iter().map(ToString::to_string).collect(),
            };
            self.update(
                id,
                Some(self.access.vm.clone()),
                standings,
                state,
                BarrierVerdict::Wait,
            );
            return Ok(false);
        }
        let Some(compares) = self.claim_conditions(id, keys, &read, all_ready) else {
            return Ok(false);
        };
        let claim = self.claim_writes(keys, lease);
        let Some(revision) = self.access.client.commit(&compares, &claim).await? else {
            // Something changed between the read and the claim; the next round reads again.
            return Ok(false);
        };
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.held.claim = Some(Revision(revision));
        }
        let why = if all_ready {
            format!(
                "every VM named in event {id} is ready ({}); this VM leads and approves it for all of them",
                resources_list(&standings)
            )
        } else {
            format!(
                "the coordination deadline of event {id} came ({} before NotBefore) with {} not ready; \
                 this VM leads and approves it (`coordination.deadline`)",
                humantime::format_duration(self.access.config.deadline.unwrap_or_default()),
                waiting.join(", ")
            )
        };
        self.update(
            id,
            Some(self.access.vm.clone()),
            standings,
            BarrierState::ThisVmApproves,
            BarrierVerdict::Wait,
        );
        self.claimed(id, why);
        Ok(true)
    }

    /// The claim holds only if the leader key is still this VM's own write, the approval key
    /// is still absent (or the ignored write read), and — when every VM counted ready — each
    /// ready key counted is still the same write and each dead VM still has no member key.
    /// None when this VM does not hold the leader key it leads by (it cannot claim).
    fn claim_conditions(
        &self,
        id: &EventId,
        keys: &EventKeys,
        read: &EventRead,
        all_ready: bool,
    ) -> Option<Vec<Compare>> {
        let Revision(campaign) = self.events.get(id)?.held.campaign?;
        let Revision(approval) = read.approval.replaceable()?;
        let mut compares = vec![
            Compare::ModRevisionIs(keys.leader.clone(), campaign),
            Compare::ModRevisionIs(keys.approval.clone(), approval),
        ];
        if !all_ready {
            return Some(compares);
        }
        for (vm, Revision(revision)) in &read.ready_revisions {
            let ready_key = self.access.subtree_key(vm, id, "ready");
            compares.push(Compare::ModRevisionIs(ready_key, *revision));
        }
        for (vm, standing) in &read.standings {
            if *standing == VmStanding::DeadCountedReady {
                compares.push(Compare::Absent(self.access.subtree_key(vm, id, "ready")));
                compares.push(Compare::Absent(self.access.member_key(vm)));
            }
        }
        Some(compares)
    }

    fn claimed(&mut self, id: &EventId, why: String) {
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.claim(why);
        }
    }

    fn update(
        &mut self,
        id: &EventId,
        leader: Option<String>,
        vms: Vec<(String, VmStanding)>,
        state: BarrierState,
        verdict: BarrierVerdict,
    ) {
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.update(leader, vms, state, verdict);
        }
    }
}

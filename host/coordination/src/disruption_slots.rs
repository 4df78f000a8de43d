//! The fleet's disruption budget on etcd (`coordination.disruption-budget`,
//! docs/coordination.md): an event naming only this VM takes a slot before it is approved
//! early and gives it back once it has ended and the plugins have recovered.
//!
//! Keys, in this VM's own subtree (so that a role per VM keeps the others out) but for the
//! group's turn key, which every VM of the group writes:
//!
//! | key | value | lease |
//! | --- | --- | --- |
//! | `vms/VM/group` | the VM's `disruption-group` | the daemon's lease |
//! | `vms/VM/queue/ID` | [`QueueRecord`]: NotBefore, when ready | the daemon's lease |
//! | `vms/VM/slots/ID` | [`SlotRecord`]: the daemon's lease then, forced or not | the slot lease (`slot-timeout`, renewed while the daemon runs) |
//! | `budget/GROUP/turn` | the VM that took or gave back a slot last | none |
//!
//! A slot is taken in one transaction that finds the turn key at the revision read before
//! the slots were counted, and writes it again: of two VMs that counted the same free slot,
//! only the first takes it. A slot outlives its daemon (the VM is down for the event) by up
//! to `slot-timeout`; under `dead-vm = "counts-as-ready"` it stops counting as soon as the
//! daemon's lease is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use forewarn_etcd::{Compare, EtcdError, KeyValue, Write};
use forewarn_imds::{EventId, ImdsTime, ScheduledEvent};
use serde::{Deserialize, Serialize};

use crate::etcd_access::EtcdAccess;
use forewarn_pipeline::approval::BarrierVerdict;
use forewarn_pipeline::barrier::DeadVm;
use forewarn_pipeline::disruption_budget::{
    BudgetUnreachable, BudgetView, DisruptionBudget, HeldSlot, QueuedClaim, Turn, turn,
};

/// `vms/VM/queue/ID`: an event of VM waiting for a slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct QueueRecord {
    /// The VM's `disruption-group`.
    pub(crate) group: String,
    /// The event's NotBefore (ms since the Unix epoch), None when IMDS gave none.
    pub(crate) not_before_unix_ms: Option<u64>,
    /// When the VM's plugins were all ready (ms since the Unix epoch, IMDS's clock).
    pub(crate) ready_unix_ms: u64,
}

/// `vms/VM/slots/ID`: a slot VM holds for the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SlotRecord {
    /// The VM's `disruption-group`.
    pub(crate) group: String,
    /// The daemon's lease when it took the slot: while its member key is under that lease,
    /// the holder's daemon is alive.
    pub(crate) member_lease: i64,
    /// Taken without waiting (a Spot eviction, a notice too short).
    pub(crate) forced: bool,
    /// When it was taken (ms since the Unix epoch, IMDS's clock).
    pub(crate) taken_unix_ms: u64,
}

/// Where one of this VM's events stands with the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ClaimState {
    /// Waiting for a slot; its queue key written under this daemon lease (None: not yet).
    Queued {
        ready_at: ImdsTime,
        queued_in_lease: Option<i64>,
    },
    /// To take a slot without waiting.
    Forced,
    /// Holding a slot, written under this slot lease.
    Holding { forced: bool, in_lease: i64 },
}

/// The slot lease and when it was last renewed.
struct SlotLease {
    id: i64,
    renewed_at: Instant,
}

/// This VM's events and the budget as last read: what `/status` shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetStatus {
    /// `coordination.disruption-budget` as written ("10%", "2").
    pub budget: String,
    /// `coordination.disruption-group`.
    pub group: String,
    /// The slots the budget gives the group as known now.
    pub slots: usize,
    /// The slots in use (under `dead-vm`).
    pub in_use: usize,
    /// The VMs known in the group (alive, or holding a slot).
    pub known_vms: usize,
    /// Who holds a slot: VM, event, forced or not, whether its daemon is alive.
    pub holders: Vec<SlotHolder>,
    /// The queue, in its order.
    pub queue: Vec<QueuedEvent>,
    /// While etcd cannot be reached: what waiting events do
    /// (`coordination.budget-unreachable`: "wait" or "approve-alone").
    pub when_unreachable: BudgetUnreachable,
    /// Whether waiting events are approved without a slot now (etcd unreachable and
    /// `budget-unreachable = "approve-alone"`).
    #[serde(default)]
    pub approving_alone: bool,
}

/// One slot held, as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotHolder {
    /// The VM holding it.
    pub vm: String,
    /// The event it was taken for.
    pub event_id: String,
    /// Taken without waiting.
    pub forced: bool,
    /// Whether the holder's daemon is alive.
    pub holder_alive: bool,
}

/// One event waiting for a slot, as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuedEvent {
    /// The VM waiting.
    pub vm: String,
    /// The event.
    pub event_id: String,
    /// Its NotBefore (ms since the Unix epoch), when given.
    pub not_before_unix_ms: Option<u64>,
}

/// The coordinator's part for the budget: this VM's claims and the keys it owes etcd.
pub(super) struct SlotKeeper {
    budget: DisruptionBudget,
    dead_vm: DeadVm,
    unreachable: BudgetUnreachable,
    claims: BTreeMap<EventId, (ScheduledEvent, ClaimState)>,
    /// Slots to give back: events handled to the end (or rescheduled while holding one).
    releases: BTreeSet<EventId>,
    /// Queue keys to delete: events that left or were withdrawn while waiting.
    unqueue: BTreeSet<EventId>,
    /// The lease slots are held under (`slot-timeout`), renewed while this daemon runs.
    slot_lease: Option<SlotLease>,
    /// The daemon lease `vms/VM/group` was last written under.
    group_in_lease: Option<i64>,
    /// The waiting events already said to wait (once per event).
    said_waiting: BTreeSet<EventId>,
    /// The budget as last read in full, with the turn key's revision read just before it and
    /// when: while the turn key stays at that revision nobody took or gave back a slot, and
    /// the view is read again only every `lease-ttl` (for slots whose lease ended and VMs
    /// that came or went), so that a hundred waiting VMs do not each read every VM's keys
    /// five times a second.
    read: Option<FullRead>,
    status: BudgetStatus,
}

/// One full read of the budget's keys.
struct FullRead {
    view: BudgetView,
    turn_revision: i64,
    at: Instant,
}

impl SlotKeeper {
    /// The keeper for `access`'s `[coordination]`, when it sets a budget.
    pub(super) fn for_config(access: &EtcdAccess) -> Option<SlotKeeper> {
        let config = &access.config;
        let budget = config.disruption_budget?;
        Some(SlotKeeper {
            budget,
            dead_vm: config.dead_vm,
            unreachable: config.budget_unreachable,
            claims: BTreeMap::new(),
            releases: BTreeSet::new(),
            unqueue: BTreeSet::new(),
            slot_lease: None,
            group_in_lease: None,
            said_waiting: BTreeSet::new(),
            read: None,
            status: BudgetStatus {
                budget: budget.to_string(),
                group: config.disruption_group.clone(),
                when_unreachable: config.budget_unreachable,
                ..BudgetStatus::default()
            },
        })
    }

    /// `event`'s plugins are ready at `now`: it waits for a slot.
    pub(super) fn queue(&mut self, event: &ScheduledEvent, now: ImdsTime) {
        self.releases.remove(&event.id);
        self.unqueue.remove(&event.id);
        let entry = self.claims.entry(event.id.clone()).or_insert_with(|| {
            let state = ClaimState::Queued {
                ready_at: now,
                queued_in_lease: None,
            };
            (event.clone(), state)
        });
        entry.0 = event.clone();
    }

    /// `event` is approved at once: it takes a slot without waiting.
    pub(super) fn occupy(&mut self, event: &ScheduledEvent) {
        self.releases.remove(&event.id);
        self.claims
            .entry(event.id.clone())
            .or_insert_with(|| (event.clone(), ClaimState::Forced));
    }

    /// The event left Scheduled (or was forgotten): a waiting one leaves the queue; a slot
    /// held stays until the plugins have recovered ([`SlotKeeper::recovered`]).
    pub(super) fn leave(&mut self, id: &EventId) {
        if let Some((_, ClaimState::Queued { .. })) = self.claims.get(id) {
            self.claims.remove(id);
            self.unqueue.insert(id.clone());
        }
    }

    /// The event was rescheduled: it leaves the queue, and gives back a slot it holds.
    pub(super) fn withdraw(&mut self, id: &EventId) {
        match self.claims.remove(id) {
            Some((_, ClaimState::Holding { .. })) => {
                self.releases.insert(id.clone());
            }
            Some(_) => {
                self.unqueue.insert(id.clone());
            }
            None => {}
        }
    }

    /// The event has ended and the plugins have recovered: its slot goes back (also when
    /// this daemon did not take it: a slot taken before a restart is this VM's still).
    pub(super) fn recovered(&mut self, id: &EventId) {
        self.claims.remove(id);
        self.said_waiting.remove(id);
        self.unqueue.insert(id.clone());
        self.releases.insert(id.clone());
    }

    /// Whether a round has work for etcd soon (waiting events, keys owed).
    pub(super) fn busy(&self) -> bool {
        !self.releases.is_empty()
            || !self.unqueue.is_empty()
            || self
                .claims
                .values()
                .any(|(_, state)| !matches!(state, ClaimState::Holding { .. }))
    }

    /// The verdict on each waiting or holding event, with etcd reachable or not.
    pub(super) fn verdicts(&self, falls_back: bool) -> Vec<(EventId, BarrierVerdict)> {
        let alone = falls_back && self.unreachable == BudgetUnreachable::ApproveAlone;
        self.claims
            .iter()
            .filter_map(|(id, (_, state))| {
                let verdict = match state {
                    ClaimState::Forced => return None,
                    ClaimState::Holding { forced: true, .. } => return None,
                    ClaimState::Holding { .. } => BarrierVerdict::Approve {
                        why: format!(
                            "took a slot of the disruption budget ({}) for event {id}; approving",
                            self.status.budget
                        ),
                    },
                    ClaimState::Queued { .. } if alone => BarrierVerdict::Approve {
                        why: format!(
                            "etcd cannot be reached and `coordination.budget-unreachable` is \
                             \"approve-alone\": approving event {id} without a slot of the \
                             disruption budget"
                        ),
                    },
                    ClaimState::Queued { .. } => BarrierVerdict::Wait,
                };
                Some((id.clone(), verdict))
            })
            .collect()
    }

    /// The budget as last read, with whether waiting events are approved alone now.
    pub(super) fn status(&self, falls_back: bool) -> BudgetStatus {
        BudgetStatus {
            approving_alone: falls_back && self.unreachable == BudgetUnreachable::ApproveAlone,
            ..self.status.clone()
        }
    }

    /// One round: the group key, the slot lease, slots given back, queue keys, forced slots,
    /// then — when a waiting event's turn came — one slot taken.
    pub(super) async fn round(
        &mut self,
        access: &EtcdAccess,
        member_lease: i64,
        now: ImdsTime,
    ) -> Result<(), EtcdError> {
        let client = &access.client;
        if self.group_in_lease != Some(member_lease) {
            client
                .put(&group_key(access), &self.status.group, member_lease)
                .await?;
            self.group_in_lease = Some(member_lease);
        }
        let slot_lease = self.ensure_slot_lease(access).await?;
        self.rewrite_held(access, member_lease, slot_lease).await?;
        self.give_back(access).await?;
        self.write_queue_keys(access, member_lease).await?;
        self.take_forced(access, member_lease, slot_lease, now)
            .await?;
        let turn_revision = client
            .get(&turn_key(access, &self.status.group))
            .await?
            .map_or(0, |kv| kv.mod_revision);
        let stale = self.read.as_ref().is_none_or(|read| {
            read.turn_revision != turn_revision || read.at.elapsed() >= access.config.lease_ttl
        });
        if stale {
            let keys = client.list(&access.vms_prefix()).await?;
            let view = budget_view(access, &self.status.group, &keys);
            self.note_view(&view);
            self.read = Some(FullRead {
                view,
                turn_revision,
                at: Instant::now(),
            });
        }
        let Some(read) = self.read.take() else {
            return Ok(());
        };
        let taken = self
            .take_turn(
                access,
                &read.view,
                turn_revision,
                member_lease,
                slot_lease,
                now,
            )
            .await;
        // A slot taken wrote the turn key: the next round reads everything again.
        self.read = Some(read);
        taken
    }

    /// Grants the slot lease, or renews it when due; a lease found expired is replaced and
    /// the slots held are written again under the new one.
    async fn ensure_slot_lease(&mut self, access: &EtcdAccess) -> Result<i64, EtcdError> {
        let renew_every = access.config.lease_ttl / 3;
        if let Some(held) = self.slot_lease.as_mut() {
            if held.renewed_at.elapsed() < renew_every {
                return Ok(held.id);
            }
            if access.client.keep_alive(held.id).await?.is_some() {
                held.renewed_at = Instant::now();
                return Ok(held.id);
            }
            self.slot_lease = None;
        }
        let id = access
            .client
            .grant_lease(access.config.slot_timeout)
            .await?;
        self.slot_lease = Some(SlotLease {
            id,
            renewed_at: Instant::now(),
        });
        Ok(id)
    }

    /// Writes again, under `slot_lease`, the slots held under a lease that expired (etcd out
    /// of reach for longer than `slot-timeout`): the VM is still down for the event.
    async fn rewrite_held(
        &mut self,
        access: &EtcdAccess,
        member_lease: i64,
        slot_lease: i64,
    ) -> Result<(), EtcdError> {
        let stale: Vec<(EventId, bool)> = self
            .claims
            .iter()
            .filter_map(|(id, (_, state))| match state {
                ClaimState::Holding { forced, in_lease } if *in_lease != slot_lease => {
                    Some((id.clone(), *forced))
                }
                _ => None,
            })
            .collect();
        for (id, forced) in stale {
            let now = ImdsTime::from_system_time(std::time::SystemTime::now());
            let writes = self.slot_writes(access, &id, member_lease, slot_lease, forced, now);
            access.client.transaction(&[], &writes).await?;
            self.hold(&id, forced, slot_lease);
        }
        Ok(())
    }

    /// Deletes the slots of events handled to the end (writing the turn key, so that a VM
    /// counting meanwhile counts again) and the queue keys of events no longer waiting.
    async fn give_back(&mut self, access: &EtcdAccess) -> Result<(), EtcdError> {
        let releases: Vec<EventId> = self.releases.iter().cloned().collect();
        for id in releases {
            let slot = slot_key(access, &id);
            let held = [Compare::Present(slot.clone())];
            let writes = [
                Write::Delete(slot),
                Write::Delete(queue_key(access, &id)),
                turn_write(access, &self.status.group),
            ];
            if access.client.transaction(&held, &writes).await? {
                tracing::info!(event_id = %id, "gave back this VM's slot of the disruption budget");
            }
            self.releases.remove(&id);
        }
        let unqueue: Vec<EventId> = self.unqueue.iter().cloned().collect();
        for id in unqueue {
            access.client.delete(&queue_key(access, &id)).await?;
            self.unqueue.remove(&id);
        }
        Ok(())
    }

    /// Writes the queue key of each waiting event not yet queued under `member_lease`.
    async fn write_queue_keys(
        &mut self,
        access: &EtcdAccess,
        member_lease: i64,
    ) -> Result<(), EtcdError> {
        let group = self.status.group.clone();
        for (id, (event, state)) in &mut self.claims {
            let ClaimState::Queued {
                ready_at,
                queued_in_lease,
            } = state
            else {
                continue;
            };
            if *queued_in_lease == Some(member_lease) {
                continue;
            }
            let record = QueueRecord {
                group: group.clone(),
                not_before_unix_ms: event.not_before_time().map(ImdsTime::unix_ms),
                ready_unix_ms: ready_at.unix_ms(),
            };
            let value = serde_json::to_string(&record).unwrap_or_default();
            access
                .client
                .put(&queue_key(access, id), &value, member_lease)
                .await?;
            *queued_in_lease = Some(member_lease);
            // The queue changed: the next read is a full one.
            self.read = None;
        }
        Ok(())
    }

    /// Takes a slot for each event approved without waiting, whatever the count.
    async fn take_forced(
        &mut self,
        access: &EtcdAccess,
        member_lease: i64,
        slot_lease: i64,
        now: ImdsTime,
    ) -> Result<(), EtcdError> {
        let forced: Vec<EventId> = self
            .claims
            .iter()
            .filter(|(_, (_, state))| *state == ClaimState::Forced)
            .map(|(id, _)| id.clone())
            .collect();
        for id in forced {
            let writes = self.slot_writes(access, &id, member_lease, slot_lease, true, now);
            access.client.transaction(&[], &writes).await?;
            tracing::info!(event_id = %id, "took a slot of the disruption budget without waiting (a Spot eviction or a notice too short to wait)");
            self.hold(&id, true, slot_lease);
        }
        Ok(())
    }

    /// Takes a slot for the first waiting event whose turn came, if the turn key is still at
    /// `turn_revision`; another VM that took one meanwhile makes it wait for the next round.
    async fn take_turn(
        &mut self,
        access: &EtcdAccess,
        view: &BudgetView,
        turn_revision: i64,
        member_lease: i64,
        slot_lease: i64,
        now: ImdsTime,
    ) -> Result<(), EtcdError> {
        let waiting: Vec<EventId> = self
            .claims
            .iter()
            .filter(|(_, (_, state))| matches!(state, ClaimState::Queued { .. }))
            .map(|(id, _)| id.clone())
            .collect();
        for id in waiting {
            let verdict = turn(view, self.budget, self.dead_vm, &access.vm, &id);
            if let Turn::Wait {
                ahead,
                in_use,
                slots,
            } = verdict
            {
                self.say_waiting(&id, ahead, in_use, slots);
                continue;
            }
            let unchanged = [Compare::ModRevisionIs(
                turn_key(access, &self.status.group),
                turn_revision,
            )];
            let mut writes = self.slot_writes(access, &id, member_lease, slot_lease, false, now);
            writes.push(Write::Delete(queue_key(access, &id)));
            if !access.client.transaction(&unchanged, &writes).await? {
                return Ok(());
            }
            tracing::info!(
                event_id = %id,
                in_use = view.in_use(self.dead_vm) + 1,
                slots = self.budget.slots(view.known_vms.len().max(1)),
                "took a slot of the disruption budget"
            );
            self.hold(&id, false, slot_lease);
            return Ok(());
        }
        Ok(())
    }

    /// Says once that `id` waits, and that Azure starts it at NotBefore anyway.
    fn say_waiting(&mut self, id: &EventId, ahead: usize, in_use: usize, slots: usize) {
        if !self.said_waiting.insert(id.clone()) {
            return;
        }
        tracing::info!(
            event_id = %id,
            ahead,
            in_use,
            slots,
            "{}",
            forewarn_pipeline::log_messages::WAITING_FOR_DISRUPTION_SLOT
        );
    }

    fn slot_writes(
        &self,
        access: &EtcdAccess,
        id: &EventId,
        member_lease: i64,
        slot_lease: i64,
        forced: bool,
        now: ImdsTime,
    ) -> Vec<Write> {
        let record = SlotRecord {
            group: self.status.group.clone(),
            member_lease,
            forced,
            taken_unix_ms: now.unix_ms(),
        };
        vec![
            Write::Put {
                key: slot_key(access, id),
                value: serde_json::to_string(&record).unwrap_or_default(),
                lease: slot_lease,
            },
            turn_write(access, &self.status.group),
        ]
    }

    fn hold(&mut self, id: &EventId, forced: bool, slot_lease: i64) {
        if let Some((_, state)) = self.claims.get_mut(id) {
            *state = ClaimState::Holding {
                forced,
                in_lease: slot_lease,
            };
        }
    }

    fn note_view(&mut self, view: &BudgetView) {
        self.status.known_vms = view.known_vms.len();
        self.status.slots = self.budget.slots(view.known_vms.len().max(1));
        self.status.in_use = view.in_use(self.dead_vm);
        self.status.holders = view
            .slots
            .iter()
            .map(|slot| SlotHolder {
                vm: slot.vm.clone(),
                event_id: slot.event_id.clone(),
                forced: slot.forced,
                holder_alive: slot.holder_alive,
            })
            .collect();
        self.status.queue = view
            .ordered_queue()
            .into_iter()
            .map(|claim| QueuedEvent {
                vm: claim.vm.clone(),
                event_id: claim.event_id.clone(),
                not_before_unix_ms: claim.not_before.map(ImdsTime::unix_ms),
            })
            .collect();
    }
}

/// `PREFIX/vms/VM/group`.
fn group_key(access: &EtcdAccess) -> String {
    format!("{}{}/group", access.vms_prefix(), access.vm)
}

/// `PREFIX/vms/VM/slots/ID`.
fn slot_key(access: &EtcdAccess, id: &EventId) -> String {
    format!("{}{}/slots/{id}", access.vms_prefix(), access.vm)
}

/// `PREFIX/vms/VM/queue/ID`.
fn queue_key(access: &EtcdAccess, id: &EventId) -> String {
    format!("{}{}/queue/{id}", access.vms_prefix(), access.vm)
}

/// `PREFIX/budget/GROUP/turn`.
fn turn_key(access: &EtcdAccess, group: &str) -> String {
    format!("{}/budget/{group}/turn", access.config.prefix)
}

fn turn_write(access: &EtcdAccess, group: &str) -> Write {
    Write::Put {
        key: turn_key(access, group),
        value: access.vm.clone(),
        lease: 0,
    }
}

/// One key of a VM's subtree that the budget reads.
enum BudgetKey<'a> {
    Member,
    Group,
    Slot(&'a str),
    Queue(&'a str),
}

/// `(VM, key)` of a key under `PREFIX/vms/`, when the budget reads it.
fn budget_key<'a>(vms_prefix: &str, key: &'a str) -> Option<(&'a str, BudgetKey<'a>)> {
    let rest = key.strip_prefix(vms_prefix)?;
    let (vm, rest) = rest.split_once('/')?;
    let kind = match rest.split_once('/') {
        None if rest == "member" => BudgetKey::Member,
        None if rest == "group" => BudgetKey::Group,
        Some(("slots", id)) => BudgetKey::Slot(id),
        Some(("queue", id)) => BudgetKey::Queue(id),
        _ => return None,
    };
    Some((vm, kind))
}

/// The budget of `group` as the keys under `PREFIX/vms/` say: VMs alive in the group (member
/// key and group key), slots (alive: the member key is under the lease the slot names) and
/// the queue. A value that is not a record is skipped.
pub(crate) fn budget_view(access: &EtcdAccess, group: &str, keys: &[KeyValue]) -> BudgetView {
    let vms_prefix = access.vms_prefix();
    let mut member_lease: BTreeMap<&str, i64> = BTreeMap::new();
    let mut in_group: BTreeSet<&str> = BTreeSet::new();
    let mut slots: Vec<(&str, &str, SlotRecord)> = Vec::new();
    let mut queue = Vec::new();
    for kv in keys {
        let Some((vm, kind)) = budget_key(&vms_prefix, &kv.key) else {
            continue;
        };
        match kind {
            BudgetKey::Member if kv.lease != 0 => {
                member_lease.insert(vm, kv.lease);
            }
            BudgetKey::Member => {}
            BudgetKey::Group if kv.value == group => {
                in_group.insert(vm);
            }
            BudgetKey::Group => {}
            BudgetKey::Slot(id) => match serde_json::from_str::<SlotRecord>(&kv.value) {
                Ok(record) if record.group == group => slots.push((vm, id, record)),
                _ => {}
            },
            BudgetKey::Queue(id) => match serde_json::from_str::<QueueRecord>(&kv.value) {
                Ok(record) if record.group == group => queue.push(QueuedClaim {
                    vm: vm.to_owned(),
                    event_id: id.to_owned(),
                    not_before: record.not_before_unix_ms.map(ImdsTime::from_unix_ms),
                    ready_at: ImdsTime::from_unix_ms(record.ready_unix_ms),
                }),
                _ => {}
            },
        }
    }
    let mut known_vms: BTreeSet<String> = in_group
        .iter()
        .filter(|vm| member_lease.contains_key(*vm))
        .map(|vm| (*vm).to_owned())
        .collect();
    let slots = slots
        .into_iter()
        .map(|(vm, id, record)| {
            known_vms.insert(vm.to_owned());
            HeldSlot {
                vm: vm.to_owned(),
                event_id: id.to_owned(),
                holder_alive: member_lease.get(vm) == Some(&record.member_lease),
                forced: record.forced,
            }
        })
        .collect();
    BudgetView {
        known_vms,
        slots,
        queue,
    }
}

#[cfg(test)]
mod tests;

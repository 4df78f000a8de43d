//! One round of the barrier against etcd, as the coordinator's actor runs it: keep the
//! lease, release what this VM left or withdrew, then move each event forward — record
//! ready, campaign, and, leading, claim the approval once every VM is ready or the deadline
//! came; record a sent approval so that no new leader approves the event again.

use std::time::{Duration, Instant};

use forewarn_etcd::{Compare, EtcdError, Write};
use forewarn_imds::ScheduledEvent;

use crate::coordination::actor::{Coordinator, Lease};
use crate::coordination::coordination_status::EventBarrier;
use crate::coordination::records::{
    EventKeys, EventRecords, reads_everything, ready_marker, resources_list, stated_not_before,
};
use crate::log_messages;
use crate::pipeline::approval::BarrierVerdict;
use crate::pipeline::barrier::{self, BarrierView, VmStanding};

/// How long records that must outlive a daemon (`was-ready`, a sent `approval`) are kept.
const RECORD_TTL: Duration = Duration::from_secs(24 * 3600);

/// Logged (field `event_id`) when an approval record names this VM under a lease this
/// daemon does not hold: it is not acted on.
pub const NOT_OUR_APPROVAL_MESSAGE: &str = "an approval record in etcd names this VM, but \
     this daemon did not write it (another lease); not sending it. If it is not a stale claim \
     of a previous run (those expire with `coordination.lease-ttl`), check who may write under \
     `coordination.prefix`";

impl Coordinator {
    /// One pass: keep the lease, drop forgotten events, move each event forward.
    pub(super) async fn round(&mut self) -> Result<(), EtcdError> {
        let lease_id = self.ensure_lease().await?;
        self.release_withdrawn().await?;
        self.release_left().await?;
        let ids: Vec<String> = self.events.keys().cloned().collect();
        for id in ids {
            // A request that arrived meanwhile (a Join, a Withdraw) is applied first.
            self.take_requests();
            self.step(&id, lease_id).await?;
        }
        Ok(())
    }

    /// Grants the lease (and registers this VM as a member) or renews it when due.
    async fn ensure_lease(&mut self) -> Result<i64, EtcdError> {
        if let Some(held) = self.lease.as_mut() {
            if held.renewed_at.elapsed() < self.access.config.lease_ttl / 3 {
                return Ok(held.id);
            }
            if self.access.client.keep_alive(held.id).await?.is_some() {
                held.renewed_at = Instant::now();
                return Ok(held.id);
            }
            tracing::warn!(
                lease = held.id,
                "this VM's etcd lease expired (etcd was out of reach for longer than \
                 `coordination.lease-ttl`); recording ready again under a new lease"
            );
            self.lease = None;
        }
        let id = self
            .access
            .client
            .grant_lease(self.access.config.lease_ttl)
            .await?;
        self.access
            .client
            .put(
                &self.access.member_key(&self.access.vm),
                &self.access.vm,
                id,
            )
            .await?;
        self.lease = Some(Lease {
            id,
            renewed_at: Instant::now(),
        });
        Ok(id)
    }

    /// Releases the ready key and leadership of events this VM left, once their time came
    /// (a claim stays: its approval may be on its way; it ends with the daemon's lease).
    async fn release_left(&mut self) -> Result<(), EtcdError> {
        let now = Instant::now();
        let due: Vec<String> = self
            .leaving
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            let keys = self.access.keys(id);
            let release = [Compare::ValueIs(
                keys.leader.clone(),
                self.access.vm.clone(),
            )];
            let outcome = async {
                self.access.client.delete(&keys.ready).await?;
                self.access
                    .client
                    .transaction(&release, &[Write::Delete(keys.leader.clone())])
                    .await
            }
            .await;
            // Not released: tried again next round.
            outcome?;
            self.leaving.remove(id);
            tracing::debug!(event_id = %id, "no longer coordinating the event");
        }
        Ok(())
    }

    /// Releases what this VM held for events it is no longer ready for.
    async fn release_withdrawn(&mut self) -> Result<(), EtcdError> {
        let withdrawn = std::mem::take(&mut self.withdrawn);
        for (index, (id, sent)) in withdrawn.iter().enumerate() {
            let keys = self.access.keys(id);
            let mine = Compare::ValueIs(keys.leader.clone(), self.access.vm.clone());
            let mut releases = vec![Write::Delete(keys.leader.clone())];
            if !sent {
                releases.push(Write::Delete(keys.approval.clone()));
            }
            let outcome = async {
                self.access.client.delete(&keys.ready).await?;
                self.access.client.transaction(&[mine], &releases).await
            }
            .await;
            if let Err(error) = outcome {
                // Try again next round, with whatever was not released yet.
                self.withdrawn.extend(withdrawn[index..].iter().cloned());
                return Err(error);
            }
            tracing::info!(event_id = %id, "withdrew this VM's ready record: the event was rescheduled");
        }
        Ok(())
    }

    /// Moves one event forward: record ready, campaign, and — leading — claim the approval
    /// when every VM is ready or the deadline came.
    async fn step(&mut self, id: &str, lease: i64) -> Result<(), EtcdError> {
        let Some((event, ready_in_lease, claimed)) = self.snapshot(id) else {
            return Ok(());
        };
        let keys = self.access.keys(id);
        if ready_in_lease != Some(lease) {
            self.record_ready(id, &keys, lease).await?;
        }
        if claimed {
            return self.record_sent(id, &keys).await;
        }
        if self.another_still_leads(id, &keys).await? {
            return Ok(());
        }
        let records = self.access.client.list(&keys.event_prefix).await?;
        let records = EventRecords::read(&records, &keys.event_prefix);
        let members = self
            .access
            .client
            .list(&format!("{}/members/", self.access.config.prefix))
            .await?;
        let marker = ready_marker(&event);
        let view = BarrierView {
            ready: records.ready_for(&marker),
            was_ready: records.was_ready.clone(),
            alive: members.into_iter().map(|kv| kv.value).collect(),
        };
        let resources: Vec<String> = event
            .resources
            .iter()
            .map(|vm| vm.to_ascii_lowercase())
            .collect();
        let standings = barrier::standings(&resources, &view, self.access.config.dead_vm);
        if let Some((by, by_lease)) = &records.approval {
            let ours = self.written_by_us(id, *by_lease, lease);
            return self.settle_approved(id, by, ours, records.leader, standings);
        }
        let leader = match records.leader {
            Some(leader) => leader,
            None => self.campaign(&keys, lease).await?,
        };
        if leader != self.access.vm {
            let state = format!("{leader} leads; waiting for it to approve");
            self.update(id, Some(leader), standings, state, BarrierVerdict::Wait);
            return Ok(());
        }
        self.note_leading(id);
        self.lead(id, &event, &keys, lease, standings).await
    }

    /// Whether a VM another VM leads may end its round after reading the `leader` and
    /// `approval` keys (two ranges of one key each): see [`reads_everything`]. Its view of the
    /// others' standings then stays as last read in full.
    async fn another_still_leads(&mut self, id: &str, keys: &EventKeys) -> Result<bool, EtcdError> {
        let seen = self
            .events
            .get(id)
            .and_then(|tracked| tracked.barrier.leader.clone());
        let Some(seen) = seen.filter(|leader| *leader != self.access.vm) else {
            return Ok(false);
        };
        let leader = self.access.client.list(&keys.leader).await?;
        let leader_now = leader
            .iter()
            .find(|kv| kv.key == keys.leader)
            .map(|kv| kv.value.as_str());
        if reads_everything(&self.access.vm, Some(&seen), leader_now, false) {
            return Ok(false);
        }
        let approval = self.access.client.list(&keys.approval).await?;
        let claimed = approval.iter().any(|kv| kv.key == keys.approval);
        Ok(!reads_everything(
            &self.access.vm,
            Some(&seen),
            leader_now,
            claimed,
        ))
    }

    fn snapshot(&self, id: &str) -> Option<(ScheduledEvent, Option<i64>, bool)> {
        let tracked = self.events.get(id)?;
        Some((
            tracked.event.clone(),
            tracked.ready_in_lease,
            tracked.claimed,
        ))
    }

    async fn record_ready(
        &mut self,
        id: &str,
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
    async fn record_lease(&mut self, id: &str) -> Result<i64, EtcdError> {
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
        let due: Vec<String> = self
            .events
            .iter()
            .filter(|(_, tracked)| tracked.sent && !tracked.sent_recorded)
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            let keys = self.access.keys(&id);
            self.record_sent(&id, &keys).await?;
        }
        Ok(())
    }

    /// After the daemon sent the approval: the claim becomes a lasting record, so that a
    /// new leader never approves the event again.
    async fn record_sent(&mut self, id: &str, keys: &EventKeys) -> Result<(), EtcdError> {
        let due = self
            .events
            .get(id)
            .is_some_and(|tracked| tracked.sent && !tracked.sent_recorded);
        if !due {
            return Ok(());
        }
        let record_lease = self.record_lease(id).await?;
        self.access
            .client
            .put(&keys.approval, &self.access.vm, record_lease)
            .await?;
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.sent_recorded = true;
            tracked.barrier.state = "approved by this VM".into();
        }
        Ok(())
    }

    /// Whether a record attached to `record_lease` was written by this process: under its
    /// daemon lease `lease`, or under the event's record lease it granted.
    fn written_by_us(&self, id: &str, record_lease: i64, lease: i64) -> bool {
        if record_lease == 0 {
            return false;
        }
        let event_lease = self.events.get(id).and_then(|t| t.record_lease);
        record_lease == lease || Some(record_lease) == event_lease
    }

    /// An approval record exists. This VM sends the approval only for a claim it wrote
    /// itself in this process's lease (`ours`); a record naming it under another lease (a
    /// forged key, or a claim of a previous run, which expires with that run's lease) is
    /// never acted on.
    fn settle_approved(
        &mut self,
        id: &str,
        by: &str,
        ours: bool,
        leader: Option<String>,
        standings: Vec<(String, VmStanding)>,
    ) -> Result<(), EtcdError> {
        if by == self.access.vm && ours {
            let why = format!("this VM claimed the approval of event {id}; sending it");
            self.claimed(id, why);
            return Ok(());
        }
        if by == self.access.vm {
            tracing::warn!(event_id = %id, vm = %self.access.vm, "{NOT_OUR_APPROVAL_MESSAGE}");
        }
        let state = format!("approved by {by}");
        self.update(id, leader, standings, state, BarrierVerdict::Wait);
        Ok(())
    }

    /// Creates the leader key if absent; returns the leader.
    async fn campaign(&mut self, keys: &EventKeys, lease: i64) -> Result<String, EtcdError> {
        let won = self
            .access
            .client
            .transaction(
                &[Compare::Absent(keys.leader.clone())],
                &[Write::Put {
                    key: keys.leader.clone(),
                    value: self.access.vm.clone(),
                    lease,
                }],
            )
            .await?;
        if won {
            return Ok(self.access.vm.clone());
        }
        let records = self.access.client.list(&keys.leader).await?;
        Ok(records
            .into_iter()
            .find(|kv| kv.key == keys.leader)
            .map(|kv| kv.value)
            .unwrap_or_default())
    }

    fn note_leading(&mut self, id: &str) {
        let Some(tracked) = self.events.get_mut(id) else {
            return;
        };
        if !tracked.leading {
            tracked.leading = true;
            tracing::info!(event_id = %id, vm = %self.access.vm, "{}", log_messages::COORDINATION_LEADS);
        }
    }

    /// As the leader: claim the approval when the barrier is down or the deadline came.
    async fn lead(
        &mut self,
        id: &str,
        event: &ScheduledEvent,
        keys: &EventKeys,
        lease: i64,
        standings: Vec<(String, VmStanding)>,
    ) -> Result<(), EtcdError> {
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
            let state = format!("this VM leads; waiting for {}", waiting.join(", "));
            self.update(
                id,
                Some(self.access.vm.clone()),
                standings,
                state,
                BarrierVerdict::Wait,
            );
            return Ok(());
        }
        let compares = self.claim_conditions(keys, &standings, all_ready, &ready_marker(event));
        let claim = [Write::Put {
            key: keys.approval.clone(),
            value: self.access.vm.clone(),
            lease,
        }];
        if !self.access.client.transaction(&compares, &claim).await? {
            // Something changed between the read and the claim; the next round reads again.
            return Ok(());
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
            "approving: this VM leads".into(),
            BarrierVerdict::Wait,
        );
        self.claimed(id, why);
        Ok(())
    }

    /// The claim holds only if this VM still leads, nobody claimed yet, and — when every VM
    /// counted ready — each ready key read is still there and each dead VM still dead.
    fn claim_conditions(
        &self,
        keys: &EventKeys,
        standings: &[(String, VmStanding)],
        all_ready: bool,
        marker: &str,
    ) -> Vec<Compare> {
        let mut compares = vec![
            Compare::ValueIs(keys.leader.clone(), self.access.vm.clone()),
            Compare::Absent(keys.approval.clone()),
        ];
        if !all_ready {
            return compares;
        }
        for (vm, standing) in standings {
            let ready_key = format!("{}ready/{vm}", keys.event_prefix);
            match standing {
                VmStanding::Ready => compares.push(Compare::ValueIs(ready_key, marker.to_owned())),
                VmStanding::DeadCountedReady => {
                    compares.push(Compare::Absent(ready_key));
                    compares.push(Compare::Absent(self.access.member_key(vm)));
                }
                VmStanding::DeadHolding | VmStanding::NotReady => {}
            }
        }
        compares
    }

    fn claimed(&mut self, id: &str, why: String) {
        if let Some(tracked) = self.events.get_mut(id) {
            tracked.claimed = true;
            tracked.verdict = BarrierVerdict::Approve { why };
        }
        self.publish();
    }

    fn update(
        &mut self,
        id: &str,
        leader: Option<String>,
        vms: Vec<(String, VmStanding)>,
        state: String,
        verdict: BarrierVerdict,
    ) {
        let Some(tracked) = self.events.get_mut(id) else {
            return;
        };
        tracked.barrier = EventBarrier {
            event_id: id.to_owned(),
            leader,
            vms,
            state,
        };
        if !tracked.claimed {
            tracked.verdict = verdict;
        }
    }
}

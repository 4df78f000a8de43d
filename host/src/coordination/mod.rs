//! Coordinated approval across VMs: an approval barrier on etcd. Each VM records that it is
//! ready for an event naming several VMs; one elected VM approves once all of them are.
//!
//! Keys (all under `coordination.prefix`, VM names in lower case):
//!
//! | key | value | lease |
//! | --- | --- | --- |
//! | `members/VM` | VM | the daemon's lease: alive while the daemon runs |
//! | `events/ID/ready/VM` | NotBefore it prepared for (ms, 0 = none) | the daemon's lease |
//! | `events/ID/was-ready/VM` | VM | a 24 h record lease: outlives the daemon |
//! | `events/ID/leader` | VM | the leader's lease: created only if absent (the election) |
//! | `events/ID/approval` | VM | the leader's lease while claimed, a record lease once sent |
//! | `fleet/VM` | the VM's status record, JSON ([`fleet_record::FleetRecord`], ≤ 4 KiB) | the daemon's lease |
//!
//! The pipeline pushes [`BarrierRequest`]s (join, withdraw, leave, sent) that the event loop
//! hands to [`Coordinator::request`]; a background task talks to etcd and sends the daemon
//! each event's verdict ([`Verdicts`]) whenever it changes. Nothing is forgotten for want of
//! asking: an event is coordinated from its Join to its Leave or Withdraw. Only the leader,
//! in a transaction that also checks its leadership and every ready key it counted, claims
//! the approval; only a claim makes the verdict [`BarrierVerdict::Approve`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use forewarn_etcd::{Compare, EtcdClient, EtcdError, KeyValue, Write};
use forewarn_imds::{EventField, ImdsClock, ScheduledEvent};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use crate::pipeline::barrier::{BarrierView, DeadVm, VmStanding};

pub mod fleet_reader;
pub mod fleet_record;

use crate::config::CoordinationConfig;
use crate::log_messages;
use crate::pipeline::approval::{BarrierRequest, BarrierVerdict};
use crate::pipeline::barrier;
use crate::pipeline::clock::unix_ms;

/// How often the coordinator reads etcd while events are being coordinated.
pub const ROUND_EVERY: Duration = Duration::from_millis(200);
/// How long after the pipeline left an event (it started, ended or was forgotten) its ready
/// key and leadership are released. Nothing waits on them any more (the event is no longer
/// read each round); they stay a while so that the other VMs' last reads, and `/status`,
/// still show every VM ready around the start. A Withdraw releases at once.
const RELEASED_AFTER_LEAVING: Duration = Duration::from_secs(15);
/// How long records that must outlive a daemon (`was-ready`, a sent `approval`) are kept.
const RECORD_TTL: Duration = Duration::from_secs(24 * 3600);

/// The coordinator could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CoordinationError {
    /// The `[coordination]` section is not usable (the message names the key).
    #[error("[coordination]: {0}")]
    Setup(String),
    /// The etcd client could not be built (its settings or TLS files).
    #[error("[coordination]: {}", .0.describe("coordination"))]
    Client(#[from] EtcdError),
}

/// How long the rounds of a connected coordinator may fail (from the start of the first
/// failed round) before its events fall back to the single-VM policy: a cluster electing a
/// new leader (a member died) answers every request "leader changed" or "no leader" for
/// about a second; that is no reason to approve alone. Meanwhile events wait.
const FALL_BACK_AFTER: Duration = Duration::from_secs(3);

/// The link to etcd, as the status shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Connection {
    /// No answer yet.
    #[default]
    Connecting,
    /// The last round with etcd succeeded.
    Connected,
    /// The last round failed; events fall back to the single-VM policy.
    Unreachable,
    /// etcd members answer but none knows a leader (the cluster lost its quorum); events
    /// fall back to the single-VM policy.
    NoQuorum,
}

impl Connection {
    /// Every link state, for the metrics.
    pub const ALL: [Connection; 4] = [
        Connection::Connecting,
        Connection::Connected,
        Connection::Unreachable,
        Connection::NoQuorum,
    ];

    /// The name `/status` uses: "connecting", "connected", "unreachable" or "no-quorum".
    pub fn as_str(self) -> &'static str {
        match self {
            Connection::Connecting => "connecting",
            Connection::Connected => "connected",
            Connection::Unreachable => "unreachable",
            Connection::NoQuorum => "no-quorum",
        }
    }

    /// Whether events naming several VMs are decided by `policy.group-approval` meanwhile.
    pub fn falls_back(self) -> bool {
        matches!(self, Connection::Unreachable | Connection::NoQuorum)
    }

    fn of(outcome: &Result<(), EtcdError>) -> Connection {
        match outcome {
            Ok(()) => Connection::Connected,
            Err(EtcdError::NoQuorum { .. }) => Connection::NoQuorum,
            Err(_) => Connection::Unreachable,
        }
    }
}

/// What `/status` shows about coordination (see [`Coordinator::status`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordinationStatus {
    /// This VM's name as the barrier records it (lower case).
    pub vm_name: String,
    /// The etcd client URLs from `coordination.endpoints`.
    pub endpoints: Vec<String>,
    /// The key prefix from `coordination.prefix`.
    pub prefix: String,
    /// The link to etcd as of the last round.
    pub connection: Connection,
    /// Whether events naming several VMs are decided by `policy.group-approval` now,
    /// because etcd cannot be reached or has lost its quorum.
    #[serde(default)]
    pub fallback: bool,
    /// The endpoint tried first: the one that answered last.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// When `connection` last changed (ms since the Unix epoch).
    pub since_unix_ms: u64,
    /// The last error talking to etcd, kept after it recovers.
    pub last_error: Option<String>,
    /// This daemon's lease, while it holds one.
    pub lease_id: Option<i64>,
    /// Events being coordinated.
    pub events: Vec<EventBarrier>,
}

/// One event on the barrier, as this VM last read it from etcd.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventBarrier {
    /// The event's `EventId`.
    pub event_id: String,
    /// The VM that holds the event's election, once one does.
    pub leader: Option<String>,
    /// Each VM named in Resources with where it stands.
    pub vms: Vec<(String, VmStanding)>,
    /// One line: "waiting for vm-c", "approving: this VM leads", "approved by vm-a".
    pub state: String,
}

/// The handle the daemon holds; cheap to clone.
#[derive(Clone)]
pub struct Coordinator {
    inner: Arc<Inner>,
}

struct Inner {
    config: CoordinationConfig,
    vm: String,
    client: EtcdClient,
    /// Now on IMDS's clock (NotBefore's), for the barrier's deadline.
    clock: ImdsClock,
    shared: Mutex<Shared>,
    /// Each event's verdict, sent to the daemon whenever it changes.
    verdicts: mpsc::UnboundedSender<(String, BarrierVerdict)>,
    /// Wakes the coordinator's task: a new event, or an approval was sent.
    task_wake: Notify,
    status: watch::Sender<CoordinationStatus>,
}

#[derive(Default)]
struct Shared {
    events: BTreeMap<String, Tracked>,
    /// Events this VM is no longer ready for (rescheduled): keys to release, and whether
    /// this VM's approval claim, if any, was sent.
    withdrawn: Vec<(String, bool)>,
    /// Events this VM left (no longer Scheduled, or handled to the end): keys to release,
    /// each at its instant ([`RELEASED_AFTER_LEAVING`]).
    leaving: BTreeMap<String, Instant>,
    /// The verdict last sent to the daemon, by event.
    published: BTreeMap<String, BarrierVerdict>,
    connection: Connection,
    since_unix_ms: u64,
    last_error: Option<String>,
    lease_id: Option<i64>,
    /// When the rounds began failing while connected (None while they succeed).
    failing_since: Option<Instant>,
}

struct Tracked {
    event: ScheduledEvent,
    verdict: BarrierVerdict,
    /// The lease the ready key was last written under.
    ready_in_lease: Option<i64>,
    /// The lease of this event's lasting records.
    record_lease: Option<i64>,
    leading: bool,
    claimed: bool,
    sent: bool,
    sent_recorded: bool,
    barrier: EventBarrier,
}

impl Tracked {
    fn new(event: &ScheduledEvent) -> Tracked {
        Tracked {
            event: event.clone(),
            verdict: BarrierVerdict::Wait,
            ready_in_lease: None,
            record_lease: None,
            leading: false,
            claimed: false,
            sent: false,
            sent_recorded: false,
            barrier: EventBarrier {
                event_id: event.id.clone(),
                state: "recording ready in etcd".into(),
                ..EventBarrier::default()
            },
        }
    }
}

/// This daemon's lease and when it was last renewed.
struct Lease {
    id: i64,
    renewed_at: Instant,
}

/// Logged (field `event_id`) when an approval record names this VM under a lease this
/// daemon does not hold: it is not acted on.
pub const NOT_OUR_APPROVAL_MESSAGE: &str = "an approval record in etcd names this VM, but \
     this daemon did not write it (another lease); not sending it. If it is not a stale claim \
     of a previous run (those expire with `coordination.lease-ttl`), check who may write under \
     `coordination.prefix`";

/// The verdicts of the barrier, by event, each sent when it changes.
pub(crate) type Verdicts = mpsc::UnboundedReceiver<(String, BarrierVerdict)>;

impl Coordinator {
    /// Builds the etcd client and starts the coordinator's task (it stops with `shutdown`).
    /// etcd need not be reachable yet: until it is, verdicts fall back to the policy.
    /// `clock` is IMDS's, which NotBefore is on: the barrier's deadline is planned on it.
    pub(crate) fn start(
        config: &CoordinationConfig,
        vm_name: &str,
        clock: ImdsClock,
        shutdown: CancellationToken,
    ) -> Result<(Coordinator, Verdicts), CoordinationError> {
        config.validate().map_err(CoordinationError::Setup)?;
        let client = EtcdClient::connect(&config.etcd_settings())?;
        let vm = vm_name.to_ascii_lowercase();
        let status = CoordinationStatus {
            vm_name: vm.clone(),
            endpoints: config.endpoints.clone(),
            prefix: config.prefix.clone(),
            ..CoordinationStatus::default()
        };
        let (verdicts_tx, verdicts) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            config: config.clone(),
            vm,
            client,
            clock,
            shared: Mutex::new(Shared {
                since_unix_ms: unix_ms(SystemTime::now()),
                ..Shared::default()
            }),
            verdicts: verdicts_tx,
            task_wake: Notify::new(),
            status: watch::channel(status).0,
        });
        tokio::spawn(inner.clone().run(shutdown));
        Ok((Coordinator { inner }, verdicts))
    }

    /// Applies what the pipeline asks: a Join starts coordinating the event (the task records
    /// this VM ready and campaigns), a Withdraw or a Leave stops it (releasing its keys), a
    /// Sent has the leader record the approval. The verdict of a joined event is sent at once
    /// (Unreachable while etcd cannot be reached).
    pub(crate) fn request(&self, request: BarrierRequest) {
        let mut shared = self.inner.lock();
        match request {
            BarrierRequest::Join(event) => {
                // Joined again before its keys were released: they are this VM's again.
                shared.leaving.remove(&event.id);
                let tracked = shared
                    .events
                    .entry(event.id.clone())
                    .or_insert_with(|| Tracked::new(&event));
                tracked.event = (*event).clone();
            }
            BarrierRequest::Withdraw(id) => {
                shared.published.remove(&id);
                if let Some(tracked) = shared.events.remove(&id) {
                    shared.withdrawn.push((id, tracked.sent));
                }
            }
            BarrierRequest::Leave(id) => {
                shared.published.remove(&id);
                if shared.events.remove(&id).is_some() {
                    shared
                        .leaving
                        .insert(id, Instant::now() + RELEASED_AFTER_LEAVING);
                }
            }
            BarrierRequest::Sent(ids) => {
                for id in ids {
                    if let Some(tracked) = shared.events.get_mut(&id) {
                        tracked.sent = true;
                    }
                }
            }
        }
        self.inner.publish(&mut shared);
        drop(shared);
        self.inner.task_wake.notify_one();
    }

    /// The coordination status as of the last round.
    pub fn status(&self) -> CoordinationStatus {
        self.inner.status.borrow().clone()
    }

    /// Follows the coordination status (for the status page).
    pub fn subscribe(&self) -> watch::Receiver<CoordinationStatus> {
        self.inner.status.subscribe()
    }

    /// Publishes this VM's fleet record from `records` under the daemon's lease
    /// (`fleet/VM`, see [`fleet_record`]) until `shutdown`.
    pub fn publish_fleet_record(
        &self,
        records: watch::Receiver<Option<fleet_record::FleetRecord>>,
        shutdown: CancellationToken,
    ) {
        fleet_record::spawn_publisher(self.inner.clone(), records, shutdown);
    }

    /// Reads every VM's fleet record for `/status/fleet` (see [`fleet_reader`]).
    pub fn fleet_reader(&self) -> fleet_reader::FleetReader {
        fleet_reader::FleetReader::new(self.inner.clone())
    }
}

/// The keys of one event.
struct EventKeys {
    event_prefix: String,
    ready: String,
    was_ready: String,
    leader: String,
    approval: String,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends the daemon each event's verdict that changed since it was last sent: a claim
    /// approves; otherwise, while etcd falls back, Unreachable; otherwise the last read.
    fn publish(&self, shared: &mut Shared) {
        let unreachable = shared.connection.falls_back();
        for (id, tracked) in &shared.events {
            let verdict = match tracked.claimed || !unreachable {
                true => tracked.verdict.clone(),
                false => BarrierVerdict::Unreachable,
            };
            if shared.published.get(id) == Some(&verdict) {
                continue;
            }
            // A daemon that stopped listening is stopping too.
            let _ignored = self.verdicts.send((id.clone(), verdict.clone()));
            shared.published.insert(id.clone(), verdict);
        }
    }

    fn member_key(&self, vm: &str) -> String {
        format!("{}/members/{vm}", self.config.prefix)
    }

    fn fleet_key(&self, vm: &str) -> String {
        format!("{}{vm}", self.fleet_prefix())
    }

    pub(crate) fn fleet_prefix(&self) -> String {
        format!("{}/fleet/", self.config.prefix)
    }

    fn keys(&self, event_id: &str) -> EventKeys {
        let event_prefix = format!("{}/events/{event_id}/", self.config.prefix);
        EventKeys {
            ready: format!("{event_prefix}ready/{}", self.vm),
            was_ready: format!("{event_prefix}was-ready/{}", self.vm),
            leader: format!("{event_prefix}leader"),
            approval: format!("{event_prefix}approval"),
            event_prefix,
        }
    }

    async fn run(self: Arc<Inner>, shutdown: CancellationToken) {
        let mut lease: Option<Lease> = None;
        loop {
            let started = Instant::now();
            let outcome = self.round(&mut lease).await;
            self.record_outcome(outcome, started, lease.as_ref().map(|lease| lease.id));
            let idle = {
                let shared = self.lock();
                shared.events.is_empty() && shared.leaving.is_empty()
            };
            let pause = if idle {
                self.config.lease_ttl / 3
            } else {
                ROUND_EVERY
            };
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = self.task_wake.notified() => {}
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One pass: keep the lease, drop forgotten events, move each event forward.
    async fn round(&self, lease: &mut Option<Lease>) -> Result<(), EtcdError> {
        let lease_id = self.ensure_lease(lease).await?;
        self.release_withdrawn().await?;
        self.release_left().await?;
        let ids: Vec<String> = self.lock().events.keys().cloned().collect();
        for id in ids {
            self.step(&id, lease_id).await?;
        }
        Ok(())
    }

    /// Grants the lease (and registers this VM as a member) or renews it when due.
    async fn ensure_lease(&self, lease: &mut Option<Lease>) -> Result<i64, EtcdError> {
        if let Some(held) = lease.as_mut() {
            if held.renewed_at.elapsed() < self.config.lease_ttl / 3 {
                return Ok(held.id);
            }
            if self.client.keep_alive(held.id).await?.is_some() {
                held.renewed_at = Instant::now();
                return Ok(held.id);
            }
            tracing::warn!(
                lease = held.id,
                "this VM's etcd lease expired (etcd was out of reach for longer than \
                 `coordination.lease-ttl`); recording ready again under a new lease"
            );
            *lease = None;
        }
        let id = self.client.grant_lease(self.config.lease_ttl).await?;
        self.client
            .put(&self.member_key(&self.vm), &self.vm, id)
            .await?;
        *lease = Some(Lease {
            id,
            renewed_at: Instant::now(),
        });
        Ok(id)
    }

    /// Releases the ready key and leadership of events this VM left, once their time came
    /// (a claim stays: its approval may be on its way; it ends with the daemon's lease).
    async fn release_left(&self) -> Result<(), EtcdError> {
        let now = Instant::now();
        let due: Vec<String> = self
            .lock()
            .leaving
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            let keys = self.keys(id);
            let release = [Compare::ValueIs(keys.leader.clone(), self.vm.clone())];
            let outcome = async {
                self.client.delete(&keys.ready).await?;
                self.client
                    .transaction(&release, &[Write::Delete(keys.leader.clone())])
                    .await
            }
            .await;
            // Not released: tried again next round.
            outcome?;
            self.lock().leaving.remove(id);
            tracing::debug!(event_id = %id, "no longer coordinating the event");
        }
        Ok(())
    }

    /// Releases what this VM held for events it is no longer ready for.
    async fn release_withdrawn(&self) -> Result<(), EtcdError> {
        let withdrawn = std::mem::take(&mut self.lock().withdrawn);
        for (index, (id, sent)) in withdrawn.iter().enumerate() {
            let keys = self.keys(id);
            let mine = Compare::ValueIs(keys.leader.clone(), self.vm.clone());
            let mut releases = vec![Write::Delete(keys.leader.clone())];
            if !sent {
                releases.push(Write::Delete(keys.approval.clone()));
            }
            let outcome = async {
                self.client.delete(&keys.ready).await?;
                self.client.transaction(&[mine], &releases).await
            }
            .await;
            if let Err(error) = outcome {
                // Try again next round, with whatever was not released yet.
                self.lock()
                    .withdrawn
                    .extend(withdrawn[index..].iter().cloned());
                return Err(error);
            }
            tracing::info!(event_id = %id, "withdrew this VM's ready record: the event was rescheduled");
        }
        Ok(())
    }

    /// Moves one event forward: record ready, campaign, and — leading — claim the approval
    /// when every VM is ready or the deadline came.
    async fn step(&self, id: &str, lease: i64) -> Result<(), EtcdError> {
        let Some((event, ready_in_lease, claimed)) = self.snapshot(id) else {
            return Ok(());
        };
        let keys = self.keys(id);
        if ready_in_lease != Some(lease) {
            self.record_ready(id, &keys, lease).await?;
        }
        if claimed {
            return self.record_sent(id, &keys).await;
        }
        if self.another_still_leads(id, &keys).await? {
            return Ok(());
        }
        let records = self.client.list(&keys.event_prefix).await?;
        let records = EventRecords::read(&records, &keys.event_prefix);
        let members = self
            .client
            .list(&format!("{}/members/", self.config.prefix))
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
        let standings = barrier::standings(&resources, &view, self.config.dead_vm);
        if let Some((by, by_lease)) = &records.approval {
            let ours = self.written_by_us(id, *by_lease, lease);
            return self.settle_approved(id, by, ours, records.leader, standings);
        }
        let leader = match records.leader {
            Some(leader) => leader,
            None => self.campaign(&keys, lease).await?,
        };
        if leader != self.vm {
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
    async fn another_still_leads(&self, id: &str, keys: &EventKeys) -> Result<bool, EtcdError> {
        let seen = self
            .lock()
            .events
            .get(id)
            .and_then(|tracked| tracked.barrier.leader.clone());
        let Some(seen) = seen.filter(|leader| *leader != self.vm) else {
            return Ok(false);
        };
        let leader = self.client.list(&keys.leader).await?;
        let leader_now = leader
            .iter()
            .find(|kv| kv.key == keys.leader)
            .map(|kv| kv.value.as_str());
        if reads_everything(&self.vm, Some(&seen), leader_now, false) {
            return Ok(false);
        }
        let approval = self.client.list(&keys.approval).await?;
        let claimed = approval.iter().any(|kv| kv.key == keys.approval);
        Ok(!reads_everything(
            &self.vm,
            Some(&seen),
            leader_now,
            claimed,
        ))
    }

    fn snapshot(&self, id: &str) -> Option<(ScheduledEvent, Option<i64>, bool)> {
        let shared = self.lock();
        let tracked = shared.events.get(id)?;
        Some((
            tracked.event.clone(),
            tracked.ready_in_lease,
            tracked.claimed,
        ))
    }

    async fn record_ready(&self, id: &str, keys: &EventKeys, lease: i64) -> Result<(), EtcdError> {
        let record_lease = self.record_lease(id).await?;
        self.client
            .put(&keys.was_ready, &self.vm, record_lease)
            .await?;
        let marker = self
            .lock()
            .events
            .get(id)
            .map(|tracked| ready_marker(&tracked.event))
            .unwrap_or_default();
        self.client.put(&keys.ready, &marker, lease).await?;
        if let Some(tracked) = self.lock().events.get_mut(id) {
            tracked.ready_in_lease = Some(lease);
        }
        tracing::info!(event_id = %id, vm = %self.vm, "{}", log_messages::COORDINATION_READY);
        Ok(())
    }

    /// The lease of this event's lasting records, granted on first use.
    async fn record_lease(&self, id: &str) -> Result<i64, EtcdError> {
        if let Some(lease) = self.lock().events.get(id).and_then(|t| t.record_lease) {
            return Ok(lease);
        }
        let lease = self.client.grant_lease(RECORD_TTL).await?;
        if let Some(tracked) = self.lock().events.get_mut(id) {
            tracked.record_lease = Some(lease);
        }
        Ok(lease)
    }

    /// After the daemon sent the approval: the claim becomes a lasting record, so that a
    /// new leader never approves the event again.
    async fn record_sent(&self, id: &str, keys: &EventKeys) -> Result<(), EtcdError> {
        let due = self
            .lock()
            .events
            .get(id)
            .is_some_and(|tracked| tracked.sent && !tracked.sent_recorded);
        if !due {
            return Ok(());
        }
        let record_lease = self.record_lease(id).await?;
        self.client
            .put(&keys.approval, &self.vm, record_lease)
            .await?;
        if let Some(tracked) = self.lock().events.get_mut(id) {
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
        let event_lease = self.lock().events.get(id).and_then(|t| t.record_lease);
        record_lease == lease || Some(record_lease) == event_lease
    }

    /// An approval record exists. This VM sends the approval only for a claim it wrote
    /// itself in this process's lease (`ours`); a record naming it under another lease (a
    /// forged key, or a claim of a previous run, which expires with that run's lease) is
    /// never acted on.
    fn settle_approved(
        &self,
        id: &str,
        by: &str,
        ours: bool,
        leader: Option<String>,
        standings: Vec<(String, VmStanding)>,
    ) -> Result<(), EtcdError> {
        if by == self.vm && ours {
            let why = format!("this VM claimed the approval of event {id}; sending it");
            self.claimed(id, why);
            return Ok(());
        }
        if by == self.vm {
            tracing::warn!(event_id = %id, vm = %self.vm, "{NOT_OUR_APPROVAL_MESSAGE}");
        }
        let state = format!("approved by {by}");
        self.update(id, leader, standings, state, BarrierVerdict::Wait);
        Ok(())
    }

    /// Creates the leader key if absent; returns the leader.
    async fn campaign(&self, keys: &EventKeys, lease: i64) -> Result<String, EtcdError> {
        let won = self
            .client
            .transaction(
                &[Compare::Absent(keys.leader.clone())],
                &[Write::Put {
                    key: keys.leader.clone(),
                    value: self.vm.clone(),
                    lease,
                }],
            )
            .await?;
        if won {
            return Ok(self.vm.clone());
        }
        let records = self.client.list(&keys.leader).await?;
        Ok(records
            .into_iter()
            .find(|kv| kv.key == keys.leader)
            .map(|kv| kv.value)
            .unwrap_or_default())
    }

    fn note_leading(&self, id: &str) {
        let mut shared = self.lock();
        let Some(tracked) = shared.events.get_mut(id) else {
            return;
        };
        if !tracked.leading {
            tracked.leading = true;
            tracing::info!(event_id = %id, vm = %self.vm, "{}", log_messages::COORDINATION_LEADS);
        }
    }

    /// As the leader: claim the approval when the barrier is down or the deadline came.
    async fn lead(
        &self,
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
            self.config.deadline,
            self.clock.now(),
        );
        if !all_ready && !deadline {
            let state = format!("this VM leads; waiting for {}", waiting.join(", "));
            self.update(
                id,
                Some(self.vm.clone()),
                standings,
                state,
                BarrierVerdict::Wait,
            );
            return Ok(());
        }
        let compares = self.claim_conditions(keys, &standings, all_ready, &ready_marker(event));
        let claim = [Write::Put {
            key: keys.approval.clone(),
            value: self.vm.clone(),
            lease,
        }];
        if !self.client.transaction(&compares, &claim).await? {
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
                humantime::format_duration(self.config.deadline.unwrap_or_default()),
                waiting.join(", ")
            )
        };
        self.update(
            id,
            Some(self.vm.clone()),
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
            Compare::ValueIs(keys.leader.clone(), self.vm.clone()),
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
                    compares.push(Compare::Absent(self.member_key(vm)));
                }
                VmStanding::DeadHolding | VmStanding::NotReady => {}
            }
        }
        compares
    }

    fn claimed(&self, id: &str, why: String) {
        let mut shared = self.lock();
        if let Some(tracked) = shared.events.get_mut(id) {
            tracked.claimed = true;
            tracked.verdict = BarrierVerdict::Approve { why };
        }
        self.publish(&mut shared);
    }

    fn update(
        &self,
        id: &str,
        leader: Option<String>,
        vms: Vec<(String, VmStanding)>,
        state: String,
        verdict: BarrierVerdict,
    ) {
        let mut shared = self.lock();
        let Some(tracked) = shared.events.get_mut(id) else {
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

    /// Tracks the link to etcd, logs each change once, and publishes the status.
    /// Records the outcome of the round that began at `started`.
    fn record_outcome(
        &self,
        outcome: Result<(), EtcdError>,
        started: Instant,
        lease_id: Option<i64>,
    ) {
        let mut shared = self.lock();
        shared.lease_id = lease_id;
        let previous = shared.connection;
        let now = Instant::now();
        // Failing since the start of the first failed round: a round of unanswered requests
        // (2 s a request, every endpoint, then their status) already counts.
        shared.failing_since = match outcome {
            Ok(()) => None,
            Err(_) => Some(shared.failing_since.unwrap_or(started)),
        };
        shared.connection = connection_after(
            previous,
            Connection::of(&outcome),
            shared.failing_since,
            now,
        );
        if let Err(error) = outcome {
            // Settings are named as keys of the config file, e.g. `coordination.endpoints`.
            let error = error.describe("coordination");
            log_fallback(previous, shared.connection, &error);
            shared.last_error = Some(error);
        }
        let changed = shared.connection != previous;
        if changed {
            shared.since_unix_ms = unix_ms(SystemTime::now());
            if previous.falls_back() && !shared.connection.falls_back() {
                tracing::info!("etcd answers again: coordinating events naming several VMs");
            }
            if previous == Connection::Connecting && shared.connection == Connection::Connected {
                tracing::info!(endpoints = %crate::log_fields::list(&self.config.endpoints), "connected to etcd for coordinated approval");
            }
        }
        let status = CoordinationStatus {
            vm_name: self.vm.clone(),
            endpoints: self.config.endpoints.clone(),
            prefix: self.config.prefix.clone(),
            connection: shared.connection,
            fallback: shared.connection.falls_back(),
            endpoint: Some(self.client.preferred_endpoint().to_owned()),
            since_unix_ms: shared.since_unix_ms,
            last_error: shared.last_error.clone(),
            lease_id: shared.lease_id,
            events: shared.events.values().map(|t| t.barrier.clone()).collect(),
        };
        self.publish(&mut shared);
        drop(shared);
        self.status.send_if_modified(|current| {
            let modified = *current != status;
            *current = status;
            modified
        });
    }
}

/// The link after a round whose own outcome is `observed`: a connected coordinator whose
/// rounds began failing less than [`FALL_BACK_AFTER`] ago stays connected (its events wait).
fn connection_after(
    previous: Connection,
    observed: Connection,
    failing_since: Option<Instant>,
    now: Instant,
) -> Connection {
    let Some(since) = failing_since else {
        return observed;
    };
    let passing = now.saturating_duration_since(since) < FALL_BACK_AFTER;
    match previous == Connection::Connected && observed.falls_back() && passing {
        true => Connection::Connected,
        false => observed,
    }
}

/// Logs entering a fallback (once per outage) and a change of its cause.
fn log_fallback(previous: Connection, now: Connection, error: &str) {
    if previous == now {
        return;
    }
    match (previous.falls_back(), now) {
        (false, Connection::NoQuorum) => tracing::warn!(
            %error,
            "{}", log_messages::COORDINATION_NO_QUORUM
        ),
        (false, _) => tracing::warn!(
            %error,
            "etcd cannot be reached: events naming several VMs fall back to the single-VM \
             policy (`policy.group-approval`) until it answers; nothing is approved early \
             because of this"
        ),
        (true, now) => tracing::info!(
            %error,
            connection = now.as_str(),
            "etcd still cannot coordinate; events naming several VMs still follow \
             `policy.group-approval`"
        ),
    }
}

/// What etcd holds about one event.
#[derive(Debug, Default)]
struct EventRecords {
    leader: Option<String>,
    /// Who claimed the approval, and the lease the claim is attached to.
    approval: Option<(String, i64)>,
    /// VM → the NotBefore it is ready for ([`ready_marker`]).
    ready: BTreeMap<String, String>,
    was_ready: BTreeSet<String>,
}

impl EventRecords {
    fn read(records: &[KeyValue], event_prefix: &str) -> EventRecords {
        let mut read = EventRecords::default();
        for record in records {
            let Some(name) = record.key.strip_prefix(event_prefix) else {
                continue;
            };
            match name.split_once('/') {
                Some(("ready", vm)) => {
                    read.ready.insert(vm.to_owned(), record.value.clone());
                }
                Some(("was-ready", vm)) => {
                    read.was_ready.insert(vm.to_owned());
                }
                _ if name == "leader" => read.leader = Some(record.value.clone()),
                _ if name == "approval" => {
                    read.approval = Some((record.value.clone(), record.lease));
                }
                _ => {}
            }
        }
        read
    }

    /// The VMs ready for the event as scheduled at `marker` (a VM still ready for an
    /// earlier NotBefore has not seen the reschedule yet).
    fn ready_for(&self, marker: &str) -> BTreeSet<String> {
        self.ready
            .iter()
            .filter(|(_, ready_for)| ready_for.as_str() == marker)
            .map(|(vm, _)| vm.clone())
            .collect()
    }
}

/// Whether a round over an event must read all of it (every ready and member key) or may
/// stop after the `leader` and `approval` keys. Only the leader needs the others' standings;
/// a VM another VM leads needs to know only that the leader it saw is still there and that
/// nothing is claimed yet. Reading everything on every round made etcd's traffic grow as N²
/// (every waiting VM reading every VM's keys every 200 ms: BENCHMARKS.md, "Fleets").
fn reads_everything(
    me: &str,
    leader_seen: Option<&str>,
    leader_now: Option<&str>,
    approval_claimed: bool,
) -> bool {
    match (leader_seen, leader_now) {
        (Some(seen), Some(now)) if seen == now && seen != me => approval_claimed,
        _ => true,
    }
}

/// What a ready key holds: the NotBefore (ms since the epoch, 0 if none) the VM prepared for.
fn ready_marker(event: &ScheduledEvent) -> String {
    stated_not_before(event)
        .map(unix_ms)
        .unwrap_or(0)
        .to_string()
}

/// NotBefore as IMDS stated it; none when forewarn could not read it (the instant it is
/// read as instead is when this VM first saw the event, which differs from VM to VM, so
/// neither the ready keys nor the deadline may rest on it).
fn stated_not_before(event: &ScheduledEvent) -> Option<SystemTime> {
    match event.unreadable(EventField::NotBefore) {
        Some(_) => None,
        None => event.not_before,
    }
}

fn resources_list(standings: &[(String, VmStanding)]) -> String {
    standings
        .iter()
        .map(|(vm, standing)| match standing {
            VmStanding::DeadCountedReady => format!("{vm} (gone, counted ready)"),
            _ => vm.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;

//! The coordinator as an actor, shaped like the IMDS poller: one task owns all its state
//! (`&mut self`, no lock), takes the pipeline's [`BarrierRequest`]s from a channel, runs a
//! round against etcd every [`ROUND_EVERY`] while events are coordinated
//! (`coordination::etcd_round`), and sends each event's effective verdict to the daemon when
//! it changes, and its status on a watch.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use forewarn_etcd::EtcdError;
use forewarn_imds::{EventId, ImdsClock, ScheduledEvent};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::coordination_status::{
    BarrierState, Connection, CoordinationStatus, EventBarrier, connection_after, log_fallback,
};
use crate::disruption_slots::SlotKeeper;
use crate::etcd_access::EtcdAccess;
use forewarn_imds::unix_ms;
use forewarn_pipeline::approval::{BarrierRequest, BarrierVerdict, applies_to};
use forewarn_pipeline::barrier::{Revision, SharedKey};

/// How often the coordinator reads etcd while events are being coordinated.
pub const ROUND_EVERY: Duration = Duration::from_millis(200);
/// How long after the pipeline left an event (it started, ended or was forgotten) its ready
/// key and leadership are released. Nothing waits on them any more (the event is no longer
/// read each round); they stay a while so that the other VMs' last reads, and `/status`,
/// still show every VM ready around the start. A Withdraw releases at once.
const RELEASED_AFTER_LEAVING: Duration = Duration::from_secs(15);

/// How long the coordinator may take at shutdown to record the approvals this VM sent (a few
/// etcd requests of 2 s at most each, and well within a service manager's stop timeout).
const FINISH_WITHIN: Duration = Duration::from_secs(5);

/// The coordinator's task and everything it owns.
pub(crate) struct Coordinator {
    pub(super) access: Arc<EtcdAccess>,
    /// Now on IMDS's clock (NotBefore's), for the barrier's deadline.
    pub(super) clock: ImdsClock,
    /// The events joined, by id.
    pub(super) events: BTreeMap<EventId, Tracked>,
    /// Events this VM is no longer ready for (rescheduled): keys to release, with what this
    /// VM wrote of the shared ones.
    pub(super) withdrawn: Vec<(EventId, Held)>,
    /// Events this VM left (no longer Scheduled, or handled to the end): keys to release,
    /// each at its instant ([`RELEASED_AFTER_LEAVING`]), with what this VM wrote of the
    /// shared ones (a claim stays: its approval may be on its way).
    pub(super) leaving: BTreeMap<EventId, (Instant, Held)>,
    /// This daemon's lease, once granted.
    pub(super) lease: Option<Lease>,
    /// The disruption budget's claims, when `coordination.disruption-budget` is set.
    pub(super) slots: Option<SlotKeeper>,
    /// The link to etcd and what `/status` shows of it.
    link: LinkState,
    /// The verdict last sent to the daemon, by event.
    published: BTreeMap<EventId, BarrierVerdict>,
    /// The pipeline's requests.
    requests: mpsc::UnboundedReceiver<BarrierRequest>,
    /// Each event's verdict, sent to the daemon whenever it changes.
    verdicts: mpsc::UnboundedSender<(EventId, BarrierVerdict)>,
    status: watch::Sender<CoordinationStatus>,
}

/// The link to etcd as the rounds found it.
struct LinkState {
    connection: Connection,
    since_unix_ms: u64,
    last_error: Option<String>,
    /// When the rounds began failing while connected (None while they succeed).
    failing_since: Option<Instant>,
}

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
    fn new(event: &ScheduledEvent) -> Tracked {
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
}

impl Tracked {
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

/// This daemon's lease and when it was last renewed.
pub(super) struct Lease {
    pub(super) id: i64,
    pub(super) renewed_at: Instant,
}

impl Coordinator {
    /// The actor over `access`, taking `requests`, answering on `verdicts` and `status`.
    pub(super) fn new(
        access: Arc<EtcdAccess>,
        clock: ImdsClock,
        requests: mpsc::UnboundedReceiver<BarrierRequest>,
        verdicts: mpsc::UnboundedSender<(EventId, BarrierVerdict)>,
        status: watch::Sender<CoordinationStatus>,
    ) -> Coordinator {
        Coordinator {
            slots: SlotKeeper::for_config(&access),
            access,
            clock,
            events: BTreeMap::new(),
            withdrawn: Vec::new(),
            leaving: BTreeMap::new(),
            lease: None,
            link: LinkState {
                connection: Connection::default(),
                since_unix_ms: unix_ms(SystemTime::now()),
                last_error: None,
                failing_since: None,
            },
            published: BTreeMap::new(),
            requests,
            verdicts,
            status,
        }
    }

    /// Rounds until `shutdown` (or until the daemon drops its handle): a round, then the
    /// requests that arrived, then a pause (a request cuts it short).
    pub(super) async fn run(mut self, shutdown: CancellationToken) {
        loop {
            let started = Instant::now();
            let outcome = self.round().await;
            self.record_outcome(outcome, started);
            let slots_busy = self.slots.as_ref().is_some_and(SlotKeeper::busy);
            let idle = self.events.is_empty() && self.leaving.is_empty() && !slots_busy;
            let pause = match idle {
                true => self.access.config.lease_ttl / 3,
                false => ROUND_EVERY,
            };
            tokio::select! {
                () = shutdown.cancelled() => {
                    self.finish().await;
                    break;
                }
                request = self.requests.recv() => match request {
                    Some(request) => {
                        self.apply(request);
                        self.take_requests();
                    }
                    None => break,
                },
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// The last step at shutdown (the daemon's loop has returned, its last requests are in
    /// the channel): applies them and records the approvals sent but not yet recorded, within
    /// [`FINISH_WITHIN`]; etcd down, the claim expires with the lease as before.
    async fn finish(&mut self) {
        self.take_requests();
        let recorded = tokio::time::timeout(FINISH_WITHIN, self.record_sent_approvals()).await;
        match recorded {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(
                error = %error.describe("coordination"),
                "stopping: could not record in etcd an approval this VM sent; another VM may \
                 approve the event again once this VM's lease expires (harmless at IMDS)"
            ),
            Err(_) => tracing::warn!(
                "stopping: etcd did not answer within {} s while recording an approval this VM \
                 sent; another VM may approve the event again once this VM's lease expires \
                 (harmless at IMDS)",
                FINISH_WITHIN.as_secs()
            ),
        }
    }

    /// Applies the requests waiting in the channel (between two steps of a round too, so a
    /// Join is answered within one etcd request, not one round).
    pub(super) fn take_requests(&mut self) {
        while let Ok(request) = self.requests.try_recv() {
            self.apply(request);
        }
    }

    /// Applies what the pipeline asks: a Join starts coordinating the event (the next round
    /// records this VM ready and campaigns), a Withdraw or a Leave stops it (releasing its
    /// keys), a Sent has the leader record the approval. The verdict of a joined event is
    /// sent at once (Unreachable while etcd cannot be reached).
    pub(super) fn apply(&mut self, request: BarrierRequest) {
        if let Some(slots) = self.slots.as_mut() {
            let now = self.clock.now();
            match &request {
                BarrierRequest::Join(event) if !applies_to(event, &self.access.vm) => {
                    slots.queue(event, now);
                    self.publish();
                    return;
                }
                BarrierRequest::Occupy(event) => slots.occupy(event),
                BarrierRequest::Recovered(id) => slots.recovered(id),
                BarrierRequest::Withdraw(id) => slots.withdraw(id),
                BarrierRequest::Leave(id) => slots.leave(id),
                BarrierRequest::Join(_) | BarrierRequest::Sent(_) => {}
            }
        }
        match request {
            BarrierRequest::Occupy(_) | BarrierRequest::Recovered(_) => {}
            BarrierRequest::Join(event) => {
                // Joined again before its keys were released: they are this VM's again.
                let held = self.leaving.remove(&event.id).map(|(_, held)| held);
                let tracked = self.events.entry(event.id.clone()).or_insert_with(|| {
                    let mut tracked = Tracked::new(&event);
                    tracked.held = held.unwrap_or_default();
                    tracked
                });
                tracked.event = (*event).clone();
            }
            BarrierRequest::Withdraw(id) => {
                self.published.remove(&id);
                if let Some(tracked) = self.events.remove(&id) {
                    let held = Held {
                        sent: tracked.was_sent(),
                        ..tracked.held
                    };
                    self.withdrawn.push((id, held));
                }
            }
            BarrierRequest::Leave(id) => {
                self.published.remove(&id);
                if let Some(tracked) = self.events.remove(&id) {
                    let release_at = Instant::now() + RELEASED_AFTER_LEAVING;
                    self.leaving.insert(id, (release_at, tracked.held));
                }
            }
            BarrierRequest::Sent(ids) => {
                for id in ids {
                    if let Some(tracked) = self.events.get_mut(&id) {
                        tracked.mark_sent();
                    }
                }
            }
        }
        self.publish();
    }

    /// Sends the daemon each event's verdict that changed since it was last sent: a claim
    /// approves; otherwise, while etcd falls back, Unreachable; otherwise the last read.
    pub(super) fn publish(&mut self) {
        let unreachable = self.link.connection.falls_back();
        for (id, tracked) in &self.events {
            let verdict = match tracked.is_claimed() || !unreachable {
                true => tracked.verdict.clone(),
                false => BarrierVerdict::Unreachable,
            };
            if self.published.get(id) == Some(&verdict) {
                continue;
            }
            // A daemon that stopped listening is stopping too.
            let _ignored = self.verdicts.send((id.clone(), verdict.clone()));
            self.published.insert(id.clone(), verdict);
        }
        let slot_verdicts = self
            .slots
            .as_ref()
            .map(|slots| slots.verdicts(unreachable))
            .unwrap_or_default();
        for (id, verdict) in slot_verdicts {
            if self.published.get(&id) == Some(&verdict) {
                continue;
            }
            let _ignored = self.verdicts.send((id.clone(), verdict.clone()));
            self.published.insert(id, verdict);
        }
    }

    /// Tracks the link to etcd, logs each change once, and publishes the status and the
    /// verdicts. Records the outcome of the round that began at `started`.
    pub(super) fn record_outcome(&mut self, outcome: Result<(), EtcdError>, started: Instant) {
        let link = &mut self.link;
        let previous = link.connection;
        // Failing since the start of the first failed round: a round of unanswered requests
        // (2 s a request, every endpoint, then their status) already counts.
        link.failing_since = match outcome {
            Ok(()) => None,
            Err(_) => Some(link.failing_since.unwrap_or(started)),
        };
        link.connection = connection_after(
            previous,
            Connection::of(&outcome),
            link.failing_since,
            Instant::now(),
        );
        if let Err(error) = outcome {
            // Settings are named as keys of the config file, e.g. `coordination.endpoints`.
            let error = error.describe("coordination");
            log_fallback(previous, link.connection, &error);
            link.last_error = Some(error);
        }
        if link.connection != previous {
            link.since_unix_ms = unix_ms(SystemTime::now());
            if previous.falls_back() && !link.connection.falls_back() {
                tracing::info!("etcd answers again: coordinating events naming several VMs");
            }
            if previous == Connection::Connecting && link.connection == Connection::Connected {
                tracing::info!(endpoints = %forewarn_pipeline::log_fields::list(&self.access.config.endpoints), "connected to etcd for coordinated approval");
            }
        }
        let status = CoordinationStatus {
            vm_name: self.access.vm.clone(),
            endpoints: self.access.config.endpoints.clone(),
            prefix: self.access.config.prefix.clone(),
            connection: link.connection,
            fallback: link.connection.falls_back(),
            endpoint: Some(self.access.client.preferred_endpoint().to_owned()),
            since_unix_ms: link.since_unix_ms,
            last_error: link.last_error.clone(),
            lease_id: self.lease.as_ref().map(|lease| lease.id),
            events: self.events.values().map(|t| t.barrier.clone()).collect(),
            budget: self
                .slots
                .as_ref()
                .map(|slots| slots.status(link.connection.falls_back())),
        };
        self.publish();
        self.status.send_if_modified(|current| {
            let modified = *current != status;
            *current = status;
            modified
        });
    }
}

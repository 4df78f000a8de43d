//! The coordinator as an actor, shaped like the IMDS poller: one task owns all its state
//! (`&mut self`, no lock), takes the pipeline's [`BarrierRequest`]s from a channel, runs a
//! round against etcd every [`ROUND_EVERY`] while events are coordinated (its
//! `EtcdBarrier`, `coordination::etcd_round`, owns what etcd holds of this VM), and sends
//! each event's effective verdict to the daemon when it changes, and its status on a watch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use forewarn_etcd::EtcdError;
use forewarn_imds::{EventId, ImdsClock};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::coordination_status::{Connection, CoordinationStatus, connection_after, log_fallback};
use crate::etcd_access::EtcdAccess;
use crate::etcd_round::EtcdBarrier;
use forewarn_imds::unix_ms;
use forewarn_pipeline::approval::{BarrierRequest, BarrierVerdict};

/// How often the coordinator reads etcd while events are being coordinated.
pub const ROUND_EVERY: Duration = Duration::from_millis(200);
/// How long the coordinator may take at shutdown to record the approvals this VM sent (a few
/// etcd requests of 2 s at most each, and well within a service manager's stop timeout).
const FINISH_WITHIN: Duration = Duration::from_secs(5);

/// The coordinator's task and everything it owns.
pub(crate) struct Coordinator {
    access: Arc<EtcdAccess>,
    /// This VM's side of the barrier in etcd: the events joined, the keys to release, the
    /// lease, the disruption budget's claims.
    pub(super) barrier: EtcdBarrier,
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
            barrier: EtcdBarrier::new(Arc::clone(&access), clock),
            access,
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
            let pause = match self.barrier.is_idle() {
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
        let recorded =
            tokio::time::timeout(FINISH_WITHIN, self.barrier.record_sent_approvals()).await;
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

    /// One pass against etcd: keep the lease, release what this VM left or withdrew, move
    /// each event forward (taking the requests that arrived before each; a claim's verdict is
    /// sent at once), then the disruption budget's claims.
    async fn round(&mut self) -> Result<(), EtcdError> {
        let lease = self.barrier.keep_lease_and_release().await?;
        for id in self.barrier.joined() {
            // A request that arrived meanwhile (a Join, a Withdraw) is applied first.
            self.take_requests();
            if self.barrier.step(&id, lease).await? {
                self.publish();
            }
        }
        self.barrier.budget_round(lease).await
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
        if let Some(left) = self.barrier.apply(request) {
            self.published.remove(&left);
        }
        self.publish();
    }

    /// Sends the daemon each event's verdict that changed since it was last sent: a claim
    /// approves; otherwise, while etcd falls back, Unreachable; otherwise the last read.
    pub(super) fn publish(&mut self) {
        let unreachable = self.link.connection.falls_back();
        for (id, verdict) in self.barrier.verdicts(unreachable) {
            if self.published.get(&id) == Some(&verdict) {
                continue;
            }
            // A daemon that stopped listening is stopping too.
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
            lease_id: self.barrier.lease_id(),
            events: self.barrier.event_barriers(),
            budget: self.barrier.budget_status(link.connection.falls_back()),
        };
        self.publish();
        self.status.send_if_modified(|current| {
            let modified = *current != status;
            *current = status;
            modified
        });
    }
}

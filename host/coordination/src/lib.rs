//! Coordinated approval across VMs: an approval barrier on etcd. Each VM records that it is
//! ready for an event naming several VMs; one elected VM approves once all of them are.
//!
//! Keys (all under `coordination.prefix`, VM names in lower case). Every key that says
//! where a VM stands is in its own subtree `vms/VM/`, so that an etcd role per VM can keep
//! the others out of it; only the election and the claim are shared:
//!
//! | key | value | lease |
//! | --- | --- | --- |
//! | `vms/VM/member` | VM | the daemon's lease: alive while the daemon runs |
//! | `vms/VM/events/ID/ready` | NotBefore it prepared for (ms, 0 = none) | the daemon's lease |
//! | `vms/VM/events/ID/was-ready` | VM | a 24 h record lease: outlives the daemon |
//! | `vms/VM/events/ID/leads` | VM | the daemon's lease; written with `leader`, one revision |
//! | `vms/VM/events/ID/claim` | VM | as `approval`; written with it, one revision |
//! | `events/ID/leader` | VM | the leader's lease: written only if absent (or ignored) |
//! | `events/ID/approval` | VM | the leader's lease while claimed, a record lease once sent |
//! | `fleet/VM` | the VM's status record, JSON ([`fleet_record::FleetRecord`], ≤ 4 KiB) | the daemon's lease |
//!
//! A VM counts ready or alive only from its own subtree, under the lease of its own member
//! key; a shared key only when the VM it names wrote it — for this VM, the revision of its
//! own transaction, kept in memory; for another, its marker of the same revision and lease
//! (`pipeline::barrier::judge_shared`). Other shared keys are ignored, replaced by the next
//! campaign or claim, shown in `/status` and logged once per event and key.
//!
//! The pipeline pushes [`BarrierRequest`]s (join, withdraw, leave, sent) that the event loop
//! hands to [`CoordinatorHandle::request`]; the coordinator, an actor that owns its state
//! (`actor.rs`), runs its rounds against etcd (`etcd_round.rs`) and sends the daemon each
//! event's verdict ([`Verdicts`]) whenever it changes. Nothing is forgotten for want of
//! asking: an event is coordinated from its Join to its Leave or Withdraw. Only the leader,
//! in a transaction that also checks its leadership and every ready key it counted, claims
//! the approval; only a claim makes the verdict `BarrierVerdict::Approve`.

use std::sync::Arc;
use std::time::Duration;

use forewarn_etcd::{EtcdClient, EtcdError};
use forewarn_imds::{EventId, ImdsClock};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use forewarn_pipeline::barrier::{BarrierView, DeadVm, VmStanding};

mod actor;
mod coordination_config;
mod coordination_status;
mod daemon_lease;
mod disruption_slots;
mod etcd_access;
mod etcd_round;
pub mod fleet_impact;
pub mod fleet_reader;
pub mod fleet_record;
mod key_releases;
mod records;
mod tracked_event;

pub use actor::ROUND_EVERY;
pub use coordination_config::{CoordinationConfig, MAX_COORDINATION_DURATION};
pub use coordination_status::{BarrierState, Connection, CoordinationStatus, EventBarrier};
pub use disruption_slots::{BudgetStatus, QueuedEvent, SlotHolder};
pub use tracked_event::IGNORED_KEY_MESSAGE;

use actor::Coordinator;
use etcd_access::EtcdAccess;
use forewarn_pipeline::approval::{BarrierRequest, BarrierVerdict};

/// The coordinator could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum CoordinationError {
    /// The `[coordination]` section is not usable (the error names the key).
    #[error("[coordination]: {0}")]
    Setup(#[from] forewarn_pipeline::setting_error::SettingError),
    /// The etcd client could not be built (its settings or TLS files).
    #[error("[coordination]: {}", .0.describe("coordination"))]
    Client(#[from] EtcdError),
}

/// The verdicts of the barrier, by event, each sent when it changes.
pub type Verdicts = mpsc::UnboundedReceiver<(EventId, BarrierVerdict)>;

/// What the daemon holds of the coordinator: the channel its requests go in, the watch its
/// status comes out of, and the etcd access the fleet tasks share. Cheap to clone; the
/// coordinator stops when the last handle is dropped or at shutdown.
#[derive(Clone)]
pub struct CoordinatorHandle {
    requests: mpsc::UnboundedSender<BarrierRequest>,
    status: watch::Receiver<CoordinationStatus>,
    access: Arc<EtcdAccess>,
}

/// Builds the etcd client and starts the coordinator (it stops with `shutdown`, after its
/// last step: await the [`CoordinatorTask`]). etcd need
/// not be reachable yet: until it is, verdicts fall back to the policy. `clock` is IMDS's,
/// which NotBefore is on: the barrier's deadline is planned on it.
pub fn spawn(
    config: &CoordinationConfig,
    vm_name: &str,
    clock: ImdsClock,
    shutdown: CancellationToken,
) -> Result<(CoordinatorHandle, Verdicts, CoordinatorTask), CoordinationError> {
    config.validate()?;
    let client = EtcdClient::connect(&config.etcd_settings())?;
    let vm = vm_name.to_ascii_lowercase();
    let status = CoordinationStatus {
        vm_name: vm.clone(),
        endpoints: config.endpoints.clone(),
        prefix: config.prefix.clone(),
        ..CoordinationStatus::default()
    };
    let access = Arc::new(EtcdAccess {
        config: config.clone(),
        vm,
        client,
    });
    let (requests_tx, requests) = mpsc::unbounded_channel();
    let (verdicts_tx, verdicts) = mpsc::unbounded_channel();
    let (status_tx, status) = watch::channel(status);
    let coordinator = Coordinator::new(access.clone(), clock, requests, verdicts_tx, status_tx);
    let task = CoordinatorTask(tokio::spawn(coordinator.run(shutdown)));
    let handle = CoordinatorHandle {
        requests: requests_tx,
        status,
        access,
    };
    Ok((handle, verdicts, task))
}

/// How long the daemon waits at shutdown for the coordinator to stop: a round in progress
/// (2 s a request) and its last step (`actor::FINISH_WITHIN`).
const STOPPED_WITHIN: Duration = Duration::from_secs(15);

/// The coordinator's task. The daemon cancels its token once the event loop has returned
/// and awaits it, so that its last step (recording in etcd the approvals sent while the loop
/// was stopping) runs before the process exits.
pub struct CoordinatorTask(JoinHandle<()>);

impl CoordinatorTask {
    /// Waits for the coordinator to stop (its token cancelled), at most [`STOPPED_WITHIN`].
    pub async fn stopped(self) {
        if tokio::time::timeout(STOPPED_WITHIN, self.0).await.is_err() {
            tracing::warn!(
                "stopping: the coordinator did not stop within {} s (etcd slow to answer); \
                 exiting without waiting longer",
                STOPPED_WITHIN.as_secs()
            );
        }
    }
}

impl CoordinatorHandle {
    /// A handle on the caller's own channels, with no coordinator behind it: a test plays
    /// the etcd side, reading the requests from the other end of `requests`, sending
    /// verdicts on the [`Verdicts`] it gives the daemon, and setting `status`. Its etcd
    /// access names an endpoint nothing listens on; only the fleet tasks would use it.
    /// With the `harness` feature (the daemon's tests).
    #[cfg(feature = "harness")]
    pub fn from_channels(
        vm_name: &str,
        requests: mpsc::UnboundedSender<BarrierRequest>,
        status: watch::Receiver<CoordinationStatus>,
    ) -> CoordinatorHandle {
        let config: CoordinationConfig = toml::from_str("endpoints = [\"http://127.0.0.1:9\"]")
            .expect("a [coordination] section with one endpoint parses");
        let client = EtcdClient::connect(&config.etcd_settings())
            .expect("an etcd client for a plain http:// endpoint builds");
        let access = Arc::new(EtcdAccess {
            config,
            vm: vm_name.to_ascii_lowercase(),
            client,
        });
        CoordinatorHandle {
            requests,
            status,
            access,
        }
    }

    /// Hands the coordinator what the pipeline asks ([`BarrierRequest`]); its verdicts come
    /// back on the [`Verdicts`] that [`spawn`] returned.
    pub fn request(&self, request: BarrierRequest) {
        if self.requests.send(request).is_err() {
            tracing::error!(
                "the etcd coordinator stopped; events naming several VMs are no longer \
                 coordinated; this is a bug in forewarn"
            );
        }
    }

    /// Whether `coordination.disruption-budget` is set: early approvals of events naming only
    /// this VM wait for a slot.
    pub fn keeps_a_disruption_budget(&self) -> bool {
        self.access.config.disruption_budget.is_some()
    }

    /// The coordination status as of the last round.
    pub fn status(&self) -> CoordinationStatus {
        self.status.borrow().clone()
    }

    /// Follows the coordination status (for the status page).
    pub fn subscribe(&self) -> watch::Receiver<CoordinationStatus> {
        self.status.clone()
    }

    /// Publishes this VM's fleet record from `records` under the daemon's lease
    /// (`fleet/VM`, see [`fleet_record`]) until `shutdown`.
    pub fn publish_fleet_record(
        &self,
        records: watch::Receiver<Option<fleet_record::FleetRecord>>,
        shutdown: CancellationToken,
    ) {
        let status = self.status.clone();
        fleet_record::spawn_publisher(self.access.clone(), status, records, shutdown);
    }

    /// Reads every VM's fleet record for `/status/fleet` (see [`fleet_reader`]).
    pub fn fleet_reader(&self) -> fleet_reader::FleetReader {
        fleet_reader::FleetReader::new(self.access.clone())
    }
}

#[cfg(test)]
mod tests;

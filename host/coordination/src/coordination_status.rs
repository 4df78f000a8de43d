//! What the coordinator says about itself: the link to etcd ([`Connection`], with the rule
//! of when a connected coordinator falls back, [`connection_after`]) and the view `/status`
//! shows ([`CoordinationStatus`], one [`EventBarrier`] per event).

use std::time::{Duration, Instant};

use forewarn_etcd::EtcdError;
use serde::{Deserialize, Serialize};

use forewarn_imds::EventId;

use crate::disruption_slots::BudgetStatus;
use forewarn_pipeline::barrier::VmStanding;
use forewarn_pipeline::log_messages;

/// How long the rounds of a connected coordinator may fail (from the start of the first
/// failed round) before its events fall back to the single-VM policy: a cluster electing a
/// new leader (a member died) answers every request "leader changed" or "no leader" for
/// about a second; that is no reason to approve alone. Meanwhile events wait.
pub(super) const FALL_BACK_AFTER: Duration = Duration::from_secs(3);

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

    pub(super) fn of(outcome: &Result<(), EtcdError>) -> Connection {
        match outcome {
            Ok(()) => Connection::Connected,
            Err(EtcdError::NoQuorum { .. }) => Connection::NoQuorum,
            Err(_) => Connection::Unreachable,
        }
    }
}

/// What `/status` shows about coordination (see `CoordinatorHandle::status`).
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
    /// The fleet's disruption budget as this VM last read it, when one is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetStatus>,
}

/// One event on the barrier, as this VM last read it from etcd. In JSON (`/status`) its
/// [`BarrierState`] is both `stage` (typed, what a reader of the JSON decodes) and `state`
/// (its line, what the status page shows).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "EventBarrierJson", from = "EventBarrierJson")]
pub struct EventBarrier {
    /// The event's `EventId`.
    pub event_id: EventId,
    /// The VM that holds the event's election, once one does.
    pub leader: Option<String>,
    /// Each VM named in Resources with where it stands.
    pub vms: Vec<(String, VmStanding)>,
    /// Where the event stands on the barrier.
    pub state: BarrierState,
    /// The event's shared keys (`leader`, `approval`) found there but not obeyed, one line
    /// each: what they name and why (the VM named did not write them).
    pub ignored: Vec<String>,
}

/// Where an event stands on the barrier, as this VM last read it; its line (`Display`):
/// "this VM leads; waiting for vm-c", "vm-b leads; waiting for it to approve", "approved by
/// vm-a".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum BarrierState {
    /// This VM is writing that it is ready (before its first read of the event).
    #[default]
    RecordingReady,
    /// No VM holds the election yet.
    Electing,
    /// This VM leads, and these VMs are not ready yet.
    ThisVmLeads {
        /// The VMs named in Resources that are not ready.
        waiting: Vec<String>,
    },
    /// This VM leads and claims the approval (everyone is ready, or the deadline came).
    ThisVmApproves,
    /// Another VM leads; the approval is its to claim.
    OtherLeads {
        /// The leader.
        leader: String,
    },
    /// Another VM claimed the approval.
    ApprovedBy {
        /// The VM whose claim is in etcd.
        vm: String,
    },
    /// This VM claimed the approval, sent it, and recorded it in etcd.
    ApprovedByThisVm,
}

impl std::fmt::Display for BarrierState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BarrierState::RecordingReady => f.write_str("recording ready in etcd"),
            BarrierState::Electing => f.write_str("electing a leader"),
            BarrierState::ThisVmLeads { waiting } => {
                write!(f, "this VM leads; waiting for {}", waiting.join(", "))
            }
            BarrierState::ThisVmApproves => f.write_str("approving: this VM leads"),
            BarrierState::OtherLeads { leader } => {
                write!(f, "{leader} leads; waiting for it to approve")
            }
            BarrierState::ApprovedBy { vm } => write!(f, "approved by {vm}"),
            BarrierState::ApprovedByThisVm => f.write_str("approved by this VM"),
        }
    }
}

/// [`EventBarrier`] in JSON: the state twice, typed (`stage`, read back) and as its line
/// (`state`, written for the status page and people; ignored when read).
#[derive(Serialize, Deserialize)]
struct EventBarrierJson {
    event_id: EventId,
    leader: Option<String>,
    vms: Vec<(String, VmStanding)>,
    #[serde(default, skip_deserializing)]
    state: String,
    #[serde(default)]
    stage: BarrierState,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ignored: Vec<String>,
}

impl From<EventBarrier> for EventBarrierJson {
    fn from(barrier: EventBarrier) -> EventBarrierJson {
        EventBarrierJson {
            event_id: barrier.event_id,
            leader: barrier.leader,
            vms: barrier.vms,
            state: barrier.state.to_string(),
            stage: barrier.state,
            ignored: barrier.ignored,
        }
    }
}

impl From<EventBarrierJson> for EventBarrier {
    fn from(json: EventBarrierJson) -> EventBarrier {
        EventBarrier {
            event_id: json.event_id,
            leader: json.leader,
            vms: json.vms,
            state: json.stage,
            ignored: json.ignored,
        }
    }
}

/// The link after a round whose own outcome is `observed`: a connected coordinator whose
/// rounds began failing less than [`FALL_BACK_AFTER`] ago stays connected (its events wait).
pub(super) fn connection_after(
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
pub(super) fn log_fallback(previous: Connection, now: Connection, error: &str) {
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

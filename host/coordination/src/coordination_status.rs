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

/// One event on the barrier, as this VM last read it from etcd.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventBarrier {
    /// The event's `EventId`.
    pub event_id: EventId,
    /// The VM that holds the event's election, once one does.
    pub leader: Option<String>,
    /// Each VM named in Resources with where it stands.
    pub vms: Vec<(String, VmStanding)>,
    /// One line: "waiting for vm-c", "approving: this VM leads", "approved by vm-a".
    pub state: String,
    /// The event's shared keys (`leader`, `approval`) found there but not obeyed, one line
    /// each: what they name and why (the VM named did not write them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
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

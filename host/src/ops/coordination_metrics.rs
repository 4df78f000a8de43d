//! The etcd barrier's metrics (`[coordination]`): whether events naming several VMs fall back
//! to `policy.group-approval`, and the state of the link to etcd. Registered with the other
//! metrics ([`crate::ops::metrics`]); fed from the coordinator's status.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::coordination::{Connection, CoordinationStatus};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// The coordination gauges (clones share them).
#[derive(Clone, Default)]
pub(crate) struct CoordinationMetrics {
    fallback: Gauge,
    connection: Family<StateLabel, Gauge>,
}

impl CoordinationMetrics {
    /// Registers the gauges under `registry`'s prefix (`forewarn_`).
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "coordination_fallback",
            "1 while events naming several VMs are decided by policy.group-approval because \
             etcd cannot be reached or has lost its quorum, else 0",
            self.fallback.clone(),
        );
        registry.register(
            "coordination_connection",
            "The link to etcd: 1 for its current state (connecting, connected, unreachable, \
             no-quorum), 0 for the others; only with [coordination]",
            self.connection.clone(),
        );
    }

    /// Sets the gauges from the coordinator's status.
    pub(crate) fn record(&self, status: &CoordinationStatus) {
        self.fallback.set(i64::from(status.fallback));
        for state in Connection::ALL {
            self.connection
                .get_or_create(&StateLabel {
                    state: state.as_str(),
                })
                .set(i64::from(state == status.connection));
        }
    }
}

/// Keeps the coordination gauges up to date with `status` until `shutdown`.
pub(crate) fn spawn_collector(
    metrics: CoordinationMetrics,
    mut status: watch::Receiver<CoordinationStatus>,
    shutdown: CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            let now = status.borrow_and_update().clone();
            metrics.record(&now);
            tokio::select! {
                () = shutdown.cancelled() => return,
                changed = status.changed() => if changed.is_err() { return },
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_quorum_sets_fallback_and_names_the_state() {
        let metrics = CoordinationMetrics::default();
        let mut registry = Registry::with_prefix("forewarn");
        metrics.register(&mut registry);
        metrics.record(&CoordinationStatus {
            connection: Connection::NoQuorum,
            fallback: true,
            ..CoordinationStatus::default()
        });
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.lines()
                .any(|l| l == "forewarn_coordination_fallback 1"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l == "forewarn_coordination_connection{state=\"no-quorum\"} 1"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l == "forewarn_coordination_connection{state=\"connected\"} 0"),
            "{text}"
        );
    }
}

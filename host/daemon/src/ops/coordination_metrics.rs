//! The etcd barrier's metrics (`[coordination]`): whether events naming several VMs fall back
//! to `policy.group-approval`, the state of the link to etcd, and the disruption budget of
//! this VM's group (slots, slots in use, this VM's events waiting and the earliest NotBefore
//! among them). Registered with the other metrics ([`crate::ops::metrics`]); fed from the
//! coordinator's status.

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
    budget_slots: Gauge,
    slots_in_use: Gauge,
    waiting: Gauge,
    waiting_not_before: Gauge,
    approving_alone: Gauge,
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
        registry.register(
            "disruption_budget_slots",
            "The slots the disruption budget gives this VM's group now \
             (coordination.disruption-budget over the VMs known in the group); 0 without one",
            self.budget_slots.clone(),
        );
        registry.register(
            "disruption_slots_in_use",
            "Slots of this VM's group held now: VMs approved early and not recovered yet (as \
             this VM last read etcd)",
            self.slots_in_use.clone(),
        );
        registry.register(
            "disruption_waiting",
            "This VM's events whose early approval waits for a slot of the disruption budget",
            self.waiting.clone(),
        );
        registry.register(
            "disruption_waiting_not_before_timestamp_seconds",
            "The earliest NotBefore (Unix seconds) of this VM's events waiting for a slot; 0 \
             when none waits (at NotBefore Azure starts the event anyway)",
            self.waiting_not_before.clone(),
        );
        registry.register(
            "disruption_approving_alone",
            "1 while events waiting for a slot are approved without one (etcd unreachable and \
             coordination.budget-unreachable = \"approve-alone\"), else 0",
            self.approving_alone.clone(),
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
        let Some(budget) = &status.budget else {
            return;
        };
        let slots = i64::try_from(budget.slots).unwrap_or(i64::MAX);
        self.budget_slots.set(slots);
        self.slots_in_use
            .set(i64::try_from(budget.in_use).unwrap_or(i64::MAX));
        let mine: Vec<_> = budget
            .queue
            .iter()
            .filter(|queued| queued.vm == status.vm_name)
            .collect();
        self.waiting
            .set(i64::try_from(mine.len()).unwrap_or(i64::MAX));
        let earliest = mine
            .iter()
            .filter_map(|queued| queued.not_before_unix_ms)
            .min()
            .map_or(0, |ms| i64::try_from(ms / 1000).unwrap_or(i64::MAX));
        self.waiting_not_before.set(earliest);
        self.approving_alone.set(i64::from(budget.approving_alone));
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

    #[test]
    fn the_budget_gauges_count_the_slots_and_this_vms_waiting_events() {
        use crate::coordination::{BudgetStatus, QueuedEvent};
        let metrics = CoordinationMetrics::default();
        let mut registry = Registry::with_prefix("forewarn");
        metrics.register(&mut registry);
        let queued = |vm: &str, at: u64| QueuedEvent {
            vm: vm.into(),
            event_id: format!("{vm}-{at}"),
            not_before_unix_ms: Some(at),
        };
        metrics.record(&CoordinationStatus {
            vm_name: "vm-a".into(),
            budget: Some(BudgetStatus {
                slots: 2,
                in_use: 2,
                queue: vec![
                    queued("vm-b", 1_000_000),
                    queued("vm-a", 9_000_000),
                    queued("vm-a", 5_000_000),
                ],
                ..BudgetStatus::default()
            }),
            ..CoordinationStatus::default()
        });
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "forewarn_disruption_budget_slots 2",
            "forewarn_disruption_slots_in_use 2",
            "forewarn_disruption_waiting 2",
            "forewarn_disruption_waiting_not_before_timestamp_seconds 5000",
            "forewarn_disruption_approving_alone 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}: {text}");
        }
    }
}

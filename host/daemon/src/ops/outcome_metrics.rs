//! The outcome records' metrics: `forewarn_event_impact_seconds` (the impact measured from
//! inside the VM, by event type) and `forewarn_event_preparations_total` (prepared in time,
//! late, not prepared, nothing to prepare). Registered with the other metrics
//! ([`crate::ops::metrics`]); fed by the outcome keeper when an event is over. Labels are
//! bounded: the known event types (anything else is `Unknown`) and the preparation kinds.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::pipeline::outcome::ClosedOutcome;
use crate::pipeline::outcome::verdict::PreparationOutcome;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventTypeLabel {
    event_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PreparationLabel {
    preparation: &'static str,
}

/// Impact buckets, in seconds: a Freeze's fraction of a second to a Redeploy's minutes.
const IMPACT_BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];

/// The outcome metrics (clones share them).
#[derive(Clone)]
pub(crate) struct OutcomeMetrics {
    impact: Family<EventTypeLabel, Histogram>,
    preparations: Family<PreparationLabel, Counter>,
}

impl Default for OutcomeMetrics {
    fn default() -> Self {
        let metrics = OutcomeMetrics {
            impact: Family::new_with_constructor(|| Histogram::new(IMPACT_BUCKETS.iter().copied())),
            preparations: Family::default(),
        };
        // Every kind shows from the start, at 0, so a rate() over them is defined.
        for preparation in PreparationOutcome::FINAL_LABELS {
            let _created = metrics
                .preparations
                .get_or_create(&PreparationLabel { preparation });
        }
        metrics
    }
}

impl OutcomeMetrics {
    /// Registers the metrics under `registry`'s prefix (`forewarn_`).
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "event_impact_seconds",
            "The impact of each event that ended, measured from inside the VM: a Freeze's pause \
             (largest heartbeat gap), a Reboot's or Redeploy's downtime (last heartbeat to the \
             daemon's start in a new boot); 0 when no pause was seen; events not measured are \
             not counted",
            self.impact.clone(),
        );
        registry.register(
            "event_preparations",
            "Events that ended, by how preparation went: in-time (every plugin approved before \
             NotBefore), late, not-prepared (it started first), not-needed (no plugin asked)",
            self.preparations.clone(),
        );
    }

    /// Counts an event that is over.
    pub(crate) fn record(&self, closed: &ClosedOutcome) {
        if let Some(seconds) = closed.impact_seconds {
            self.impact
                .get_or_create(&EventTypeLabel {
                    event_type: closed.event_type.as_wire(),
                })
                .observe(seconds);
        }
        let preparation = closed.preparation.as_str();
        if preparation != PreparationOutcome::Pending.as_str() {
            self.preparations
                .get_or_create(&PreparationLabel { preparation })
                .inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use forewarn_imds::EventType;

    use super::*;

    fn encoded(metrics: &OutcomeMetrics) -> String {
        let mut registry = Registry::with_prefix("forewarn");
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn an_ended_freeze_counts_its_pause_and_its_preparation() {
        let metrics = OutcomeMetrics::default();
        metrics.record(&ClosedOutcome {
            event_type: EventType::Freeze,
            impact_seconds: Some(3.2),
            preparation: PreparationOutcome::InTime {
                before_ms: Some(41_000),
            },
        });
        metrics.record(&ClosedOutcome {
            event_type: EventType::Reboot,
            impact_seconds: None,
            preparation: PreparationOutcome::NotPrepared,
        });
        let text = encoded(&metrics);
        assert!(
            text.contains("forewarn_event_impact_seconds_sum{event_type=\"Freeze\"} 3.2"),
            "{text}"
        );
        assert!(
            text.contains("forewarn_event_impact_seconds_count{event_type=\"Freeze\"} 1"),
            "{text}"
        );
        assert!(
            !text.contains("event_type=\"Reboot\""),
            "not measured: {text}"
        );
        assert!(
            text.contains("forewarn_event_preparations_total{preparation=\"in-time\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("forewarn_event_preparations_total{preparation=\"not-prepared\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("forewarn_event_preparations_total{preparation=\"late\"} 0"),
            "{text}"
        );
    }
}

//! Prometheus metrics for `GET /metrics`: counters fed from the timeline, the poller's
//! status and the plugin set. Labels are bounded: plugin names, kinds, never event ids.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use forewarn_imds::PollStatus;
use forewarn_runtime::Readiness;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::ops::coordination_metrics::CoordinationMetrics;
use crate::ops::outcome_metrics::OutcomeMetrics;
use crate::pipeline::timeline::TimelineEntry;
use crate::plugins::set::PluginSet;
use crate::storage_health::StorageHealth;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabels {
    event_type: String,
    transition: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    plugin: String,
    phase: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ShutdownOutcomeLabel {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabel {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FieldLabel {
    field: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HealthStateLabel {
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: String,
}

/// Plugin call latency buckets, in seconds: 1 ms to the default 10 s budget and beyond.
const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// Every metric forewarn exports, and the registry that encodes them.
pub(crate) struct Metrics {
    registry: Registry,
    polls: Counter,
    poll_errors: Family<KindLabel, Counter>,
    documents: Counter,
    consecutive_poll_failures: Gauge,
    transitions: Family<TransitionLabels, Counter>,
    plugin_calls: Family<CallLabels, Counter>,
    call_latency: Family<PluginLabel, Histogram>,
    approvals: Counter,
    approval_failures: Counter,
    not_approved: Counter,
    turns_shortened: Counter,
    host_shutdowns: Family<ShutdownOutcomeLabel, Counter>,
    host_shutdown_preparation: Histogram,
    late_preparations: Counter,
    events_finished: Counter,
    reloads: Counter,
    load_failures: Counter,
    plugins_loaded: Gauge,
    plugin_load_errors: Gauge,
    events_current: Gauge,
    ready: Gauge,
    /// Probers of `/readyz` in the last minute, and drains no prober saw.
    readyz_probers: Gauge,
    drains_without_probes: Counter,
    /// `/health/scale-set`'s state (1 on the current one) and its reasons (1 while one holds).
    scale_set_health: Family<HealthStateLabel, Gauge>,
    scale_set_unhealthy: Family<ReasonLabel, Gauge>,
    timeline_missed: Counter,
    quarantines: Family<PluginLabel, Counter>,
    quarantined: Family<PluginLabel, Gauge>,
    /// The etcd barrier's gauges (`[coordination]`).
    pub(crate) coordination: CoordinationMetrics,
    /// The outcome records' impact and preparation counts (`outcome_metrics.rs`).
    pub(crate) outcomes: OutcomeMetrics,
    storage: StorageMetrics,
    /// What IMDS sends and forewarn cannot read, and IMDS's clock (`record_imds_reading`).
    unreadable: Family<FieldLabel, Counter>,
    clock_offset: Gauge<f64, std::sync::atomic::AtomicU64>,
    unchanged_documents: Counter,
}

/// The state directory's metrics (docs/operations.md, "When the disk is full"), brought up
/// to date from the `StorageHealth` at each scrape.
#[derive(Default)]
struct StorageMetrics {
    journal_writable: Gauge,
    journal_write_failures: Counter,
    journal_reserve_bytes: Gauge,
    journal_syncs: Counter,
    journal_written_bytes: Counter,
    plugin_state_writable: Gauge,
    plugin_state_write_failures: Counter,
    plugin_state_refused: Family<PluginLabel, Counter>,
    plugin_state_syncs: Counter,
    plugin_state_written_bytes: Counter,
}

impl StorageMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "journal_writable",
            "1 while the journal's commits reach the disk, 0 while they fail (early approvals \
             wait meanwhile)",
            self.journal_writable.clone(),
        );
        registry.register(
            "journal_write_failures",
            "Journal commits that failed (full, read-only or failing disk); retried with backoff",
            self.journal_write_failures.clone(),
        );
        registry.register(
            "journal_reserve_bytes",
            "Bytes set aside beyond the journal's change log for a full disk",
            self.journal_reserve_bytes.clone(),
        );
        registry.register(
            "journal_syncs",
            "fsync and fdatasync calls the journal made",
            self.journal_syncs.clone(),
        );
        registry.register(
            "journal_written_bytes",
            "Bytes the journal wrote (change log lines and snapshots)",
            self.journal_written_bytes.clone(),
        );
        registry.register(
            "plugin_state_writable",
            "1 while plugins' state writes reach the disk, 0 while they fail",
            self.plugin_state_writable.clone(),
        );
        registry.register(
            "plugin_state_write_failures",
            "Plugin state writes that failed on the disk",
            self.plugin_state_write_failures.clone(),
        );
        registry.register(
            "plugin_state_writes_refused",
            "Plugin state writes refused over the plugin's disk write budget, by plugin",
            self.plugin_state_refused.clone(),
        );
        registry.register(
            "plugin_state_syncs",
            "fsync calls made for plugin state (the file and its directory per write)",
            self.plugin_state_syncs.clone(),
        );
        registry.register(
            "plugin_state_written_bytes",
            "Bytes written for plugin state",
            self.plugin_state_written_bytes.clone(),
        );
    }

    fn update(&self, health: &StorageHealth) {
        let journal = health.journal();
        self.journal_writable.set(i64::from(journal.durable));
        raise(&self.journal_write_failures, journal.write_failures);
        self.journal_reserve_bytes
            .set(i64::try_from(journal.reserve_left).unwrap_or(i64::MAX));
        raise(&self.journal_syncs, journal.syncs);
        raise(&self.journal_written_bytes, journal.bytes);
        let plugin_state = health.plugin_state();
        self.plugin_state_writable
            .set(i64::from(plugin_state.writable));
        raise(
            &self.plugin_state_write_failures,
            plugin_state.write_failures,
        );
        for (plugin, refused) in &plugin_state.refused_over_budget {
            let label = PluginLabel {
                plugin: plugin.clone(),
            };
            raise(&self.plugin_state_refused.get_or_create(&label), *refused);
        }
        raise(&self.plugin_state_syncs, plugin_state.syncs);
        raise(&self.plugin_state_written_bytes, plugin_state.bytes);
    }
}

/// Brings `counter` up to `total` (a total kept elsewhere).
fn raise(counter: &Counter, total: u64) {
    counter.inc_by(total.saturating_sub(counter.get()));
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric under the `forewarn_` prefix.
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("forewarn");
        let build_info = Family::<VersionLabel, Gauge>::default();
        build_info
            .get_or_create(&VersionLabel {
                version: env!("CARGO_PKG_VERSION").to_owned(),
            })
            .set(1);
        registry.register("build_info", "forewarn's version (always 1)", build_info);
        let metrics = Metrics {
            polls: Counter::default(),
            poll_errors: Family::default(),
            documents: Counter::default(),
            consecutive_poll_failures: Gauge::default(),
            transitions: Family::default(),
            plugin_calls: Family::default(),
            call_latency: Family::new_with_constructor(|| {
                Histogram::new(LATENCY_BUCKETS.iter().copied())
            }),
            approvals: Counter::default(),
            approval_failures: Counter::default(),
            not_approved: Counter::default(),
            turns_shortened: Counter::default(),
            host_shutdowns: Family::default(),
            host_shutdown_preparation: Histogram::new(LATENCY_BUCKETS.iter().copied()),
            late_preparations: Counter::default(),
            events_finished: Counter::default(),
            reloads: Counter::default(),
            load_failures: Counter::default(),
            plugins_loaded: Gauge::default(),
            plugin_load_errors: Gauge::default(),
            events_current: Gauge::default(),
            ready: Gauge::default(),
            readyz_probers: Gauge::default(),
            drains_without_probes: Counter::default(),
            scale_set_health: Family::default(),
            scale_set_unhealthy: Family::default(),
            timeline_missed: Counter::default(),
            quarantines: Family::default(),
            quarantined: Family::default(),
            coordination: CoordinationMetrics::default(),
            outcomes: OutcomeMetrics::default(),
            storage: StorageMetrics::default(),
            unreadable: Family::default(),
            clock_offset: Gauge::default(),
            unchanged_documents: Counter::default(),
            registry: Registry::default(),
        };
        metrics.register_all(registry)
    }

    fn register_all(mut self, mut registry: Registry) -> Metrics {
        registry.register(
            "imds_polls",
            "IMDS Scheduled Events requests made, successful or not",
            self.polls.clone(),
        );
        registry.register("imds_poll_errors", "Failed IMDS polls by kind (gone, throttled, server, transport, timeout, malformed, status)", self.poll_errors.clone());
        registry.register(
            "imds_documents",
            "Scheduled Events documents fetched and parsed",
            self.documents.clone(),
        );
        registry.register(
            "imds_consecutive_failures",
            "Failed IMDS polls since the last success",
            self.consecutive_poll_failures.clone(),
        );
        registry.register(
            "event_transitions",
            "Event transitions seen, by event type and transition",
            self.transitions.clone(),
        );
        registry.register("plugin_calls", "Plugin calls by plugin, phase and outcome (approve, defer, budget-exceeded, trap, memory-exceeded, ...)", self.plugin_calls.clone());
        registry.register(
            "plugin_call_duration_seconds",
            "Plugin call latency by plugin",
            self.call_latency.clone(),
        );
        registry.register(
            "approvals",
            "Events approved at IMDS (each event of an accepted approval counts once)",
            self.approvals.clone(),
        );
        registry.register(
            "approval_failures",
            "Approval requests IMDS did not accept (retried)",
            self.approval_failures.clone(),
        );
        registry.register(
            "events_not_approved",
            "Events every plugin approved but no approval was sent (policy, dry run, deadline)",
            self.not_approved.clone(),
        );
        registry.register(
            "plugin_turns_shortened",
            "Plugins that started preparing before those they run after approved, so that the \
             chain fits before NotBefore (short notice)",
            self.turns_shortened.clone(),
        );
        registry.register(
            "host_shutdowns",
            "Operating system shutdowns with no Scheduled Event held back for the plugins, by \
             how they were let go on (prepared, already-prepared, budget-spent)",
            self.host_shutdowns.clone(),
        );
        registry.register(
            "host_shutdown_preparation_seconds",
            "From the operating system's shutdown notice to its release",
            self.host_shutdown_preparation.clone(),
        );
        registry.register(
            "events_prepared_late",
            "Events whose NotBefore minus the safety margin passed before every plugin approved",
            self.late_preparations.clone(),
        );
        registry.register(
            "events_finished",
            "Events whose handling is complete",
            self.events_finished.clone(),
        );
        registry.register(
            "plugin_reloads",
            "Plugin sets published after the first (reloads)",
            self.reloads.clone(),
        );
        registry.register(
            "plugin_load_failures",
            "Plugin files that failed to load (each new failure counts once)",
            self.load_failures.clone(),
        );
        registry.register(
            "plugins_loaded",
            "Plugins currently loaded",
            self.plugins_loaded.clone(),
        );
        registry.register(
            "plugin_load_errors",
            "Plugin files currently failing to load",
            self.plugin_load_errors.clone(),
        );
        registry.register(
            "events_current",
            "Scheduled events currently being handled",
            self.events_current.clone(),
        );
        registry.register(
            "ready",
            "1 while no plugin holds the VM out of rotation, else 0",
            self.ready.clone(),
        );
        registry.register(
            "readyz_probers",
            "Load balancer probers (one per address) that asked /readyz in the last minute",
            self.readyz_probers.clone(),
        );
        registry.register(
            "drains_without_probes",
            "Drains during which no load balancer probed /readyz, so lb-drain waited out its \
             whole window (is the health probe pointed at forewarn?)",
            self.drains_without_probes.clone(),
        );
        registry.register(
            "scale_set_health",
            "1 on the state /health/scale-set answers (Initializing, Healthy, Unhealthy), 0 on \
             the others",
            self.scale_set_health.clone(),
        );
        registry.register(
            "scale_set_unhealthy",
            "1 while this reason makes /health/scale-set answer Unhealthy (imds-unreachable, \
             no-plugin-loadable, journal-not-durable, plugin-quarantined), else 0",
            self.scale_set_unhealthy.clone(),
        );
        registry.register(
            "timeline_missed",
            "Timeline entries the metrics reader missed because it fell behind",
            self.timeline_missed.clone(),
        );
        registry.register(
            "plugin_quarantines",
            "Times a plugin was quarantined after repeated failed calls (policy.quarantine-after-failures within policy.quarantine-window)",
            self.quarantines.clone(),
        );
        registry.register(
            "plugin_quarantined",
            "1 while the plugin is quarantined (not called until a new version is loaded), else 0",
            self.quarantined.clone(),
        );
        self.coordination.register(&mut registry);
        self.outcomes.register(&mut registry);
        self.storage.register(&mut registry);
        self.register_imds_reading(&mut registry);
        self.registry = registry;
        self
    }

    /// The metrics of what forewarn reads from IMDS: fields it cannot read, its clock, and
    /// documents unchanged from the one before.
    fn register_imds_reading(&self, registry: &mut Registry) {
        registry.register(
            "events_unreadable",
            "Events IMDS listed with a field forewarn cannot read, by field (NotBefore, \
             DurationInSeconds, EventType, EventStatus, Resources; EventId: entries it cannot \
             track); each event and field counts once",
            self.unreadable.clone(),
        );
        registry.register(
            "imds_clock_offset_seconds",
            "IMDS's clock minus the VM's, from IMDS's Date headers, as deadlines are corrected \
             (positive: the VM's clock is behind)",
            self.clock_offset.clone(),
        );
        registry.register(
            "imds_documents_unchanged",
            "Documents byte for byte the same as the one before (not parsed again)",
            self.unchanged_documents.clone(),
        );
    }

    /// Brings the unreadable-field counts, the clock offset and the unchanged documents up
    /// to `now`, given the status they were last updated from.
    pub(crate) fn record_imds_reading(&self, before: &PollStatus, now: &PollStatus) {
        for (field, count) in &now.unreadable_by_field {
            let previous = before.unreadable_by_field.get(field).copied().unwrap_or(0);
            self.unreadable
                .get_or_create(&FieldLabel {
                    field: (*field).to_owned(),
                })
                .inc_by(count.saturating_sub(previous));
        }
        if let Some(clock) = now.clock {
            self.clock_offset.set(clock.offset_ms as f64 / 1000.0);
        }
        self.unchanged_documents.inc_by(
            now.unchanged_documents
                .saturating_sub(before.unchanged_documents),
        );
    }

    /// The Prometheus text exposition (OpenMetrics 1.0 text format).
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(%error, "cannot encode the metrics");
        }
        text
    }

    /// Counts one timeline entry.
    pub(crate) fn record_timeline(&self, entry: &TimelineEntry) {
        match entry {
            TimelineEntry::Transition {
                event_type,
                transition,
                ..
            } => {
                // The known type, or "Unknown": IMDS's text never reaches the label
                // (prometheus-client writes label values as they are, so a quote and a
                // newline in it would forge series), and the labels stay a fixed set.
                self.transitions
                    .get_or_create(&TransitionLabels {
                        event_type: event_type.as_wire().to_owned(),
                        transition: transition.as_str().to_owned(),
                    })
                    .inc();
            }
            TimelineEntry::PluginAnswered {
                plugin,
                phase,
                outcome,
                elapsed_ms,
                ..
            } => {
                self.plugin_calls
                    .get_or_create(&CallLabels {
                        plugin: plugin.to_string(),
                        phase: phase.as_str().to_owned(),
                        outcome: outcome.as_str().to_owned(),
                    })
                    .inc();
                self.call_latency
                    .get_or_create(&PluginLabel {
                        plugin: plugin.to_string(),
                    })
                    .observe(*elapsed_ms as f64 / 1000.0);
            }
            TimelineEntry::Approved { event_ids } => {
                self.approvals.inc_by(event_ids.len() as u64);
            }
            TimelineEntry::ApprovalFailed { .. } => {
                self.approval_failures.inc();
            }
            TimelineEntry::NotApproved { .. } => {
                self.not_approved.inc();
            }
            TimelineEntry::Finished { .. } => {
                self.events_finished.inc();
            }
            TimelineEntry::TurnShortened { .. } => {
                self.turns_shortened.inc();
            }
            TimelineEntry::HostShutdownReleased {
                outcome,
                prepared_ms,
                ..
            } => {
                self.host_shutdowns
                    .get_or_create(&ShutdownOutcomeLabel {
                        outcome: (*outcome).to_owned(),
                    })
                    .inc();
                self.host_shutdown_preparation
                    .observe(*prepared_ms as f64 / 1000.0);
            }
            TimelineEntry::HostShutdownBegan { .. } => {}
            TimelineEntry::PreparingLate { .. } => {
                self.late_preparations.inc();
            }
            TimelineEntry::PluginQuarantined(quarantined) => {
                let label = PluginLabel {
                    plugin: quarantined.plugin.to_string(),
                };
                self.quarantines.get_or_create(&label).inc();
                self.quarantined.get_or_create(&label).set(1);
            }
            TimelineEntry::QuarantineLifted { plugin } => {
                let label = PluginLabel {
                    plugin: plugin.to_string(),
                };
                self.quarantined.get_or_create(&label).set(0);
            }
            TimelineEntry::Handling { .. }
            | TimelineEntry::PreparationWaits { .. }
            | TimelineEntry::PluginCalled { .. }
            | TimelineEntry::PluginLog { .. } => {}
        }
    }

    /// Brings the poll counters up to `now`, given the status they were last updated from.
    pub(crate) fn record_poll(&self, before: &PollStatus, now: &PollStatus) {
        self.polls.inc_by(now.polls.saturating_sub(before.polls));
        for (kind, count) in &now.errors_by_kind {
            let previous = before.errors_by_kind.get(kind).copied().unwrap_or(0);
            self.poll_errors
                .get_or_create(&KindLabel {
                    kind: (*kind).to_owned(),
                })
                .inc_by(count.saturating_sub(previous));
        }
        let successes = |status: &PollStatus| {
            let errors: u64 = status.errors_by_kind.values().sum();
            status.polls.saturating_sub(errors)
        };
        self.documents
            .inc_by(successes(now).saturating_sub(successes(before)));
        self.consecutive_poll_failures
            .set(i64::from(now.consecutive_failures));
    }

    /// Counts a newly published plugin set: a reload (unless `first`) and its new load errors.
    pub(crate) fn record_plugin_set(
        &self,
        previous_errors: &BTreeMap<PathBuf, String>,
        set: &PluginSet,
        first: bool,
    ) {
        if !first {
            self.reloads.inc();
        }
        let new_failures = set
            .load_errors()
            .iter()
            .filter(|(file, error)| previous_errors.get(*file) != Some(*error))
            .count();
        self.load_failures.inc_by(new_failures as u64);
        self.plugins_loaded.set(set.all().len() as i64);
        self.plugin_load_errors.set(set.load_errors().len() as i64);
    }

    /// Sets the gauges read at scrape time.
    pub(crate) fn set_current(&self, events: usize, ready: bool) {
        self.events_current.set(events as i64);
        self.ready.set(i64::from(ready));
    }

    /// Brings the `/readyz` probe metrics up to date (at scrape time).
    pub(crate) fn set_readiness_probes(&self, readiness: &Readiness, now: std::time::Instant) {
        self.readyz_probers
            .set(i64::try_from(readiness.recent_probers(now)).unwrap_or(i64::MAX));
        let counted = readiness.drains_without_probes();
        self.drains_without_probes
            .inc_by(counted.saturating_sub(self.drains_without_probes.get()));
    }

    /// Brings the state directory's metrics up to date (at scrape time).
    pub(crate) fn set_storage(&self, health: &StorageHealth) {
        self.storage.update(health);
    }

    /// Brings the scale-set health's gauges up to date.
    pub(crate) fn set_scale_set_health(
        &self,
        health: &crate::ops::scale_set_health::ScaleSetHealth,
    ) {
        let current = health.state.rich_state();
        for state in ["Initializing", "Healthy", "Unhealthy"] {
            let label = HealthStateLabel {
                state: state.to_owned(),
            };
            self.scale_set_health
                .get_or_create(&label)
                .set(i64::from(state == current));
        }
        let reasons = health.state.reasons();
        for code in crate::ops::scale_set_health::UnhealthyReason::CODES {
            let holds = reasons.iter().any(|reason| reason.code() == code);
            let label = ReasonLabel {
                reason: code.to_owned(),
            };
            self.scale_set_unhealthy
                .get_or_create(&label)
                .set(i64::from(holds));
        }
    }

    fn record_missed(&self, missed: u64) {
        self.timeline_missed.inc_by(missed);
    }
}

/// Spawns the tasks that keep `metrics` up to date until `shutdown`.
pub(crate) fn spawn_collectors(
    metrics: Arc<Metrics>,
    timeline: broadcast::Receiver<TimelineEntry>,
    poll: watch::Receiver<PollStatus>,
    plugins: watch::Receiver<Arc<PluginSet>>,
    shutdown: CancellationToken,
) {
    tokio::spawn(follow_timeline(metrics.clone(), timeline, shutdown.clone()));
    tokio::spawn(follow_polls(metrics.clone(), poll, shutdown.clone()));
    tokio::spawn(follow_plugin_sets(metrics, plugins, shutdown));
}

async fn follow_timeline(
    metrics: Arc<Metrics>,
    mut timeline: broadcast::Receiver<TimelineEntry>,
    shutdown: CancellationToken,
) {
    loop {
        let received = tokio::select! {
            () = shutdown.cancelled() => return,
            received = timeline.recv() => received,
        };
        match received {
            Ok(entry) => metrics.record_timeline(&entry),
            Err(broadcast::error::RecvError::Lagged(missed)) => metrics.record_missed(missed),
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

async fn follow_polls(
    metrics: Arc<Metrics>,
    mut poll: watch::Receiver<PollStatus>,
    shutdown: CancellationToken,
) {
    let mut before = PollStatus::default();
    loop {
        let now = poll.borrow_and_update().clone();
        metrics.record_poll(&before, &now);
        metrics.record_imds_reading(&before, &now);
        before = now;
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = poll.changed() => if changed.is_err() { return },
        }
    }
}

async fn follow_plugin_sets(
    metrics: Arc<Metrics>,
    mut plugins: watch::Receiver<Arc<PluginSet>>,
    shutdown: CancellationToken,
) {
    let mut previous_errors = BTreeMap::new();
    let mut first = true;
    loop {
        let set = plugins.borrow_and_update().clone();
        metrics.record_plugin_set(&previous_errors, &set, first);
        previous_errors = set.load_errors().clone();
        first = false;
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = plugins.changed() => if changed.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests;

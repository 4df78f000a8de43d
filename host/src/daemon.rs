//! The daemon's event loop: turns IMDS documents into transitions, asks plugins in
//! dependency order under their budgets, approves at IMDS, and journals every step first.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use forewarn_imds::{Document, EventStatus, ImdsClient, ScheduledEvent};
use forewarn_runtime::wit::latest::{Decision, Phase};
use forewarn_runtime::{CallContext, CallOutcome, Readiness};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::convert::{from_unix_ms, phase_name, to_wit_event, unix_ms};
use crate::coordination::{self, Coordinator};
use crate::journal::{Journal, JournalError};
use crate::log_fields;
use crate::plugins::{LoadedPlugin, PluginSet, SharedPlugins};
use crate::policy::{self, ApprovalGate, Plan, PolicyConfig};
use crate::readiness_holds;
use crate::state::{
    Answer, Approval, DaemonState, EventProgress, Handling, Lifecycle, PluginProgress,
};
use crate::timeline::{Timeline, TimelineEntry};
use crate::tracker::Transition;

/// Shortest wait before asking a deferring plugin again.
const MIN_RETRY: Duration = Duration::from_millis(100);
/// Wait before asking again a plugin whose call failed (trap, budget exceeded).
const FAILURE_RETRY: Duration = Duration::from_secs(5);
/// Wait before re-sending an approval IMDS did not accept.
const APPROVAL_RETRY: Duration = Duration::from_secs(1);
/// Recovery calls made before giving up on a plugin's recovery.
const RECOVERY_ATTEMPTS: u32 = 3;
/// The journal's file name in the state directory.
pub const JOURNAL_NAME: &str = "journal";

/// What the loop needs to know besides its inputs.
#[derive(Debug, Clone)]
pub struct DaemonSettings {
    pub vm_name: String,
    pub policy: PolicyConfig,
    pub state_dir: PathBuf,
}

/// The loop's own errors: only the journal can stop the daemon, since acting without
/// recording would break the promise that a restart resumes where it stopped.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "the journal could not be written, so forewarn stops rather than act without a record: {0}"
    )]
    Journal(#[from] JournalError),
}

/// The event loop and the state it owns.
pub struct Daemon {
    settings: DaemonSettings,
    client: ImdsClient,
    plugins: SharedPlugins,
    timeline: Timeline,
    journal: Journal<DaemonState>,
    state: DaemonState,
    in_flight: HashSet<(String, String)>,
    calls: JoinSet<CallResult>,
    approval_retry_at: Option<SystemTime>,
    snapshots: watch::Sender<Arc<DaemonState>>,
    /// The etcd approval barrier for events naming several VMs (`[coordination]`).
    coordination: Option<Coordinator>,
    /// The VM's readiness, whose holds are journaled with the state (`with_readiness`).
    readiness: Option<Arc<Readiness>>,
    /// Calls decided in this round, started once the round's state is journaled.
    planned: Vec<PlannedCall>,
    /// The approval holds already announced, by event (see `announce_hold`); not journaled:
    /// a restart announces them again.
    holds_announced: std::collections::HashMap<String, String>,
    /// State changed (a document or an answer was applied) and is not journaled yet; the
    /// next round journals it before anything is acted on, so each round costs one fsync.
    unsaved: bool,
}

struct PlannedCall {
    event_id: String,
    plugin: LoadedPlugin,
    phase: Phase,
    context: CallContext,
    budget: Duration,
    event: ScheduledEvent,
}

struct CallResult {
    event_id: String,
    plugin: String,
    phase: Phase,
    outcome: CallOutcome,
}

impl Daemon {
    /// Opens the journal in `settings.state_dir` and resumes from it.
    pub fn open(
        settings: DaemonSettings,
        client: ImdsClient,
        plugins: SharedPlugins,
        timeline: Timeline,
    ) -> Result<Daemon, DaemonError> {
        let (journal, opened) = Journal::open(&settings.state_dir, JOURNAL_NAME)?;
        if let Some(quarantined) = &opened.quarantined {
            tracing::error!(
                moved_to = %quarantined.display(),
                "the journal was unreadable and was moved aside; starting without it, so \
                 events already prepared may be prepared again"
            );
        }
        let state: DaemonState = opened.value.unwrap_or_default();
        let snapshots = watch::channel(Arc::new(state.clone())).0;
        if !state.events.is_empty() {
            tracing::info!(events = state.events.len(), "resuming from the journal");
        }
        Ok(Daemon {
            settings,
            client,
            plugins,
            timeline,
            journal,
            state,
            in_flight: HashSet::new(),
            calls: JoinSet::new(),
            approval_retry_at: None,
            snapshots,
            coordination: None,
            readiness: None,
            planned: Vec::new(),
            holds_announced: std::collections::HashMap::new(),
            unsaved: false,
        })
    }

    /// A view of the state as last journaled, updated after every commit (for status).
    pub fn snapshots(&self) -> watch::Receiver<Arc<DaemonState>> {
        self.snapshots.subscribe()
    }

    /// Approves events naming several VMs together with the other VMs, through etcd.
    pub fn with_coordination(mut self, coordinator: Coordinator) -> Daemon {
        self.coordination = Some(coordinator);
        self
    }

    /// Journals `readiness`'s holds with every commit (restored at start by
    /// [`readiness_holds::restore`]) and releases those of removed or ungranted plugins.
    pub fn with_readiness(mut self, readiness: Arc<Readiness>) -> Daemon {
        self.readiness = Some(readiness);
        self
    }

    /// Releases the readiness holds of plugins that were removed or lost the grant.
    fn release_stale_holds(&mut self) {
        let Some(readiness) = &self.readiness else {
            return;
        };
        let plugins = self.plugins.borrow().clone();
        if readiness_holds::release_stale(readiness, &plugins) {
            self.unsaved = true;
        }
    }

    /// The state as last journaled (for status and tests).
    pub fn state(&self) -> &DaemonState {
        &self.state
    }

    /// Runs until `shutdown` is cancelled or `documents` closes, then lets calls in flight
    /// finish within their budgets and journals their answers.
    pub async fn run(
        mut self,
        mut documents: mpsc::Receiver<Document>,
        shutdown: CancellationToken,
    ) -> Result<(), DaemonError> {
        let mut plugins = self.plugins.clone();
        let coordination = self.coordination.clone();
        self.release_stale_holds();
        loop {
            self.advance(SystemTime::now()).await?;
            let wake = self.next_wakeup(SystemTime::now());
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                Some(joined) = self.calls.join_next(), if !self.calls.is_empty() => {
                    self.record_joined(joined)?;
                }
                document = documents.recv() => match document {
                    Some(document) => self.observe(&document, SystemTime::now())?,
                    None => break,
                },
                changed = plugins.changed() => {
                    if changed.is_err() {
                        // The plugin set can no longer change; keep working with the last one.
                        plugins = self.plugins.clone();
                    }
                    self.release_stale_holds();
                }
                () = coordination::changed(coordination.as_ref()) => {}
                () = tokio::time::sleep(wake) => {}
            }
        }
        self.finish_calls_in_flight().await
    }

    async fn finish_calls_in_flight(&mut self) -> Result<(), DaemonError> {
        if !self.calls.is_empty() {
            tracing::info!(
                calls = self.calls.len(),
                "waiting for plugin calls in flight to finish"
            );
        }
        while let Some(joined) = self.calls.join_next().await {
            self.record_joined(joined)?;
        }
        self.commit()
    }

    /// Applies one document's transitions to the state. Nothing is acted on until the next
    /// round (`advance`) has journaled them.
    pub fn observe(&mut self, document: &Document, now: SystemTime) -> Result<(), DaemonError> {
        let transitions = self.state.tracker.observe(document, now);
        if transitions.is_empty() {
            return Ok(());
        }
        for transition in &transitions {
            self.apply_transition(transition);
        }
        self.unsaved = true;
        Ok(())
    }

    fn apply_transition(&mut self, transition: &Transition) {
        let event = transition.event().clone();
        tracing::info!(
            event_id = %event.id,
            event_type = %event.event_type_raw,
            transition = transition.kind(),
            not_before = %log_fields::time(event.not_before),
            resources = %log_fields::list(&event.resources),
            "event transition"
        );
        self.emit(TimelineEntry::Transition {
            event_id: event.id.clone(),
            event_type: event.event_type_raw.clone(),
            transition: transition.kind().to_owned(),
            detail: describe_event(&event),
        });
        match transition {
            Transition::Scheduled(_) => self.start_handling(event, Lifecycle::Scheduled),
            Transition::Rescheduled { .. } => self.reschedule(event),
            Transition::Started { .. } => self.mark_started(event),
            Transition::EndedAfterStart(_) => self.mark_ended(event, true),
            Transition::EndedWithoutStart(_) => self.mark_ended(event, false),
        }
    }

    fn start_handling(&mut self, event: ScheduledEvent, lifecycle: Lifecycle) {
        let handling = match policy::plan(&event, &self.settings.vm_name, &self.settings.policy) {
            Plan::Ignore { reason } => {
                tracing::info!(event_id = %event.id, "{reason}");
                Handling::Ignored { reason }
            }
            Plan::ApproveAtOnce { rule } => Handling::ApproveAtOnce { rule: rule.into() },
            Plan::Prepare { affects_this_vm } => Handling::Prepare { affects_this_vm },
        };
        self.emit(TimelineEntry::Handling {
            event_id: event.id.clone(),
            handling: describe_handling(&handling),
        });
        let id = event.id.clone();
        let mut progress = EventProgress::new(event, handling, lifecycle);
        if lifecycle == Lifecycle::Started {
            progress.approval = Approval::Abandoned {
                reason: "the event appeared already started".into(),
            };
        }
        self.state.events.insert(id, progress);
    }

    fn reschedule(&mut self, event: ScheduledEvent) {
        let id = event.id.clone();
        if let Some(coordinator) = &self.coordination {
            // This VM prepares again: it is no longer ready for the event.
            coordinator.withdraw(&id);
        }
        // A reschedule can change Resources, so the policy is asked again.
        let previous_plugins = self.state.events.remove(&id).map(|p| p.plugins);
        self.start_handling(event, Lifecycle::Scheduled);
        if let (Some(progress), Some(plugins)) = (self.state.events.get_mut(&id), previous_plugins)
        {
            progress.plugins = plugins;
            progress.restart_preparation();
        }
    }

    fn mark_started(&mut self, event: ScheduledEvent) {
        let id = event.id.clone();
        let Some(progress) = self.state.events.get_mut(&id) else {
            // Straight to Started (a hardware failure): plugins are told it started.
            self.start_handling(event, Lifecycle::Started);
            return;
        };
        progress.event = event;
        progress.lifecycle = Lifecycle::Started;
        if matches!(progress.approval, Approval::Pending | Approval::Due { .. }) {
            progress.approval = Approval::Abandoned {
                reason: "the event started before it was approved".into(),
            };
        }
    }

    fn mark_ended(&mut self, event: ScheduledEvent, after_start: bool) {
        let id = event.id.clone();
        match self.state.events.get_mut(&id) {
            Some(progress) => {
                let after_start = after_start || missed_the_start(progress, SystemTime::now());
                progress.event = event;
                progress.lifecycle = Lifecycle::Ended { after_start };
                if matches!(progress.approval, Approval::Pending | Approval::Due { .. }) {
                    progress.approval = Approval::Abandoned {
                        reason: "the event ended before it was approved".into(),
                    };
                }
            }
            None => tracing::debug!(event_id = %id, "an event the daemon never handled ended"),
        }
    }

    /// Starts every call that is due, decides approvals, and sends them.
    async fn advance(&mut self, now: SystemTime) -> Result<(), DaemonError> {
        let plugins = self.plugins.borrow().clone();
        let mut changed = false;
        let ids: Vec<String> = self.state.events.keys().cloned().collect();
        for id in ids {
            changed |= self.advance_event(&id, &plugins, now);
        }
        // Journal first (transitions, answers, attempt numbers, approvals due), then act:
        // start the calls and send the approvals.
        if self.unsaved || changed || !self.planned.is_empty() {
            self.commit()?;
        }
        for call in std::mem::take(&mut self.planned) {
            self.start_call(call);
        }
        self.send_due_approvals(now).await
    }

    /// Moves one event forward; returns whether its journaled state changed.
    fn advance_event(&mut self, id: &str, plugins: &Arc<PluginSet>, now: SystemTime) -> bool {
        let Some(progress) = self.state.events.get(id) else {
            return false;
        };
        if let (Approval::Coordinating { .. }, Lifecycle::Scheduled) =
            (&progress.approval, progress.lifecycle)
        {
            return self.coordinate(id, now);
        }
        match (&progress.handling, progress.lifecycle) {
            (Handling::Ignored { .. }, Lifecycle::Ended { .. }) => self.forget(id),
            (Handling::Ignored { .. }, _) => false,
            (Handling::ApproveAtOnce { .. }, Lifecycle::Scheduled) => self.decide_approval(id, now),
            (Handling::ApproveAtOnce { .. }, Lifecycle::Ended { .. }) => self.forget(id),
            (Handling::ApproveAtOnce { .. }, Lifecycle::Started) => false,
            (Handling::Prepare { .. }, Lifecycle::Scheduled) => {
                self.advance_preparation(id, plugins, now)
            }
            (Handling::Prepare { .. }, Lifecycle::Started) => self.tell_started(id, plugins, now),
            (Handling::Prepare { .. }, Lifecycle::Ended { .. }) => {
                self.advance_recovery(id, plugins, now)
            }
        }
    }

    fn advance_preparation(&mut self, id: &str, plugins: &Arc<PluginSet>, now: SystemTime) -> bool {
        let Some(progress) = self.state.events.get(id) else {
            return false;
        };
        if progress.approval != Approval::Pending {
            return false;
        }
        let event = progress.event.clone();
        let subscribers = plugins.subscribers(event.event_type);
        let budget_left = self.deadline_budget(&event, now);
        if budget_left.is_zero() {
            return self.abandon_for_deadline(id, &subscribers);
        }
        let all_prepared = subscribers
            .iter()
            .all(|plugin| progress.plugin(plugin.name()).prepared);
        if all_prepared {
            if let Some(reason) = self.approval_hold(&event, subscribers.len(), plugins) {
                self.announce_hold(id, reason);
                return false;
            }
            return self.decide_approval(id, now);
        }
        let mut changed = false;
        for plugin in &subscribers {
            let name = plugin.name();
            let Some(progress) = self.state.events.get(id) else {
                break;
            };
            let own = progress.plugin(name);
            let waiting_on_others = plugins
                .predecessors(name)
                .iter()
                .filter(|before| {
                    plugins
                        .get(before)
                        .is_some_and(|p| p.manifest.subscribes_to(event.event_type))
                })
                .any(|before| !progress.plugin(before).prepared);
            let not_yet = own
                .retry_at_unix_ms
                .is_some_and(|at| from_unix_ms(at) > now);
            if own.prepared || waiting_on_others || not_yet || self.is_in_flight(id, name) {
                continue;
            }
            let budget = policy::plugin_budget(
                plugin.manifest.budget,
                event.not_before,
                now,
                self.settings.policy.safety_margin(),
            );
            let attempt = own.prepare_attempts + 1;
            if let Some(progress) = self.state.events.get_mut(id) {
                progress.plugin_mut(name).prepare_attempts = attempt;
            }
            self.spawn_call(id, plugin, Phase::Prepare, attempt, budget, &event);
            changed = true;
        }
        changed
    }

    fn tell_started(&mut self, id: &str, plugins: &Arc<PluginSet>, _now: SystemTime) -> bool {
        let Some(progress) = self.state.events.get(id) else {
            return false;
        };
        let event = progress.event.clone();
        let to_tell: Vec<LoadedPlugin> = plugins
            .subscribers(event.event_type)
            .into_iter()
            .filter(|plugin| !progress.plugin(plugin.name()).told_started)
            .filter(|plugin| !self.is_in_flight(id, plugin.name()))
            .cloned()
            .collect();
        for plugin in &to_tell {
            self.spawn_call(
                id,
                plugin,
                Phase::Started,
                1,
                plugin.manifest.budget,
                &event,
            );
        }
        false
    }

    /// Recovery runs in reverse dependency order: a plugin recovers once every plugin
    /// that ran after it has recovered (start the app before rejoining the load balancer).
    fn advance_recovery(&mut self, id: &str, plugins: &Arc<PluginSet>, now: SystemTime) -> bool {
        let Some(progress) = self.state.events.get(id) else {
            return false;
        };
        let event = progress.event.clone();
        let phase = match progress.lifecycle {
            Lifecycle::Ended { after_start: true } => Phase::EndedAfterStart,
            _ => Phase::EndedWithoutStart,
        };
        let subscribers = plugins.subscribers(event.event_type);
        let all_told = subscribers
            .iter()
            .all(|plugin| progress.plugin(plugin.name()).told_ended);
        if all_told && !subscribers.iter().any(|p| self.is_in_flight(id, p.name())) {
            return self.forget(id);
        }
        let mut to_call = Vec::new();
        for plugin in subscribers.iter().rev() {
            let name = plugin.name();
            let own = progress.plugin(name);
            let successors_pending = subscribers.iter().any(|other| {
                plugins
                    .predecessors(other.name())
                    .iter()
                    .any(|before| before == name)
                    && !progress.plugin(other.name()).told_ended
            });
            let not_yet = own
                .retry_at_unix_ms
                .is_some_and(|at| from_unix_ms(at) > now);
            if own.told_ended || successors_pending || not_yet || self.is_in_flight(id, name) {
                continue;
            }
            to_call.push(((*plugin).clone(), own.recovery_attempts + 1));
        }
        let changed = !to_call.is_empty();
        for (plugin, attempt) in to_call {
            if let Some(progress) = self.state.events.get_mut(id) {
                progress.plugin_mut(plugin.name()).recovery_attempts = attempt;
            }
            self.spawn_call(id, &plugin, phase, attempt, plugin.manifest.budget, &event);
        }
        changed
    }

    fn abandon_for_deadline(&mut self, id: &str, subscribers: &[&LoadedPlugin]) -> bool {
        let Some(progress) = self.state.events.get_mut(id) else {
            return false;
        };
        let waiting: Vec<String> = subscribers
            .iter()
            .filter(|plugin| !progress.plugin(plugin.name()).prepared)
            .map(|plugin| plugin.name().to_owned())
            .collect();
        let reason = format!(
            "NotBefore (minus the {} ms safety margin) came before every plugin approved \
             (still preparing: {}); the platform starts the event on its own",
            self.settings.policy.safety_margin_ms,
            if waiting.is_empty() {
                "none".into()
            } else {
                waiting.join(", ")
            }
        );
        tracing::warn!(event_id = %id, "{reason}");
        progress.approval = Approval::Abandoned {
            reason: reason.clone(),
        };
        self.emit(TimelineEntry::NotApproved {
            event_id: id.to_owned(),
            reason,
        });
        true
    }

    /// Every plugin approved (or none was needed): ask the policy whether to approve.
    fn decide_approval(&mut self, id: &str, now: SystemTime) -> bool {
        let Some(progress) = self.state.events.get_mut(id) else {
            return false;
        };
        if progress.approval != Approval::Pending {
            return false;
        }
        let coordinated = self.coordination.is_some()
            && coordination::applies_to(&progress.event, &self.settings.vm_name);
        let gate = if coordinated {
            coordination::gate(
                &progress.event,
                &self.settings.vm_name,
                &self.settings.policy,
            )
        } else {
            policy::approval_gate(
                &progress.event,
                &self.settings.vm_name,
                &self.settings.policy,
            )
        };
        let (approval, note) = match gate {
            ApprovalGate::Approve if coordinated => (
                Approval::Coordinating {
                    since_unix_ms: unix_ms(now),
                },
                None,
            ),
            ApprovalGate::Approve => (
                Approval::Due {
                    since_unix_ms: unix_ms(now),
                },
                None,
            ),
            ApprovalGate::DryRun { would } => (
                Approval::DryRun {
                    would: would.clone(),
                },
                Some(would),
            ),
            ApprovalGate::Withhold { reason } => (
                Approval::Withheld {
                    reason: reason.clone(),
                },
                Some(reason),
            ),
        };
        progress.approval = approval;
        if let Some(reason) = note {
            tracing::info!(event_id = %id, "{reason}");
            self.emit(TimelineEntry::NotApproved {
                event_id: id.to_owned(),
                reason,
            });
        }
        true
    }

    /// An event waiting on the etcd barrier: asks the coordinator whether to approve now.
    fn coordinate(&mut self, id: &str, now: SystemTime) -> bool {
        let (Some(coordinator), Some(progress)) =
            (&self.coordination, self.state.events.get_mut(id))
        else {
            return false;
        };
        let settings = &self.settings;
        coordination::advance(
            coordinator,
            progress,
            &settings.vm_name,
            &settings.policy,
            now,
        )
    }

    /// POSTs every due approval in one request (already journaled as due).
    async fn send_due_approvals(&mut self, now: SystemTime) -> Result<(), DaemonError> {
        if self.approval_retry_at.is_some_and(|at| at > now) {
            return Ok(());
        }
        let due: Vec<String> = self
            .state
            .events
            .iter()
            .filter(|(_, progress)| matches!(progress.approval, Approval::Due { .. }))
            .map(|(id, _)| id.clone())
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        match self.client.approve(&due).await {
            Ok(()) => {
                let at_unix_ms = unix_ms(SystemTime::now());
                for id in &due {
                    if let Some(progress) = self.state.events.get_mut(id) {
                        progress.approval = Approval::Sent { at_unix_ms };
                    }
                }
                self.approval_retry_at = None;
                if let Some(coordinator) = &self.coordination {
                    coordinator.approval_sent(&due);
                }
                self.commit()?;
                tracing::info!(event_ids = %log_fields::list(&due), "approved at IMDS");
                self.emit(TimelineEntry::Approved { event_ids: due });
            }
            Err(error) => {
                tracing::warn!(event_ids = %log_fields::list(&due), %error, "approval not accepted by IMDS; retrying");
                self.approval_retry_at = Some(SystemTime::now() + APPROVAL_RETRY);
                self.emit(TimelineEntry::ApprovalFailed {
                    event_ids: due,
                    error: error.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Decides a call: marks it in flight now, starts it after the journal commit.
    fn spawn_call(
        &mut self,
        id: &str,
        plugin: &LoadedPlugin,
        phase: Phase,
        attempt: u32,
        budget: Duration,
        event: &ScheduledEvent,
    ) {
        let Some(progress) = self.state.events.get(id) else {
            return;
        };
        let affects_this_vm = match progress.handling {
            Handling::Prepare { affects_this_vm } => affects_this_vm,
            _ => true,
        };
        self.in_flight
            .insert((id.to_owned(), plugin.name().to_owned()));
        self.planned.push(PlannedCall {
            event_id: id.to_owned(),
            plugin: plugin.clone(),
            phase,
            context: CallContext {
                vm_name: self.settings.vm_name.clone(),
                affects_this_vm,
                attempt,
            },
            budget,
            event: event.clone(),
        });
    }

    fn start_call(&mut self, call: PlannedCall) {
        let PlannedCall {
            event_id,
            plugin,
            phase,
            context,
            budget,
            event,
        } = call;
        self.emit(TimelineEntry::PluginCalled {
            event_id: event_id.clone(),
            plugin: plugin.name().to_owned(),
            phase: phase_name(phase).to_owned(),
            attempt: context.attempt,
            budget_ms: budget.as_millis() as u64,
        });
        tracing::debug!(event_id = %event_id, plugin = plugin.name(), phase = phase_name(phase), attempt = context.attempt, budget = %log_fields::duration(budget), "calling plugin");
        let wit_event = to_wit_event(&event);
        let runnable = plugin.plugin;
        self.calls.spawn(async move {
            let outcome = runnable.call(&wit_event, phase, &context, budget).await;
            CallResult {
                event_id,
                plugin: runnable.name().to_owned(),
                phase,
                outcome,
            }
        });
    }

    fn record_joined(
        &mut self,
        joined: Result<CallResult, tokio::task::JoinError>,
    ) -> Result<(), DaemonError> {
        match joined {
            Ok(result) => self.record_call(result),
            Err(error) => {
                // A panic inside the runtime is a forewarn bug; the call is lost, but the
                // (event, plugin) pair stays marked in flight only until the next restart.
                tracing::error!(%error, "a plugin call task failed; this is a bug in forewarn");
                Ok(())
            }
        }
    }

    fn record_call(&mut self, result: CallResult) -> Result<(), DaemonError> {
        self.in_flight
            .remove(&(result.event_id.clone(), result.plugin.clone()));
        let now = SystemTime::now();
        let answer = answer_of(&result, now);
        log_answer(&result.event_id, &result.plugin, &answer);
        for line in &result.outcome.logs {
            self.emit(TimelineEntry::PluginLog {
                event_id: result.event_id.clone(),
                plugin: result.plugin.clone(),
                level: line.level,
                message: line.message.clone(),
            });
        }
        self.emit(TimelineEntry::PluginAnswered {
            event_id: result.event_id.clone(),
            plugin: result.plugin.clone(),
            phase: answer.phase.clone(),
            outcome: answer.outcome.clone(),
            reason: answer.reason.clone(),
            elapsed_ms: answer.elapsed_ms,
        });
        let margin = self.settings.policy.safety_margin();
        let Some(progress) = self.state.events.get_mut(&result.event_id) else {
            return Ok(());
        };
        let not_before = progress.event.not_before;
        let own = progress.plugin_mut(&result.plugin);
        own.last_answer = Some(answer);
        match result.phase {
            Phase::Prepare => record_prepare(own, &result.outcome, now, not_before, margin),
            Phase::Started => own.told_started = true,
            Phase::EndedAfterStart | Phase::EndedWithoutStart => {
                record_recovery(own, &result.outcome, now)
            }
        }
        self.unsaved = true;
        Ok(())
    }

    /// Why an event whose subscribers all approved may still not be approved: a plugin file
    /// that failed to load counts as a subscriber that has not approved, and nobody
    /// subscribing is not consent unless `policy.approve-unsubscribed` says so. None: go on.
    fn approval_hold(
        &self,
        event: &ScheduledEvent,
        subscribers: usize,
        plugins: &PluginSet,
    ) -> Option<String> {
        let failed: Vec<String> = plugins
            .load_errors()
            .keys()
            .map(|path| path.display().to_string())
            .collect();
        if !failed.is_empty() {
            return Some(format!(
                "not approving event {}: plugin file(s) {} failed to load, and a plugin that                  cannot run has not approved; fix or remove the file (`forewarn status` shows                  why it failed) and the approval goes ahead",
                event.id,
                failed.join(", ")
            ));
        }
        if subscribers == 0 && !self.settings.policy.approve_unsubscribed {
            return Some(format!(
                "not approving event {}: no plugin subscribes to {}, so nothing prepared this                  VM and the event starts at NotBefore; add a plugin that subscribes to it, or                  set `policy.approve-unsubscribed = true` to approve such events at once",
                event.id, event.event_type_raw
            ));
        }
        None
    }

    /// Logs and shows `reason` once per event and reason (the hold is checked every round).
    fn announce_hold(&mut self, id: &str, reason: String) {
        if self.holds_announced.get(id) == Some(&reason) {
            return;
        }
        tracing::warn!(event_id = %id, "{reason}");
        self.emit(TimelineEntry::NotApproved {
            event_id: id.to_owned(),
            reason: reason.clone(),
        });
        self.holds_announced.insert(id.to_owned(), reason);
    }

    fn forget(&mut self, id: &str) -> bool {
        self.holds_announced.remove(id);
        if self.state.events.remove(id).is_none() {
            return false;
        }
        tracing::info!(event_id = %id, "event handled to the end");
        self.emit(TimelineEntry::Finished {
            event_id: id.to_owned(),
        });
        true
    }

    /// How long until something is due: a retry, a deadline, an approval retry.
    fn next_wakeup(&self, now: SystemTime) -> Duration {
        let idle = Duration::from_secs(60);
        let margin = self.settings.policy.safety_margin();
        let mut instants: Vec<SystemTime> = Vec::new();
        for progress in self.state.events.values() {
            instants.extend(
                progress
                    .plugins
                    .values()
                    .filter_map(|own| own.retry_at_unix_ms.map(from_unix_ms)),
            );
            if progress.lifecycle == Lifecycle::Scheduled
                && progress.approval == Approval::Pending
                && let Some(not_before) = progress.event.not_before
            {
                instants.push(not_before.checked_sub(margin).unwrap_or(not_before));
            }
        }
        instants.extend(self.approval_retry_at);
        instants
            .into_iter()
            .map(|at| at.duration_since(now).unwrap_or(Duration::ZERO))
            .min()
            .unwrap_or(idle)
            .min(idle)
    }

    fn deadline_budget(&self, event: &ScheduledEvent, now: SystemTime) -> Duration {
        policy::plugin_budget(
            Duration::MAX,
            event.not_before,
            now,
            self.settings.policy.safety_margin(),
        )
    }

    fn is_in_flight(&self, id: &str, plugin: &str) -> bool {
        self.in_flight.contains(&(id.to_owned(), plugin.to_owned()))
    }

    fn commit(&mut self) -> Result<(), DaemonError> {
        if let Some(readiness) = &self.readiness {
            self.state.readiness_holds = readiness.holders().into_iter().collect();
        }
        self.journal.commit(&self.state)?;
        self.unsaved = false;
        self.snapshots.send_replace(Arc::new(self.state.clone()));
        Ok(())
    }

    fn emit(&self, entry: TimelineEntry) {
        // No subscriber is fine: the timeline is for whoever listens.
        let _ignored = self.timeline.send(entry);
    }
}

/// Whether an event that vanished while the daemon last saw it Scheduled most likely ran:
/// our approval was sent (or was due: a crash between the POST and the journal write leaves
/// it so), or its NotBefore had passed. Either way the daemon missed the
/// Started document (it was down — perhaps rebooted by this very event — or IMDS was
/// unreadable for longer than the event lasted). A cancel happens before the start, so
/// recovering as after a start is the safe reading: plugins restore and restart.
fn missed_the_start(progress: &EventProgress, now: SystemTime) -> bool {
    let approved = matches!(
        progress.approval,
        Approval::Sent { .. } | Approval::Due { .. }
    );
    let past_not_before = progress
        .event
        .not_before
        .is_some_and(|not_before| not_before <= now);
    if approved || past_not_before {
        tracing::info!(
            event_id = %progress.event.id,
            approved,
            past_not_before,
            "event vanished without being seen Started; recovering as after a start"
        );
    }
    approved || past_not_before
}

fn record_prepare(
    own: &mut PluginProgress,
    outcome: &CallOutcome,
    now: SystemTime,
    not_before: Option<SystemTime>,
    margin: Duration,
) {
    let wait = match &outcome.answer {
        Ok(Decision::Approve) => {
            own.prepared = true;
            own.retry_at_unix_ms = None;
            return;
        }
        Ok(Decision::Defer(deferral)) => {
            Duration::from_millis(u64::from(deferral.retry_after_ms)).max(MIN_RETRY)
        }
        Err(_) => FAILURE_RETRY,
    };
    own.retry_at_unix_ms = Some(unix_ms(retry_instant(now, wait, not_before, margin)));
}

/// When to ask again: after `wait`, but early enough that a last call fits before the
/// deadline (NotBefore minus the margin), and never sooner than `MIN_RETRY`.
fn retry_instant(
    now: SystemTime,
    wait: Duration,
    not_before: Option<SystemTime>,
    margin: Duration,
) -> SystemTime {
    let wanted = now + wait;
    let Some(not_before) = not_before else {
        return wanted;
    };
    let last_useful = not_before
        .checked_sub(margin + Duration::from_secs(1))
        .unwrap_or(now);
    wanted.min(last_useful).max(now + MIN_RETRY)
}

fn record_recovery(own: &mut PluginProgress, outcome: &CallOutcome, now: SystemTime) {
    if outcome.answer.is_ok() || own.recovery_attempts >= RECOVERY_ATTEMPTS {
        if outcome.answer.is_err() {
            tracing::error!(
                attempts = own.recovery_attempts,
                "giving up on a plugin's recovery after repeated failures"
            );
        }
        own.told_ended = true;
        own.retry_at_unix_ms = None;
        return;
    }
    own.retry_at_unix_ms = Some(unix_ms(now + FAILURE_RETRY));
}

fn answer_of(result: &CallResult, now: SystemTime) -> Answer {
    let (outcome, reason) = match &result.outcome.answer {
        Ok(Decision::Approve) => ("approve".to_owned(), String::new()),
        Ok(Decision::Defer(deferral)) => ("defer".to_owned(), deferral.reason.clone()),
        Err(failure) => (failure.kind().to_owned(), failure.reason()),
    };
    Answer {
        phase: phase_name(result.phase).to_owned(),
        outcome,
        reason,
        at_unix_ms: unix_ms(now),
        elapsed_ms: result.outcome.elapsed.as_millis() as u64,
    }
}

/// The audit trail: one structured line per plugin decision.
fn log_answer(event_id: &str, plugin: &str, answer: &Answer) {
    match answer.outcome.as_str() {
        "approve" | "defer" => tracing::info!(
            event_id, plugin, phase = %answer.phase, decision = %answer.outcome,
            reason = %answer.reason, elapsed_ms = answer.elapsed_ms, "plugin decision"
        ),
        _ => tracing::warn!(
            event_id, plugin, phase = %answer.phase, decision = "defer",
            failure = %answer.outcome, reason = %answer.reason, elapsed_ms = answer.elapsed_ms,
            "plugin call failed; counted as a defer"
        ),
    }
}

fn describe_event(event: &ScheduledEvent) -> String {
    let status = match event.status {
        EventStatus::Scheduled => "Scheduled",
        EventStatus::Started => "Started",
    };
    let mut parts = vec![
        format!("{} {}", event.event_type_raw, status),
        format!("for {}", event.resources.join(", ")),
    ];
    if let Some(not_before) = event.not_before {
        let seconds = not_before
            .duration_since(SystemTime::now())
            .map(|left| left.as_secs())
            .unwrap_or(0);
        parts.push(format!("NotBefore in {seconds}s"));
    }
    if let Some(duration) = event.duration_seconds {
        parts.push(format!("impact {duration}s"));
    }
    parts.join(", ")
}

fn describe_handling(handling: &Handling) -> String {
    match handling {
        Handling::Ignored { reason } => format!("ignored: {reason}"),
        Handling::ApproveAtOnce { rule } => format!("approve at once (rule: {rule})"),
        Handling::Prepare {
            affects_this_vm: true,
        } => "plugins prepare this VM".into(),
        Handling::Prepare {
            affects_this_vm: false,
        } => "plugins are told (the event names other VMs, not this one)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_is_pulled_in_before_the_deadline() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let not_before = Some(now + Duration::from_secs(10));
        let margin = Duration::from_secs(2);
        let at = retry_instant(now, Duration::from_secs(60), not_before, margin);
        assert_eq!(at, now + Duration::from_secs(7));
        let at = retry_instant(now, Duration::from_secs(1), not_before, margin);
        assert_eq!(at, now + Duration::from_secs(1));
        let past = Some(now);
        let at = retry_instant(now, Duration::from_secs(5), past, margin);
        assert_eq!(at, now + MIN_RETRY);
    }
}

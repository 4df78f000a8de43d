//! The daemon's event loop: the thin I/O shell around the [`Pipeline`]. It feeds the
//! pipeline documents, answers and plugin sets with the time, and executes its actions.
//!
//! Like mini-redis's `server::run`, it decides nothing: [`Action::Persist`] is written to
//! the journal (with the readiness holds) before the calls and the approval that follow it
//! ([`Action::PersistGrouped`] within the journal keeper's group window; a journal that
//! cannot be written degrades the daemon, never stops it: `daemon/journal_keeper.rs`),
//! [`Action::Call`] becomes a task, [`Action::Approve`] one POST in a task of its own (a slow
//! IMDS never holds up the documents, answers and deadlines of other events), [`Action::Emit`]
//! a timeline entry. When a POST is sent, and that only one is in flight, is the approval
//! stage's rule (`pipeline/approval/post.rs`); the loop sends every POST it is asked for and
//! answers each, even one whose task failed, with [`Input::ApprovalSent`] or
//! [`Input::ApprovalFailed`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use forewarn_imds::{Documents, EventId, ImdsClient, ImdsClock, ImdsTime, ScheduledEvent};
use forewarn_runtime::{CallContext, Readiness};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::coordination::{CoordinatorHandle, Verdicts};
use crate::daemon::journal::Journal;
use crate::daemon::journal_keeper::{CommitWhen, JournalKeeper};
use crate::daemon::journal_schema;
use crate::daemon::plugin_starts::PluginStarts;
use crate::daemon::readiness_holds;
use crate::daemon::tasks_in_flight::TasksInFlight;
use crate::daemon::timeline_broadcast::Timeline;
use crate::durable_file::DurableFileError;
use crate::log_messages;
use crate::pipeline::approval::BarrierVerdict;
use crate::pipeline::machine::{Action, CallAnswer, Input, Pipeline, PipelineSettings};
use crate::pipeline::policy::PolicyConfig;
use crate::pipeline::quarantine::QuarantinedPlugin;
use crate::pipeline::scheduler::CallReply;
use crate::pipeline::scheduler::PlannedCall;
use crate::pipeline::state::{AnswerOutcome, DaemonState};
use crate::pipeline::timeline::TimelineEntry;
use crate::plugins::convert::{reply_of, to_wit_event, to_wit_phase, unloaded_reply};
use crate::plugins::set::SharedPlugins;
use crate::service_manager::{ShutdownNotice, ShutdownWatch};
use crate::storage_health::StorageHealth;

/// The longest the loop sleeps with nothing scheduled (it wakes on every input anyway).
const IDLE_WAKE: Duration = Duration::from_secs(60);

/// What the loop needs to know besides its inputs.
#[derive(Debug, Clone)]
pub struct DaemonSettings {
    /// This VM's name, as IMDS lists it in `Resources`.
    pub vm_name: String,
    /// This VM's priority and eviction policy, as plugins see them.
    pub vm: forewarn_runtime::wit::latest::VmInfo,
    /// The `[policy]` section.
    pub policy: PolicyConfig,
    /// Where the journal lives (`daemon.state-dir`).
    pub state_dir: PathBuf,
}

/// The loop's own errors: only a journal that cannot be read stops the daemon from
/// starting. One that cannot be written degrades it (docs/operations.md, "When the disk is
/// full").
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The journal could not be read (nor moved aside).
    #[error("the journal cannot be read, so forewarn cannot know what it already did: {0}")]
    Journal(#[from] DurableFileError),
}

/// The event loop and the I/O it owns.
pub struct Daemon {
    settings: DaemonSettings,
    pipeline: Pipeline,
    client: ImdsClient,
    plugins: SharedPlugins,
    timeline: Timeline,
    journal: JournalKeeper,
    /// Whether the pipeline was last told the journal is durable.
    journal_durable: bool,
    /// The plugin calls in flight, each with its call, so a task that fails still answers
    /// it: a plugin has one call in flight at a time, and a lost answer would keep it busy
    /// until a restart.
    calls: TasksInFlight<CallAnswer, PlannedCall>,
    snapshots: watch::Sender<Arc<DaemonState>>,
    /// The plugins in crash-loop quarantine, for status; updated when one enters or leaves.
    quarantined: watch::Sender<Vec<QuarantinedPlugin>>,
    /// The etcd approval barrier: it takes the pipeline's requests ([`Action::Coordinate`])...
    coordination: Option<CoordinatorHandle>,
    /// ...and sends back its verdicts, each when it changes ([`Input::BarrierVerdict`]).
    verdicts: Option<Verdicts>,
    /// The VM's readiness, whose holds are journaled with the state (`with_readiness`).
    readiness: Option<Arc<Readiness>>,
    /// Each plugin's `on-start` of this run, awaited by its first call.
    starts: PluginStarts,
    /// The approval POSTs in flight (the approval stage asks for one at a time), each
    /// answering with its input ([`Input::ApprovalSent`] or [`Input::ApprovalFailed`]) and
    /// holding the events it approves, so a task that fails still answers the pipeline,
    /// which sends no other approval until it hears back.
    approvals: TasksInFlight<Input, Vec<EventId>>,
    /// IMDS's clock: every `now` the pipeline is given is on it (see `Daemon::now`).
    clock: ImdsClock,
    /// The operating system's shutdown, held back by the service manager while the plugins
    /// prepare ([`Input::HostShutdown`], [`Action::ReleaseShutdown`]); None: not held.
    shutdown_watch: Option<ShutdownWatch>,
}

impl Daemon {
    /// Opens the journal in `settings.state_dir` and resumes from it; `storage` hears how
    /// its writes fare.
    pub fn open(
        settings: DaemonSettings,
        client: ImdsClient,
        plugins: SharedPlugins,
        timeline: Timeline,
        storage: Arc<StorageHealth>,
    ) -> Result<Daemon, DaemonError> {
        let (journal, opened) = Journal::open(&settings.state_dir)?;
        let journal =
            JournalKeeper::new(journal, storage, opened.unwritable.as_ref(), Instant::now());
        if let Some(quarantined) = &opened.quarantined {
            tracing::error!(
                moved_to = %quarantined.display(),
                "{}",
                log_messages::JOURNAL_QUARANTINED
            );
        }
        if let Some(quarantined) = &opened.quarantined_log {
            tracing::error!(
                moved_to = %quarantined.display(),
                "{}",
                log_messages::CHANGE_LOG_QUARANTINED
            );
        }
        // A quarantined journal or log means an earlier run on this VM: not a first run.
        let first_run = opened.record.is_none()
            && opened.quarantined.is_none()
            && opened.quarantined_log.is_none();
        let state = journal_schema::resume(opened.record);
        let snapshots = watch::channel(Arc::new(state.clone())).0;
        let pipeline = Pipeline::new(pipeline_settings(&settings), state);
        let starts = PluginStarts::new(&settings.vm_name, settings.vm, first_run);
        let clock = client.clock();
        Ok(Daemon {
            settings,
            pipeline,
            client,
            plugins,
            timeline,
            journal,
            // What the pipeline believes; the first round tells it otherwise if need be.
            journal_durable: true,
            calls: TasksInFlight::new(),
            snapshots,
            quarantined: watch::channel(Vec::new()).0,
            coordination: None,
            verdicts: None,
            readiness: None,
            starts,
            approvals: TasksInFlight::new(),
            clock,
            shutdown_watch: None,
        })
    }

    /// Now on IMDS's clock, which NotBefore is on: the VM's wall clock corrected by the
    /// offset IMDS's `Date` headers show (none until IMDS answered; see `ImdsClock`). Every
    /// deadline is planned on it, so a VM clock that is behind, ahead or stepped does not
    /// move them.
    fn now(&self) -> ImdsTime {
        self.clock.now()
    }

    /// A view of the state as last recorded (on disk, or waiting for the journal), updated
    /// at every commit (for status).
    pub(crate) fn snapshots(&self) -> watch::Receiver<Arc<DaemonState>> {
        self.snapshots.subscribe()
    }

    /// The plugins in quarantine, updated whenever one enters or leaves it (for status).
    pub(crate) fn quarantined_plugins(&self) -> watch::Receiver<Vec<QuarantinedPlugin>> {
        self.quarantined.subscribe()
    }

    /// Approves events naming several VMs together with the other VMs, through etcd.
    pub(crate) fn with_coordination(
        mut self,
        coordinator: CoordinatorHandle,
        verdicts: Verdicts,
    ) -> Daemon {
        self.pipeline.coordinate_with_barrier();
        if coordinator.keeps_a_disruption_budget() {
            self.pipeline.keep_to_disruption_budget();
        }
        self.coordination = Some(coordinator);
        self.verdicts = Some(verdicts);
        self
    }

    /// Prepares the plugins when the operating system shuts down with no Scheduled Event,
    /// while `watch`'s service manager holds the shutdown back.
    pub(crate) fn with_shutdown_watch(mut self, watch: Option<ShutdownWatch>) -> Daemon {
        self.shutdown_watch = watch;
        self
    }

    /// Journals `readiness`'s holds with every commit (restored at start by
    /// [`readiness_holds::restore`]) and releases those of removed or ungranted plugins.
    pub(crate) fn with_readiness(mut self, readiness: Arc<Readiness>) -> Daemon {
        self.readiness = Some(readiness);
        self
    }

    /// Runs until `shutdown` is cancelled or `documents` closes, then lets calls and approval
    /// POSTs in flight finish and journals their outcomes (see `finish_calls_in_flight`). A
    /// new document goes before answers waiting to be taken: documents are at most one a
    /// second, and the newest is the only one that matters (a Preempt in it must not wait
    /// behind a stream of answers).
    pub async fn run(
        mut self,
        mut documents: Documents,
        shutdown: CancellationToken,
    ) -> Result<(), DaemonError> {
        let mut plugins = self.plugins.clone();
        // False once the plugin set's sender is gone: the set can no longer change (polling
        // a closed watch would answer at once, every turn).
        let mut plugin_set_open = true;
        self.plugins_changed();
        loop {
            self.execute().await?;
            let wake = self.sleep_for(self.now());
            tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                changed = documents.changed() => match changed {
                    Ok(()) => self.document_arrived(&mut documents),
                    Err(_) => break,
                },
                Some(ended) = self.calls.next_ended(), if !self.calls.is_empty() => {
                    self.answered(ended);
                }
                Some(ended) = self.approvals.next_ended(), if !self.approvals.is_empty() => {
                    self.approval_answered(ended);
                }
                changed = plugins.changed(), if plugin_set_open => match changed {
                    Ok(()) => self.plugins_changed(),
                    // The set can no longer change: keep working with the last one.
                    Err(_) => plugin_set_open = false,
                },
                Some(notice) = next_shutdown_notice(&mut self.shutdown_watch) => {
                    let input = match notice {
                        ShutdownNotice::Coming { budget } => Input::HostShutdown { budget },
                        ShutdownNotice::CalledOff => Input::HostShutdownCancelled,
                    };
                    self.pipeline.handle(input, self.now());
                }
                Some((event_id, verdict)) = next_verdict(&mut self.verdicts) => {
                    let input = Input::BarrierVerdict { event_id, verdict };
                    self.pipeline.handle(input, self.now());
                }
                () = tokio::time::sleep(wake) => self.pipeline.handle_timeout(self.now()),
            }
        }
        self.finish_calls_in_flight().await
    }

    /// The newest document (the poller's watch keeps only that one) goes to the pipeline.
    fn document_arrived(&mut self, documents: &mut Documents) {
        let newest = documents.borrow_and_update().clone();
        if let Some(document) = newest {
            self.pipeline.handle(Input::Document(document), self.now());
        }
    }

    /// Stops: the pipeline starts no new call or POST, and every task in flight is awaited,
    /// not aborted. A call's answer is journaled (the plugin is not asked again for nothing
    /// by the next start); a POST's outcome too: one IMDS accepted is journaled as sent, not
    /// left due to be sent again, and its `Coordinate(Sent)` reaches the coordinator, which
    /// the daemon stops only after this loop returned (it records the approval in etcd
    /// then). The wait is bounded: a call by its
    /// budget, a POST by the IMDS client's time-out.
    async fn finish_calls_in_flight(&mut self) -> Result<(), DaemonError> {
        self.pipeline.handle(Input::ShutdownStarted, self.now());
        if !self.calls.is_empty() || !self.approvals.is_empty() {
            tracing::info!(
                calls = self.calls.len(),
                approvals = self.approvals.len(),
                "waiting for plugin calls and approvals in flight to finish"
            );
        }
        self.execute().await?;
        loop {
            tokio::select! {
                Some(ended) = self.calls.next_ended() => self.answered(ended),
                Some(ended) = self.approvals.next_ended() => self.approval_answered(ended),
                else => break,
            }
            self.execute().await?;
        }
        self.persist(Arc::new(self.pipeline.state().clone()), CommitWhen::Now);
        self.journal.flush(Instant::now());
        Ok(())
    }

    /// Executes every action the pipeline queued, in order (after writing a grouped commit
    /// whose window ended, or retrying a failed journal, when due).
    async fn execute(&mut self) -> Result<(), DaemonError> {
        self.journal.tick(Instant::now());
        self.report_durability();
        while let Some(action) = self.pipeline.poll_action() {
            match action {
                Action::Persist(state) => self.persist(state, CommitWhen::Now),
                Action::PersistGrouped(state) => self.persist(state, CommitWhen::Grouped),
                Action::Call(call) => self.start_call(call),
                Action::Coordinate(request) => match &self.coordination {
                    Some(coordinator) => coordinator.request(request),
                    None => tracing::error!(
                        ?request,
                        "a request to the etcd barrier without [coordination]; this is a bug in forewarn"
                    ),
                },
                Action::Approve(event_ids) => self.start_approval(event_ids),
                Action::ReleaseShutdown(_) => {
                    if let Some(watch) = &self.shutdown_watch {
                        watch.release();
                    }
                }
                Action::Emit(entry) => {
                    if matches!(
                        entry,
                        TimelineEntry::PluginQuarantined(_)
                            | TimelineEntry::QuarantineLifted { .. }
                    ) {
                        self.quarantined.send_replace(self.pipeline.quarantined());
                    }
                    // No subscriber is fine: the timeline is for whoever listens.
                    let _ignored = self.timeline.send(entry);
                }
            }
        }
        Ok(())
    }

    /// How long to sleep before the pipeline's next timeout (or the journal's next write).
    fn sleep_for(&self, now: ImdsTime) -> Duration {
        let journal = self
            .journal
            .wake_at()
            .map(|at| at.saturating_duration_since(Instant::now()));
        self.pipeline
            .poll_timeout()
            .map(|at| at.duration_since(now))
            .into_iter()
            .chain(journal)
            .min()
            .unwrap_or(IDLE_WAKE)
            .min(IDLE_WAKE)
    }

    /// The plugin set changed: the pipeline schedules by the new roster, and readiness
    /// holds of plugins that were removed or lost the grant are released.
    fn plugins_changed(&mut self) {
        let set = self.plugins.borrow().clone();
        self.starts.start_new(&set);
        self.pipeline
            .handle(Input::Plugins(set.roster().clone()), self.now());
        let Some(readiness) = &self.readiness else {
            return;
        };
        if readiness_holds::release_stale(readiness, &set) {
            self.pipeline
                .handle(Input::ReadinessHoldsChanged, self.now());
        }
    }

    /// A plugin call ended, or its task failed: the pipeline hears its answer.
    fn answered(&mut self, ended: Result<CallAnswer, (PlannedCall, tokio::task::JoinError)>) {
        let answer = match ended {
            Ok(answer) => answer,
            // A panic inside the runtime is a forewarn bug; the call counts as a trap, so
            // the plugin is free for its next call.
            Err((call, error)) => {
                tracing::error!(%error, "a plugin call task failed; this is a bug in forewarn");
                CallAnswer {
                    reply: CallReply {
                        outcome: AnswerOutcome::Trap,
                        reason: format!("the call task failed: {error}"),
                        retry_after: Duration::ZERO,
                        elapsed: Duration::ZERO,
                        logs: Vec::new(),
                    },
                    call,
                }
            }
        };
        self.pipeline
            .handle(Input::Answer(Box::new(answer)), self.now());
    }

    fn start_call(&mut self, call: PlannedCall) {
        let plugin = self.plugins.borrow().get(&call.plugin).cloned();
        let context = CallContext {
            vm_name: self.settings.vm_name.clone(),
            affects_this_vm: call.affects_this_vm,
            attempt: call.attempt,
            vm: self.settings.vm,
        };
        let planned = call.clone();
        let start_gate = self.starts.gate(&call.plugin);
        let offset_ms = self.clock.skew().map_or(0, |skew| skew.offset_ms);
        self.calls.spawn(planned, async move {
            let Some(plugin) = plugin else {
                // Unloaded between the pipeline's round and this call.
                return CallAnswer {
                    reply: unloaded_reply(&call.plugin),
                    call,
                };
            };
            // The call's budget includes any wait for the plugin's on-start: its deadline is
            // the one the pipeline planned, however long recovery takes.
            let mut budget = call.budget;
            if let Some(gate) = start_gate {
                let waited = gate.passed_within(&plugin, call.budget).await;
                budget = call.budget.saturating_sub(waited);
            }
            let event = to_wit_event(&on_vm_clock(call.event.clone(), offset_ms));
            let outcome = plugin
                .plugin
                .call(&event, to_wit_phase(call.phase), &context, budget)
                .await;
            CallAnswer {
                reply: reply_of(outcome),
                call,
            }
        });
    }

    /// POSTs the approvals (already journaled as due) in a task; its outcome comes back
    /// through [`Daemon::approval_answered`].
    fn start_approval(&mut self, event_ids: Vec<EventId>) {
        let client = self.client.clone();
        let ids = event_ids.clone();
        self.approvals.spawn(event_ids, async move {
            match client.approve(&ids).await {
                Ok(()) => Input::ApprovalSent(ids),
                Err(error) => Input::ApprovalFailed {
                    event_ids: ids,
                    rejected: error.is_rejection(),
                    error: error.to_string(),
                },
            }
        });
    }

    /// An approval POST returned, or its task failed (a panic: a failed POST, sent again
    /// after the usual wait): the pipeline hears how it went.
    fn approval_answered(&mut self, ended: Result<Input, (Vec<EventId>, tokio::task::JoinError)>) {
        let input = match ended {
            Ok(input) => input,
            Err((event_ids, error)) => {
                tracing::error!(%error, "the approval task failed; this is a bug in forewarn");
                Input::ApprovalFailed {
                    event_ids,
                    rejected: false,
                    error: format!("the approval task failed: {error}"),
                }
            }
        };
        self.pipeline.handle(input, self.now());
    }

    /// Hands `state` to the journal (which writes it `when` asked, or keeps it while the
    /// disk refuses), shows it in status, and tells the pipeline when the journal stopped
    /// or started being durable.
    fn persist(&mut self, state: Arc<DaemonState>, when: CommitWhen) {
        let readiness_holds = self
            .readiness
            .as_ref()
            .map(|readiness| readiness.holders().into_iter().collect())
            .unwrap_or_default();
        self.journal
            .record(state.clone(), readiness_holds, when, Instant::now());
        self.snapshots.send_replace(state);
        self.report_durability();
    }

    /// Tells the pipeline when the journal stopped or started being durable: it holds
    /// approvals meanwhile, and takes back one queued behind a commit that failed.
    fn report_durability(&mut self) {
        let durable = self.journal.is_durable();
        if durable == self.journal_durable {
            return;
        }
        self.journal_durable = durable;
        self.pipeline
            .handle(Input::JournalDurable(durable), self.now());
    }
}

/// The barrier's next verdict; pending forever without coordination. A coordinator that
/// stopped (its task ended) is said once, and its arm waits forever after.
/// The service manager's next word on the operating system's shutdown; pending forever when
/// nothing holds shutdowns back (or no longer can).
async fn next_shutdown_notice(watch: &mut Option<ShutdownWatch>) -> Option<ShutdownNotice> {
    let Some(receiver) = watch.as_mut() else {
        return std::future::pending().await;
    };
    let notice = receiver.next().await;
    if notice.is_none() {
        *watch = None;
    }
    notice
}

async fn next_verdict(verdicts: &mut Option<Verdicts>) -> Option<(EventId, BarrierVerdict)> {
    let Some(receiver) = verdicts.as_mut() else {
        return std::future::pending().await;
    };
    let verdict = receiver.recv().await;
    if verdict.is_none() {
        tracing::error!(
            "the etcd coordinator stopped; events naming several VMs wait on it no longer \
             change; this is a bug in forewarn"
        );
        *verdicts = None;
    }
    verdict
}

/// `event` as a plugin sees it: NotBefore on the VM's own clock (IMDS's less the offset
/// between them), so that what a plugin computes from it and the VM's clock (the time left,
/// `until-not-before-ms`) is right however far the VM's clock is off.
fn on_vm_clock(mut event: ScheduledEvent, imds_ahead_ms: i64) -> ScheduledEvent {
    let by = Duration::from_millis(imds_ahead_ms.unsigned_abs());
    event.not_before = event.not_before.and_then(|not_before| match imds_ahead_ms {
        ahead if ahead >= 0 => not_before.checked_sub(by),
        _ => not_before.checked_add(by),
    });
    event
}

fn pipeline_settings(settings: &DaemonSettings) -> PipelineSettings {
    PipelineSettings {
        vm_name: settings.vm_name.clone(),
        policy: settings.policy.clone(),
    }
}

#[cfg(test)]
mod tests;

//! A test harness for the pipeline on a fake clock, in the style of quinn-proto's `Pair`:
//! time only moves when a test steps it to the pipeline's next timeout, and plugins answer
//! as each test scripts them, so every test runs in microseconds and never sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use forewarn_events::{
    Document, EventId, EventStatus, EventType, ImdsTime, PluginName, ScheduledEvent,
};

use crate::approval::BarrierRequest;
use crate::machine::{Action, CallAnswer, Input, Pipeline, PipelineSettings};
use crate::policy::PolicyConfig;
use crate::roster::{FailurePolicy, PluginTerms, Roster, Subscription};
use crate::scheduler::{CallReply, PlannedCall};
use crate::state::{AnswerOutcome, CallPhase, DaemonState};
use serde::Deserialize;

/// The VM the harness's pipeline runs on.
pub const VM: &str = "vm-a";

/// The harness's start time: a fixed instant, so failures print the same numbers.
pub fn t0() -> ImdsTime {
    ImdsTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

type Script = Box<dyn Fn(&PlannedCall) -> CallReply>;

/// One action as the harness executed it, with the fake time.
#[derive(Debug, Clone)]
pub struct Executed {
    /// The fake time it was executed at.
    pub at: ImdsTime,
    /// What the pipeline asked for.
    pub action: Action,
}

/// A pipeline, a fake clock, and scripted plugins.
pub struct Harness {
    /// The fake clock.
    pub now: ImdsTime,
    /// The pipeline under test.
    pub pipeline: Pipeline,
    /// Every action executed, in order.
    pub log: Vec<Executed>,
    /// The state last persisted.
    pub persisted: Option<Arc<DaemonState>>,
    scripts: BTreeMap<String, Script>,
    /// Whether IMDS accepts approvals (false: it answers 500).
    pub imds_accepts: bool,
    /// Ids IMDS does not know: a POST naming any of them is refused with 400.
    pub imds_unknown: BTreeSet<String>,
    /// While Some, calls are started but not answered: they wait here, in flight, until
    /// [`Harness::answer_held`].
    pub held: Option<Vec<PlannedCall>>,
    /// Whether the journal's commits reach the disk: while false, a persist fails and the
    /// pipeline hears so, as the event loop tells it ([`Harness::journal_writable_again`]).
    pub journal_writable: bool,
    journal_reported_durable: bool,
}

impl Harness {
    /// A fresh pipeline with `plugins` (name, manifest text), under `policy`.
    pub fn new(plugins: &[(&str, &str)], policy: PolicyConfig) -> Harness {
        Harness::resume(plugins, policy, DaemonState::default(), t0())
    }

    /// A pipeline resuming from `state` (as after a restart) at `now`.
    pub fn resume(
        plugins: &[(&str, &str)],
        policy: PolicyConfig,
        state: DaemonState,
        now: ImdsTime,
    ) -> Harness {
        let settings = PipelineSettings {
            vm_name: VM.to_owned(),
            policy,
        };
        let mut harness = Harness {
            now,
            pipeline: Pipeline::new(settings, state),
            log: Vec::new(),
            persisted: None,
            scripts: BTreeMap::new(),
            imds_accepts: true,
            imds_unknown: BTreeSet::new(),
            held: None,
            journal_writable: true,
            journal_reported_durable: true,
        };
        harness.input(Input::Plugins(Arc::new(roster(plugins))));
        harness
    }

    /// A fresh pipeline whose events naming this VM and others wait on the etcd barrier:
    /// its requests are only recorded ([`Harness::barrier_requests`]); a test plays the
    /// coordinator by feeding [`Input::BarrierVerdict`].
    pub fn coordinated(plugins: &[(&str, &str)], policy: PolicyConfig) -> Harness {
        let mut harness = Harness::new(plugins, policy);
        harness.pipeline.coordinate_with_barrier();
        harness
    }

    /// Scripts how `plugin` answers (every plugin approves at once unless scripted).
    pub fn script(&mut self, plugin: &str, reply: impl Fn(&PlannedCall) -> CallReply + 'static) {
        self.scripts.insert(plugin.to_owned(), Box::new(reply));
    }

    /// IMDS lists `events` now.
    pub fn document(&mut self, events: &[ScheduledEvent]) {
        let document = Document {
            incarnation: Some(1),
            events: events.to_vec(),
            rejected: Vec::new(),
        };
        self.input(Input::Document(Arc::new(document)));
    }

    /// Feeds `input` at the current time and executes everything that follows: calls are
    /// answered at once by their scripts, approvals by IMDS as `imds_accepts` says.
    pub fn input(&mut self, input: Input) {
        self.pipeline.handle(input, self.now);
        self.execute();
    }

    /// Jumps the clock to the pipeline's next timeout (if it is before `limit`) and runs the
    /// round; returns false when nothing is due before `limit`.
    pub fn step_before(&mut self, limit: ImdsTime) -> bool {
        let Some(at) = self.pipeline.poll_timeout() else {
            return false;
        };
        if at > limit {
            return false;
        }
        self.now = self.now.max(at);
        self.pipeline.handle_timeout(self.now);
        self.execute();
        self.assert_nothing_left_due();
        // A timeout that is still due after its round would make the event loop spin.
        if let Some(next) = self.pipeline.poll_timeout() {
            assert!(
                next > self.now,
                "the timeout at {next:?} is still due after its round (now {:?})",
                self.now
            );
        }
        true
    }

    /// Steps through every timeout in the next `span` of fake time, then sets the clock to
    /// its end.
    pub fn run_for(&mut self, span: Duration) {
        let end = self.now + span;
        while self.step_before(end) {}
        self.now = end;
        self.pipeline.handle_timeout(self.now);
        self.execute();
    }

    /// A second round at the same instant starts nothing: everything due was done (a call or
    /// an approval left due but not started would only happen at the next input).
    fn assert_nothing_left_due(&mut self) {
        self.pipeline.handle_timeout(self.now);
        while let Some(action) = self.pipeline.poll_action() {
            assert!(
                matches!(
                    action,
                    Action::Persist(_) | Action::PersistGrouped(_) | Action::Emit(_)
                ),
                "{action:?} was due at {:?} but not started by its round",
                self.now
            );
        }
    }

    fn execute(&mut self) {
        while let Some(action) = self.pipeline.poll_action() {
            self.log.push(Executed {
                at: self.now,
                action: action.clone(),
            });
            match action {
                Action::Persist(state) | Action::PersistGrouped(state) => {
                    if self.journal_writable {
                        self.persisted = Some(state);
                    } else if self.journal_reported_durable {
                        self.journal_reported_durable = false;
                        self.pipeline.handle(Input::JournalDurable(false), self.now);
                    }
                }
                Action::Call(call) => match &mut self.held {
                    Some(held) => held.push(call),
                    // Answered later in this loop, after the actions already queued.
                    None => self.answer(call),
                },
                Action::Approve(event_ids) => {
                    let stale = event_ids
                        .iter()
                        .any(|id| self.imds_unknown.contains(id.as_str()));
                    let input = if stale {
                        Input::ApprovalFailed {
                            event_ids,
                            rejected: true,
                            error: "IMDS answered 400".into(),
                        }
                    } else if self.imds_accepts {
                        Input::ApprovalSent(event_ids)
                    } else {
                        Input::ApprovalFailed {
                            event_ids,
                            rejected: false,
                            error: "IMDS answered 500".into(),
                        }
                    };
                    self.pipeline.handle(input, self.now);
                }
                Action::Coordinate(_) | Action::Emit(_) | Action::ReleaseShutdown(_) => {}
            }
        }
    }

    fn answer(&mut self, call: PlannedCall) {
        let reply = match self.scripts.get(call.plugin.as_str()) {
            Some(script) => script(&call),
            None => approve(),
        };
        self.pipeline.handle(
            Input::Answer(Box::new(CallAnswer { call, reply })),
            self.now,
        );
    }

    /// The journal can be written again: the newest state is on disk, and the pipeline hears
    /// so (as from the event loop after a retry that worked).
    pub fn journal_writable_again(&mut self) {
        self.journal_writable = true;
        self.journal_reported_durable = true;
        self.persisted = Some(Arc::new(self.pipeline.state().clone()));
        self.input(Input::JournalDurable(true));
    }

    /// From now on, calls stay in flight until [`Harness::answer_held`] answers them.
    pub fn hold_answers(&mut self) {
        self.held.get_or_insert_with(Vec::new);
    }

    /// Answers the calls held so far (by their scripts) and executes what follows; calls
    /// started meanwhile are held in turn. Returns the calls answered.
    pub fn answer_held(&mut self) -> Vec<PlannedCall> {
        let answered = self.held.replace(Vec::new()).unwrap_or_default();
        for call in answered.clone() {
            self.answer(call);
            self.execute();
        }
        answered
    }

    /// The calls started so far: (time, plugin, phase, attempt, budget).
    pub fn calls(&self) -> Vec<(ImdsTime, PluginName, CallPhase, u32, Duration)> {
        self.log
            .iter()
            .filter_map(|executed| match &executed.action {
                Action::Call(call) => Some((
                    executed.at,
                    call.plugin.clone(),
                    call.phase,
                    call.attempt,
                    call.budget,
                )),
                _ => None,
            })
            .collect()
    }

    /// The (plugin, phase) of every call started, in order.
    pub fn call_order(&self) -> Vec<(String, CallPhase)> {
        self.calls()
            .into_iter()
            .map(|(_, plugin, phase, _, _)| (plugin.into_string(), phase))
            .collect()
    }

    /// The requests to the etcd barrier, in order.
    pub fn barrier_requests(&self) -> Vec<BarrierRequest> {
        self.log
            .iter()
            .filter_map(|executed| match &executed.action {
                Action::Coordinate(request) => Some(request.clone()),
                _ => None,
            })
            .collect()
    }

    /// The operating system's shutdown let go on: (time, why).
    pub fn shutdown_releases(&self) -> Vec<(ImdsTime, crate::host_shutdown::ShutdownRelease)> {
        self.log
            .iter()
            .filter_map(|executed| match &executed.action {
                Action::ReleaseShutdown(release) => Some((executed.at, release.clone())),
                _ => None,
            })
            .collect()
    }

    /// The approval POSTs: (time, event ids).
    pub fn approvals(&self) -> Vec<(ImdsTime, Vec<EventId>)> {
        self.log
            .iter()
            .filter_map(|executed| match &executed.action {
                Action::Approve(ids) => Some((executed.at, ids.clone())),
                _ => None,
            })
            .collect()
    }
}

/// A roster from (name, manifest text) pairs.
pub fn roster(plugins: &[(&str, &str)]) -> Roster {
    Roster::new(
        plugins
            .iter()
            .map(|(name, text)| {
                let manifest: ManifestText = toml::from_str(text)
                    .unwrap_or_else(|error| panic!("manifest of {name}: {error}"));
                (PluginName::from(*name), manifest.terms())
            })
            .collect(),
    )
}

/// The keys of a plugin manifest the pipeline reads, as tests write them (the daemon's
/// `forewarn-manifest` parses and checks the whole file; the pipeline sees only the terms).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
struct ManifestText {
    subscribe: Vec<String>,
    after: Vec<PluginName>,
    #[serde(with = "humantime_serde")]
    budget: Duration,
    #[serde(with = "humantime_serde::option")]
    prepare_time: Option<Duration>,
    on_failure: FailurePolicy,
    prepare_again_on_reschedule: bool,
}

impl Default for ManifestText {
    fn default() -> Self {
        let terms = PluginTerms::default();
        ManifestText {
            subscribe: vec!["*".into()],
            after: terms.after,
            budget: terms.budget,
            prepare_time: terms.prepare_time,
            on_failure: terms.on_failure,
            prepare_again_on_reschedule: terms.prepare_again_on_reschedule,
        }
    }
}

impl ManifestText {
    fn terms(self) -> PluginTerms {
        PluginTerms {
            subscribe: Subscription::of_names(&self.subscribe),
            after: self.after,
            budget: self.budget,
            prepare_time: self.prepare_time,
            on_failure: self.on_failure,
            prepare_again_on_reschedule: self.prepare_again_on_reschedule,
        }
    }
}

/// A Scheduled event for [`VM`] with NotBefore `notice` after `now`.
pub fn event(id: &str, event_type: EventType, now: ImdsTime, notice: Duration) -> ScheduledEvent {
    ScheduledEvent {
        resources: vec![VM.to_owned()],
        not_before: Some((now + notice).system_time()),
        ..ScheduledEvent::new(id, event_type, EventStatus::Scheduled)
    }
}

/// The timeline entry of `transition` of `event`, as the pipeline emits it.
pub fn transition_entry(
    event: &ScheduledEvent,
    transition: crate::tracker::TransitionKind,
) -> crate::timeline::TimelineEntry {
    crate::timeline::TimelineEntry::Transition {
        event_id: event.id.clone(),
        event_type: event.event_type,
        event_type_raw: event.event_type_raw.clone(),
        transition,
        detail: String::new(),
        announced: Box::new(event.clone()),
    }
}

/// The same event, Started.
pub fn started(event: &ScheduledEvent) -> ScheduledEvent {
    ScheduledEvent {
        status: EventStatus::Started,
        not_before: None,
        ..event.clone()
    }
}

/// An approving reply.
pub fn approve() -> CallReply {
    reply(AnswerOutcome::Approve, Duration::ZERO)
}

/// A deferring reply asking to be called again after `retry_after`.
pub fn defer(retry_after: Duration) -> CallReply {
    CallReply {
        reason: "not yet".into(),
        ..reply(AnswerOutcome::Defer, retry_after)
    }
}

/// A reply with `outcome` (a failure kind, for instance).
pub fn reply(outcome: AnswerOutcome, retry_after: Duration) -> CallReply {
    CallReply {
        outcome,
        reason: String::new(),
        retry_after,
        elapsed: Duration::from_millis(3),
        logs: Vec::new(),
    }
}

//! The simulation running against the real clock, shared by the HTTP handlers and the
//! timer task: every access first catches the state up to now, so documents are current.

use forewarn_imds::millis;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use forewarn_imds::EventId;
use tokio::sync::watch;

use crate::faults::{
    FaultKind, FaultMethod, FaultOutcome, FaultPlan, GetCounts, incarnation_resets, plan_request,
    vm_clock_changes,
};
use crate::replay::{history_records, served_document};
use crate::scale_set::{ProbeOutcome, ScaleSetModel};
use crate::scenario::Scenario;
use crate::scenario_clock::{ScenarioClock, unix_ms};
use crate::simulation::{Simulation, UnknownEvent};
use crate::snapshot::{
    ApprovalRecord, BoundedLog, FaultRecord, REQUEST_LOG_LIMIT, RequestRecord, StateSnapshot,
    WireDocument,
};

/// How many times a client must have fetched the current document before a quiet stretch
/// after it is skipped: the second fetch comes a poll interval after the first, by when the
/// client has acted on what the first one listed.
const SEEN_AFTER_SERVED: u32 = 2;

/// Everything the handlers and the timer share.
pub(crate) struct Engine {
    /// Scenario time runs this many times faster than wall time (for every scenario the
    /// console starts, too).
    speed: f64,
    inner: Mutex<Inner>,
    finished: watch::Sender<bool>,
    shutdown: watch::Sender<bool>,
}

pub(crate) struct Inner {
    /// The scenario playing: the one the simulator started with, or the last one the
    /// console started; the console's faults are added to it.
    pub(crate) scenario: Arc<Scenario>,
    pub(crate) clock: ScenarioClock,
    pub(crate) simulation: Simulation,
    /// The scale set around the VMs, when the scenario has one.
    pub(crate) scale_set: Option<ScaleSetModel>,
    approvals: BoundedLog<ApprovalRecord>,
    pub(crate) requests: BoundedLog<RequestRecord>,
    /// How many GETs to scheduledevents each VM has made, in all and in each fault's window.
    gets: GetCounts,
    history_logged: usize,
    pub(crate) faults: BoundedLog<FaultRecord>,
    /// How many incarnation resets a served document has shown so far.
    resets_served: usize,
    /// The sequence number the next recorded request gets (from 1; never reused).
    next_request_seq: u64,
    /// How many events the console has generated (their ids derive from it).
    pub(crate) generated_events: usize,
    /// What makes this simulator's generated ids differ from another run's: when it started.
    pub(crate) seed: u64,
    /// Scenario time stays at 0 until the first GET of scheduledevents
    /// ([`Engine::hold_until_first_poll`]).
    held_until_poll: bool,
    /// The document last served and what it was rendered from (see `Engine::document_json`).
    served: Option<(ServedKey, Arc<str>)>,
    /// How many times that document was served.
    served_times: u32,
    /// Whether a quiet stretch is skipped at the next fetch of the document
    /// ([`Engine::allow_skipping`]).
    skip_allowed: bool,
}

/// What a served document depends on: every change of the events is in the history (or is
/// an incarnation reset), and the api-version asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ServedKey {
    changes: usize,
    incarnation: u64,
    api_version: String,
}

impl Inner {
    fn new(scenario: Arc<Scenario>, clock: ScenarioClock) -> Inner {
        let (ahead, steps) = vm_clock_changes(&scenario.faults);
        let clock = clock.with_vm_clock(ahead, steps);
        Inner {
            simulation: Simulation::new(&scenario),
            scale_set: scenario.scale_set.clone().map(ScaleSetModel::new),
            scenario,
            clock,
            approvals: BoundedLog::new(REQUEST_LOG_LIMIT),
            requests: BoundedLog::new(REQUEST_LOG_LIMIT),
            gets: GetCounts::default(),
            history_logged: 0,
            faults: BoundedLog::new(REQUEST_LOG_LIMIT),
            resets_served: 0,
            next_request_seq: 1,
            generated_events: 0,
            seed: unix_ms(SystemTime::now()),
            held_until_poll: false,
            served: None,
            served_times: 0,
            skip_allowed: false,
        }
    }

    /// Skips scenario time to the end of the quiet stretch now, when skipping is allowed
    /// and may be taken (see [`Engine::allow_skipping`]); returns the scenario time skipped.
    fn skip_quiet_stretch(&mut self) -> Option<Duration> {
        let skippable = self.skip_allowed
            && !self.held_until_poll
            && self.scenario.faults.is_empty()
            && self.scale_set.is_none()
            && self.current_document_seen();
        if !skippable {
            return None;
        }
        let from = self.simulation.now();
        let to = self.simulation.quiet_until().filter(|to| *to > from)?;
        self.clock.skip_to(to);
        let now = self.clock.scenario_now();
        self.simulation.advance(now);
        tracing::debug!(
            scenario = %self.scenario.name,
            from_scenario_ms = millis(from),
            to_scenario_ms = millis(to),
            "a quiet stretch of the scenario skipped"
        );
        Some(to - from)
    }

    /// Whether the document listing the events as they are now was fetched at least
    /// [`SEEN_AFTER_SERVED`] times.
    fn current_document_seen(&self) -> bool {
        let Some((key, _)) = &self.served else {
            return false;
        };
        key.changes == self.simulation.history().len()
            && key.incarnation == self.simulation.incarnation()
            && self.served_times >= SEEN_AFTER_SERVED
    }
}

impl Engine {
    pub(crate) fn new(scenario: Scenario, clock: ScenarioClock) -> Engine {
        let speed = clock.speed();
        Engine {
            speed,
            inner: Mutex::new(Inner::new(Arc::new(scenario), clock)),
            finished: watch::Sender::new(false),
            shutdown: watch::Sender::new(false),
        }
    }

    /// The scenario playing now.
    pub(crate) fn scenario(&self) -> Arc<Scenario> {
        Arc::clone(&self.lock().scenario)
    }

    /// The dedicated host `vm` is on now (`host.id`): the scenario's first, moved on by each
    /// Redeploy of it that started; None when the scenario names none.
    pub(crate) fn dedicated_host(&self, vm: &str) -> Option<String> {
        let inner = self.current();
        let hosts = &inner.scenario.dedicated_hosts;
        let moved = inner.simulation.redeploys_started(vm);
        hosts.get(moved.min(hosts.len().checked_sub(1)?)).cloned()
    }

    /// Plays `scenario` from its start (scenario time 0 is now), at the simulator's speed.
    /// The request, approval and fault logs go on.
    pub(crate) fn restart_with(&self, scenario: Scenario) {
        let mut inner = self.lock();
        self.play_from_start(&mut inner, Arc::new(scenario));
        tracing::info!(scenario = %inner.scenario.name, "scenario started from its beginning");
        self.publish(&mut inner);
    }

    /// Plays the current scenario from its start, with scenario time held at 0 until the
    /// first GET of scheduledevents (any VM's): a client that starts slowly still sees the
    /// whole scenario, its short notices included.
    pub(crate) fn hold_until_first_poll(&self) {
        let mut inner = self.lock();
        let scenario = Arc::clone(&inner.scenario);
        self.play_from_start(&mut inner, scenario);
        inner.held_until_poll = true;
    }

    /// A GET of scheduledevents arrived: a held clock starts now.
    pub(crate) fn note_poll(&self) {
        let mut inner = self.lock();
        if !inner.held_until_poll {
            return;
        }
        let (ahead, steps) = vm_clock_changes(&inner.scenario.faults);
        inner.clock = ScenarioClock::start_now(self.speed).with_vm_clock(ahead, steps);
        inner.held_until_poll = false;
        tracing::info!(scenario = %inner.scenario.name, "first poll: the scenario's clock starts now");
    }

    fn play_from_start(&self, inner: &mut Inner, scenario: Arc<Scenario>) {
        let fresh = Inner::new(scenario, ScenarioClock::start_now(self.speed));
        inner.scenario = fresh.scenario;
        inner.clock = fresh.clock;
        inner.simulation = fresh.simulation;
        inner.scale_set = fresh.scale_set;
        inner.served = None;
        inner.served_times = 0;
        inner.gets.clear();
        inner.history_logged = 0;
        inner.resets_served = 0;
        inner.held_until_poll = false;
        self.finished.send_replace(false);
    }

    /// Changes the state under the lock, caught up to now, and publishes what changed.
    pub(crate) fn with_current<T>(&self, change: impl FnOnce(&mut Inner) -> T) -> T {
        let mut inner = self.current();
        let answer = change(&mut inner);
        self.publish(&mut inner);
        answer
    }

    /// Catches the state up to now (the timer calls this).
    pub(crate) fn tick(&self) {
        drop(self.current());
    }

    /// The VM a request is for: the default VM when unprefixed; None if the scenario
    /// has no VM of that name.
    pub(crate) fn resolve_vm(&self, prefix: Option<&str>) -> Option<String> {
        let scenario = self.scenario();
        match prefix {
            None => Some(scenario.default_vm().to_string()),
            Some(name) => scenario
                .vms
                .iter()
                .find(|vm| vm.eq_ignore_ascii_case(name))
                .cloned(),
        }
    }

    /// How the faults disturb this request; each GET is counted per VM. The
    /// faults that act on it are recorded as served, and so is an incarnation reset the
    /// first time a document after it is served.
    pub(crate) fn plan_fault(&self, vm: &str, method: FaultMethod) -> FaultPlan {
        let mut inner = self.current();
        let now = inner.simulation.now();
        let scenario = Arc::clone(&inner.scenario);
        let numbers = match method {
            FaultMethod::Get => inner.gets.count(vm, &scenario.faults, now),
            FaultMethod::Post => inner.gets.post(vm),
        };
        let plan = plan_request(&scenario.faults, method, now, &numbers);
        let record = |kind: FaultKind| FaultRecord {
            kind,
            method: match method {
                FaultMethod::Get => "GET".to_string(),
                FaultMethod::Post => "POST".to_string(),
            },
            vm: vm.to_string(),
            at_unix_ms: unix_ms(SystemTime::now()),
            at_scenario_ms: millis(now),
            status: None,
            delay_ms: None,
            body: None,
            incarnation: None,
            vm_clock_offset_ms: None,
        };
        for fault in &plan.applied {
            let mut served = record(fault.kind);
            match fault.kind {
                FaultKind::Status => served.status = fault.status,
                FaultKind::Delay | FaultKind::SlowFirstCall => {
                    served.delay_ms = fault.delay.map(millis);
                }
                FaultKind::Malformed => served.body = fault.body,
                FaultKind::IncarnationReset | FaultKind::VmClock => {}
            }
            inner.faults.push(served);
        }
        if method == FaultMethod::Get && plan.outcome == FaultOutcome::Normal {
            let passed = incarnation_resets(&inner.scenario.faults)
                .iter()
                .filter(|at| **at <= now)
                .count();
            if passed > inner.resets_served {
                inner.resets_served = passed;
                let mut served = record(FaultKind::IncarnationReset);
                served.incarnation = Some(inner.simulation.incarnation());
                inner.faults.push(served);
            }
        }
        plan
    }

    /// The current document as JSON in the shape of `api_version` (or of the scenario's
    /// `shape`, if that is older).
    /// Rendered once per change: a document of thousands of events is served every second.
    pub(crate) fn document_json(&self, api_version: &str) -> Arc<str> {
        let mut inner = self.current();
        if inner.skip_quiet_stretch().is_some() {
            self.publish(&mut inner);
        }
        let key = ServedKey {
            changes: inner.simulation.history().len(),
            incarnation: inner.simulation.incarnation(),
            api_version: api_version.to_owned(),
        };
        if let Some((served_key, text)) = &inner.served
            && *served_key == key
        {
            let text = Arc::clone(text);
            inner.served_times = inner.served_times.saturating_add(1);
            return text;
        }
        let text: Arc<str> = served_document(
            &inner.simulation,
            &inner.clock,
            api_version,
            inner.scenario.shape.as_deref(),
            &inner.scenario.omit_fields,
        )
        .into();
        inner.served = Some((key, Arc::clone(&text)));
        inner.served_times = 1;
        text
    }

    /// While `allowed`, each quiet stretch ([`Simulation::quiet_until`]: no event is
    /// Scheduled) is skipped at the client's next fetch of the document, once it has
    /// fetched the current one [`SEEN_AFTER_SERVED`] times: the fetch gets the change that
    /// ends the stretch at the instant it happens, as a client polling at that very moment
    /// would. Neither clock a client reads moves: a NotBefore still to come shows as far
    /// ahead of the wall as it would have. Never with faults (their windows and clock steps
    /// are in scenario time) or a scale set (its probes are).
    pub(crate) fn allow_skipping(&self, allowed: bool) {
        self.lock().skip_allowed = allowed;
    }

    /// Approves the events on behalf of `vm`, recording each id either way.
    pub(crate) fn approve(&self, vm: &str, event_ids: &[EventId]) -> Result<(), UnknownEvent> {
        let mut inner = self.current();
        let now = inner.simulation.now();
        let outcome = inner.simulation.approve(now, event_ids).map(|_| ());
        if outcome.is_ok() {
            inner.gets.approved(vm);
        }
        let at_unix_ms = inner.clock.unix_ms_at(now);
        for event_id in event_ids {
            inner.approvals.push(ApprovalRecord {
                event_id: event_id.to_string(),
                vm: vm.to_string(),
                at_unix_ms,
                at_scenario_ms: millis(now),
                accepted: outcome.is_ok(),
            });
        }
        self.publish(&mut inner);
        outcome
    }

    /// Records a request (its `seq` is filled in here), stamped with when it arrived
    /// (before any injected delay).
    pub(crate) fn record_request(&self, mut request: RequestRecord, arrived: SystemTime) {
        let mut inner = self.lock();
        request.seq = inner.next_request_seq;
        request.at_unix_ms = unix_ms(arrived);
        inner.next_request_seq += 1;
        inner.requests.push(request);
    }

    pub(crate) fn snapshot(&self) -> StateSnapshot {
        let inner = self.current();
        let simulation = &inner.simulation;
        let rendered = forewarn_imds::render_document(&simulation.document(&inner.clock));
        let events = serde_json::from_str::<WireDocument>(&rendered)
            .map(|document| document.events)
            .unwrap_or_default();
        let history = history_records(simulation, &inner.clock);
        StateSnapshot {
            scenario: inner.scenario.name.clone(),
            speed: inner.clock.speed(),
            started_at_unix_ms: inner.clock.started_unix_ms(),
            now_scenario_ms: millis(simulation.now()),
            skipped_scenario_ms: millis(inner.clock.skipped_in_all()),
            finished: simulation.is_finished(),
            incarnation: simulation.incarnation(),
            events,
            approvals: inner.approvals.to_vec(),
            requests: inner.requests.to_vec(),
            history,
            faults: inner.faults.to_vec(),
            scale_set: inner.scale_set.as_ref().map(ScaleSetModel::snapshot),
        }
    }

    pub(crate) fn subscribe_finished(&self) -> watch::Receiver<bool> {
        self.finished.subscribe()
    }

    pub(crate) fn subscribe_shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    pub(crate) fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// The state, caught up to now.
    fn current(&self) -> MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        let now = match inner.held_until_poll {
            true => Duration::ZERO,
            false => inner.clock.scenario_now(),
        };
        record_clock_steps(&mut inner);
        inner.simulation.advance(now);
        if let Some(scale_set) = &mut inner.scale_set {
            scale_set.advance(now);
        }
        self.publish(&mut inner);
        inner
    }

    /// The scale set's probes due now (VM, address, path, wall-time timeout), each marked
    /// sent; empty without a scale set or while the clock is held.
    pub(crate) fn scale_set_probes_due(&self) -> Vec<(String, String, String, Duration)> {
        let mut inner = self.current();
        if inner.held_until_poll {
            return Vec::new();
        }
        let now = inner.simulation.now();
        let Some(scale_set) = &mut inner.scale_set else {
            return Vec::new();
        };
        let extension = scale_set.spec().health_extension.clone();
        let due = scale_set.probes_due(now);
        for (vm, _) in &due {
            scale_set.probe_sent(vm, now);
        }
        due.into_iter()
            .map(|(vm, address)| {
                (
                    vm,
                    address,
                    extension.request_path.clone(),
                    extension.probe_timeout,
                )
            })
            .collect()
    }

    /// What a probe of `vm` got, taken in at the scenario time it came back.
    pub(crate) fn record_probe(&self, vm: &str, outcome: &ProbeOutcome) {
        let mut inner = self.current();
        let now = inner.simulation.now();
        if let Some(scale_set) = &mut inner.scale_set {
            scale_set.record_probe(vm, now, outcome);
            scale_set.advance(now);
        }
    }

    /// Azure's clock now: what IMDS's `Date` header says (the machine's clock unless the
    /// scenario sets a VM clock offset).
    pub(crate) fn azure_now(&self) -> SystemTime {
        let mut inner = self.current();
        inner.clock.azure_now()
    }

    /// From now on the VM's clock is `vm_minus_azure_ms` off Azure's (a step if it was
    /// something else): Azure's clock, which the simulator runs, moves instead.
    pub(crate) fn step_vm_clock(&self, vm_minus_azure_ms: i64) {
        let mut inner = self.current();
        inner.clock.step_now(-vm_minus_azure_ms);
        record_clock_steps(&mut inner);
        let now = inner.clock.scenario_now();
        inner.simulation.keep_running();
        inner.simulation.advance(now);
        self.publish(&mut inner);
    }

    /// Logs new history entries and announces the end of the scenario.
    fn publish(&self, inner: &mut Inner) {
        let history = inner.simulation.history();
        for change in &history[inner.history_logged..] {
            tracing::info!(
                scenario = %inner.scenario.name,
                event_id = %change.event_id,
                transition = ?change.transition,
                at_scenario_ms = millis(change.at),
                "simulated event changed"
            );
        }
        inner.history_logged = history.len();
        if inner.simulation.is_finished() && !*self.finished.borrow() {
            tracing::info!(scenario = %inner.scenario.name, "scenario finished");
            self.finished.send_replace(true);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the state half-changed in a way
        // that matters more than stopping the simulator would.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Records each change of the VM's clock offset (the start's, and each step) as a fault
/// served, when scenario time reaches it.
fn record_clock_steps(inner: &mut Inner) {
    for (at, ahead_ms) in inner.clock.take_reports() {
        inner.faults.push(FaultRecord {
            kind: FaultKind::VmClock,
            method: String::new(),
            vm: String::new(),
            at_unix_ms: unix_ms(SystemTime::now()),
            at_scenario_ms: millis(at),
            status: None,
            delay_ms: None,
            body: None,
            incarnation: None,
            vm_clock_offset_ms: Some(-ahead_ms),
        });
    }
}

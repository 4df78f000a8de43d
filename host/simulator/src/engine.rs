//! The simulation running against the real clock, shared by the HTTP handlers and the
//! timer task: every access first catches the state up to now, so documents are current.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::faults::{FaultMethod, FaultPlan, plan_request};
use crate::scenario::Scenario;
use crate::snapshot::{
    ApprovalRecord, BoundedLog, HistoryRecord, REQUEST_LOG_LIMIT, RequestRecord, StateSnapshot,
    WireDocument,
};
use crate::state::{Simulation, UnknownEvent};
use crate::timeline::{Timeline, unix_ms};

/// Everything the handlers and the timer share.
pub(crate) struct Engine {
    scenario: Scenario,
    timeline: Timeline,
    inner: Mutex<Inner>,
    finished: watch::Sender<bool>,
    shutdown: watch::Sender<bool>,
}

struct Inner {
    simulation: Simulation,
    approvals: BoundedLog<ApprovalRecord>,
    requests: BoundedLog<RequestRecord>,
    vms_past_first_get: HashSet<String>,
    history_logged: usize,
}

impl Engine {
    pub fn new(scenario: Scenario, timeline: Timeline) -> Engine {
        let inner = Inner {
            simulation: Simulation::new(&scenario),
            approvals: BoundedLog::new(REQUEST_LOG_LIMIT),
            requests: BoundedLog::new(REQUEST_LOG_LIMIT),
            vms_past_first_get: HashSet::new(),
            history_logged: 0,
        };
        Engine {
            scenario,
            timeline,
            inner: Mutex::new(inner),
            finished: watch::Sender::new(false),
            shutdown: watch::Sender::new(false),
        }
    }

    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Catches the state up to now (the timer calls this).
    pub fn tick(&self) {
        drop(self.current());
    }

    /// The VM a request is for: the default VM when unprefixed; None if the scenario
    /// has no VM of that name.
    pub fn resolve_vm(&self, prefix: Option<&str>) -> Option<String> {
        match prefix {
            None => Some(self.scenario.default_vm().to_string()),
            Some(name) => self
                .scenario
                .vms
                .iter()
                .find(|vm| vm.eq_ignore_ascii_case(name))
                .cloned(),
        }
    }

    /// How the faults disturb this request; a GET counts as the VM's first call once.
    pub fn plan_fault(&self, vm: &str, method: FaultMethod) -> FaultPlan {
        let mut inner = self.current();
        let first_call =
            method == FaultMethod::Get && inner.vms_past_first_get.insert(vm.to_string());
        let now = inner.simulation.now();
        plan_request(&self.scenario.faults, method, now, first_call)
    }

    /// The current document as 2020-07-01 JSON.
    pub fn document_json(&self) -> String {
        let inner = self.current();
        forewarn_imds::render_document(&inner.simulation.document(&self.timeline))
    }

    /// Approves the events on behalf of `vm`, recording each id either way.
    pub fn approve(&self, vm: &str, event_ids: &[String]) -> Result<(), UnknownEvent> {
        let mut inner = self.current();
        let now = inner.simulation.now();
        let outcome = inner.simulation.approve(now, event_ids).map(|_| ());
        for event_id in event_ids {
            inner.approvals.push(ApprovalRecord {
                event_id: event_id.clone(),
                vm: vm.to_string(),
                at_unix_ms: self.timeline.unix_ms_at(now),
                at_scenario_ms: millis(now),
                accepted: outcome.is_ok(),
            });
        }
        self.publish(&mut inner);
        outcome
    }

    /// Records a request, stamped with when it arrived (before any injected delay).
    pub fn record_request(
        &self,
        method: &str,
        path: &str,
        vm: &str,
        status: u16,
        arrived: SystemTime,
    ) {
        let mut inner = self.lock();
        inner.requests.push(RequestRecord {
            method: method.to_string(),
            path: path.to_string(),
            vm: vm.to_string(),
            status,
            at_unix_ms: unix_ms(arrived),
        });
    }

    pub fn snapshot(&self) -> StateSnapshot {
        let inner = self.current();
        let simulation = &inner.simulation;
        let rendered = forewarn_imds::render_document(&simulation.document(&self.timeline));
        let events = serde_json::from_str::<WireDocument>(&rendered)
            .map(|document| document.events)
            .unwrap_or_default();
        let history = simulation
            .history()
            .iter()
            .map(|change| HistoryRecord {
                event_id: change.event_id.clone(),
                transition: change.transition,
                at_scenario_ms: millis(change.at),
                at_unix_ms: self.timeline.unix_ms_at(change.at),
            })
            .collect();
        StateSnapshot {
            scenario: self.scenario.name.clone(),
            speed: self.timeline.speed(),
            started_at_unix_ms: self.timeline.started_unix_ms(),
            now_scenario_ms: millis(simulation.now()),
            finished: simulation.is_finished(),
            incarnation: simulation.incarnation(),
            events,
            approvals: inner.approvals.to_vec(),
            requests: inner.requests.to_vec(),
            history,
        }
    }

    pub fn subscribe_finished(&self) -> watch::Receiver<bool> {
        self.finished.subscribe()
    }

    pub fn subscribe_shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// The state, caught up to now.
    fn current(&self) -> MutexGuard<'_, Inner> {
        let mut inner = self.lock();
        inner.simulation.advance(self.timeline.scenario_now());
        self.publish(&mut inner);
        inner
    }

    /// Logs new history entries and announces the end of the scenario.
    fn publish(&self, inner: &mut Inner) {
        let history = inner.simulation.history();
        for change in &history[inner.history_logged..] {
            tracing::info!(
                scenario = %self.scenario.name,
                event_id = %change.event_id,
                transition = ?change.transition,
                at_scenario_ms = millis(change.at),
                "simulated event changed"
            );
        }
        inner.history_logged = history.len();
        if inner.simulation.is_finished() && !*self.finished.borrow() {
            tracing::info!(scenario = %self.scenario.name, "scenario finished");
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

fn millis(at: Duration) -> u64 {
    u64::try_from(at.as_millis()).unwrap_or(u64::MAX)
}

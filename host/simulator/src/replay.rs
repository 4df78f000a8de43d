//! A scenario played without a server or a running clock: the caller says which scenario
//! instant it is, so tests read the exact documents served over time, with no waiting.

use std::time::{Duration, SystemTime};

use forewarn_imds::EventId;

use crate::scenario::Scenario;
use crate::scenario_clock::ScenarioClock;
use crate::shape::{in_shape, served_version};
use crate::simulation::Simulation;
use crate::snapshot::HistoryRecord;

/// The same state machine the server plays, stepped by hand in scenario time.
#[derive(Debug, Clone)]
pub struct Replay {
    shape: Option<String>,
    omit_fields: Vec<String>,
    simulation: Simulation,
    clock: ScenarioClock,
}

/// An approval named an event that is not in the current document (the server's 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("EventId \"{0}\" is not in the current document")]
pub struct NotInDocument(pub String);

impl Replay {
    /// The scenario at scenario time 0, whose wall clock starts at `started` and runs
    /// `speed` times slower than scenario time (as `forewarn simulate --speed`).
    pub fn new(scenario: &Scenario, started: SystemTime, speed: f64) -> Replay {
        Replay {
            shape: scenario.shape.clone(),
            omit_fields: scenario.omit_fields.clone(),
            simulation: Simulation::new(scenario),
            clock: {
                let (ahead, steps) = crate::faults::vm_clock_changes(&scenario.faults);
                ScenarioClock::starting_at(started, speed).with_vm_clock(ahead, steps)
            },
        }
    }

    /// Applies every change due up to scenario time `now` (earlier times are ignored).
    pub fn advance(&mut self, now: Duration) {
        self.simulation.advance(now);
    }

    /// The scenario time the replay has reached.
    pub fn now(&self) -> Duration {
        self.simulation.now()
    }

    /// A POST of `event_ids` at scenario time `at` (advancing first), as the server takes it.
    pub fn approve(&mut self, at: Duration, event_ids: &[EventId]) -> Result<(), NotInDocument> {
        self.simulation
            .approve(at, event_ids)
            .map(|_| ())
            .map_err(|unknown| NotInDocument(unknown.0))
    }

    /// The document a GET with `api_version` is served now, as JSON text.
    pub fn document(&self, api_version: &str) -> String {
        served_document(
            &self.simulation,
            &self.clock,
            api_version,
            self.shape.as_deref(),
            &self.omit_fields,
        )
    }

    /// The wall-clock instant of scenario time `at` (what `NotBefore` shows for it).
    pub fn wall_at(&self, at: Duration) -> SystemTime {
        self.clock.wall_at(at)
    }

    /// Every change so far, oldest first (as `/simulator/state`'s `history`).
    pub fn history(&self) -> Vec<HistoryRecord> {
        history_records(&self.simulation, &self.clock)
    }
}

/// The current document as a GET with `api_version` is served it, for a scenario whose
/// `shape` is `scenario_shape` and whose `omit_fields` are `omit`.
pub(crate) fn served_document(
    simulation: &Simulation,
    clock: &ScenarioClock,
    api_version: &str,
    scenario_shape: Option<&str>,
    omit: &[String],
) -> String {
    let current = forewarn_imds::render_document(&simulation.document(clock));
    in_shape(&current, served_version(api_version, scenario_shape), omit)
}

/// The simulation's history with wall-clock times.
pub(crate) fn history_records(
    simulation: &Simulation,
    clock: &ScenarioClock,
) -> Vec<HistoryRecord> {
    simulation
        .history()
        .iter()
        .map(|change| HistoryRecord {
            event_id: change.event_id.clone(),
            transition: change.transition,
            at_scenario_ms: forewarn_imds::millis(change.at),
            at_unix_ms: clock.unix_ms_at(change.at),
        })
        .collect()
}

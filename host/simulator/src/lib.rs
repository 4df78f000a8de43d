//! forewarn's built-in Azure IMDS Scheduled Events simulator: scenarios as data, a state
//! machine in scenario time, injectable faults, and an axum server (`forewarn simulate`).
//!
//! Start one with [`spawn`] and a [`SimulatorConfig`]; read what it did with
//! [`SimulatorHandle::snapshot`] or `GET /simulator/state` (a [`StateSnapshot`]: the
//! document, approvals, requests, history and the faults it served).

mod builtin;
mod engine;
mod faults;
mod handle;
mod ids;
mod replay;
mod scenario;
mod scenario_clock;
mod server;
mod shape;
mod simulation;
mod snapshot;

pub use builtin::{DEFAULT_SCENARIO, builtin_scenarios, load_scenario};
pub use faults::{FaultKind, FaultMethod, FaultSpec, MalformedBody};
pub use handle::{SimError, SimulatorConfig, SimulatorHandle, spawn};
pub use ids::stable_event_id;
pub use replay::{NotInDocument, Replay};
pub use scenario::{EventSpec, InitialStatus, Reschedule, Scenario, ScenarioError, Source};
pub use simulation::Transition;
pub use snapshot::{
    ApprovalRecord, FaultRecord, HistoryRecord, RequestRecord, StateSnapshot, WireEvent,
};

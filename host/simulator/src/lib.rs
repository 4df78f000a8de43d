//! forewarn's built-in Azure IMDS Scheduled Events simulator: scenarios as data, a state
//! machine in scenario time, injectable faults, and an axum server (`forewarn simulate`).

mod builtin;
mod engine;
pub mod faults;
mod handle;
mod ids;
pub mod scenario;
mod server;
pub mod snapshot;
pub mod state;
pub mod timeline;

pub use builtin::{
    DEFAULT_SCENARIO, builtin_scenario, builtin_scenario_text, builtin_scenarios, load_scenario,
};
pub use handle::{SimError, SimulatorConfig, SimulatorHandle, spawn};
pub use ids::stable_event_id;
pub use scenario::{Scenario, ScenarioError};
pub use server::SUPPORTED_API_VERSIONS;
pub use snapshot::{ApprovalRecord, HistoryRecord, RequestRecord, StateSnapshot, WireEvent};
pub use state::{Simulation, Transition};

//! forewarn's built-in Azure IMDS Scheduled Events simulator: scenarios as data, a state
//! machine in scenario time, injectable faults, and an axum server (`forewarn simulate`).
//!
//! Start one with [`spawn`] and a [`SimulatorConfig`]; read what it did with
//! [`SimulatorHandle::snapshot`] or `GET /simulator/state` (a [`StateSnapshot`]: the
//! document, approvals, requests, history and the faults it served). Besides Scheduled
//! Events it serves the compute metadata (name, priority, eviction policy) and managed
//! identity tokens (`/metadata/identity/oauth2/token`), and Azure Resource Manager's
//! restart, redeploy and simulateEviction of its VMs (`forewarn drill`), each turned into the
//! Scheduled Event Azure announces for it. A console at `/` (and its JSON
//! endpoints under `/simulator/`) starts scenarios, generates events and injects faults.

mod arm;
mod builtin;
mod console_control;
mod console_routes;
mod engine;
mod faults;
mod handle;
mod identity;
mod ids;
mod json_answer;
mod replay;
mod resource_ids;
mod scale_set;
mod scale_set_prober;
mod scenario;
mod scenario_clock;
mod server;
mod shape;
mod simulation;
mod snapshot;
mod vm_priority;

pub use builtin::{DEFAULT_SCENARIO, builtin_scenarios, load_scenario};
pub use console_control::{
    CONSOLE_REQUESTS_MAX, ConsoleFault, ConsoleInputError, ConsoleView, FAULT_WINDOW_MAX,
    GENERATED_EVENTS_MAX, GENERATED_NOTICE_MAX, GENERATED_RUN_MAX, GenerateEvent,
    INJECTED_FAULTS_MAX, InjectFault, InjectedFault, StartScenario,
};
pub use faults::{FaultKind, FaultMethod, FaultSpec, MalformedBody};
pub use handle::{SimError, SimulatorConfig, SimulatorHandle, spawn};
pub use identity::{DEFAULT_TOKEN_LIFETIME, IdentitySpec, SIMULATED_TENANT};
pub use ids::stable_event_id;
pub use replay::{NotInDocument, Replay};
pub use scale_set::{
    ExtensionState, HealthExtensionSpec, HealthStates, InstanceView, ProbeOutcome, ProbeReading,
    RepairAction, RepairRecord, RepairsSpec, RollingUpgradeSpec, ScaleSetSnapshot, ScaleSetSpec,
    UpgradeStep, read_probe, read_probe_as,
};
pub use scenario::{EventSpec, InitialStatus, Reschedule, Scenario, ScenarioError, Source};
pub use simulation::Transition;
pub use snapshot::{
    ApprovalRecord, FaultRecord, HistoryRecord, IDENTITY_TOKEN_PATH, REQUEST_BODY_KEPT,
    RequestRecord, StateSnapshot, WireEvent,
};
pub use vm_priority::{EvictionPolicy, VmPriority};

//! forewarn's plugin runtime: loads WebAssembly components that implement the
//! `forewarn:plugin` world and calls them sandboxed, under time and memory budgets.
//!
//! It knows wasmtime and the WIT contract, and nothing of IMDS: the daemon maps its events
//! to the WIT types in [`wit::latest`] and decides what to do with the answers.
//!
//! ```
//! use std::time::Duration;
//!
//! use forewarn_runtime::wit::latest::{Decision, Phase};
//! use forewarn_runtime::{CallContext, HostServices, PluginSettings, Runtime, RuntimeConfig};
//! # use forewarn_test_support::{fixtures::sample_event, guests::NOOP};
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // One runtime per daemon: the engine settings, the compile cache, the host services.
//! let runtime = Runtime::new(RuntimeConfig::default(), HostServices::default())?;
//! // A plugin: a component's bytes, checked and compiled, under the operator's settings
//! // (memory cap, config, grants: none here, so every capability is refused).
//! let plugin = runtime.load("noop", &std::fs::read(NOOP)?, PluginSettings::default())?;
//! // One call: a fresh instance, the event in, the decision out, under a budget.
//! let context = CallContext {
//!     vm_name: "vm-a".into(),
//!     affects_this_vm: true,
//!     attempt: 1,
//!     vm: Default::default(),
//! };
//! let outcome = plugin
//!     .call(&sample_event(), Phase::Prepare, &context, Duration::from_secs(10))
//!     .await;
//! assert_eq!(outcome.answer, Ok(Decision::Approve));
//! # Ok(())
//! # }
//! ```
//!
//! # Core concepts
//!
//! - [`Runtime`]: one per daemon. Holds the epoch ticker that cuts calls off at their
//!   budget, the compile cache (compiled in a confined child process), and the
//!   [`HostServices`] every plugin shares.
//! - [`Plugin`]: one loaded version of one plugin: its own engine, linker and instance
//!   pool, the [`PluginSettings`] (memory cap, config, [`Capabilities`]) its calls run under.
//!   Dropping the last handle unmaps it.
//! - A **call** ([`Plugin::call`], [`Plugin::start`]): a fresh store and instance
//!   (made ahead of the call when possible), under a time budget and a memory cap; it ends in
//!   a [`CallOutcome`]: a decision, or a [`CallFailure`] the daemon counts as a defer.
//! - **Capabilities**: what a plugin may ask of the host (key-value state, readiness,
//!   HTTP, identity tokens, operator actions), one unit each under `capabilities/`, denied
//!   unless its manifest grants them ([`Capabilities`]).
//! - **WIT versions**: [`wit`] holds one module per contract version; a plugin built against
//!   an older version keeps working.

mod allocation;
mod cache;
mod call_env;
mod call_state;
mod capabilities;
mod compiler;
mod confined_child;
mod engine_config;
mod epoch;
mod error;
mod host_api;
mod inspect;
mod limits;
mod log_budget;
mod mutex;
mod plugin;
mod plugin_engine;
mod plugin_log;
mod ready_instance;
mod refusal_tally;
mod resident_memory;
mod runtime;
mod sandbox;
mod services;
mod swap;
pub mod wit;

pub use allocation::InstanceAllocation;
pub use call_state::{LOG_LINE_MAX_BYTES, LOG_LINES_PER_CALL};
pub use capabilities::actions::ActionSpec;
pub use capabilities::http::HttpClient;
pub use capabilities::http::network;
pub use capabilities::identity::{
    IssuedToken, ManagedIdentity, TOKEN_RENEW_BEFORE, TokenFetchError, TokenFetcher, TokenFuture,
};
pub use capabilities::key_value::{
    DiskBudget, KeyValueStore, KeyValueStoreError, MemoryKeyValueStore, STATE_DISK_BYTES_PER_CALL,
    STATE_WRITES_PER_CALL,
};
pub use capabilities::readiness::{MAX_UNHEALTHY_THRESHOLD, PROBER_MEMORY, Prober, Readiness};
pub use compiler::{
    COMPILE_ADDRESS_SPACE, COMPILE_ADDRESS_SPACE_PER_CPU, COMPILE_CPU_TIME, COMPILE_SUBCOMMAND,
    COMPILE_TIMEOUT, CompileLimits, Compiler, EXIT_INVALID_COMPONENT, compile_to_bytes,
};
pub use error::{CompileFailure, LoadError, RuntimeError};
pub use forewarn_events::{cut_to_bytes, cut_to_chars, log_safe};
pub use forewarn_manifest::{DEFAULT_MEMORY_LIMIT, PluginSettings};
pub use inspect::ComponentReport;
pub use log_budget::{LOG_BURST_LINES, LOG_LINES_PER_MINUTE};
pub use plugin::{
    CallContext, CallFailure, CallOutcome, Plugin, REASON_MAX_BYTES, StartAnswer, StartOutcome,
};
pub use plugin_log::{LogLevel, PLUGIN_LOG_TARGET, PluginLogLine};
pub use ready_instance::{InstanceTiming, PREPARE_BUDGET};
pub use refusal_tally::{RefusalTally, Refused};
pub use resident_memory::ResidentMemory;
pub use runtime::{Runtime, RuntimeConfig};
pub use rustls::pki_types::CertificateDer;
pub use services::HostServices;

//! forewarn's plugin runtime: loads WebAssembly components that implement the
//! `forewarn:plugin` world and calls them sandboxed, under time and memory budgets.
//!
//! It knows wasmtime and the WIT contract, and nothing of IMDS: the daemon maps its events
//! to the WIT types in [`wit::latest`] and decides what to do with the answers.

mod actions;
mod allocation;
mod cache;
mod call_env;
mod call_state;
mod compiler;
mod confined_child;
mod engine_config;
mod epoch;
mod error;
mod grants;
mod host_api;
mod http;
#[cfg(test)]
mod https_tests;
mod identity;
mod inspect;
mod limits;
mod log_budget;
mod mutex;
pub mod network;
mod permissions;
mod plugin;
mod plugin_engine;
mod plugin_log;
mod ready_instance;
mod resident_memory;
mod runtime;
mod sandbox;
mod services;
mod swap;
mod text;
mod tls;
pub mod trust;
pub mod wit;

pub use allocation::InstanceAllocation;
pub use call_state::{LOG_LINE_MAX_BYTES, LOG_LINES_PER_CALL, STATE_WRITES_PER_CALL};
pub use compiler::{
    COMPILE_ADDRESS_SPACE, COMPILE_ADDRESS_SPACE_PER_CPU, COMPILE_SUBCOMMAND, COMPILE_TIMEOUT,
    CompileLimits, Compiler, EXIT_INVALID_COMPONENT, compile_to_bytes,
};
pub use error::{CompileFailure, LoadError, RuntimeError};
pub use http::HttpClient;
pub use identity::{IssuedToken, ManagedIdentity, TOKEN_RENEW_BEFORE, TokenFetcher, TokenFuture};
pub use inspect::ComponentReport;
pub use log_budget::{LOG_BURST_LINES, LOG_LINES_PER_MINUTE};
pub use permissions::{
    DEFAULT_HTTP_RESPONSE_LIMIT, Grants, HTTP_RESPONSE_LIMIT_MAX, HttpResponseLimit,
};
pub use plugin::{
    CallContext, CallFailure, CallOutcome, Plugin, REASON_MAX_BYTES, StartAnswer, StartOutcome,
};
pub use plugin_log::{LogLevel, PLUGIN_LOG_TARGET, PluginLogLine};
pub use ready_instance::{InstanceTiming, PREPARE_BUDGET};
pub use resident_memory::ResidentMemory;
pub use runtime::{Runtime, RuntimeConfig};
pub use rustls::pki_types::CertificateDer;
pub use services::{
    ActionSpec, DEFAULT_MEMORY_LIMIT, DiskBudget, HostServices, MemoryStateStore, PluginSettings,
    Readiness, STATE_DISK_BYTES_PER_CALL, StateStore, StateStoreError,
};
pub use text::log_safe;
pub use tls::ca_certificates;

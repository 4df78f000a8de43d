//! forewarn's plugin runtime: loads WebAssembly components that implement the
//! `forewarn:plugin` world and calls them sandboxed, under time and memory budgets.
//!
//! It knows wasmtime and the WIT contract, and nothing of IMDS: the daemon maps its events
//! to the WIT types in [`bindings`] and decides what to do with the answers.

mod actions;
pub mod bindings;
mod cache;
mod call_state;
mod epoch;
mod error;
mod host_api;
mod http;
mod inspect;
mod limits;
pub mod network;
mod plugin;
mod plugin_log;
mod runtime;
mod sandbox;
mod services;
pub mod trust;

pub use actions::ACTION_OUTPUT_MAX_BYTES;
pub use cache::{CACHE_INDEX_FILE, CacheError, CompileCache};
pub use call_state::{
    LOG_FIELD_MAX_BYTES, LOG_LINE_MAX_BYTES, LOG_LINES_PER_CALL, STATE_WRITE_BYTES_PER_CALL,
    STATE_WRITES_PER_CALL,
};
pub use error::{LoadError, RuntimeError};
pub use host_api::PLUGIN_LOG_TARGET;
pub use http::{DROPPED_REQUEST_HEADERS, HttpClient, RESPONSE_BODY_MAX_BYTES};
pub use inspect::ComponentReport;
pub use plugin::{CallContext, CallFailure, CallOutcome, Plugin, REASON_MAX_BYTES};
pub use plugin_log::{LogLevel, PluginLogLine};
pub use runtime::{Compiled, Runtime, RuntimeConfig};
pub use services::{
    ActionSpec, DEFAULT_MEMORY_LIMIT, Grants, HostServices, MemoryStateStore, PluginSettings,
    Readiness, StateStore,
};

//! The WIT contract `forewarn:plugin@0.3.0`, the latest: Rust types and glue generated from
//! `wit/forewarn.wit` by wasmtime's `bindgen!`; `host_api.rs` implements its `host` interface.
//!
//! Host calls that wait on the outside world (HTTP, actions, state writes to disk, identity
//! tokens) are async. Older versions' glue converts to and from these types.

// The generated items carry the WIT's own documentation, where it has any.
#![allow(missing_docs)]

use crate::plugin_log::LogLevel;
use crate::wit::version::WitVersion;

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "event-handler",
    imports: {
        "forewarn:plugin/host.http-send": async,
        "forewarn:plugin/host.run-action": async,
        "forewarn:plugin/host.state-set": async,
        "forewarn:plugin/host.state-delete": async,
        "forewarn:plugin/host.azure-access-token": async,
    },
    exports: { default: async },
    additional_derives: [PartialEq, Eq],
});

pub use forewarn::plugin::host::{
    AccessToken, ActionOutput, DrainStatus, HostError, HttpRequest, HttpResponse, Level,
};
pub use forewarn::plugin::types::{
    Context, Decision, Deferral, EventSource, EventStatus, EventType, EvictionPolicy, Phase,
    ScheduledEvent, StartContext, VmInfo, VmPriority,
};

/// The oldest plugin contract version these bindings serve.
pub(crate) const MIN_VERSION: WitVersion = WitVersion::new(0, 3, 0);

impl From<Level> for LogLevel {
    fn from(level: Level) -> Self {
        match level {
            Level::Trace => LogLevel::Trace,
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        }
    }
}

impl Default for VmInfo {
    /// A regular VM: what a plugin is told when the instance metadata said nothing.
    fn default() -> Self {
        VmInfo {
            priority: VmPriority::Regular,
            eviction_policy: None,
        }
    }
}

//! The WIT contract `forewarn:plugin@0.1.0`: Rust types and glue generated from
//! `wit/forewarn.wit` by wasmtime's `bindgen!`, and the conversions from its types.
//!
//! Host calls that wait on the outside world (HTTP, actions, state writes to disk) are async.
//! As the latest version, its `host` interface is implemented in `host_api.rs`.

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
    },
    exports: { default: async },
    additional_derives: [PartialEq, Eq],
});

pub use forewarn::plugin::host::{ActionOutput, HostError, HttpRequest, HttpResponse, Level};
pub use forewarn::plugin::types::{
    Context, Decision, Deferral, EventSource, EventStatus, EventType, Phase, ScheduledEvent,
};

/// The oldest plugin contract version these bindings serve.
pub(crate) const MIN_VERSION: WitVersion = WitVersion::new(0, 1, 0);

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

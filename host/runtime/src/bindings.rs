//! Rust types and glue generated from `wit/forewarn.wit` by wasmtime's `bindgen!`.
//! Host calls that wait on the outside world (HTTP, actions, state writes to disk) are async.

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

/// The fully qualified name of the interface every plugin must export.
pub const HANDLER_EXPORT: &str = "forewarn:plugin/handler@0.1.0";

/// The fully qualified name of the interface the daemon offers to plugins.
pub const HOST_IMPORT: &str = "forewarn:plugin/host@0.1.0";

//! forewarn-sdk: write forewarn plugins in Rust. Re-exports the WIT types under short names,
//! the [`Plugin`] trait, [`export!`], and safe wrappers for the host calls in [`host`].
//!
//! ```no_run
//! use forewarn_sdk::{Context, Decision, Event, Phase, Plugin, host::log};
//!
//! struct Hello;
//!
//! impl Plugin for Hello {
//!     fn on_event(event: &Event, phase: Phase, ctx: &Context) -> Decision {
//!         log::info!("{} {} (attempt {})", event.event_type, phase, ctx.attempt);
//!         Decision::approve()
//!     }
//! }
//!
//! forewarn_sdk::export!(Hello);
//! ```

extern crate self as forewarn_sdk;

#[doc(hidden)]
pub mod bindings;
mod decision;
mod error;
mod event;
mod event_ids;
pub mod host;
mod plugin;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;
pub mod time;
mod vm;

pub use bindings::forewarn::plugin::host::{
    AccessToken, ActionOutput, DrainStatus, HttpRequest, HttpResponse, Level,
};
pub use bindings::forewarn::plugin::types::{
    Context, Decision, Deferral, EventSource, EventStatus, EventType, EvictionPolicy, Phase,
    ScheduledEvent, ScheduledEvent as Event, StartContext, VmInfo, VmPriority,
};
pub use error::HostError;
pub use event_ids::EventIds;
pub use plugin::Plugin;

/// Everything a typical plugin names, for `use forewarn_sdk::prelude::*;`.
pub mod prelude {
    pub use crate::host::{self, http, identity, log, state};
    pub use crate::{
        Context, Decision, Event, EventSource, EventType, EvictionPolicy, HostError, Phase, Plugin,
        VmPriority,
    };
}

/// Not public API: paths the macros expand to.
#[doc(hidden)]
pub mod __private {
    pub use crate::plugin::Adapter;
    pub use wit_bindgen;
}

//! The daemon's I/O shell: wiring (runtime, IMDS client, plugin directory), the event loop
//! that executes the pipeline's actions, and the journal that makes them durable.

pub(crate) mod event_loop;
pub(crate) mod journal;
pub(crate) mod journal_keeper;
pub(crate) mod journal_schema;
pub mod outcome_keeper;
pub(crate) mod plugin_starts;
pub(crate) mod readiness_holds;
pub(crate) mod tasks_in_flight;
pub mod timeline_broadcast;
pub mod wiring;

pub use event_loop::{Daemon, DaemonError, DaemonSettings};

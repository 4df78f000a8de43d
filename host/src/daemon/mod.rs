//! The daemon's I/O shell: wiring (runtime, IMDS client, plugin directory), the event loop
//! that executes the pipeline's actions, and the journal that makes them durable.

pub mod event_loop;
pub mod journal;
pub mod journal_record;
pub mod readiness_holds;
pub mod wiring;

pub use event_loop::{Daemon, DaemonError, DaemonSettings};
pub use journal_record::JOURNAL_NAME;

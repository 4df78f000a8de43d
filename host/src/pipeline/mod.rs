//! The event pipeline's pure stages, clock-injected and free of I/O: tracker → policy →
//! scheduler → approval, driven as one state machine ([`Pipeline`]) by the event loop.
//!
//! - [`tracker`] turns IMDS documents into transitions;
//! - [`policy`] plans each event (ignore, approve at once, or let plugins prepare);
//! - [`scheduler`] decides which plugin call is due, in which order, under which budget;
//! - [`approval`] decides whether and when the approval goes to IMDS (alone, by group
//!   policy, or through the [`barrier`]);
//! - [`quarantine`] counts each plugin's failed calls and quarantines one in a crash loop;
//! - [`state`] is what the journal keeps; [`timeline`] what the pipeline reports;
//! - [`agenda`] says which events a round visits (touched, due, or waiting for a plugin
//!   that is free again), so a round costs what changed, not the number of events.

pub(crate) mod agenda;
pub(crate) mod approval;
pub(crate) mod barrier;
pub(crate) mod machine;
pub mod policy;
pub mod quarantine;
pub(crate) mod roster;
pub(crate) mod scheduler;
pub mod state;
#[cfg(test)]
pub(crate) mod test_harness;
pub mod timeline;
pub mod tracker;

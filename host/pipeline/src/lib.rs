//! The event pipeline's pure stages, clock-injected and free of I/O: tracker → policy →
//! scheduler → approval, driven as one state machine ([`machine::Pipeline`]) by the event
//! loop of `forewarn-host`, which re-exports this crate as `forewarn_host::pipeline`.
//!
//! Pure by construction: no dependency does I/O, reads a clock or runs tasks
//! (`tests/dependencies.rs` keeps them to an allow-list), and `clippy.toml` refuses
//! `SystemTime::now`, files, processes and threads from std.
//!
//! - [`tracker`] turns IMDS documents into transitions;
//! - [`policy`] plans each event (ignore, approve at once, or let plugins prepare);
//! - [`scheduler`] decides which plugin call is due, in which order, under which budget;
//! - [`approval`] decides whether and when the approval goes to IMDS (alone, by group
//!   policy, or through the [`barrier`]);
//! - [`disruption_budget`] decides how many VMs of a group may be down at once through
//!   early approvals, and whose turn the next slot is;
//! - [`quarantine`] counts each plugin's failed calls and quarantines one in a crash loop;
//! - [`outcome`] folds the timeline into one outcome record per event (what IMDS
//!   announced, what forewarn did, the impact measured from inside the VM);
//! - [`state`] is what the journal keeps; [`timeline`] what the pipeline reports;
//! - [`agenda`] says which events a round visits (touched, due, or waiting for a plugin
//!   that is free again), so a round costs what changed, not the number of events;
//! - [`log_fields`] and [`log_messages`]: how the daemon's log lines read, and the messages
//!   tools and tests key on;
//! - `test_harness` (feature `harness`): the pipeline on a fake clock, for tests.

pub mod agenda;
pub mod approval;
pub mod barrier;
pub mod disruption_budget;
pub mod host_shutdown;
pub mod log_fields;
pub mod log_messages;
pub mod machine;
pub mod outcome;
pub mod policy;
pub mod quarantine;
pub mod roster;
pub mod scheduler;
pub mod setting_error;
pub mod state;
#[cfg(any(test, feature = "harness"))]
pub mod test_harness;
pub mod timeline;
pub mod tracker;

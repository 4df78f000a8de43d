//! Code only the command line uses: the `demo` tour, its timeline printer and its
//! built-in workload.

pub mod demo;
pub mod demo_log;
pub mod demo_workload;

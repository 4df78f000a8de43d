//! Code only the command line uses: the `demo` tour, its timeline printer and its
//! built-in workload.

pub mod demo;
pub mod demo_log;
pub mod demo_workload;
pub mod plugin_files;
pub mod plugin_new;
pub mod plugin_test;
pub mod status_table;
pub mod verdict;

//! The `forewarn` commands, one file a command, each the same shape: `Args` (what clap
//! parses) and `async fn run(args: Args) -> anyhow::Result<ExitCode>` (`compile-plugin`'s is
//! not async: it runs before the async runtime starts). `main.rs` only parses and
//! dispatches. A file is named after its command (`plugin check` → `plugin_check.rs`), with
//! `_command` added where another module of the crate has that name (`status_command.rs`,
//! beside `ops/status.rs`). Beside them: the helpers some commands share.

pub mod compile_plugin;
pub mod config_check;
pub mod config_example;
#[cfg(feature = "simulator")]
pub mod demo;
#[cfg(feature = "simulator")]
mod demo_load_balancer;
#[cfg(feature = "simulator")]
pub mod demo_workload;
pub mod drill;
pub mod events_export;
pub mod events_list;
pub mod events_show;
pub mod fleet_status;
pub mod plugin_check;
pub mod plugin_export_bundled;
pub mod plugin_install;
pub mod plugin_list;
pub mod plugin_pull;
pub mod plugin_push;
pub mod plugin_remove;
pub mod plugin_rollback;
pub mod plugin_upgrade;
pub mod run;
pub mod service;
#[cfg(feature = "simulator")]
pub mod simulate;
pub mod status_command;

#[cfg(feature = "simulator")]
pub mod demo_log;
pub mod logging;
pub mod outcome_records;
pub mod plugin_files;
#[cfg(feature = "simulator")]
mod quiet_stretch_skipper;
pub mod status_table;
pub mod supply_args;

#[cfg(test)]
pub(crate) mod parse_args;

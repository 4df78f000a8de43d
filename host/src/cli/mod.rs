//! Code only the command line uses: the `demo` tour, its timeline printer and its
//! built-in workload; the `plugin` commands, one file each.

pub mod demo;
pub mod demo_log;
pub mod demo_workload;
pub mod plugin_check;
pub mod plugin_files;
pub mod plugin_install;
pub mod plugin_list;
pub mod plugin_new;
pub mod plugin_pull;
pub mod plugin_push;
pub mod plugin_remove;
pub mod plugin_rollback;
pub mod plugin_test;
pub mod plugin_upgrade;
pub mod sdk_component_new;
pub mod sdk_export;
pub mod supply_args;
pub mod verdict;

//! forewarn's daemon as a library: the binary in `main.rs` is a thin CLI over these modules,
//! and the end-to-end tests drive the binary built from them.

pub mod admin;
pub mod app;
pub mod bundled;
pub mod config;
pub mod config_example;
pub mod convert;
pub mod coordination;
pub mod daemon;
pub mod demo;
pub mod demo_log;
pub mod demo_workload;
pub mod journal;
pub mod log_fields;
pub mod log_messages;
pub mod manifest;
pub mod metrics;
pub mod plugin_state;
pub mod plugins;
pub mod policy;
pub mod readiness_holds;
pub mod reload;
pub mod state;
pub mod status;
pub mod systemd;
pub mod timeline;
pub mod tracker;

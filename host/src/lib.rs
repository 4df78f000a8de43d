//! forewarn's daemon as a library: the binary in `main.rs` is a thin CLI over these modules,
//! and the end-to-end tests drive the binary built from them.

pub mod app;
pub mod bundled;
pub mod config;
pub mod convert;
pub mod daemon;
pub mod demo;
pub mod journal;
pub mod manifest;
pub mod plugin_state;
pub mod plugins;
pub mod policy;
pub mod state;
pub mod timeline;
pub mod tracker;

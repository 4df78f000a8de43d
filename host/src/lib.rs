//! forewarn's daemon as a library: the binary in `main.rs` is a thin CLI over these modules,
//! and the end-to-end tests drive the binary built from them.
//!
//! - [`pipeline`]: pure, clock-injected stages from IMDS documents to approvals (the crate
//!   `forewarn-pipeline`, re-exported with its [`log_fields`] and [`log_messages`]).
//! - [`daemon`]: the I/O shell that runs the pipeline (event loop, journal, wiring).
//! - [`plugins`]: the plugin directory, reload and the bundled plugins (the manifest is the
//!   crate `forewarn-manifest`, the supply chain `forewarn-supply`).
//! - [`coordination`]: the etcd approval barrier's background task.
//! - [`ops`]: admin endpoint, metrics, status.
//! - [`service_manager`]: systemd on Linux, the Service Control Manager on Windows.
//! - [`config`]: the configuration file.
//! - [`cli`]: what only the command line uses (the demo).
//! - [`log_format`]: how log lines are written: every field escaped and cut.

pub mod cli;
pub mod config;
pub use forewarn_coordination as coordination;
pub mod daemon;
pub use forewarn_pipeline::log_fields;
pub mod log_format;
pub use forewarn_pipeline::log_messages;
pub mod ops;
pub use forewarn_pipeline as pipeline;
pub mod plugins;
pub use forewarn_service_manager as service_manager;

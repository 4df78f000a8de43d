//! forewarn's daemon: the I/O shell around the pure pipeline, the plugin directory it loads,
//! its operations surface and its configuration file. The `forewarn` binary (the crate
//! `forewarn-host`) is the command line over it.
//!
//! - [`daemon`]: the I/O shell that runs the pipeline (event loop, journal, wiring).
//! - [`plugins`]: the plugin directory, its hot reload and the per-plugin state store (the
//!   manifest is the crate `forewarn-manifest`, the supply chain `forewarn-supply`).
//! - [`ops`]: admin endpoint, metrics, status.
//! - [`config`]: the configuration file.
//! - [`log_format`]: how log lines are written: every field escaped and cut.
//! - [`durable_file`] and [`storage_health`]: one value written crash-safely, and the state
//!   directory's health, which the journal and the plugins' key-value files share (below
//!   `daemon/` and `plugins/`, so neither reaches into the other).
//!
//! Beside it, in crates of their own: the pure stages (`forewarn-pipeline`, re-exported as
//! [`pipeline`] with its [`log_fields`] and [`log_messages`]), the etcd barrier
//! (`forewarn-coordination`, as [`coordination`]) and the service manager
//! (`forewarn-service-manager`, as [`service_manager`]).

pub mod config;
pub use forewarn_coordination as coordination;
pub mod daemon;
pub mod durable_file;
pub use forewarn_pipeline::log_fields;
pub mod log_format;
pub use forewarn_pipeline::log_messages;
pub mod ops;
pub use forewarn_pipeline as pipeline;
pub mod plugins;
pub use forewarn_service_manager as service_manager;
pub mod storage_health;

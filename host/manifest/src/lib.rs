//! A plugin's manifest (`NAME.toml` beside `NAME.wasm`) and what follows from it: the
//! plugin-name rule, the `[capabilities]` a plugin is granted (the one model of them: what
//! the runtime enforces, through [`PluginSettings`]), and the same grants in the words an operator consents to
//! ([`GrantSummary`]: the consent of `plugin install`, the upgrade diff, `plugin list`, the
//! lock file), every value shown escaped ([`shown`]).
//!
//! - [`plugin_manifest`]: the manifest's keys, parsed and checked, errors naming line and key.
//! - [`capabilities`]: the `[capabilities]` table, one module per key.
//! - [`plugin_name`]: what a plugin may be called.
//! - [`plugin_settings`]: what the runtime enforces for a plugin on every call.
//! - [`grant_summary`]: what a manifest grants, claimed, consented to, compared on upgrade.
//! - [`shown`]: text from outside escaped and cut before it reaches a terminal.

pub mod capabilities;
pub mod grant_summary;
pub mod plugin_manifest;
pub mod plugin_name;
pub mod plugin_settings;
pub mod shown;

pub use capabilities::Capabilities;
pub use grant_summary::GrantSummary;
pub use plugin_manifest::{
    ConfigValue, FailurePolicy, ManifestError, ManifestProblem, PluginManifest, describe_toml_error,
};
pub use plugin_name::{MAX_PLUGIN_NAME_BYTES, name_problem};
pub use plugin_settings::{DEFAULT_MEMORY_LIMIT, PluginSettings};

//! The plugin author's tools, in one place: the languages forewarn has templates and SDKs
//! for, the templates and the SDKs this binary carries, and the author's commands (`plugin
//! new`, `plugin test`, `plugin dev`, `sdk export`, `sdk component-new`), each the same shape
//! as the operator's in [`crate::cli`]: `Args` and `run`.
//!
//! `plugin test` and `plugin dev` run the daemon (`forewarn-daemon`) against the simulator
//! (`forewarn-simulator`), as an operator's VM would run it against IMDS.

pub mod carried_sdk;
pub mod languages;
pub mod plugin_templates;

#[cfg(feature = "simulator")]
pub mod plugin_dev;
pub mod plugin_new;
#[cfg(feature = "simulator")]
pub mod plugin_test;
pub mod sdk_component_new;
pub mod sdk_export;

#[cfg(feature = "simulator")]
mod author_shell;
#[cfg(feature = "simulator")]
mod dev_daemon;
#[cfg(feature = "simulator")]
mod plugin_dev_project;
#[cfg(feature = "simulator")]
pub mod verdict;

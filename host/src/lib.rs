//! The `forewarn` command line as a library: the binary in `main.rs` parses and dispatches to
//! these modules, and the end-to-end tests drive the binary built from them. The daemon it
//! runs is the crate `forewarn-daemon`.
//!
//! - [`cli`]: the commands, one file each (the operator's: run, status, events, fleet, config,
//!   service, the supply chain's `plugin` commands, the demo and the simulator).
//! - [`authoring`]: the plugin author's tools in one place: the languages, the templates, the
//!   carried SDKs, `plugin new`, `plugin test`, `plugin dev`, `sdk export`, `sdk component-new`.
//! - [`bundled`]: the plugins compiled into the binary.

pub mod authoring;
pub mod bundled;
pub mod cli;

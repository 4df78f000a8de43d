//! Plugin management: the drop-in directory's manifests, the loaded plugin set in
//! dependency order, hot reload, the bundled plugins, and the per-plugin state store.

pub mod bundled;
pub mod convert;
pub mod debounce;
pub mod manifest;
pub mod reload;
pub mod set;
pub mod state_store;

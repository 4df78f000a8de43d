//! Plugin management: the drop-in directory's manifests, the loaded plugin set in
//! dependency order, hot reload, and the per-plugin state store.

pub(crate) mod convert;
pub(crate) mod debounce;
pub(crate) mod key_value_files;
pub(crate) mod key_value_write_rate;
pub mod reload;
pub mod set;

//! What the runtime enforces for one plugin on every call, as its manifest says: the memory
//! cap, the config values and the capabilities granted (the same [`Capabilities`] the lock
//! file keeps; the runtime's units check each request against their own key).

use std::collections::BTreeMap;

use crate::Capabilities;

/// Per-plugin settings the runtime enforces on every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSettings {
    /// Cap on the plugin's linear memory, in bytes.
    pub memory_limit_bytes: u64,
    /// Values returned by the `config` host function.
    pub config: BTreeMap<String, String>,
    /// What the plugin may use of the host.
    pub grants: Capabilities,
}

/// The default memory cap: 64 MiB.
pub const DEFAULT_MEMORY_LIMIT: u64 = 64 * 1024 * 1024;

impl Default for PluginSettings {
    fn default() -> Self {
        PluginSettings {
            memory_limit_bytes: DEFAULT_MEMORY_LIMIT,
            config: BTreeMap::new(),
            grants: Capabilities::default(),
        }
    }
}

//! What the daemon lends to plugins through the `host` interface, one service per capability
//! (each defined in its unit under `capabilities/`). Each plugin's settings (its grants among
//! them) are its manifest's: [`forewarn_manifest::PluginSettings`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::capabilities::actions::runner::ActionSpec;
use crate::capabilities::http::client::HttpClient;
use crate::capabilities::identity::token_cache::ManagedIdentity;
use crate::capabilities::key_value::store::{KeyValueStore, MemoryKeyValueStore};
use crate::capabilities::readiness::holds::Readiness;

/// The services shared by every plugin of one daemon.
#[derive(Clone)]
pub struct HostServices {
    /// Where plugins' key-value store lives (in the daemon: files under `state-dir/plugin-state`).
    pub key_value: Arc<dyn KeyValueStore>,
    /// The VM's readiness, as plugins set it.
    pub readiness: Arc<Readiness>,
    /// The actions the operator defined, by name. A plugin may run one only when its
    /// grants name it too.
    pub actions: Arc<BTreeMap<String, ActionSpec>>,
    /// The client behind `http-send` (no proxy, no redirects).
    pub http: HttpClient,
    /// The VM's managed identity behind `azure-access-token`; none when the daemon has no
    /// identity endpoint.
    pub identity: Option<Arc<ManagedIdentity>>,
}

impl Default for HostServices {
    fn default() -> Self {
        HostServices {
            key_value: Arc::new(MemoryKeyValueStore::default()),
            readiness: Arc::new(Readiness::default()),
            actions: Arc::new(BTreeMap::new()),
            http: HttpClient::default(),
            identity: None,
        }
    }
}

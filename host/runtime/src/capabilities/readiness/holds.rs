//! Who holds the VM out of rotation: the service behind `set-ready` and `/readyz`.

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::mutex::lock;

/// The VM's readiness for load balancers: ready while no plugin has marked it not ready.
#[derive(Default)]
pub struct Readiness {
    not_ready: Mutex<BTreeSet<String>>,
}

impl Readiness {
    /// Records `plugin`'s view: `false` holds the VM out of rotation until it says `true`.
    /// Returns whether it changed (a plugin that repeats itself on every call changes
    /// nothing).
    pub fn set(&self, plugin: &str, ready: bool) -> bool {
        let mut not_ready = lock(&self.not_ready);
        if ready {
            not_ready.remove(plugin)
        } else {
            not_ready.insert(plugin.to_owned())
        }
    }

    /// Whether every plugin considers the VM ready.
    pub fn is_ready(&self) -> bool {
        lock(&self.not_ready).is_empty()
    }

    /// The plugins currently holding the VM not ready, sorted.
    pub fn holders(&self) -> Vec<String> {
        lock(&self.not_ready).iter().cloned().collect()
    }
}

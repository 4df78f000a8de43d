//! Safe wrappers around everything the daemon offers a plugin (the WIT `host` interface):
//! logging, configuration, durable state, readiness, outbound HTTP(S), operator actions and
//! the VM's managed identity.
//!
//! Outside a wasm component (in a native `cargo test`) there is no daemon: these calls go to
//! the thread's [`TestHost`](crate::testing::TestHost) instead (see [`crate::testing`]).

pub mod http;
pub mod identity;
mod imports;
pub mod log;
pub mod state;

use crate::{ActionOutput, DrainStatus, HostError};
use imports as raw;

/// A value from the `[config]` table of the plugin's manifest, or `None`.
pub fn config(key: &str) -> Option<String> {
    raw::config(key)
}

/// A value from the `[config]` table of the plugin's manifest, or `default`.
pub fn config_or(key: &str, default: &str) -> String {
    config(key).unwrap_or_else(|| default.to_owned())
}

/// Marks this VM ready (`true`) or not ready (`false`) on the daemon's `/readyz` endpoint.
/// Needs `[capabilities] readiness = true`.
pub fn set_ready(ready: bool) -> Result<(), HostError> {
    raw::set_ready(ready)
}

/// What the load balancers probing `/readyz` have seen since the VM was marked not ready:
/// how many probers there are (0: none probes forewarn) and how many have been answered 503
/// `unhealthy_threshold` times in a row (the load balancer's own threshold, 1 to 16), and for
/// how long all of them have. Needs `[capabilities] readiness = true`. Since WIT 0.3.0.
pub fn drain_progress(unhealthy_threshold: u32) -> Result<DrainStatus, HostError> {
    raw::drain_progress(unhealthy_threshold)
}

/// Runs the operator-defined action `name` (`[actions.NAME]` in the daemon's config), when
/// granted by `[capabilities] actions = ["NAME"]`, and waits for it to finish.
pub fn run_action(name: &str) -> Result<ActionOutput, HostError> {
    raw::run_action(name)
}

impl ActionOutput {
    /// Whether the action exited with code 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0)
    }
}

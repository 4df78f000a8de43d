//! `HostCall`: one call a plugin made to the test host, recorded in order with its arguments
//! so a test can assert on what the plugin did, not only on what it answered.

use crate::{HttpRequest, Level};

/// One host call, as the plugin made it (whatever the test host answered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostCall {
    /// `log::write` and the level functions and macros.
    Log {
        /// The line's level.
        level: Level,
        /// The line.
        message: String,
    },
    /// `host::config` / `host::config_or`.
    Config {
        /// The key looked up.
        key: String,
    },
    /// `state::get` and its typed variants.
    StateGet {
        /// The key read.
        key: String,
    },
    /// `state::set` and its typed variants.
    StateSet {
        /// The key written.
        key: String,
        /// The bytes written.
        value: Vec<u8>,
    },
    /// `state::delete`.
    StateDelete {
        /// The key removed.
        key: String,
    },
    /// `host::set_ready`.
    SetReady {
        /// Ready (`true`) or not ready (`false`).
        ready: bool,
    },
    /// `host::drain_progress`.
    DrainProgress {
        /// The load balancer's threshold asked about.
        unhealthy_threshold: u32,
    },
    /// `http::send`, `http::get`, `http::post`.
    Http(HttpRequest),
    /// `host::run_action`.
    RunAction {
        /// The action's name.
        name: String,
    },
    /// `identity::access_token`.
    AccessToken {
        /// The resource (audience) asked for.
        resource: String,
    },
}

impl HostCall {
    /// Whether the call changes something outside the plugin (state, readiness, HTTP, an
    /// action): what most tests assert on. Logs, config and state reads are not effects.
    pub fn is_effect(&self) -> bool {
        !matches!(
            self,
            HostCall::Log { .. }
                | HostCall::Config { .. }
                | HostCall::StateGet { .. }
                | HostCall::AccessToken { .. }
        )
    }
}

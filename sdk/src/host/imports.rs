//! Where the host wrappers' calls go: the daemon's WIT imports in a wasm component, the
//! thread's test host in a native build (`cargo test`), with the same signatures.

#[cfg(target_arch = "wasm32")]
pub(crate) use crate::bindings::forewarn::plugin::host::{
    azure_access_token, config, drain_progress, http_send, log, run_action, set_ready,
    state_delete, state_get, state_set,
};

#[cfg(not(target_arch = "wasm32"))]
pub(crate) use crate::testing::imports::{
    azure_access_token, config, drain_progress, http_send, log, run_action, set_ready,
    state_delete, state_get, state_set,
};

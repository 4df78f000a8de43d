//! Where the host wrappers' calls go: the daemon's WIT imports in a wasm component, the
//! thread's test host in a native build (`cargo test`), with the same signatures. Every
//! function of each, so a host function added to the contract needs no line here.

#[cfg(target_arch = "wasm32")]
pub(crate) use crate::bindings::forewarn::plugin::host::*;

#[cfg(not(target_arch = "wasm32"))]
pub(crate) use crate::testing::imports::*;

//! The frozen WIT contract `forewarn:plugin@0.1.0` (`host/runtime/wit/since_v0.1.0`): its
//! bindings and the conversions between its types and the latest ones.
//!
//! `host_api/v0_1_0.rs` serves its host calls through the latest implementation; a 0.1.0
//! plugin simply does not see what later versions added (identity tokens, `vm`,
//! `until-not-before-ms`, `on-start`).

// The generated items carry the WIT's own documentation, where it has any.
#![allow(missing_docs)]

use crate::wit::v0_3_0 as latest;
use crate::wit::version::WitVersion;

wasmtime::component::bindgen!({
    path: "wit/since_v0.1.0",
    world: "event-handler",
    imports: {
        "forewarn:plugin/host.http-send": async,
        "forewarn:plugin/host.run-action": async,
        "forewarn:plugin/host.state-set": async,
        "forewarn:plugin/host.state-delete": async,
    },
    exports: { default: async },
    additional_derives: [PartialEq, Eq],
});

pub(crate) use forewarn::plugin::{host, types};

/// The oldest plugin contract version these bindings serve.
pub(crate) const MIN_VERSION: WitVersion = WitVersion::new(0, 1, 0);

crate::wit::frozen::unchanged_since_v0_1_0!();

/// The 0.1.0 context: the latest one without `until-not-before-ms` and `vm`.
impl From<&latest::Context> for types::Context {
    fn from(context: &latest::Context) -> Self {
        types::Context {
            vm_name: context.vm_name.clone(),
            affects_this_vm: context.affects_this_vm,
            deadline_unix_ms: context.deadline_unix_ms,
            attempt: context.attempt,
        }
    }
}

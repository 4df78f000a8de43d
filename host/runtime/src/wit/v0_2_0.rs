//! The frozen WIT contract `forewarn:plugin@0.2.0` (`host/runtime/wit/since_v0.2.0`): its
//! bindings and the conversions between its types and the latest ones.
//!
//! `host_api/v0_2_0.rs` serves its host calls through the latest implementation; a 0.2.0
//! plugin simply does not see what later versions added (`drain-progress`).

// The generated items carry the WIT's own documentation, where it has any.
#![allow(missing_docs)]

use crate::wit::v0_3_0 as latest;
use crate::wit::version::WitVersion;

wasmtime::component::bindgen!({
    path: "wit/since_v0.2.0",
    world: "event-handler",
    imports: {
        "forewarn:plugin/host.http-send": async,
        "forewarn:plugin/host.run-action": async,
        "forewarn:plugin/host.state-set": async,
        "forewarn:plugin/host.state-delete": async,
        "forewarn:plugin/host.azure-access-token": async,
    },
    exports: { default: async },
    additional_derives: [PartialEq, Eq],
});

pub(crate) use forewarn::plugin::{host, types};

/// The oldest plugin contract version these bindings serve.
pub(crate) const MIN_VERSION: WitVersion = WitVersion::new(0, 2, 0);

crate::wit::frozen::unchanged_since_v0_1_0!();

impl From<latest::AccessToken> for host::AccessToken {
    fn from(token: latest::AccessToken) -> Self {
        host::AccessToken {
            token: token.token,
            expires_on_unix_ms: token.expires_on_unix_ms,
        }
    }
}

impl From<&latest::Context> for types::Context {
    fn from(context: &latest::Context) -> Self {
        types::Context {
            vm_name: context.vm_name.clone(),
            affects_this_vm: context.affects_this_vm,
            deadline_unix_ms: context.deadline_unix_ms,
            attempt: context.attempt,
            until_not_before_ms: context.until_not_before_ms,
            vm: (&context.vm).into(),
        }
    }
}

impl From<&latest::StartContext> for types::StartContext {
    fn from(context: &latest::StartContext) -> Self {
        types::StartContext {
            vm_name: context.vm_name.clone(),
            vm: (&context.vm).into(),
            first_run: context.first_run,
            deadline_unix_ms: context.deadline_unix_ms,
        }
    }
}

impl From<&latest::VmInfo> for types::VmInfo {
    fn from(vm: &latest::VmInfo) -> Self {
        let priority = match vm.priority {
            latest::VmPriority::Regular => types::VmPriority::Regular,
            latest::VmPriority::Spot => types::VmPriority::Spot,
            latest::VmPriority::Low => types::VmPriority::Low,
            latest::VmPriority::Unknown => types::VmPriority::Unknown,
        };
        let eviction_policy = vm.eviction_policy.map(|policy| match policy {
            latest::EvictionPolicy::Deallocate => types::EvictionPolicy::Deallocate,
            latest::EvictionPolicy::Delete => types::EvictionPolicy::Delete,
            latest::EvictionPolicy::Unknown => types::EvictionPolicy::Unknown,
        });
        types::VmInfo {
            priority,
            eviction_policy,
        }
    }
}

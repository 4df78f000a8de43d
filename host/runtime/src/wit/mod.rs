//! The versions of the WIT contract `forewarn:plugin` this host speaks: one module of glue
//! per version, and the dispatch that calls each plugin through the version it was built for.
//!
//! Every call goes through a `match` over the versions; an older version's arm converts its
//! values to and from the [`latest`] types, which the rest of the crate (and the daemon) uses.
//!
//! How to add a WIT version (say 0.4.0; 0.3.0 was added this way, see `v0_2_0.rs`):
//! 1. Freeze the current contract: copy `wit/forewarn.wit` to `host/runtime/wit/since_v0.3.0/`
//!    and make `v0_3_0.rs` like `v0_2_0.rs` (`bindgen!` on that copy, the shared conversions
//!    of `frozen.rs`, `From` impls for what changed since 0.1.0); add `host_api/v0_3_0.rs`
//!    like `host_api/v0_2_0.rs` (`impl host::Host for CallState` calling the latest
//!    implementation); then edit `wit/forewarn.wit`.
//! 2. Add `v0_4_0.rs` (`bindgen!` on `../../wit`, `MIN_VERSION` 0.4.0, the `latest` type
//!    re-exports) and make it `latest` below; `host_api.rs` implements its `host` traits.
//! 3. Point the frozen modules' conversions at the new latest types (the compiler lists them).
//! 4. Add a variant `V0_4_0` to `HandlerPre` and `Handler`, its `MIN_VERSION` to
//!    `SUPPORTED`, its `add_to_linker` to [`add_to_linker`], the frozen `Host` traits to
//!    `HostFunctions`.
//! 5. Add one arm per call in `HandlerPre` and `Handler`; the old arms convert with `.into()`.

mod frozen;
pub mod v0_1_0;
pub mod v0_2_0;
pub mod v0_3_0;
pub(crate) mod version;

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use crate::error::LoadError;
use version::WitVersion;

pub use v0_3_0 as latest;

/// The interface every plugin exports, without its `@version`.
pub(crate) const HANDLER_INTERFACE: &str = "forewarn:plugin/handler";

/// The contract versions the host serves, oldest first: each glue module's `MIN_VERSION`.
const SUPPORTED: &[WitVersion] = &[
    v0_1_0::MIN_VERSION,
    v0_2_0::MIN_VERSION,
    v0_3_0::MIN_VERSION,
];

/// The host functions a plugin may import, whatever its contract version.
pub(crate) trait HostFunctions:
    v0_3_0::forewarn::plugin::host::Host
    + v0_3_0::forewarn::plugin::types::Host
    + v0_2_0::forewarn::plugin::host::Host
    + v0_2_0::forewarn::plugin::types::Host
    + v0_1_0::forewarn::plugin::host::Host
    + v0_1_0::forewarn::plugin::types::Host
    + Send
    + 'static
{
}

impl<T> HostFunctions for T where
    T: v0_3_0::forewarn::plugin::host::Host
        + v0_3_0::forewarn::plugin::types::Host
        + v0_2_0::forewarn::plugin::host::Host
        + v0_2_0::forewarn::plugin::types::Host
        + v0_1_0::forewarn::plugin::host::Host
        + v0_1_0::forewarn::plugin::types::Host
        + Send
        + 'static
{
}

/// The export names of the handler interface of every supported version, quoted, as a
/// message lists them: "`forewarn:plugin/handler@0.1.0` or `forewarn:plugin/handler@0.2.0`".
pub(crate) fn supported_handler_exports() -> String {
    SUPPORTED
        .iter()
        .map(|version| format!("`{HANDLER_INTERFACE}@{version}`"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Ok when the host has bindings for a plugin built against `plugin`; Err names the plugin's
/// version and the supported ones.
pub(crate) fn check_supported(plugin: WitVersion) -> Result<(), LoadError> {
    if SUPPORTED.iter().any(|supported| supported.serves(plugin)) {
        return Ok(());
    }
    Err(unsupported(plugin.to_string()))
}

/// The contract version new plugins target (the [`latest`] bindings'), as `x.y.z`.
pub fn latest_version() -> String {
    v0_3_0::MIN_VERSION.to_string()
}

/// The error for a plugin built against the contract version `found`.
pub(crate) fn unsupported(found: String) -> LoadError {
    let supported = SUPPORTED
        .iter()
        .map(|version| format!("forewarn:plugin@{version}"))
        .collect::<Vec<_>>()
        .join(", ");
    LoadError::UnsupportedVersion { found, supported }
}

/// Adds the `host` interface of every supported version to `linker`.
pub(crate) fn add_to_linker<T: HostFunctions>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    v0_1_0::EventHandler::add_to_linker::<T, HasSelf<T>>(linker, |state| state)?;
    v0_2_0::EventHandler::add_to_linker::<T, HasSelf<T>>(linker, |state| state)?;
    v0_3_0::EventHandler::add_to_linker::<T, HasSelf<T>>(linker, |state| state)
}

/// A plugin prepared for fast instantiation, through the bindings of its contract version.
pub(crate) enum HandlerPre<T: 'static> {
    /// Built against `forewarn:plugin@0.1.x`.
    V0_1_0(v0_1_0::EventHandlerPre<T>),
    /// Built against `forewarn:plugin@0.2.x`.
    V0_2_0(v0_2_0::EventHandlerPre<T>),
    /// Built against `forewarn:plugin@0.3.x`.
    V0_3_0(v0_3_0::EventHandlerPre<T>),
}

impl<T: HostFunctions> HandlerPre<T> {
    /// Checks the linked component against the bindings of `plugin`'s version.
    pub(crate) fn new(plugin: WitVersion, instance_pre: InstancePre<T>) -> Result<Self, LoadError> {
        let mismatch = |error: wasmtime::Error| LoadError::WrongWorld {
            details: format!(
                "its `{HANDLER_INTERFACE}@{plugin}` export does not match that version of the \
                 contract: {error:#}"
            ),
        };
        if v0_1_0::MIN_VERSION.serves(plugin) {
            let pre = v0_1_0::EventHandlerPre::new(instance_pre).map_err(mismatch)?;
            return Ok(HandlerPre::V0_1_0(pre));
        }
        if v0_2_0::MIN_VERSION.serves(plugin) {
            let pre = v0_2_0::EventHandlerPre::new(instance_pre).map_err(mismatch)?;
            return Ok(HandlerPre::V0_2_0(pre));
        }
        if v0_3_0::MIN_VERSION.serves(plugin) {
            let pre = v0_3_0::EventHandlerPre::new(instance_pre).map_err(mismatch)?;
            return Ok(HandlerPre::V0_3_0(pre));
        }
        Err(unsupported(plugin.to_string()))
    }

    /// Whether the plugin's contract has `on-start` (0.2.0 and later).
    pub(crate) fn has_on_start(&self) -> bool {
        !matches!(self, HandlerPre::V0_1_0(_))
    }

    /// A fresh instance in `store`.
    pub(crate) async fn instantiate_async(
        &self,
        store: &mut Store<T>,
    ) -> wasmtime::Result<Handler> {
        match self {
            HandlerPre::V0_1_0(pre) => Ok(Handler::V0_1_0(pre.instantiate_async(store).await?)),
            HandlerPre::V0_2_0(pre) => Ok(Handler::V0_2_0(pre.instantiate_async(store).await?)),
            HandlerPre::V0_3_0(pre) => Ok(Handler::V0_3_0(pre.instantiate_async(store).await?)),
        }
    }
}

/// One instance of a plugin, to call through the bindings of its contract version.
pub(crate) enum Handler {
    /// Built against `forewarn:plugin@0.1.x`.
    V0_1_0(v0_1_0::EventHandler),
    /// Built against `forewarn:plugin@0.2.x`.
    V0_2_0(v0_2_0::EventHandler),
    /// Built against `forewarn:plugin@0.3.x`.
    V0_3_0(v0_3_0::EventHandler),
}

impl Handler {
    /// Calls `on-event`, in the latest types.
    pub(crate) async fn call_on_event<T: HostFunctions>(
        &self,
        store: &mut Store<T>,
        event: &latest::ScheduledEvent,
        phase: latest::Phase,
        context: &latest::Context,
    ) -> wasmtime::Result<latest::Decision> {
        match self {
            Handler::V0_1_0(handler) => {
                let decision = handler
                    .forewarn_plugin_handler()
                    .call_on_event(store, &event.into(), phase.into(), &context.into())
                    .await?;
                Ok(decision.into())
            }
            Handler::V0_2_0(handler) => {
                let decision = handler
                    .forewarn_plugin_handler()
                    .call_on_event(store, &event.into(), phase.into(), &context.into())
                    .await?;
                Ok(decision.into())
            }
            Handler::V0_3_0(handler) => {
                handler
                    .forewarn_plugin_handler()
                    .call_on_event(store, event, phase, context)
                    .await
            }
        }
    }

    /// Calls `on-start`; a plugin whose contract has none (0.1.0) is not called: Ok(false).
    pub(crate) async fn call_on_start<T: HostFunctions>(
        &self,
        store: &mut Store<T>,
        context: &latest::StartContext,
    ) -> wasmtime::Result<bool> {
        match self {
            Handler::V0_1_0(_) => Ok(false),
            Handler::V0_2_0(handler) => {
                handler
                    .forewarn_plugin_handler()
                    .call_on_start(store, &context.into())
                    .await?;
                Ok(true)
            }
            Handler::V0_3_0(handler) => {
                handler
                    .forewarn_plugin_handler()
                    .call_on_start(store, context)
                    .await?;
                Ok(true)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_version_names_the_plugins_version_and_the_supported_ones() {
        assert_eq!(check_supported(WitVersion::new(0, 1, 0)), Ok(()));
        assert_eq!(check_supported(WitVersion::new(0, 2, 0)), Ok(()));
        assert_eq!(check_supported(WitVersion::new(0, 2, 3)), Ok(()));
        assert_eq!(check_supported(WitVersion::new(0, 3, 1)), Ok(()));
        let rows = [
            (WitVersion::new(0, 4, 0), "forewarn:plugin@0.4.0"),
            (WitVersion::new(1, 0, 0), "forewarn:plugin@1.0.0"),
            (WitVersion::new(0, 0, 9), "forewarn:plugin@0.0.9"),
        ];
        for (plugin, named) in rows {
            let error = check_supported(plugin).unwrap_err();
            assert!(
                matches!(error, LoadError::UnsupportedVersion { .. }),
                "{error:?}"
            );
            let message = error.to_string();
            assert!(message.contains(named), "{message}");
            assert!(
                message.contains(
                    "it supports forewarn:plugin@0.1.0, forewarn:plugin@0.2.0, \
                     forewarn:plugin@0.3.0"
                ),
                "{message}"
            );
        }
    }

    #[test]
    fn the_supported_handler_exports_are_listed_for_messages() {
        assert_eq!(
            supported_handler_exports(),
            "`forewarn:plugin/handler@0.1.0` or `forewarn:plugin/handler@0.2.0` or \
             `forewarn:plugin/handler@0.3.0`"
        );
    }
}

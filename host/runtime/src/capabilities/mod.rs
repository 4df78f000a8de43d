//! What plugins may use of the host, one capability to a unit (as Spin's `crates/factors` keep
//! one capability to a crate). Each unit holds all of its capability:
//!
//! - the **grant**: what the plugin's manifest line allows (its field of the manifest's
//!   [`Capabilities`](forewarn_manifest::Capabilities)) and the
//!   check of one request against it, refusing with a message that names the manifest line;
//! - the **service** the daemon lends (a store, a client, a runner), held in
//!   [`HostServices`](crate::services::HostServices);
//! - the **host function**: its whole body; the WIT glue in `host_api/` only forwards to it;
//! - a **test** that calls the host function without a guest.
//!
//! | capability | manifest, under `[capabilities]` | unit |
//! | --- | --- | --- |
//! | durable key-value store (`state-get/set/delete`) | always, within the plugin's quota | [`key_value`] |
//! | readiness (`set-ready`) | `readiness = true` | [`readiness`] |
//! | outgoing HTTP (`http-send`) | `http = ["host:port"]`, `http-ca-file`, `http-response-limit` | [`http`] |
//! | managed-identity tokens (`azure-access-token`) | `azure-identity = ["resource"]` | [`identity`] |
//! | operator actions (`run-action`) | `actions = ["name"]`, defined by `[actions.NAME]` in the daemon config | [`actions`] |
//!
//! Adding a capability: docs/architecture.md, "Adding a capability".

pub(crate) mod actions;
pub(crate) mod http;
pub(crate) mod identity;
pub(crate) mod key_value;
mod log_text;
pub(crate) mod readiness;
#[cfg(test)]
pub(crate) mod testing;

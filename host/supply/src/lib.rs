//! The plugin supply chain: publishing a plugin to an OCI registry (`forewarn plugin push`),
//! and installing it pinned, verified and consented to (`plugin install`, `upgrade`,
//! `rollback`, `remove`, `list`, `pull`).
//!
//! - [`reference`]: OCI references and sha256 digests.
//! - [`artifact`]: the Wasm OCI artifact layout with the plugin's manifest as a second layer,
//!   and the signature artifact.
//! - [`registry`]: the distribution-API client (size caps, same-host redirects only).
//! - [`layout`]: OCI image layouts (directories and tarballs) for air-gapped machines.
//! - [`fetch`]: a whole artifact from a registry or a layout, every digest checked.
//! - [`signature`]: OpenSSH (sshsig, ed25519) signatures and `[plugins] trusted-keys`.
//! - [`component_check`]: what `plugin check` checks.
//! - [`install`]: the checks, the consent and the atomic write into the plugin directory.
//! - [`lock`]: `plugins.lock`, the record of what was installed from where.
//! - [`push`]: building, pushing and signing an artifact.
//! - [`source`]: what `plugin install`'s argument names.
//! - [`version`]: how old an artifact is, so an upgrade never silently goes back.

pub mod artifact;
pub mod bounded_body;
pub mod component_check;
pub mod error;
pub mod fetch;
pub mod install;
pub mod layout;
pub mod lock;
pub mod push;
pub mod reference;
pub mod registry;
pub mod registry_credentials;
mod registry_tls;
pub mod signature;
pub mod source;
pub mod version;

pub use error::SupplyError;

//! The `[capabilities]` table of a manifest: what a plugin may do beyond computing, each
//! denied unless listed. One module per key, the shape of Spin's `allowed_hosts.rs`: the
//! module checks its own value (what the parser cannot), says what it grants the runtime,
//! and words it for the operator — the consent of `plugin install`, the upgrade's diff and
//! widenings, `plugin list` — on the form kept in the lock file
//! ([`GrantSummary`](crate::GrantSummary), which calls each in turn).
//!
//! | key | module | the runtime's grant (`forewarn_runtime::Grants`) |
//! | --- | --- | --- |
//! | `readiness` | [`readiness`] | `readiness` (`set-ready`) |
//! | `http` | [`http_hosts`] | `http` (`http-send`) |
//! | `actions` | [`actions`] | `actions` (`run-action`) |
//! | `azure-identity` | [`azure_identity`] | `azure_identity` (`azure-access-token`) |
//! | `http-ca-file` | [`http_ca_file`] | `http_roots` (read when the manifest is loaded) |
//! | `http-response-limit` | [`http_response_limit`] | `http_response_limit` |
//!
//! Adding a key: docs/architecture.md, "Adding a capability".

use forewarn_pipeline::setting_error::SettingError;
use std::path::{Path, PathBuf};

use forewarn_runtime::{CertificateDer, Grants};
use serde::{Deserialize, Serialize};

pub mod actions;
pub mod azure_identity;
pub mod http_ca_file;
pub mod http_hosts;
pub mod http_response_limit;
pub(crate) mod name_set;
pub mod readiness;

/// Host capabilities granted to the plugin; all denied unless listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct Capabilities {
    /// May mark the VM ready or not ready on `/readyz`.
    pub readiness: bool,
    /// `host:port` pairs the plugin may send HTTP requests to.
    pub http: Vec<String>,
    /// Names of actions (defined in the daemon config) the plugin may run.
    pub actions: Vec<String>,
    /// Resources (token audiences, e.g. "https://storage.azure.com/") the plugin may ask the
    /// VM's managed identity for access tokens for.
    pub azure_identity: Vec<String>,
    /// A PEM file of CAs `http-send` trusts for https:// besides the system's (private
    /// endpoints); a relative path is relative to the manifest's directory.
    pub http_ca_file: Option<PathBuf>,
    /// How much of a response body `http-send` hands over ("16MiB"); a longer body is cut.
    /// Default 1 MiB, at most [`forewarn_runtime::HTTP_RESPONSE_LIMIT_MAX`] (64 MiB).
    pub http_response_limit: Option<bytesize::ByteSize>,
    /// The certificates of `http-ca-file`, read when the manifest is loaded.
    #[serde(skip)]
    pub http_roots: Vec<CertificateDer<'static>>,
}

impl Capabilities {
    /// Refuses a value that would rewrite the terminal of whoever reads the grants (see
    /// [`crate::shown::refuse_text_that_moves`]); each key's unit names itself.
    pub(crate) fn refuse_text_that_moves(&self) -> Result<(), SettingError> {
        http_hosts::refuse_text_that_moves(&self.http)?;
        azure_identity::refuse_text_that_moves(&self.azure_identity)?;
        actions::refuse_text_that_moves(&self.actions)?;
        http_ca_file::refuse_text_that_moves(self.http_ca_file.as_deref())
    }

    /// Checks each key's value as far as the parser cannot; each key's unit names itself.
    pub(crate) fn check(&self) -> Result<(), SettingError> {
        http_response_limit::check(self.http_response_limit)?;
        http_hosts::check(&self.http)?;
        azure_identity::check(&self.azure_identity)
    }

    /// Reads the certificates of `http-ca-file` (a relative path in `dir`) into
    /// `http_roots`.
    pub(crate) fn read_http_roots(&mut self, dir: &Path) -> Result<(), SettingError> {
        self.http_roots = http_ca_file::read(self.http_ca_file.as_deref(), dir)?;
        Ok(())
    }

    /// What the runtime lets the plugin do.
    pub fn grants(&self) -> Grants {
        Grants {
            readiness: self.readiness,
            http: self.http.clone(),
            actions: self.actions.clone(),
            azure_identity: self.azure_identity.clone(),
            http_roots: self.http_roots.clone(),
            http_response_limit: http_response_limit::granted(self.http_response_limit),
        }
    }
}

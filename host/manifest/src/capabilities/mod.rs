//! The `[capabilities]` table of a manifest: what a plugin may do beyond computing, each
//! denied unless listed. It is the one model of a plugin's capabilities: the runtime enforces
//! it as it is ([`PluginSettings::grants`](crate::PluginSettings), each unit checking its own
//! key), and the lock file and the artifact's claim keep it as written (lists sorted) inside
//! the [`GrantSummary`](crate::GrantSummary), which words it for the operator through the
//! methods here.
//!
//! One module per key, the shape of Spin's `allowed_hosts.rs`: the module checks its own
//! value (what the parser cannot), says what it grants the runtime, and words it for the
//! operator — the consent of `plugin install`, the upgrade's diff and widenings, `plugin
//! list`.
//!
//! | key | module | what the runtime grants with it |
//! | --- | --- | --- |
//! | `readiness` | [`readiness`] | `readiness` (`set-ready`) |
//! | `http` | [`http_hosts`] | `http` (`http-send`) |
//! | `actions` | [`actions`] | `actions` (`run-action`) |
//! | `azure-identity` | [`azure_identity`] | `azure_identity` (`azure-access-token`) |
//! | `http-ca-file` | [`http_ca_file`] | extra CAs for https:// (`http_roots`, read when the manifest is loaded) |
//! | `http-response-limit` | [`http_response_limit`] | how much of a response `http-send` reads |
//!
//! Adding a key: docs/architecture.md, "Adding a capability".

use forewarn_pipeline::setting_error::SettingError;
use std::path::{Path, PathBuf};

use bytesize::ByteSize;
use http_response_limit::HttpResponseLimit;

use rustls::pki_types::CertificateDer;
use serde::{Deserialize, Serialize};

pub mod actions;
pub mod azure_identity;
pub mod forbidden_addresses;
pub mod http_ca_file;
pub mod http_hosts;
pub mod http_response_limit;
pub(crate) mod name_set;
pub mod readiness;

/// Host capabilities granted to the plugin; all denied unless listed. The same table, lists
/// sorted, is what the lock file and the artifact's claim keep.
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_ca_file: Option<PathBuf>,
    /// How much of a response body `http-send` hands over ("16MiB"); a longer body is cut.
    /// Default 1 MiB, at most [`http_response_limit::HTTP_RESPONSE_LIMIT_MAX`] (64 MiB).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_response_limit: Option<ByteSize>,
    /// The certificates of `http-ca-file`, read when the manifest is loaded; not part of
    /// what the lock keeps.
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

    /// How much of a response body `http-send` hands over: the manifest's limit, else the
    /// default.
    pub fn response_limit(&self) -> HttpResponseLimit {
        http_response_limit::granted(self.http_response_limit)
    }

    /// The table as the lock file and the claim keep it: each list sorted, once each, so
    /// two compare and print the same way whatever order the manifest listed them in; the
    /// certificates read are left out.
    pub(crate) fn sorted(&self) -> Capabilities {
        Capabilities {
            http: name_set::sorted(&self.http),
            actions: name_set::sorted(&self.actions),
            azure_identity: name_set::sorted(&self.azure_identity),
            http_roots: Vec::new(),
            ..self.clone()
        }
    }

    /// The consent's lines, one per key.
    pub(crate) fn consent(&self) -> Vec<String> {
        let mut lines = vec![
            actions::consent(&self.actions),
            readiness::consent(self.readiness),
            http_hosts::consent(&self.http),
            azure_identity::consent(&self.azure_identity),
        ];
        lines.extend(http_ca_file::consent(self.http_ca_file.is_some()));
        lines.push(http_response_limit::consent(self.response_limit_summary()));
        lines
    }

    /// Each way `self` grants more than `other`, in words ("actions: + stop-app").
    pub(crate) fn beyond(&self, other: &Capabilities) -> Vec<String> {
        [
            actions::wider(&self.actions, &other.actions),
            http_hosts::wider(&self.http, &other.http),
            azure_identity::wider(&self.azure_identity, &other.azure_identity),
            readiness::wider(self.readiness, other.readiness),
            http_ca_file::wider(self.http_ca_file.is_some(), other.http_ca_file.is_some()),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The changes from `old`, one line each: `+`/`-` for added and removed grants, `~` for
    /// a changed value.
    pub(crate) fn changes_from(&self, old: &Capabilities) -> Vec<String> {
        let mut lines = actions::changes(&self.actions, &old.actions);
        lines.extend(http_hosts::changes(&self.http, &old.http));
        lines.extend(azure_identity::changes(
            &self.azure_identity,
            &old.azure_identity,
        ));
        lines.extend(readiness::changes(self.readiness, old.readiness));
        lines.extend(http_ca_file::changes(
            self.http_ca_file.is_some(),
            old.http_ca_file.is_some(),
        ));
        lines
    }

    /// How `self`'s `http-response-limit` is wider than `other`'s, if it is. The summary
    /// says it after the calls' limits (memory, budget, prepare-time), as it always has.
    pub(crate) fn response_limit_beyond(&self, other: &Capabilities) -> Option<String> {
        http_response_limit::wider(
            self.response_limit_summary(),
            other.response_limit_summary(),
        )
    }

    /// The upgrade's line for `http-response-limit`, if it changed (said where
    /// [`Capabilities::response_limit_beyond`] is).
    pub(crate) fn response_limit_change_from(&self, old: &Capabilities) -> Option<String> {
        http_response_limit::changes(self.response_limit_summary(), old.response_limit_summary())
    }

    /// Its parts of `plugin list`'s line ("actions: stop-app", "readiness").
    pub(crate) fn one_line(&self) -> Vec<String> {
        [
            actions::one_line(&self.actions),
            readiness::one_line(self.readiness),
            http_hosts::one_line(&self.http),
            azure_identity::one_line(&self.azure_identity),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The response limit in force, as the operator reads it.
    fn response_limit_summary(&self) -> ByteSize {
        http_response_limit::summary(self.http_response_limit)
    }
}

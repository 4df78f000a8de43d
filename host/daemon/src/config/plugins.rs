//! `[plugins]` of the config file: whose signatures `forewarn plugin install` trusts.

use serde::{Deserialize, Serialize};

use forewarn_supply::signature::TrustedKeys;

use crate::pipeline::setting_error::SettingError;

/// `[plugins]`: the supply chain's settings (docs/plugin-directory.md, "Installing from a
/// registry").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct PluginsConfig {
    /// OpenSSH ed25519 public keys (`ssh-ed25519 AAAA… name`) whose signatures `plugin
    /// install` accepts; the comment names the signer. Empty: every install needs
    /// `--allow-unsigned`.
    pub trusted_keys: Vec<String>,
}

impl PluginsConfig {
    /// The trusted keys, parsed.
    pub fn trusted_keys(&self) -> Result<TrustedKeys, SettingError> {
        TrustedKeys::parse(&self.trusted_keys)
            .map_err(|problem| SettingError::new("plugins.trusted-keys", problem.to_string()))
    }
}

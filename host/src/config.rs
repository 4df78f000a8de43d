//! The daemon's configuration file (one TOML file), its defaults, and the command-line
//! overrides applied on top of it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::manifest::describe_toml_error;
use crate::policy::PolicyConfig;

/// Where `forewarn run` looks for its config when none is named.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/forewarn/forewarn.toml";

/// The whole configuration. Every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct Config {
    /// This VM's name as IMDS lists it in `Resources`. Empty: ask IMDS instance metadata.
    pub vm_name: String,
    /// Where the journal, plugin state and compile cache live.
    pub state_dir: PathBuf,
    /// The directory of plugins (`NAME.wasm` + optional `NAME.toml`).
    pub plugin_dir: PathBuf,
    pub imds: ImdsConfig,
    pub policy: PolicyConfig,
}

/// How to reach IMDS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct ImdsConfig {
    /// Base URL; the daemon appends `/metadata/scheduledevents`.
    pub url: String,
    pub api_version: String,
    /// Time between polls; the docs recommend one second.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Upper bound on requests per second, retries and approvals included (IMDS allows 5).
    pub max_requests_per_second: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            vm_name: String::new(),
            state_dir: PathBuf::from("/var/lib/forewarn"),
            plugin_dir: PathBuf::from("/etc/forewarn/plugins.d"),
            imds: ImdsConfig::default(),
            policy: PolicyConfig::default(),
        }
    }
}

impl Default for ImdsConfig {
    fn default() -> Self {
        ImdsConfig {
            url: "http://169.254.169.254".into(),
            api_version: "2020-07-01".into(),
            poll_interval: Duration::from_secs(1),
            max_requests_per_second: 5,
        }
    }
}

/// A config file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

impl Config {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&text).map_err(|message| ConfigError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses config text; errors name the line and the key.
    pub fn parse(text: &str) -> Result<Config, String> {
        let config: Config =
            toml::from_str(text).map_err(|error| describe_toml_error(text, &error))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), String> {
        if !(1..=5).contains(&self.imds.max_requests_per_second) {
            return Err(format!(
                "key `imds.max-requests-per-second`: {} is outside 1..=5 (IMDS throttles above 5 per second)",
                self.imds.max_requests_per_second
            ));
        }
        if self.imds.poll_interval < Duration::from_millis(200) {
            return Err(
                "key `imds.poll-interval`: must be at least \"200ms\" to stay under the IMDS rate limit"
                    .into(),
            );
        }
        if !self.imds.url.starts_with("http://") {
            return Err(format!(
                "key `imds.url`: \"{}\" must start with http:// (IMDS is plain HTTP on 169.254.169.254)",
                self.imds.url
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_is_the_default() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
    }

    #[test]
    fn errors_name_the_line_and_key() {
        let error = Config::parse("vm-name = \"a\"\n[imds]\npoll-interval = 5\n").unwrap_err();
        assert!(error.starts_with("line 3:"), "{error}");
        let error = Config::parse("[imds]\nmax-requests-per-second = 50\n").unwrap_err();
        assert!(error.contains("imds.max-requests-per-second"), "{error}");
        let error = Config::parse("[policy]\nobserve = true\n").unwrap_err();
        assert!(error.contains("observe"), "{error}");
    }
}

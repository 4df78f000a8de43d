//! The daemon's configuration file (one TOML file), its defaults, and the command-line
//! overrides applied on top of it.

pub mod example;
mod outcomes;
mod plugins;
mod scale_set;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use forewarn_coordination::CoordinationConfig;
pub use forewarn_service_manager::ShutdownConfig;
pub use outcomes::OutcomesConfig;
pub use plugins::PluginsConfig;
pub use scale_set::{ScaleSetConfig, SkipUpgradeWhen};

use crate::pipeline::policy::{LeadTime, MAX_QUARANTINE_WINDOW, PolicyConfig};
use crate::pipeline::scheduler::AUTO_LEAD_FLOOR;
use crate::pipeline::setting_error::{SettingError, check_at_most};
use forewarn_manifest::describe_toml_error;

/// Where `forewarn run` looks for its config when none is named:
/// `/etc/forewarn/forewarn.toml`, or `%ProgramData%\forewarn\forewarn.toml` on Windows.
pub fn default_config_path() -> PathBuf {
    forewarn_platform::default_paths::config_file()
}

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
    /// Largest plugin component (`.wasm`) loaded; larger files are refused (default "64MiB").
    pub max_plugin_size: bytesize::ByteSize,
    /// Largest plugin manifest (`.toml`) read; larger files are refused (default "1MiB").
    pub max_manifest_size: bytesize::ByteSize,
    /// `[imds]`: where IMDS is and how often to poll it.
    pub imds: ImdsConfig,
    /// `[policy]`: which events plugins prepare and which are approved at once.
    pub policy: PolicyConfig,
    /// `[admin]`: the local HTTP endpoint for health, readiness, metrics and status.
    pub admin: AdminConfig,
    /// `[identity]`: which managed identity plugins granted `azure-identity` get tokens of.
    pub identity: IdentityConfig,
    /// Commands plugins may run by name (`[actions.NAME]`), if their manifest grants it.
    pub actions: BTreeMap<String, ActionConfig>,
    /// `[coordination]`: approve events naming several VMs together, through etcd.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coordination: Option<CoordinationConfig>,
    /// `[plugins]`: whose signatures `forewarn plugin install` trusts.
    pub plugins: PluginsConfig,
    /// `[outcomes]`: how many outcome records (one per event) the state directory keeps.
    pub outcomes: OutcomesConfig,
    /// `[scale-set]`: what `/health/scale-set` (the Application Health extension's probe)
    /// answers.
    pub scale_set: ScaleSetConfig,
    /// `[shutdown]`: the plugins' last preparation when the operating system shuts down
    /// with no Scheduled Event.
    pub shutdown: ShutdownConfig,
}

/// The daemon's own HTTP endpoint: health, readiness for load balancers, metrics, status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct AdminConfig {
    /// Address to serve `/healthz`, `/readyz`, `/metrics` and `/status` on. Loopback by
    /// default; a load balancer probing `/readyz` from outside needs a reachable address.
    pub listen: SocketAddr,
    /// Names the endpoint answers `/`, `/status` and `/metrics` for, besides IP addresses
    /// and `localhost` (DNS rebinding: a web page's own name is refused).
    pub host_names: Vec<String>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 9555)),
            host_names: Vec::new(),
        }
    }
}

/// The VM's managed identity, as plugins granted `[capabilities] azure-identity` use it: the
/// daemon fetches tokens from IMDS (`imds.url`) and hands them out; plugins never reach IMDS.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct IdentityConfig {
    /// The client id of a user-assigned identity; empty: the VM's system-assigned identity.
    pub client_id: String,
}

/// An operator-defined command a plugin may run by name — never an arbitrary command line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ActionConfig {
    /// The program and its arguments, run without a shell.
    pub argv: Vec<String>,
    /// How long the action may run before it is killed.
    #[serde(with = "humantime_serde", default = "default_action_timeout")]
    pub timeout: Duration,
}

fn default_action_timeout() -> Duration {
    Duration::from_secs(30)
}

/// Longest `actions.NAME.timeout`: an action never outlives its plugin's budget, which is at
/// most 15 minutes.
pub const MAX_ACTION_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Longest `imds.poll-interval`: polling less often than once a minute misses short notices.
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(60);

/// How to reach IMDS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct ImdsConfig {
    /// Base URL; the daemon appends `/metadata/scheduledevents`.
    pub url: String,
    /// The `api-version` query parameter (default "2020-07-01", the newest; older ones parse too).
    pub api_version: String,
    /// Time between polls; the docs recommend one second.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Upper bound on requests per second, retries and approvals included (IMDS allows 5).
    pub max_requests_per_second: u32,
    /// With `vm-name` unset: how long the name lookup is retried before forewarn says, in
    /// the log and in `forewarn status`, that `vm-name` must be set. It keeps retrying.
    #[serde(with = "humantime_serde")]
    pub vm_name_patience: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            vm_name: String::new(),
            state_dir: forewarn_platform::default_paths::state_dir(),
            plugin_dir: forewarn_platform::default_paths::plugin_dir(),
            max_plugin_size: bytesize::ByteSize::b(crate::plugins::set::DEFAULT_MAX_PLUGIN_BYTES),
            max_manifest_size: bytesize::ByteSize::b(
                crate::plugins::set::DEFAULT_MAX_MANIFEST_BYTES,
            ),
            imds: ImdsConfig::default(),
            policy: PolicyConfig::default(),
            admin: AdminConfig::default(),
            identity: IdentityConfig::default(),
            actions: BTreeMap::new(),
            coordination: None,
            plugins: PluginsConfig::default(),
            outcomes: OutcomesConfig::default(),
            scale_set: ScaleSetConfig::default(),
            shutdown: ShutdownConfig::default(),
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
            vm_name_patience: Duration::from_secs(30),
        }
    }
}

impl ImdsConfig {
    /// The socket addresses `url` names (a name is resolved now, once), which plugins'
    /// `http-send` refuses. Empty when the URL cannot be parsed or resolved.
    pub fn endpoint_addresses(&self) -> Vec<SocketAddr> {
        use std::net::ToSocketAddrs;
        let Ok(url) = reqwest::Url::parse(&self.url) else {
            return Vec::new();
        };
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Vec::new();
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match (host, port).to_socket_addrs() {
            Ok(addresses) => addresses.collect(),
            Err(error) => {
                tracing::warn!(url = %self.url, %error, "cannot resolve `imds.url` to refuse it to plugins; link-local addresses stay refused");
                Vec::new()
            }
        }
    }
}

/// A config file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, permissions).
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The config file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The file was read but is not a valid config; the problem names the line or the key.
    #[error("invalid config file {}: {problem}", path.display())]
    Invalid {
        /// The config file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        problem: InvalidConfig,
    },
}

/// Config text that is not a valid config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidConfig {
    /// Not TOML of a config: the line and the key ("line 3: key `poll-interval`: …"), then
    /// what the parser said.
    #[error("{0}")]
    Toml(String),
    /// A setting refused ("key `imds.url`: …").
    #[error(transparent)]
    Setting(#[from] SettingError),
}

impl Config {
    /// The size limits of plugin files this config sets.
    pub fn plugin_file_limits(&self) -> crate::plugins::set::PluginFileLimits {
        crate::plugins::set::PluginFileLimits {
            max_wasm_bytes: self.max_plugin_size.as_u64(),
            max_manifest_bytes: self.max_manifest_size.as_u64(),
        }
    }

    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |problem| ConfigError::Invalid {
            path: path.to_path_buf(),
            problem,
        };
        let config = Config::parse(&text).map_err(invalid)?;
        // The files a section names (certificates) are read only for a real config file.
        if let Some(coordination) = &config.coordination {
            coordination
                .check_files()
                .map_err(|error| invalid(error.into()))?;
        }
        Ok(config)
    }

    /// The config a command reads: the file named, else [`default_config_path`] if it
    /// exists, else the built-in defaults.
    pub fn load_or_default(path: Option<&Path>) -> Result<Config, ConfigError> {
        if let Some(path) = path {
            return Config::load(path);
        }
        let default = default_config_path();
        if default.exists() {
            return Config::load(&default);
        }
        Ok(Config::default())
    }

    /// Parses config text; errors name the line and the key.
    pub fn parse(text: &str) -> Result<Config, InvalidConfig> {
        let config: Config = toml::from_str(text)
            .map_err(|error| InvalidConfig::Toml(describe_toml_error(text, &error)))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), SettingError> {
        if !(1..=5).contains(&self.imds.max_requests_per_second) {
            return Err(SettingError::new(
                "imds.max-requests-per-second",
                format!(
                    "{} is outside 1..=5 (IMDS throttles above 5 per second)",
                    self.imds.max_requests_per_second
                ),
            ));
        }
        if self.imds.poll_interval < Duration::from_millis(250) {
            return Err(SettingError::new(
                "imds.poll-interval",
                "must be at least \"250ms\": IMDS allows 5 requests per second, and approvals \
                 need room beside the polls",
            ));
        }
        if !self.imds.url.starts_with("http://") {
            return Err(SettingError::new(
                "imds.url",
                format!(
                    "\"{}\" must start with http:// (IMDS is plain HTTP on 169.254.169.254)",
                    self.imds.url
                ),
            ));
        }
        check_at_most(
            "imds.poll-interval",
            self.imds.poll_interval,
            MAX_POLL_INTERVAL,
        )?;
        check_quarantine(&self.policy)?;
        if let Some(coordination) = &self.coordination {
            coordination.validate()?;
            check_barrier_after_preparation(coordination.deadline, self.policy.prepare_lead_time)?;
        }
        self.plugins.trusted_keys()?;
        self.outcomes.validate()?;
        self.scale_set.validate()?;
        self.shutdown.validate()?;
        for (name, action) in &self.actions {
            check_at_most(
                &format!("actions.{name}.timeout"),
                action.timeout,
                MAX_ACTION_TIMEOUT,
            )?;
            if action.argv.is_empty() || action.argv[0].is_empty() {
                return Err(SettingError::new(
                    format!("actions.{name}.argv"),
                    "must name a program, e.g. [\"systemctl\", \"stop\", \"app\"]",
                ));
            }
        }
        Ok(())
    }
}

/// The crash-loop quarantine's window must hold the failures it counts.
fn check_quarantine(policy: &PolicyConfig) -> Result<(), SettingError> {
    if policy.quarantine_after_failures > 0 && policy.quarantine_window.is_zero() {
        return Err(SettingError::new(
            "policy.quarantine-window",
            "must be more than zero, e.g. \"60s\" (to never quarantine a plugin, set \
             `quarantine-after-failures = 0`)",
        ));
    }
    check_at_most(
        "policy.quarantine-window",
        policy.quarantine_window,
        MAX_QUARANTINE_WINDOW,
    )
}

/// The etcd barrier's `deadline` (approve for everyone this long before NotBefore) must come
/// after preparation began (`policy.prepare-lead-time` before NotBefore), or the first ready
/// VM would approve for every VM before the others even started preparing.
fn check_barrier_after_preparation(
    deadline: Option<Duration>,
    lead: LeadTime,
) -> Result<(), SettingError> {
    let Some(deadline) = deadline else {
        return Ok(());
    };
    let (lead, named) = match lead {
        LeadTime::Fixed(lead) => (lead, format!("\"{}\"", humantime::format_duration(lead))),
        LeadTime::Auto => (AUTO_LEAD_FLOOR, "\"auto\" (at least 15m)".to_owned()),
    };
    if deadline < lead {
        return Ok(());
    }
    Err(SettingError::new(
        "coordination.deadline",
        format!(
            "\"{}\" is not shorter than `policy.prepare-lead-time` {named}: the first ready VM \
             would approve for all of them before the others start preparing; make \
             prepare-lead-time longer than the deadline plus the plugins' prepare-times",
            humantime::format_duration(deadline)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_barrier_deadline_before_preparation_begins_is_refused() {
        let coordination = "[coordination]\nendpoints = [\"http://127.0.0.1:2379\"]\n";
        // (prepare-lead-time, coordination.deadline) → accepted
        let rows = [
            (None, "2m", true),
            (None, "15m", false),
            (Some("10m"), "2m", true),
            (Some("2m"), "2m", false),
        ];
        for (lead, deadline, accepted) in rows {
            let policy = lead
                .map(|lead| format!("[policy]\nprepare-lead-time = \"{lead}\"\n"))
                .unwrap_or_default();
            let text = format!("{policy}{coordination}deadline = \"{deadline}\"\n");
            let result = Config::parse(&text);
            assert_eq!(result.is_ok(), accepted, "{lead:?} {deadline}: {result:?}");
            if let Err(error) = result {
                let error = error.to_string();
                assert!(error.starts_with("key `coordination.deadline`"), "{error}");
                assert!(error.contains("prepare-lead-time"), "{error}");
            }
        }
    }

    #[test]
    fn empty_config_is_the_default() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
    }

    #[test]
    fn huge_durations_are_refused_naming_the_key_and_the_maximum() {
        let cases = [
            (
                "[actions.stop]\nargv = [\"true\"]\ntimeout = \"18446744073709551615s\"\n",
                "key `actions.stop.timeout`",
                "\"15m\"",
            ),
            (
                "[imds]\npoll-interval = \"18446744073709551615s\"\n",
                "key `imds.poll-interval`",
                "\"1m\"",
            ),
            (
                "[policy]\nquarantine-window = \"2h\"\n",
                "key `policy.quarantine-window`",
                "\"1h\"",
            ),
        ];
        for (text, key, max) in cases {
            let error = Config::parse(text).unwrap_err().to_string();
            assert!(error.contains(key), "{error}");
            assert!(error.contains(max), "{error}");
        }
    }

    #[test]
    fn the_quarantine_window_must_hold_the_failures_it_counts() {
        let error = Config::parse("[policy]\nquarantine-window = \"0s\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("key `policy.quarantine-window`: must be more than zero"),
            "{error}"
        );
        assert!(error.contains("quarantine-after-failures = 0"), "{error}");
        let off = "[policy]\nquarantine-after-failures = 0\nquarantine-window = \"0s\"\n";
        assert_eq!(
            Config::parse(off).unwrap().policy.quarantine_after_failures,
            0
        );
    }

    #[test]
    fn errors_name_the_line_and_key() {
        let error = Config::parse("vm-name = \"a\"\n[imds]\npoll-interval = 5\n")
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("line 3:"), "{error}");
        let error = Config::parse("[imds]\nmax-requests-per-second = 50\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("imds.max-requests-per-second"), "{error}");
        let error = Config::parse("[policy]\nobserve = true\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("observe"), "{error}");
    }
}

#[cfg(test)]
mod coordination_tests;

//! A plugin's manifest (`NAME.toml` beside `NAME.wasm`): which events it wants, whom it runs
//! after, its budget and memory cap, its config values and the capabilities it is granted.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use forewarn_imds::EventType;
use forewarn_runtime::{Grants, PluginSettings};
use serde::{Deserialize, Serialize};

/// Default time a plugin has to answer one call.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(10);

/// Everything the operator says about one plugin. Every field has a default, so a plugin
/// without a manifest subscribes to every event type with the default budget and no grants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct PluginManifest {
    /// Event types to call the plugin for: "Freeze", "Reboot", "Redeploy", "Preempt",
    /// "Terminate", "Unknown" (types newer than forewarn), or "*" for all.
    pub subscribe: Vec<String>,
    /// Plugins whose preparation must be approved before this one is asked (drain before
    /// shutdown). Recovery runs in the reverse order.
    pub after: Vec<String>,
    /// Longest time one call may take ("10s", "500ms"); also capped by the event's deadline.
    #[serde(with = "humantime_serde")]
    pub budget: Duration,
    /// Cap on the plugin's memory ("64MiB").
    pub memory: bytesize::ByteSize,
    /// Values the plugin reads with the `config` host function.
    pub config: BTreeMap<String, ConfigValue>,
    pub capabilities: Capabilities,
}

/// A config value: written as a TOML string, number or boolean, read by the plugin as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConfigValue {
    Text(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
}

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
}

impl Default for PluginManifest {
    fn default() -> Self {
        PluginManifest {
            subscribe: vec!["*".into()],
            after: Vec::new(),
            budget: DEFAULT_BUDGET,
            memory: bytesize::ByteSize::b(forewarn_runtime::DEFAULT_MEMORY_LIMIT),
            config: BTreeMap::new(),
            capabilities: Capabilities::default(),
        }
    }
}

/// A manifest that could not be read; the message names the file, line and key.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read plugin manifest {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("invalid plugin manifest {}: {message}", path.display())]
    Invalid {
        path: std::path::PathBuf,
        message: String,
    },
}

impl PluginManifest {
    /// Reads and validates a manifest file.
    pub fn load(path: &Path) -> Result<PluginManifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        PluginManifest::parse(&text).map_err(|message| ManifestError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses manifest text; the error names the line and the key.
    pub fn parse(text: &str) -> Result<PluginManifest, String> {
        let manifest: PluginManifest =
            toml::from_str(text).map_err(|error| describe_toml_error(text, &error))?;
        manifest.validate()?;
        Ok(manifest)
    }

    fn validate(&self) -> Result<(), String> {
        for name in &self.subscribe {
            if name != "*" && name != "Unknown" && EventType::from_wire(name) == EventType::Unknown
            {
                return Err(format!(
                    "key `subscribe`: unknown event type \"{name}\"; use Freeze, Reboot, \
                     Redeploy, Preempt, Terminate, Unknown or \"*\""
                ));
            }
        }
        if self.budget.is_zero() {
            return Err("key `budget`: must be more than zero, e.g. \"10s\"".into());
        }
        if self.memory.as_u64() < 1024 * 1024 {
            return Err(format!(
                "key `memory`: {} is too small to run a plugin; use at least \"1MiB\"",
                self.memory
            ));
        }
        for target in &self.capabilities.http {
            if !target.contains(':') {
                return Err(format!(
                    "key `capabilities.http`: \"{target}\" must be host:port, e.g. \"127.0.0.1:8080\""
                ));
            }
        }
        Ok(())
    }

    /// Whether the plugin wants calls for events of this type.
    pub fn subscribes_to(&self, event_type: EventType) -> bool {
        self.subscribe.iter().any(|name| {
            name == "*"
                || (event_type == EventType::Unknown && name.eq_ignore_ascii_case("unknown"))
                || (event_type != EventType::Unknown && EventType::from_wire(name) == event_type)
        })
    }

    /// The settings the runtime enforces for this plugin.
    pub fn runtime_settings(&self) -> PluginSettings {
        PluginSettings {
            memory_limit_bytes: self.memory.as_u64(),
            config: self
                .config
                .iter()
                .map(|(key, value)| (key.clone(), value.as_text()))
                .collect(),
            grants: Grants {
                readiness: self.capabilities.readiness,
                http: self.capabilities.http.clone(),
                actions: self.capabilities.actions.clone(),
            },
        }
    }
}

impl ConfigValue {
    /// The value as the plugin sees it.
    pub fn as_text(&self) -> String {
        match self {
            ConfigValue::Text(text) => text.clone(),
            ConfigValue::Integer(number) => number.to_string(),
            ConfigValue::Float(number) => number.to_string(),
            ConfigValue::Boolean(flag) => flag.to_string(),
        }
    }
}

/// Turns a TOML error into "line N: message" using the span the parser reports.
pub fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end();
    match error.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {message}")
        }
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_manifest_parses() {
        let manifest = PluginManifest::parse(
            r#"
            subscribe = ["Reboot", "Preempt"]
            after = ["lb-drain"]
            budget = "5s"
            memory = "32MiB"
            [config]
            url = "http://127.0.0.1:8080/checkpoint"
            retries = 3
            [capabilities]
            readiness = true
            http = ["127.0.0.1:8080"]
            actions = ["stop-app"]
            "#,
        )
        .unwrap();
        assert!(manifest.subscribes_to(EventType::Preempt));
        assert!(!manifest.subscribes_to(EventType::Freeze));
        assert_eq!(manifest.budget, Duration::from_secs(5));
        let settings = manifest.runtime_settings();
        assert_eq!(settings.memory_limit_bytes, 32 * 1024 * 1024);
        assert_eq!(settings.config["retries"], "3");
        assert!(settings.grants.readiness);
    }

    #[test]
    fn empty_manifest_means_everything_with_defaults() {
        let manifest = PluginManifest::parse("").unwrap();
        for event_type in EventType::KNOWN {
            assert!(manifest.subscribes_to(event_type));
        }
        assert!(manifest.subscribes_to(EventType::Unknown));
        assert_eq!(manifest.budget, DEFAULT_BUDGET);
    }

    #[test]
    fn errors_name_the_line_and_the_key() {
        let error = PluginManifest::parse("budget = \"5s\"\nbudgett = \"1s\"\n").unwrap_err();
        assert!(error.starts_with("line 2:"), "{error}");
        assert!(error.contains("budgett"), "{error}");
        let error = PluginManifest::parse("subscribe = [\"Reboo\"]").unwrap_err();
        assert!(error.contains("Reboo"), "{error}");
        let error = PluginManifest::parse("budget = \"soon\"").unwrap_err();
        assert!(error.starts_with("line 1:"), "{error}");
    }
}

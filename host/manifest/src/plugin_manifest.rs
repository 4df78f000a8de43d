//! A plugin's manifest (`NAME.toml` beside `NAME.wasm`): which events it wants, whom it runs
//! after, its budget and memory cap, its config values and the capabilities it is granted.

use forewarn_pipeline::setting_error::SettingError;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::PluginSettings;
use forewarn_events::{EventType, PluginName};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub(crate) use forewarn_pipeline::roster::DEFAULT_BUDGET;
/// What a plugin's failure means for the approval: it lives with the pipeline's terms.
pub use forewarn_pipeline::roster::FailurePolicy;
use forewarn_pipeline::roster::{PluginTerms, Subscription};

use crate::capabilities::Capabilities;
use crate::shown;

/// Longest budget a manifest may give: the longest standard IMDS notice (15 minutes); a
/// huge one would overflow time arithmetic.
pub(crate) const MAX_BUDGET: Duration = Duration::from_secs(15 * 60);
/// Largest `memory` cap a manifest may give: 1 GiB, four times what a Python plugin needs
/// (256 MiB) and a quarter of a 32-bit memory's whole address space.
pub(crate) const MAX_MEMORY: bytesize::ByteSize = bytesize::ByteSize::gib(1);

/// Everything the operator says about one plugin. Every field has a default, so a plugin
/// without a manifest subscribes to every event type with the default budget and no grants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct PluginManifest {
    /// Event types to call the plugin for: "Freeze", "Reboot", "Redeploy", "Preempt",
    /// "Terminate", "Shutdown" (the operating system's own, not from IMDS: also called for
    /// every plugin listing a type that takes the VM down), "Unknown" (types newer than
    /// forewarn), or "*" for all.
    pub subscribe: Vec<String>,
    /// Plugins whose preparation must be approved before this one is asked (drain before
    /// shutdown). Recovery runs in the reverse order.
    pub after: Vec<String>,
    /// Longest time one call may take ("10s", "500ms"); also capped by the event's deadline.
    #[serde(with = "humantime_serde")]
    pub budget: Duration,
    /// How long the plugin's whole preparation usually takes, across its deferrals (a drain
    /// window, a checkpoint): the scheduler plans a chain of plugins against NotBefore with
    /// it (see "Short notice" in docs/operations.md). Default: the budget.
    #[serde(with = "humantime_serde::option")]
    pub prepare_time: Option<Duration>,
    /// Cap on the plugin's memory ("64MiB").
    pub memory: bytesize::ByteSize,
    /// Values the plugin reads with the `config` host function.
    pub config: BTreeMap<String, ConfigValue>,
    /// What the plugin may do beyond computing: HTTP hosts, actions, readiness; none granted
    /// by default.
    pub capabilities: Capabilities,
    /// Ask this plugin to prepare again when an event it prepared for is rescheduled after
    /// its approval was sent (the approval is then sent again once it approves); by default
    /// a sent approval stands and the plugin is not asked again.
    pub prepare_again_on_reschedule: bool,
    /// What a failed call (a trap, a call past its budget or its memory cap, one that could
    /// not start) means for the approval: `hold` (the default) or `approve` (an advisory
    /// plugin, such as notify). See "Plugin failure policy" in docs/operations.md.
    pub on_failure: FailurePolicy,
}

/// A config value: written as a TOML string, number or boolean, read by the plugin as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ConfigValue {
    /// A TOML string, handed over as written.
    Text(String),
    /// A TOML integer, read by the plugin in decimal.
    Integer(i64),
    /// A TOML float, read by the plugin as Rust formats it (`0.5`, `2`).
    Float(f64),
    /// A TOML boolean, read by the plugin as `true` or `false`.
    Boolean(bool),
}

impl Default for PluginManifest {
    fn default() -> Self {
        PluginManifest {
            subscribe: vec!["*".into()],
            after: Vec::new(),
            budget: DEFAULT_BUDGET,
            prepare_time: None,
            memory: bytesize::ByteSize::b(crate::DEFAULT_MEMORY_LIMIT),
            config: BTreeMap::new(),
            capabilities: Capabilities::default(),
            prepare_again_on_reschedule: false,
            on_failure: FailurePolicy::Hold,
        }
    }
}

/// A manifest that could not be read; the message names the file, line and key.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The manifest file could not be read.
    #[error("cannot read plugin manifest {}: {source}", path.display())]
    Read {
        /// The `.toml` file.
        path: std::path::PathBuf,
        /// What the operating system answered.
        source: std::io::Error,
    },
    /// The manifest is not valid TOML, or a value is out of range or unknown.
    #[error("invalid plugin manifest {}: {problem}", path.display())]
    Invalid {
        /// The `.toml` file.
        path: std::path::PathBuf,
        /// What is wrong, naming the line and the key.
        problem: ManifestProblem,
    },
}

/// What is wrong with a manifest's text: the line and the key, then the problem and its fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestProblem {
    /// Not TOML, or a key or value serde refuses: the parser's words, with line and key.
    #[error("{0}")]
    Toml(String),
    /// A value the manifest's checks refuse, at its line when the key can be found.
    #[error("{}{error}", line.map(|line| format!("line {line}: ")).unwrap_or_default())]
    Setting {
        /// The line (1-based) the key is assigned on.
        line: Option<usize>,
        /// The key and what is wrong with its value.
        error: SettingError,
    },
    /// The file is not UTF-8 text.
    #[error("not UTF-8 text; save the manifest as UTF-8")]
    NotUtf8,
}

impl ManifestError {
    /// The manifest file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ManifestError::Read { path, .. } | ManifestError::Invalid { path, .. } => path,
        }
    }
}

impl PluginManifest {
    /// Reads and validates a manifest file.
    pub fn load(path: &Path) -> Result<PluginManifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        PluginManifest::from_text(path, &text)
    }

    /// Parses the text of the manifest file `path` (already read); the error names the file,
    /// the line and the key.
    pub fn from_text(path: &Path, text: &str) -> Result<PluginManifest, ManifestError> {
        let dir = path.parent().unwrap_or(Path::new(""));
        PluginManifest::parse_in(text, dir).map_err(|problem| ManifestError::Invalid {
            path: path.to_path_buf(),
            problem,
        })
    }

    /// Parses manifest text; the error names the line and the key ("line 3: key `budget`: …").
    /// A relative `http-ca-file` is read relative to the current directory.
    pub fn parse(text: &str) -> Result<PluginManifest, ManifestProblem> {
        PluginManifest::parse_in(text, Path::new(""))
    }

    /// Parses manifest text, reading a relative `http-ca-file` in `dir`.
    fn parse_in(text: &str, dir: &Path) -> Result<PluginManifest, ManifestProblem> {
        let mut manifest: PluginManifest = toml::from_str(text)
            .map_err(|error| ManifestProblem::Toml(describe_toml_error(text, &error)))?;
        let locate = |error: SettingError| ManifestProblem::Setting {
            line: error.keys.first().and_then(|key| line_of_key(text, key)),
            error,
        };
        manifest.validate().map_err(locate)?;
        manifest.capabilities.read_http_roots(dir).map_err(locate)?;
        Ok(manifest)
    }

    /// Checks the values serde cannot; the error names the key.
    fn validate(&self) -> Result<(), SettingError> {
        self.refuse_text_that_moves()?;
        for name in &self.subscribe {
            if name != "*"
                && name != "Unknown"
                && EventType::from_subscription_name(name) == EventType::Unknown
            {
                return Err(SettingError::new(
                    "subscribe",
                    format!(
                        "unknown event type \"{name}\"; use Freeze, Reboot, Redeploy, Preempt, \
                         Terminate, Shutdown, Unknown or \"*\""
                    ),
                ));
            }
        }
        if self.budget.is_zero() {
            return Err(SettingError::new(
                "budget",
                "must be more than zero, e.g. \"10s\"",
            ));
        }
        if self.budget > MAX_BUDGET {
            return Err(SettingError::new(
                "budget",
                format!(
                    "{} is longer than the maximum \"{}\" (the longest standard IMDS \
                     notice); use e.g. \"10s\"",
                    humantime::format_duration(self.budget),
                    humantime::format_duration(MAX_BUDGET)
                ),
            ));
        }
        if let Some(prepare_time) = self.prepare_time
            && (prepare_time.is_zero() || prepare_time > MAX_BUDGET)
        {
            return Err(SettingError::new(
                "prepare-time",
                format!(
                    "{} must be more than zero and at most \"{}\" (the longest standard IMDS \
                     notice); use e.g. \"15s\"",
                    humantime::format_duration(prepare_time),
                    humantime::format_duration(MAX_BUDGET)
                ),
            ));
        }
        if self.memory.as_u64() < 1024 * 1024 {
            return Err(SettingError::new(
                "memory",
                format!(
                    "{} is too small to run a plugin; use at least \"1MiB\"",
                    self.memory
                ),
            ));
        }
        if self.memory > MAX_MEMORY {
            return Err(SettingError::new(
                "memory",
                format!(
                    "{} is more than the maximum \"1GiB\" (plugins must leave the VM its \
                     memory); use e.g. \"64MiB\", or \"256MiB\" for a Python plugin",
                    self.memory
                ),
            ));
        }
        self.capabilities.check()
    }

    /// Refuses a control character (an escape, a newline), a line separator or a
    /// bidirectional mark in a grant or another value shown to an operator: printed at
    /// `plugin push`, at the install's consent and by `plugin list`, it could rewrite their
    /// terminal (clear the screen, hide the real grants, write the clipboard).
    fn refuse_text_that_moves(&self) -> Result<(), SettingError> {
        self.capabilities.refuse_text_that_moves()?;
        shown::refuse_text_that_moves(
            "after",
            &self.after,
            "it names plugins (a-z, 0-9, '-', '_')",
        )?;
        shown::refuse_text_that_moves("subscribe", &self.subscribe, "it names event types")
    }

    /// What the pipeline reads of this manifest (subscriptions, `after`, budget,
    /// prepare-time, failure policy, prepare-again-on-reschedule).
    pub fn terms(&self) -> PluginTerms {
        PluginTerms {
            subscribe: Subscription::of_names(&self.subscribe),
            after: self.after.iter().map(PluginName::from).collect(),
            budget: self.budget,
            prepare_time: self.prepare_time,
            on_failure: self.on_failure,
            prepare_again_on_reschedule: self.prepare_again_on_reschedule,
        }
    }

    /// A digest of every field (the certificates of `http-ca-file` included), for telling
    /// versions of a plugin apart within one run of the daemon: a change to any setting (a
    /// memory cap, a grant) makes a new version, which lifts its quarantine. It hashes the
    /// derived `Debug` text, which shows every field as the derived `PartialEq` compares
    /// them and cannot fail; it is never stored.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(format!("{self:?}")))
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
            grants: self.capabilities.clone(),
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

/// Turns a TOML error into "line N: key `K`: message" using the span the parser reports.
pub fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end();
    let Some(span) = error.span() else {
        return message.to_owned();
    };
    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
    match key_on_line(text, line) {
        Some(key) => format!("line {line}: key `{key}`: {message}"),
        None => format!("line {line}: {message}"),
    }
}

/// The dotted key (`capabilities.http`) assigned on line `line` (1-based), if any, taking
/// the `[table]` header above it into account; for a header line, the table's name.
fn key_on_line(text: &str, line: usize) -> Option<String> {
    let mut table = String::new();
    for (index, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if let Some(header) = table_header(trimmed) {
            if index + 1 == line {
                return Some(header);
            }
            table = header;
            continue;
        }
        if index + 1 != line {
            continue;
        }
        let (key, _value) = trimmed.split_once('=')?;
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        if key.is_empty() {
            return None;
        }
        return Some(if table.is_empty() {
            key.to_owned()
        } else {
            format!("{table}.{key}")
        });
    }
    None
}

/// The line (1-based) where the dotted `key` is assigned, if it can be found.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let count = text.lines().count();
    (1..=count).find(|&line| key_on_line(text, line).as_deref() == Some(key))
}

/// `[capabilities]` → `capabilities`.
fn table_header(line: &str) -> Option<String> {
    let inner = line.strip_prefix('[')?.split(']').next()?;
    Some(inner.trim().trim_matches('[').trim().to_owned())
}

#[cfg(test)]
mod tests;

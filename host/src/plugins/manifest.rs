//! A plugin's manifest (`NAME.toml` beside `NAME.wasm`): which events it wants, whom it runs
//! after, its budget and memory cap, its config values and the capabilities it is granted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use forewarn_imds::{EventType, PluginName};
use forewarn_runtime::trust::{self, FileRules, Owners, TrustError};
use forewarn_runtime::{CertificateDer, Grants, HttpResponseLimit, PluginSettings};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub(crate) use crate::pipeline::roster::DEFAULT_BUDGET;
/// What a plugin's failure means for the approval: it lives with the pipeline's terms.
pub use crate::pipeline::roster::FailurePolicy;
use crate::pipeline::roster::{PluginTerms, Subscription};

/// Longest budget a manifest may give: the longest standard IMDS notice (15 minutes); a
/// huge one would overflow time arithmetic.
pub(crate) const MAX_BUDGET: Duration = Duration::from_secs(15 * 60);
/// Largest `memory` cap a manifest may give: 1 GiB, four times what a Python plugin needs
/// (256 MiB) and a quarter of a 32-bit memory's whole address space.
pub(crate) const MAX_MEMORY: bytesize::ByteSize = bytesize::ByteSize::gib(1);
/// Largest `http-ca-file` read: far more than a bundle of every public CA.
const CA_FILE_MAX_BYTES: u64 = 4 * 1024 * 1024;

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

impl Default for PluginManifest {
    fn default() -> Self {
        PluginManifest {
            subscribe: vec!["*".into()],
            after: Vec::new(),
            budget: DEFAULT_BUDGET,
            prepare_time: None,
            memory: bytesize::ByteSize::b(forewarn_runtime::DEFAULT_MEMORY_LIMIT),
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
    #[error("invalid plugin manifest {}: {message}", path.display())]
    Invalid {
        /// The `.toml` file.
        path: std::path::PathBuf,
        /// What is wrong, naming the key and, for TOML errors, the line.
        message: String,
    },
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
    pub(crate) fn from_text(path: &Path, text: &str) -> Result<PluginManifest, ManifestError> {
        let dir = path.parent().unwrap_or(Path::new(""));
        PluginManifest::parse_in(text, dir).map_err(|message| ManifestError::Invalid {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses manifest text; the error names the line and the key ("line 3: key `budget`: …").
    /// A relative `http-ca-file` is read relative to the current directory.
    pub fn parse(text: &str) -> Result<PluginManifest, String> {
        PluginManifest::parse_in(text, Path::new(""))
    }

    /// Parses manifest text, reading a relative `http-ca-file` in `dir`.
    fn parse_in(text: &str, dir: &Path) -> Result<PluginManifest, String> {
        let mut manifest: PluginManifest =
            toml::from_str(text).map_err(|error| describe_toml_error(text, &error))?;
        let locate = |(key, message): (&str, String)| match line_of_key(text, key) {
            Some(line) => format!("line {line}: key `{key}`: {message}"),
            None => format!("key `{key}`: {message}"),
        };
        manifest.validate().map_err(locate)?;
        manifest.capabilities.http_roots = manifest
            .capabilities
            .read_ca_file(dir)
            .map_err(|message| locate(("capabilities.http-ca-file", message)))?;
        Ok(manifest)
    }

    /// Checks the values serde cannot; the error is (dotted key, what is wrong).
    fn validate(&self) -> Result<(), (&'static str, String)> {
        self.refuse_text_that_moves()?;
        for name in &self.subscribe {
            if name != "*" && name != "Unknown" && EventType::from_wire(name) == EventType::Unknown
            {
                return Err((
                    "subscribe",
                    format!(
                        "unknown event type \"{name}\"; use Freeze, Reboot, Redeploy, Preempt, \
                         Terminate, Unknown or \"*\""
                    ),
                ));
            }
        }
        if self.budget.is_zero() {
            return Err(("budget", "must be more than zero, e.g. \"10s\"".into()));
        }
        if self.budget > MAX_BUDGET {
            return Err((
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
            return Err((
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
            return Err((
                "memory",
                format!(
                    "{} is too small to run a plugin; use at least \"1MiB\"",
                    self.memory
                ),
            ));
        }
        if self.memory > MAX_MEMORY {
            return Err((
                "memory",
                format!(
                    "{} is more than the maximum \"1GiB\" (plugins must leave the VM its \
                     memory); use e.g. \"64MiB\", or \"256MiB\" for a Python plugin",
                    self.memory
                ),
            ));
        }
        if let Some(limit) = self.capabilities.http_response_limit
            && HttpResponseLimit::new(limit.as_u64()).is_none()
        {
            return Err((
                "capabilities.http-response-limit",
                format!(
                    "{limit} is not between 1 byte and the hard limit of {} (64 MiB); use \
                     e.g. \"16MiB\"",
                    bytesize::ByteSize::b(forewarn_runtime::HTTP_RESPONSE_LIMIT_MAX as u64)
                ),
            ));
        }
        for target in &self.capabilities.http {
            if !target.contains(':') {
                return Err((
                    "capabilities.http",
                    format!("\"{target}\" must be host:port, e.g. \"127.0.0.1:8080\""),
                ));
            }
            if let Some(reason) = forewarn_runtime::network::forbidden_entry(target) {
                return Err((
                    "capabilities.http",
                    format!(
                        "\"{target}\" is {reason}, which plugins may never reach; remove the \
                         entry (see \"Network rules for plugins\" in docs/operations.md)"
                    ),
                ));
            }
        }
        for resource in &self.capabilities.azure_identity {
            if !(resource.starts_with("https://") || resource.starts_with("api://")) {
                return Err((
                    "capabilities.azure-identity",
                    format!(
                        "\"{resource}\" is not a resource URI; list the audience the plugin \
                         needs tokens for, e.g. \"https://storage.azure.com/\""
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Refuses a control character (an escape, a newline), a line separator or a
    /// bidirectional mark in a grant or another value shown to an operator: printed at
    /// `plugin push`, at the install's consent and by `plugin list`, it could rewrite their
    /// terminal (clear the screen, hide the real grants, write the clipboard).
    fn refuse_text_that_moves(&self) -> Result<(), (&'static str, String)> {
        let capabilities = &self.capabilities;
        let ca_file = capabilities
            .http_ca_file
            .as_ref()
            .map(|path| path.to_string_lossy().into_owned());
        let fields: [(&'static str, &str, Vec<&str>); 6] = [
            (
                "capabilities.http",
                "a host:port is letters, digits, '.', '-', '[', ']' and ':'",
                capabilities.http.iter().map(String::as_str).collect(),
            ),
            (
                "capabilities.azure-identity",
                "a resource is a URI such as \"https://storage.azure.com/\"",
                capabilities
                    .azure_identity
                    .iter()
                    .map(String::as_str)
                    .collect(),
            ),
            (
                "capabilities.actions",
                "an action is the name of an `[actions.NAME]` of the daemon's config",
                capabilities.actions.iter().map(String::as_str).collect(),
            ),
            (
                "capabilities.http-ca-file",
                "it is the path of a PEM file",
                ca_file.as_deref().into_iter().collect(),
            ),
            (
                "after",
                "it names plugins (a-z, 0-9, '-', '_')",
                self.after.iter().map(String::as_str).collect(),
            ),
            (
                "subscribe",
                "it names event types",
                self.subscribe.iter().map(String::as_str).collect(),
            ),
        ];
        for (key, what_it_is, values) in fields {
            for (index, value) in values.iter().enumerate() {
                if crate::supply::shown::moves_text(value) {
                    return Err((
                        key,
                        format!(
                            "entry {} (\"{}\") holds a control character, a line separator \
                             or a bidirectional mark, which would rewrite the terminal of \
                             whoever reads the grants; remove it ({what_it_is})",
                            index + 1,
                            crate::supply::shown::reference(value)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// What the pipeline reads of this manifest (subscriptions, `after`, budget,
    /// prepare-time, failure policy, prepare-again-on-reschedule).
    pub(crate) fn terms(&self) -> PluginTerms {
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
    pub(crate) fn digest(&self) -> String {
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
            grants: Grants {
                readiness: self.capabilities.readiness,
                http: self.capabilities.http.clone(),
                actions: self.capabilities.actions.clone(),
                azure_identity: self.capabilities.azure_identity.clone(),
                http_roots: self.capabilities.http_roots.clone(),
                http_response_limit: self
                    .capabilities
                    .http_response_limit
                    .and_then(|limit| HttpResponseLimit::new(limit.as_u64()))
                    .unwrap_or_default(),
            },
        }
    }
}

impl Capabilities {
    /// The certificates of `http-ca-file` (none without it), read in `dir` if relative,
    /// under the rules of the manifest itself (a regular file no one else may write).
    fn read_ca_file(&self, dir: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
        let Some(file) = &self.http_ca_file else {
            return Ok(Vec::new());
        };
        let path = dir.join(file);
        let fix = "set it to the PEM file of the CA that signed the server's certificate (a \
                   relative path is relative to the manifest's directory)";
        let rules = FileRules {
            owners: Owners::DaemonOrRoot,
            max_bytes: CA_FILE_MAX_BYTES,
            max_setting: "http-ca-file",
        };
        let pem = trust::read_trusted_file(&path, rules).map_err(|error| match error {
            TrustError::TooLarge { size, limit, .. } => format!(
                "{} is {size} bytes, more than the {limit} bytes a CA file may have; keep only \
                 the CAs the plugin needs",
                path.display()
            ),
            other => format!("{other}; {fix}"),
        })?;
        forewarn_runtime::ca_certificates(&pem)
            .map_err(|problem| format!("{}: {problem}; {fix}", path.display()))
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
pub(crate) fn describe_toml_error(text: &str, error: &toml::de::Error) -> String {
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

//! `[coordination]` of the config file: the section, its defaults, its validation, and the
//! etcd settings it stands for.

use std::path::PathBuf;
use std::time::Duration;

use forewarn_etcd::{Credentials, EtcdSettings, SettingsError, TlsFiles};
use serde::{Deserialize, Serialize};

use forewarn_pipeline::barrier::DeadVm;
use forewarn_pipeline::disruption_budget::{BudgetUnreachable, DisruptionBudget};
use forewarn_pipeline::setting_error::{SettingError, check_at_most};

/// Longest `coordination.lease-ttl` and `coordination.deadline`.
pub const MAX_COORDINATION_DURATION: Duration = Duration::from_secs(60 * 60);

/// The section's name: settings errors of the etcd client are shown as its keys.
const SECTION: &str = "coordination";

/// etcd refuses leases shorter than about its election timeout.
const MIN_LEASE_TTL: Duration = Duration::from_secs(2);

/// `[coordination]` (docs/coordination.md): for an event whose Resources name several VMs,
/// each VM records in etcd that its plugins are ready, and one elected VM approves for all
/// of them. Absent (the default): every VM decides alone, by `policy.group-approval`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CoordinationConfig {
    /// etcd client URLs, e.g. `["http://10.0.0.4:2379", "http://10.0.0.5:2379"]`; tried in
    /// turn. forewarn talks to etcd's JSON gateway (etcd 3.4 or later).
    pub endpoints: Vec<String>,
    /// Every key forewarn writes starts with this (default "/forewarn").
    #[serde(default = "default_coordination_prefix")]
    pub prefix: String,
    /// How long after a daemon stops renewing its lease (crash, stop, network cut) its
    /// "ready" records and leadership vanish (default "10s"; etcd needs at least "2s").
    #[serde(with = "humantime_serde", default = "default_lease_ttl")]
    pub lease_ttl: Duration,
    /// etcd user name, when etcd has authentication enabled.
    #[serde(default)]
    pub username: Option<String>,
    /// etcd password for `username`.
    #[serde(default)]
    pub password: Option<String>,
    /// Send `username`/`password` to `http://` endpoints, in clear text. Off by default:
    /// credentials need `https://` endpoints unless the operator opts in here.
    #[serde(default)]
    pub allow_plaintext_credentials: bool,
    /// CA certificate (PEM) to verify `https://` endpoints with, instead of the system's.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM), for etcd's `--client-cert-auth`; needs `key-file`.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// Client private key (PEM) for `cert-file`.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// A VM that recorded ready and then lost its lease: "hold" (default) keeps the event
    /// waiting for it until NotBefore; "counts-as-ready" lets the others go.
    #[serde(default)]
    pub dead_vm: DeadVm,
    /// How long before NotBefore the leader stops waiting for VMs that are not ready and
    /// approves anyway. Unset (default): it never approves without every VM, and the
    /// platform starts the event at NotBefore.
    #[serde(with = "humantime_serde", default)]
    pub deadline: Option<Duration>,
    /// How many VMs of this VM's group may be down at once through early approvals: a
    /// number ("2" or 2) or a percentage of the VMs known in the group ("10%", at least one
    /// VM). Unset (default): no budget, every VM approves as soon as it is ready.
    #[serde(default)]
    pub disruption_budget: Option<DisruptionBudget>,
    /// The group this VM's budget is counted in (a label the operator sets per VM: a tier, a
    /// scale set); default "fleet", one group for every VM under the prefix.
    #[serde(default = "default_disruption_group")]
    pub disruption_group: String,
    /// How long a slot outlives its daemon (the VM down for the event): after this, a VM
    /// that never came back no longer holds the others (default "30m", at most "1h").
    #[serde(with = "humantime_serde", default = "default_slot_timeout")]
    pub slot_timeout: Duration,
    /// An event waiting for a slot while etcd cannot be reached or has lost its quorum:
    /// "wait" (default; it starts at NotBefore, as without forewarn) or "approve-alone".
    #[serde(default)]
    pub budget_unreachable: BudgetUnreachable,
}

fn default_disruption_group() -> String {
    "fleet".into()
}

fn default_slot_timeout() -> Duration {
    Duration::from_secs(30 * 60)
}

fn default_coordination_prefix() -> String {
    "/forewarn".into()
}

fn default_lease_ttl() -> Duration {
    Duration::from_secs(10)
}

impl CoordinationConfig {
    /// The etcd client's settings: endpoints, credentials (when both are set) and TLS files.
    pub fn etcd_settings(&self) -> EtcdSettings {
        let credentials = match (&self.username, &self.password) {
            (Some(user), Some(password)) => Some(Credentials {
                user: user.clone(),
                password: password.clone(),
            }),
            _ => None,
        };
        EtcdSettings {
            endpoints: self.endpoints.clone(),
            credentials,
            tls: TlsFiles {
                ca_file: self.ca_file.clone(),
                cert_file: self.cert_file.clone(),
                key_file: self.key_file.clone(),
            },
        }
    }

    /// Checks the section without reading files; the message names the key and the fix.
    pub fn validate(&self) -> Result<(), SettingError> {
        check_at_most(
            "coordination.lease-ttl",
            self.lease_ttl,
            MAX_COORDINATION_DURATION,
        )?;
        if let Some(deadline) = self.deadline {
            check_at_most("coordination.deadline", deadline, MAX_COORDINATION_DURATION)?;
        }
        check_at_most(
            "coordination.slot-timeout",
            self.slot_timeout,
            MAX_COORDINATION_DURATION,
        )?;
        self.check_budget()?;
        let settings = self.etcd_settings();
        settings.check().map_err(setting_error)?;
        if !self.prefix.starts_with('/') || self.prefix.len() < 2 {
            return Err(SettingError::new(
                "coordination.prefix",
                format!(
                    "\"{}\" must start with / and name something, e.g. \"/forewarn\"",
                    self.prefix
                ),
            ));
        }
        if self.lease_ttl < MIN_LEASE_TTL {
            return Err(SettingError::new(
                "coordination.lease-ttl",
                "must be at least \"2s\" (etcd refuses shorter leases)",
            ));
        }
        if self.password.is_some() != self.username.is_some() {
            return Err(SettingError::together(
                &["coordination.username", "coordination.password"],
                "set both or neither",
            ));
        }
        self.check_plaintext_credentials(&settings)
    }

    /// The budget's group is one etcd key segment, and a slot must outlive the daemon's lease.
    fn check_budget(&self) -> Result<(), SettingError> {
        let group = &self.disruption_group;
        let key_safe = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.';
        if group.is_empty() || !group.chars().all(key_safe) {
            return Err(SettingError::new(
                "coordination.disruption-group",
                format!(
                    "\"{group}\" must be letters, digits, '-', '_' or '.' (it is a segment of \
                     an etcd key), e.g. \"web-tier\""
                ),
            ));
        }
        if self.slot_timeout < self.lease_ttl {
            return Err(SettingError::new(
                "coordination.slot-timeout",
                format!(
                    "{} is shorter than `lease-ttl` ({}); a slot must outlive the daemon's \
                     lease, or a rebooting VM frees it while it is down: set it to at least \
                     the time a reboot takes, e.g. \"30m\"",
                    humantime::format_duration(self.slot_timeout),
                    humantime::format_duration(self.lease_ttl)
                ),
            ));
        }
        Ok(())
    }

    /// Credentials go only to `https://` endpoints, unless `allow-plaintext-credentials` says so.
    fn check_plaintext_credentials(&self, settings: &EtcdSettings) -> Result<(), SettingError> {
        if self.username.is_none() || self.allow_plaintext_credentials {
            return Ok(());
        }
        match settings.plain_endpoint() {
            Some(endpoint) => Err(SettingError::new(
                "coordination.username",
                format!(
                    "the password would go to \"{endpoint}\" in clear text; use https:// \
                     endpoints (see TLS in docs/coordination.md), or set \
                     `allow-plaintext-credentials = true` in [coordination] to accept that"
                ),
            )),
            None => Ok(()),
        }
    }

    /// Reads and checks the files the section names (`ca-file`, `cert-file`, `key-file`);
    /// the message names the key. [`validate`](Self::validate) does not read files.
    pub fn check_files(&self) -> Result<(), SettingError> {
        self.etcd_settings().check_files().map_err(setting_error)
    }
}

/// The etcd client's refusal of its settings, named as keys of `[coordination]`.
fn setting_error(error: SettingsError) -> SettingError {
    match error {
        SettingsError::Invalid { settings, message } => SettingError {
            keys: settings
                .iter()
                .map(|setting| setting.key(SECTION))
                .collect(),
            problem: message,
        },
        tls @ SettingsError::TlsSetup(_) => SettingError {
            keys: Vec::new(),
            problem: tls.render(SECTION),
        },
    }
}

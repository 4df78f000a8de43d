//! What `/health/scale-set` answers: this VM's health as the scale set should see it, in the
//! Application Health extension's Rich Health States (`{"ApplicationHealthState": …,
//! "customMetrics": "…"}`), decided by [`assess`] — a pure function of what the daemon shows
//! and `now`, with no clock or I/O of its own (the admin handler is a thin shell around it).
//!
//! The rule the endpoint keeps: a VM that drains or prepares for maintenance is *Healthy*
//! (`/readyz` is what follows a drain, for the load balancer); *Unhealthy* is said only for
//! a reason forewarn can name ([`UnhealthyReason`]), each shown in `/status`, on the status
//! page, in the metric `forewarn_scale_set_unhealthy{reason}` and in the log.

use std::time::{Duration, SystemTime};

use forewarn_imds::{EventId, PluginName};
use serde::{Deserialize, Serialize};

use crate::config::{ScaleSetConfig, SkipUpgradeWhen};
use crate::pipeline::state::{DaemonState, Handling, Lifecycle};

/// The admin endpoint's path of the scale-set health answer.
pub const SCALE_SET_HEALTH_PATH: &str = "/health/scale-set";

/// What the assessment reads, taken from the live daemon (or made up by a test).
#[derive(Debug, Clone, Default)]
pub(crate) struct HealthInputs {
    /// The event loop runs (the daemon's views are published only after the plugin
    /// directory's first load and the journal's opening).
    pub running: bool,
    /// The plugin directory was loaded once.
    pub plugin_directory_loaded: bool,
    /// When the poller started.
    pub polling_since: Option<SystemTime>,
    /// When IMDS last answered with a document; None while it never has.
    pub last_imds_answer: Option<SystemTime>,
    /// Plugins loaded now.
    pub plugins_loaded: usize,
    /// Plugin files failing to load now.
    pub plugin_load_errors: usize,
    /// Since when the journal's commits fail; None while they reach the disk.
    pub journal_not_durable_since: Option<SystemTime>,
    /// Plugins in crash-loop quarantine.
    pub quarantined: Vec<PluginName>,
    /// Events plugins are preparing (or that started after they did).
    pub preparing: Vec<EventId>,
    /// The plugins holding `/readyz` at 503.
    pub readiness_held_by: Vec<String>,
}

impl HealthInputs {
    /// The events of `state` being prepared: handled by plugins, preparation begun, not
    /// ended.
    pub(crate) fn preparing_events(state: &DaemonState) -> Vec<EventId> {
        state
            .events
            .iter()
            .filter(|(_, progress)| {
                matches!(progress.handling, Handling::Prepare { .. })
                    && progress.preparing_since_unix_ms.is_some()
                    && !matches!(progress.lifecycle, Lifecycle::Ended { .. })
            })
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// What forewarn waits for before it can say anything about its health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InitializingFor {
    /// The daemon starts (VM name, journal, plugin directory).
    DaemonStart,
    /// IMDS has not answered the first poll yet (it may take two minutes).
    FirstImdsAnswer,
}

/// Why forewarn says this VM is Unhealthy: each a thing it cannot do its job without.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "kebab-case")]
pub enum UnhealthyReason {
    /// IMDS has not answered for `silent_seconds` (never, when `answered_before` is false).
    ImdsUnreachable {
        /// Seconds since the last answer (or the first poll).
        silent_seconds: u64,
        /// Whether IMDS ever answered.
        answered_before: bool,
    },
    /// The plugin directory holds plugin files and none of them loads.
    NoPluginLoadable {
        /// Plugin files failing to load.
        load_errors: usize,
    },
    /// The journal's commits have failed for `seconds`: no approval is sent meanwhile.
    JournalNotDurable {
        /// Seconds since the first failed commit.
        seconds: u64,
    },
    /// Plugins in crash-loop quarantine: not called until a new version is loaded.
    PluginQuarantined {
        /// The plugins quarantined, sorted.
        plugins: Vec<PluginName>,
    },
}

impl UnhealthyReason {
    /// Every reason's code, the metric's `reason` label values.
    pub const CODES: [&'static str; 4] = [
        "imds-unreachable",
        "no-plugin-loadable",
        "journal-not-durable",
        "plugin-quarantined",
    ];

    /// The reason's code (the metric's label, what scripts key on).
    pub fn code(&self) -> &'static str {
        match self {
            UnhealthyReason::ImdsUnreachable { .. } => Self::CODES[0],
            UnhealthyReason::NoPluginLoadable { .. } => Self::CODES[1],
            UnhealthyReason::JournalNotDurable { .. } => Self::CODES[2],
            UnhealthyReason::PluginQuarantined { .. } => Self::CODES[3],
        }
    }

    /// The reason in words, with what to do about it.
    pub fn describe(&self) -> String {
        match self {
            UnhealthyReason::ImdsUnreachable {
                silent_seconds,
                answered_before: true,
            } => format!(
                "IMDS has not answered for {}: forewarn cannot see maintenance coming; check \
                 the route to 169.254.169.254 (`forewarn status` shows the last error)",
                humantime::format_duration(Duration::from_secs(*silent_seconds))
            ),
            UnhealthyReason::ImdsUnreachable { silent_seconds, .. } => format!(
                "IMDS has not answered in the {} since the first poll: forewarn cannot see \
                 maintenance coming; check `imds.url` and the route to 169.254.169.254",
                humantime::format_duration(Duration::from_secs(*silent_seconds))
            ),
            UnhealthyReason::NoPluginLoadable { load_errors } => format!(
                "none of the {load_errors} plugin files loads: nothing prepares the application; \
                 fix them (`forewarn status` lists the errors) or remove them"
            ),
            UnhealthyReason::JournalNotDurable { seconds } => format!(
                "the journal has not reached the disk for {}: no approval is sent meanwhile; \
                 free space in the state directory or make it writable",
                humantime::format_duration(Duration::from_secs(*seconds))
            ),
            UnhealthyReason::PluginQuarantined { plugins } => format!(
                "plugin {} is quarantined (its calls kept failing) and is not called: install \
                 a fixed version, or restart forewarn",
                names(plugins)
            ),
        }
    }
}

/// Why `SkipUpgrade` is true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "kebab-case")]
pub enum SkipUpgradeCause {
    /// Plugins are preparing these events.
    Preparing {
        /// The events prepared.
        events: Vec<EventId>,
    },
    /// These plugins hold the VM out of rotation.
    ReadinessHeld {
        /// The plugins holding it.
        plugins: Vec<String>,
    },
}

impl SkipUpgradeCause {
    /// The cause in words.
    pub fn describe(&self) -> String {
        match self {
            SkipUpgradeCause::Preparing { events } => format!(
                "event {} is being prepared",
                events
                    .iter()
                    .map(|id| id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            SkipUpgradeCause::ReadinessHeld { plugins } => {
                format!("plugin {} holds the VM out of rotation", plugins.join(", "))
            }
        }
    }
}

/// The state the extension reads, with what it rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum ScaleSetHealthState {
    /// Nothing to say yet.
    Initializing {
        /// What it waits for.
        waiting_for: InitializingFor,
    },
    /// forewarn can do its job (draining and preparing included).
    Healthy,
    /// forewarn cannot do its job, for these reasons (never empty).
    Unhealthy {
        /// Why (never empty).
        reasons: Vec<UnhealthyReason>,
    },
}

impl ScaleSetHealthState {
    /// The Rich Health States word: "Initializing", "Healthy" or "Unhealthy".
    pub fn rich_state(&self) -> &'static str {
        match self {
            ScaleSetHealthState::Initializing { .. } => "Initializing",
            ScaleSetHealthState::Healthy => "Healthy",
            ScaleSetHealthState::Unhealthy { .. } => "Unhealthy",
        }
    }

    /// The reasons, empty unless Unhealthy.
    pub fn reasons(&self) -> &[UnhealthyReason] {
        match self {
            ScaleSetHealthState::Unhealthy { reasons } => reasons,
            _ => &[],
        }
    }
}

/// The whole answer: the state and the rolling upgrade's custom metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSetHealth {
    /// The state and its reasons.
    pub state: ScaleSetHealthState,
    /// Some while the VM should stay out of the current rolling upgrade.
    pub skip_upgrade: Option<SkipUpgradeCause>,
    /// `[scale-set] phase-ordering-number`.
    pub phase_ordering_number: Option<u32>,
}

/// This VM's scale-set health as of `now`.
pub(crate) fn assess(
    inputs: &HealthInputs,
    config: &ScaleSetConfig,
    now: SystemTime,
) -> ScaleSetHealth {
    ScaleSetHealth {
        state: assess_state(inputs, config, now),
        skip_upgrade: skip_upgrade(inputs, config.skip_upgrade),
        phase_ordering_number: config.phase_ordering_number,
    }
}

fn assess_state(
    inputs: &HealthInputs,
    config: &ScaleSetConfig,
    now: SystemTime,
) -> ScaleSetHealthState {
    let since = |at: SystemTime| now.duration_since(at).unwrap_or_default();
    if !inputs.running || !inputs.plugin_directory_loaded {
        return ScaleSetHealthState::Initializing {
            waiting_for: InitializingFor::DaemonStart,
        };
    }
    let mut reasons = Vec::new();
    match (inputs.last_imds_answer, inputs.polling_since) {
        (Some(answered), _) if since(answered) >= config.imds_unreachable_after => {
            reasons.push(UnhealthyReason::ImdsUnreachable {
                silent_seconds: since(answered).as_secs(),
                answered_before: true,
            });
        }
        (Some(_), _) => {}
        (None, Some(polling)) if since(polling) >= config.imds_unreachable_after => {
            reasons.push(UnhealthyReason::ImdsUnreachable {
                silent_seconds: since(polling).as_secs(),
                answered_before: false,
            });
        }
        (None, _) => {
            return ScaleSetHealthState::Initializing {
                waiting_for: InitializingFor::FirstImdsAnswer,
            };
        }
    }
    if inputs.plugins_loaded == 0 && inputs.plugin_load_errors > 0 {
        reasons.push(UnhealthyReason::NoPluginLoadable {
            load_errors: inputs.plugin_load_errors,
        });
    }
    if let Some(failing) = inputs.journal_not_durable_since
        && since(failing) >= config.journal_not_durable_after
    {
        reasons.push(UnhealthyReason::JournalNotDurable {
            seconds: since(failing).as_secs(),
        });
    }
    if !inputs.quarantined.is_empty() {
        let mut plugins = inputs.quarantined.clone();
        plugins.sort();
        reasons.push(UnhealthyReason::PluginQuarantined { plugins });
    }
    if reasons.is_empty() {
        ScaleSetHealthState::Healthy
    } else {
        ScaleSetHealthState::Unhealthy { reasons }
    }
}

fn skip_upgrade(inputs: &HealthInputs, when: SkipUpgradeWhen) -> Option<SkipUpgradeCause> {
    let preparing = (!inputs.preparing.is_empty()).then(|| SkipUpgradeCause::Preparing {
        events: inputs.preparing.clone(),
    });
    let held = (!inputs.readiness_held_by.is_empty()).then(|| SkipUpgradeCause::ReadinessHeld {
        plugins: inputs.readiness_held_by.clone(),
    });
    match when {
        SkipUpgradeWhen::PreparingOrHeld => preparing.or(held),
        SkipUpgradeWhen::Preparing => preparing,
        SkipUpgradeWhen::Never => None,
    }
}

/// The probe's body in Rich Health States: `customMetrics` is a JSON *string* holding
/// `{"rollingUpgrade": {"SkipUpgrade": …, "PhaseOrderingNumber": …}}`.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RichHealthBody {
    /// "Initializing", "Healthy" or "Unhealthy".
    #[serde(rename = "ApplicationHealthState")]
    pub application_health_state: String,
    /// [`CustomMetrics`] as a JSON string.
    #[serde(rename = "customMetrics")]
    pub custom_metrics: String,
}

/// `customMetrics`' content, before it is written as a string.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CustomMetrics {
    /// `rollingUpgrade`.
    #[serde(rename = "rollingUpgrade")]
    pub rolling_upgrade: RollingUpgradeMetrics,
}

/// What the rolling upgrade reads of this VM.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct RollingUpgradeMetrics {
    /// `SkipUpgrade`: keep this VM out of the current rolling upgrade.
    #[serde(rename = "SkipUpgrade")]
    pub skip_upgrade: bool,
    /// `PhaseOrderingNumber`: the upgrade's phase of this VM, when configured.
    #[serde(
        rename = "PhaseOrderingNumber",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub phase_ordering_number: Option<u32>,
}

impl ScaleSetHealth {
    /// The probe's answer body.
    pub fn probe_body(&self) -> RichHealthBody {
        let metrics = CustomMetrics {
            rolling_upgrade: RollingUpgradeMetrics {
                skip_upgrade: self.skip_upgrade.is_some(),
                phase_ordering_number: self.phase_ordering_number,
            },
        };
        RichHealthBody {
            application_health_state: self.state.rich_state().to_owned(),
            // A struct of a bool and a number always encodes.
            custom_metrics: serde_json::to_string(&metrics).unwrap_or_default(),
        }
    }

    /// What `/status` shows.
    pub fn view(&self) -> ScaleSetHealthView {
        ScaleSetHealthView {
            state: self.state.rich_state().to_owned(),
            waiting_for: match &self.state {
                ScaleSetHealthState::Initializing { waiting_for } => Some(*waiting_for),
                _ => None,
            },
            reasons: self
                .state
                .reasons()
                .iter()
                .map(|reason| ReasonView {
                    code: reason.code().to_owned(),
                    text: reason.describe(),
                })
                .collect(),
            skip_upgrade: self.skip_upgrade.as_ref().map(SkipUpgradeCause::describe),
            phase_ordering_number: self.phase_ordering_number,
        }
    }
}

/// `/status`'s `scale_set_health`: what `/health/scale-set` answers, with its reasons.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleSetHealthView {
    /// "Initializing", "Healthy" or "Unhealthy".
    pub state: String,
    /// While Initializing: what forewarn waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<InitializingFor>,
    /// While Unhealthy: why (never empty then).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<ReasonView>,
    /// Why the VM is kept out of the current rolling upgrade; None when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_upgrade: Option<String>,
    /// The rolling upgrade's phase sent, if configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_ordering_number: Option<u32>,
}

/// One reason of an Unhealthy state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonView {
    /// "imds-unreachable", "no-plugin-loadable", "journal-not-durable" or
    /// "plugin-quarantined".
    pub code: String,
    /// The reason in words, with what to do.
    pub text: String,
}

fn names(plugins: &[PluginName]) -> String {
    plugins
        .iter()
        .map(|plugin| plugin.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What changed between two answers, for the log: the state, its reasons, SkipUpgrade. The
/// seconds inside a reason are not a change.
pub(crate) fn same_for_the_log(left: &ScaleSetHealth, right: &ScaleSetHealth) -> bool {
    let codes = |health: &ScaleSetHealth| -> Vec<&'static str> {
        health
            .state
            .reasons()
            .iter()
            .map(UnhealthyReason::code)
            .collect()
    };
    left.state.rich_state() == right.state.rich_state()
        && codes(left) == codes(right)
        && left.skip_upgrade.is_some() == right.skip_upgrade.is_some()
}

#[cfg(test)]
mod tests;

//! `[scale-set]` of the config file: what the scale-set health endpoint
//! (`/health/scale-set`, the Application Health extension's Rich Health States) answers and
//! when (`ops/scale_set_health.rs`; docs/operations.md, "Deploying to a fleet").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::pipeline::setting_error::SettingError;

/// Least `imds-unreachable-after` and `journal-not-durable-after`: IMDS itself may not answer
/// for a while (it restarts, throttles), and a journal retry takes seconds.
const MIN_UNHEALTHY_AFTER: Duration = Duration::from_secs(30);
/// Longest `imds-unreachable-after` and `journal-not-durable-after`.
const MAX_UNHEALTHY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);
/// Largest `phase-ordering-number` (Azure orders phases by it; a small number suffices).
pub(crate) const MAX_PHASE_ORDERING_NUMBER: u32 = 1_000;

/// When the endpoint tells the scale set to keep this VM out of a rolling upgrade
/// (`customMetrics`' `rollingUpgrade.SkipUpgrade`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipUpgradeWhen {
    /// While an event is prepared, or a plugin holds the VM out of rotation (`/readyz` 503).
    #[default]
    PreparingOrHeld,
    /// Only while an event is prepared.
    Preparing,
    /// Never: the VM is upgraded whenever the rolling upgrade's batch comes.
    Never,
}

/// `[scale-set]`: the scale-set health endpoint's thresholds and its `customMetrics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct ScaleSetConfig {
    /// IMDS not answering for this long (or never, this long after the first poll) makes
    /// the VM Unhealthy: forewarn cannot see events coming.
    #[serde(with = "humantime_serde")]
    pub imds_unreachable_after: Duration,
    /// The journal failing to reach the disk for this long makes the VM Unhealthy:
    /// forewarn approves nothing meanwhile.
    #[serde(with = "humantime_serde")]
    pub journal_not_durable_after: Duration,
    /// When `SkipUpgrade` is true.
    pub skip_upgrade: SkipUpgradeWhen,
    /// `PhaseOrderingNumber` (0..=1000): the rolling upgrade's phase this VM belongs to.
    /// Unset: none is sent, and Azure puts the VM in the last phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_ordering_number: Option<u32>,
}

impl Default for ScaleSetConfig {
    fn default() -> Self {
        ScaleSetConfig {
            imds_unreachable_after: Duration::from_secs(5 * 60),
            journal_not_durable_after: Duration::from_secs(5 * 60),
            skip_upgrade: SkipUpgradeWhen::default(),
            phase_ordering_number: None,
        }
    }
}

impl ScaleSetConfig {
    /// Err naming the key when a value is out of range.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        for (key, value) in [
            (
                "scale-set.imds-unreachable-after",
                self.imds_unreachable_after,
            ),
            (
                "scale-set.journal-not-durable-after",
                self.journal_not_durable_after,
            ),
        ] {
            if !(MIN_UNHEALTHY_AFTER..=MAX_UNHEALTHY_AFTER).contains(&value) {
                return Err(SettingError::new(
                    key,
                    format!(
                        "\"{}\" is outside \"30s\"..=\"1day\": shorter makes a VM Unhealthy \
                         (and repaired) over a blip, longer hides a broken one; give a duration \
                         in that range, e.g. \"5m\"",
                        humantime::format_duration(value)
                    ),
                ));
            }
        }
        if let Some(number) = self.phase_ordering_number
            && number > MAX_PHASE_ORDERING_NUMBER
        {
            return Err(SettingError::new(
                "scale-set.phase-ordering-number",
                format!(
                    "{number} is above {MAX_PHASE_ORDERING_NUMBER}; phases run in numeric \
                     order, so number them 0, 1, 2, …"
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn bad_values_are_refused_naming_the_key_and_the_fix() {
        // (text, the error's start, or None when accepted)
        let rows = [
            (
                "[scale-set]\nimds-unreachable-after = \"5s\"\n",
                Some("key `scale-set.imds-unreachable-after`: \"5s\" is outside"),
            ),
            (
                "[scale-set]\njournal-not-durable-after = \"2days\"\n",
                Some("key `scale-set.journal-not-durable-after`: \"2days\" is outside"),
            ),
            (
                "[scale-set]\nphase-ordering-number = 5000\n",
                Some("key `scale-set.phase-ordering-number`: 5000 is above 1000"),
            ),
            ("[scale-set]\nphase-ordering-number = -1\n", Some("line 2")),
            (
                "[scale-set]\nskip-upgrade = \"sometimes\"\n",
                Some("line 2"),
            ),
            (
                "[scale-set]\nimds-unreachable-after = \"2m\"\nskip-upgrade = \"never\"\nphase-ordering-number = 2\n",
                None,
            ),
        ];
        for (text, refused) in rows {
            match (Config::parse(text), refused) {
                (Ok(config), None) => {
                    assert_eq!(
                        config.scale_set.imds_unreachable_after,
                        Duration::from_secs(120)
                    );
                    assert_eq!(config.scale_set.skip_upgrade, SkipUpgradeWhen::Never);
                    assert_eq!(config.scale_set.phase_ordering_number, Some(2));
                }
                (Err(error), Some(start)) => {
                    assert!(error.to_string().starts_with(start), "{text}: {error}");
                }
                (result, _) => panic!("{text}: {result:?}"),
            }
        }
    }

    #[test]
    fn an_unknown_skip_upgrade_value_names_the_accepted_ones() {
        let error = Config::parse("[scale-set]\nskip-upgrade = \"sometimes\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("preparing-or-held"), "{error}");
        assert!(error.contains("never"), "{error}");
    }
}

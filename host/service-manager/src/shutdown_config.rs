//! `[shutdown]` of the config file: the last, bounded preparation when the operating system
//! shuts down or reboots with no Scheduled Event (docs/operations.md, "A last chance when no
//! event came"; the service manager's side is `service_manager::shutdown_watch`).

use std::time::Duration;

use forewarn_pipeline::setting_error::SettingError;
use serde::{Deserialize, Serialize};

/// Longest `shutdown.budget`: systemd's own stop timeout for a unit is 90 s by default, and
/// a shutdown held longer than a few minutes is an outage of its own.
const MAX_BUDGET: Duration = Duration::from_secs(5 * 60);
/// Shortest `shutdown.budget`: less leaves a load balancer no time to notice.
const MIN_BUDGET: Duration = Duration::from_secs(1);

/// `[shutdown]`: whether forewarn holds an operating system shutdown back to prepare, and
/// for how long.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct ShutdownConfig {
    /// Take systemd-logind's delay inhibitor (on Windows, accept the pre-shutdown
    /// notification) and prepare the plugins when the system shuts down with no event.
    pub prepare: bool,
    /// The longest the shutdown is held back. logind lets it be held for at most its
    /// `InhibitDelayMaxSec` (5 s unless raised): the shorter of the two, less a second, is
    /// the budget; Windows for the service's `PreshutdownTimeout` (60 s as installed), less
    /// 5 s.
    #[serde(with = "humantime_serde")]
    pub budget: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            prepare: true,
            budget: Duration::from_secs(30),
        }
    }
}

impl ShutdownConfig {
    /// Err naming the key when the budget is out of range.
    pub fn validate(&self) -> Result<(), SettingError> {
        if (MIN_BUDGET..=MAX_BUDGET).contains(&self.budget) {
            return Ok(());
        }
        Err(SettingError::new(
            "shutdown.budget",
            format!(
                "\"{}\" is outside \"1s\"..=\"5m\": give the time the plugins' last \
                 preparation needs (a drain and a stop), e.g. \"30s\", and raise logind's \
                 InhibitDelayMaxSec to match (docs/operations.md)",
                humantime::format_duration(self.budget)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_must_be_between_a_second_and_five_minutes() {
        assert!(ShutdownConfig::default().validate().is_ok());
        for (budget, ok) in [(0, false), (1, true), (300, true), (301, false)] {
            let config = ShutdownConfig {
                budget: Duration::from_secs(budget),
                ..ShutdownConfig::default()
            };
            assert_eq!(config.validate().is_ok(), ok, "{budget} s");
        }
        let error = ShutdownConfig {
            budget: Duration::from_secs(600),
            ..ShutdownConfig::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("key `shutdown.budget`: ") && error.contains("InhibitDelayMaxSec")
        );
    }
}

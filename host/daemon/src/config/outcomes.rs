//! `[outcomes]` of the config file: how many outcome records (one per event: what IMDS
//! announced, what forewarn did, the impact measured) the state directory keeps.

use serde::{Deserialize, Serialize};

use crate::pipeline::outcome::OutcomeLimits;
use crate::pipeline::setting_error::SettingError;

/// Most records `keep` may name: the admin endpoint answers them all at once.
const MAX_OUTCOMES_KEPT: usize = 10_000;
/// Least `max-size`: one large record (64 plugin calls with long reasons) fits.
const MIN_OUTCOMES_SIZE: u64 = 256 * 1024;

/// `[outcomes]`: the bounds of `STATE_DIR/outcomes/` (docs/operations.md, "What an event
/// cost").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, rename_all = "kebab-case")]
pub struct OutcomesConfig {
    /// Most records kept; the oldest is removed first.
    pub keep: usize,
    /// Most bytes the records may take together; the oldest is removed first.
    pub max_size: bytesize::ByteSize,
}

impl Default for OutcomesConfig {
    fn default() -> Self {
        OutcomesConfig {
            keep: 200,
            max_size: bytesize::ByteSize::mib(16),
        }
    }
}

impl OutcomesConfig {
    /// The bounds as the outcome book takes them.
    pub fn limits(&self) -> OutcomeLimits {
        OutcomeLimits {
            keep: self.keep,
            max_total_bytes: self.max_size.as_u64(),
        }
    }

    /// Err naming the key when a bound is out of range.
    pub(crate) fn validate(&self) -> Result<(), SettingError> {
        if !(1..=MAX_OUTCOMES_KEPT).contains(&self.keep) {
            return Err(SettingError::new(
                "outcomes.keep",
                format!(
                    "{} is outside 1..={MAX_OUTCOMES_KEPT}; keep at least the last event's record",
                    self.keep
                ),
            ));
        }
        if self.max_size.as_u64() < MIN_OUTCOMES_SIZE {
            return Err(SettingError::new(
                "outcomes.max-size",
                format!(
                    "\"{}\" is below \"256KiB\", which one large record may take; give at \
                     least \"256KiB\"",
                    self.max_size
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn the_bounds_are_checked_naming_the_key() {
        let rows = [
            ("[outcomes]\nkeep = 0\n", Some("key `outcomes.keep`")),
            (
                "[outcomes]\nkeep = 5\nmax-size = \"1KiB\"\n",
                Some("key `outcomes.max-size`"),
            ),
            ("[outcomes]\nkeep = 5\nmax-size = \"1MiB\"\n", None),
        ];
        for (text, refused) in rows {
            match (Config::parse(text), refused) {
                (Ok(config), None) => assert_eq!(config.outcomes.keep, 5),
                (Err(error), Some(key)) => assert!(error.to_string().starts_with(key), "{error}"),
                (result, _) => panic!("{text}: {result:?}"),
            }
        }
    }
}

//! A setting refused, in the config file or a plugin's manifest: its dotted key, and what is
//! wrong with it, then the fix. Every check of a section returns one, so an error always
//! names the key the operator has to change ("key `imds.poll-interval`: …"); the file's
//! reader adds the line.

use std::time::Duration;

/// A setting refused: shown as "key `KEY`: PROBLEM" (or "keys `A` and `B`: PROBLEM"; a
/// problem of a whole section, naming no key, alone).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{problem}", named(keys))]
pub struct SettingError {
    /// The dotted key (`coordination.lease-ttl`, `capabilities.http`), or the keys that only
    /// go together.
    pub keys: Vec<String>,
    /// What is wrong, then how to fix it.
    pub problem: String,
}

impl SettingError {
    /// `key` refused because of `problem`.
    pub fn new(key: impl Into<String>, problem: impl Into<String>) -> SettingError {
        SettingError {
            keys: vec![key.into()],
            problem: problem.into(),
        }
    }

    /// Keys that only go together (`username` and `password`), refused because of `problem`.
    pub fn together(keys: &[&str], problem: impl Into<String>) -> SettingError {
        SettingError {
            keys: keys.iter().map(|key| (*key).to_owned()).collect(),
            problem: problem.into(),
        }
    }
}

/// "key `a`: ", "keys `a` and `b`: ", "keys `a`, `b` and `c`: ", or nothing for no key.
fn named(keys: &[String]) -> String {
    let quoted: Vec<String> = keys.iter().map(|key| format!("`{key}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((only, [])) => format!("key {only}: "),
        Some((last, rest)) => format!("keys {} and {last}: ", rest.join(", ")),
    }
}

/// Err naming `key` and the maximum when `value` is longer than `max`.
pub fn check_at_most(key: &str, value: Duration, max: Duration) -> Result<(), SettingError> {
    if value <= max {
        return Ok(());
    }
    Err(SettingError::new(
        key,
        format!(
            "{} is longer than the maximum \"{}\"; use a shorter duration",
            humantime::format_duration(value),
            humantime::format_duration(max)
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_names_the_key_then_the_problem() {
        let error = check_at_most(
            "imds.poll-interval",
            Duration::from_secs(90),
            Duration::from_secs(60),
        )
        .expect_err("longer than the maximum");
        assert_eq!(
            error.to_string(),
            "key `imds.poll-interval`: 1m 30s is longer than the maximum \"1m\"; use a shorter duration"
        );
        let both = SettingError::together(
            &["coordination.username", "coordination.password"],
            "set both or neither",
        );
        assert_eq!(
            both.to_string(),
            "keys `coordination.username` and `coordination.password`: set both or neither"
        );
    }
}

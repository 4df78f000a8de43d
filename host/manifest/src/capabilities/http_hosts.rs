//! `http = ["127.0.0.1:8080"]`: the `host:port` pairs the plugin may send HTTP requests to
//! (`http-send`), never an address of the platform's own ([`super::forbidden_addresses`]).

use forewarn_pipeline::setting_error::SettingError;

use super::name_set;
use crate::shown;

/// The dotted key errors name.
pub const KEY: &str = "capabilities.http";
/// The key in the diff and the lock file.
const NAME: &str = "http";

/// Refuses an entry that would rewrite the operator's terminal.
pub(crate) fn refuse_text_that_moves(targets: &[String]) -> Result<(), SettingError> {
    shown::refuse_text_that_moves(
        KEY,
        targets,
        "a host:port is letters, digits, '.', '-', '[', ']' and ':'",
    )
}

/// Each entry is `host:port`, none a platform address plugins may never reach.
pub(crate) fn check(targets: &[String]) -> Result<(), SettingError> {
    for target in targets {
        if !target.contains(':') {
            return Err(SettingError::new(
                KEY,
                format!("\"{target}\" must be host:port, e.g. \"127.0.0.1:8080\""),
            ));
        }
        if let Some(reason) = super::forbidden_addresses::forbidden_entry(target) {
            return Err(SettingError::new(
                KEY,
                format!(
                    "\"{target}\" is {reason}, which plugins may never reach; remove the \
                     entry (see \"Network rules for plugins\" in docs/operations.md)"
                ),
            ));
        }
    }
    Ok(())
}

/// The consent's line.
pub(crate) fn consent(targets: &[String]) -> String {
    format!("  HTTP hosts: {}", name_set::listed_or_none(targets))
}

/// How `new` grants more than `old`, if it does.
pub(crate) fn wider(new: &[String], old: &[String]) -> Option<String> {
    name_set::added(NAME, new, old)
}

/// The upgrade's lines: `+` added, `-` removed.
pub(crate) fn changes(new: &[String], old: &[String]) -> Vec<String> {
    name_set::changes(NAME, new, old)
}

/// Its part of `plugin list`'s line.
pub(crate) fn one_line(targets: &[String]) -> Option<String> {
    name_set::one_line(NAME, targets)
}

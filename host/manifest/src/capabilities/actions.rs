//! `actions = ["stop-app"]`: the operator-defined actions (`[actions.NAME]` of the daemon's
//! config) the plugin may run with `run-action`, as the daemon's user.

use forewarn_pipeline::setting_error::SettingError;

use super::name_set;
use crate::shown;

/// The dotted key errors name.
pub const KEY: &str = "capabilities.actions";
/// The key in the consent's words, the diff and the lock file.
const NAME: &str = "actions";

/// Refuses a name that would rewrite the operator's terminal.
pub(crate) fn refuse_text_that_moves(actions: &[String]) -> Result<(), SettingError> {
    shown::refuse_text_that_moves(
        KEY,
        actions,
        "an action is the name of an `[actions.NAME]` of the daemon's config",
    )
}

/// The consent's line.
pub(crate) fn consent(actions: &[String]) -> String {
    format!(
        "  actions (run as the daemon's user): {}",
        name_set::listed_or_none(actions)
    )
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
pub(crate) fn one_line(actions: &[String]) -> Option<String> {
    name_set::one_line(NAME, actions)
}

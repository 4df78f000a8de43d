//! `azure-identity = ["https://storage.azure.com/"]`: the resources (token audiences) the
//! plugin may ask the VM's managed identity for access tokens for (`azure-access-token`).

use forewarn_pipeline::setting_error::SettingError;

use super::name_set;
use crate::shown;

/// The dotted key errors name.
pub const KEY: &str = "capabilities.azure-identity";
/// The key in the diff and the lock file.
const NAME: &str = "azure-identity";

/// Refuses a resource that would rewrite the operator's terminal.
pub(crate) fn refuse_text_that_moves(resources: &[String]) -> Result<(), SettingError> {
    shown::refuse_text_that_moves(
        KEY,
        resources,
        "a resource is a URI such as \"https://storage.azure.com/\"",
    )
}

/// Each entry is a resource URI.
pub(crate) fn check(resources: &[String]) -> Result<(), SettingError> {
    for resource in resources {
        if !(resource.starts_with("https://") || resource.starts_with("api://")) {
            return Err(SettingError::new(
                KEY,
                format!(
                    "\"{resource}\" is not a resource URI; list the audience the plugin \
                     needs tokens for, e.g. \"https://storage.azure.com/\""
                ),
            ));
        }
    }
    Ok(())
}

/// The consent's line.
pub(crate) fn consent(resources: &[String]) -> String {
    format!(
        "  managed-identity resources: {}",
        name_set::listed_or_none(resources)
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
pub(crate) fn one_line(resources: &[String]) -> Option<String> {
    name_set::one_line("identity", resources)
}

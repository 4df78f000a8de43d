//! Readiness holds that outlive the daemon: journaled, restored before the admin endpoint
//! answers, and released when the plugin holding one is removed or loses its readiness grant.

use forewarn_imds::PluginName;
use std::collections::BTreeSet;
use std::path::Path;

use forewarn_runtime::Readiness;

use crate::plugins::set::{PluginSet, plugin_name_of};

use crate::daemon::journal;

/// Why a hold is released.
pub(crate) const RELEASED_PLUGIN_REMOVED: &str = "plugin removed";
pub(crate) const RELEASED_GRANT_REVOKED: &str = "readiness grant removed from the manifest";

/// What a plugin of the current set may do about readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Loaded, with `readiness = true`.
    Granted,
    /// Loaded, without the grant.
    NotGranted,
    /// Its file is there but failed to load: the hold stays (the plugin may come back).
    FailedToLoad,
    /// Neither loaded nor present.
    Removed,
}

/// Restores the holds last journaled in `state_dir` into `readiness`; returns them. An
/// absent or unreadable journal restores nothing (the daemon reports an unreadable one).
pub(crate) fn restore(readiness: &Readiness, state_dir: &Path) -> BTreeSet<String> {
    let Some(record) = journal::peek(state_dir) else {
        return BTreeSet::new();
    };
    let holds = record;
    for plugin in &holds.readiness_holds {
        readiness.set(plugin, false);
        tracing::info!(
            plugin = %plugin,
            "readiness hold restored from the journal: /readyz answers 503 until the plugin releases it"
        );
    }
    holds.readiness_holds
}

/// The standing of `name` in `plugins`.
pub(crate) fn standing(plugins: &PluginSet, name: &PluginName) -> Standing {
    if let Some(plugin) = plugins.get(name) {
        if plugin.manifest.capabilities.readiness {
            return Standing::Granted;
        }
        return Standing::NotGranted;
    }
    let failed = plugins
        .load_errors()
        .keys()
        .any(|path| plugin_name_of(path).as_deref() == Some(name.as_str()));
    if failed {
        Standing::FailedToLoad
    } else {
        Standing::Removed
    }
}

/// The holds to release, with the reason: those of removed plugins and of plugins that
/// lost the readiness grant.
pub(crate) fn stale(
    holders: &[String],
    standing: impl Fn(&str) -> Standing,
) -> Vec<(String, &'static str)> {
    holders
        .iter()
        .filter_map(|holder| match standing(holder) {
            Standing::Removed => Some((holder.clone(), RELEASED_PLUGIN_REMOVED)),
            Standing::NotGranted => Some((holder.clone(), RELEASED_GRANT_REVOKED)),
            Standing::Granted | Standing::FailedToLoad => None,
        })
        .collect()
}

/// Releases the stale holds of `readiness` against `plugins`; returns whether any was.
pub(crate) fn release_stale(readiness: &Readiness, plugins: &PluginSet) -> bool {
    let released = stale(&readiness.holders(), |name| {
        standing(plugins, &PluginName::from(name))
    });
    for (plugin, reason) in &released {
        readiness.set(plugin, true);
        tracing::warn!(
            plugin = %plugin,
            reason = %reason,
            "readiness hold released: the plugin can no longer release it itself"
        );
    }
    !released.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_of_removed_and_ungranted_plugins_are_stale_others_stay() {
        let holders: Vec<String> = ["gone", "granted", "revoked", "broken"]
            .iter()
            .map(|name| (*name).to_owned())
            .collect();
        let released = stale(&holders, |name| match name {
            "granted" => Standing::Granted,
            "revoked" => Standing::NotGranted,
            "broken" => Standing::FailedToLoad,
            _ => Standing::Removed,
        });
        assert_eq!(
            released,
            vec![
                ("gone".to_owned(), RELEASED_PLUGIN_REMOVED),
                ("revoked".to_owned(), RELEASED_GRANT_REVOKED),
            ]
        );
    }

    #[test]
    fn restore_reads_the_holds_and_old_journals_restore_none() {
        use crate::daemon::journal_schema::JOURNAL_NAME;
        let dir = tempfile::tempdir().unwrap();
        let readiness = Readiness::default();
        assert!(restore(&readiness, dir.path()).is_empty());
        std::fs::write(
            dir.path().join(format!("{JOURNAL_NAME}.json")),
            br#"{"tracker":{},"events":{}}"#,
        )
        .unwrap();
        assert!(restore(&readiness, dir.path()).is_empty());
        assert!(readiness.is_ready());
        std::fs::write(
            dir.path().join(format!("{JOURNAL_NAME}.json")),
            br#"{"events":{},"readiness_holds":["lb-drain"]}"#,
        )
        .unwrap();
        restore(&readiness, dir.path());
        assert_eq!(readiness.holders(), ["lb-drain"]);
    }
}

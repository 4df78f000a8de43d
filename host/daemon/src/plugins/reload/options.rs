//! How the plugin directory is watched ([`ReloadOptions`]) and why it could not be set up
//! ([`ReloadError`]).

use std::path::PathBuf;
use std::time::Duration;

use forewarn_platform::trust::TrustError;

use crate::plugins::set::PluginFileLimits;

/// Quiet time after the last change to a plugin's files before they are loaded.
pub(crate) const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(250);

/// Wait after a file is renamed into place, so that a manifest and a component renamed one
/// after the other (as the docs deploy them) load together.
pub(crate) const DEFAULT_RENAME_SETTLE: Duration = Duration::from_millis(20);

/// How often the whole directory is compared with what is loaded, in case a change
/// notification was lost (a full kernel queue).
pub(crate) const DEFAULT_RESCAN_INTERVAL: Duration = Duration::from_secs(30);

/// How often the path of a deleted plugin directory is looked at until it is back.
pub(crate) const DEFAULT_MISSING_DIR_POLL: Duration = Duration::from_secs(1);

/// How the plugin directory is watched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadOptions {
    /// Quiet time after the last change to a plugin's files before they are loaded.
    pub debounce: Duration,
    /// Wait after a file is renamed into place (complete at once) before it is loaded.
    pub rename_settle: Duration,
    /// How often the whole directory is compared with what is loaded.
    pub rescan_interval: Duration,
    /// How often a deleted plugin directory's path is checked until it exists again.
    pub missing_dir_poll: Duration,
    /// Largest `.wasm` and `.toml` accepted (`max-plugin-size`, `max-manifest-size`).
    pub file_limits: PluginFileLimits,
}

impl Default for ReloadOptions {
    fn default() -> Self {
        ReloadOptions {
            debounce: DEFAULT_DEBOUNCE,
            rename_settle: DEFAULT_RENAME_SETTLE,
            rescan_interval: DEFAULT_RESCAN_INTERVAL,
            missing_dir_poll: DEFAULT_MISSING_DIR_POLL,
            file_limits: PluginFileLimits::default(),
        }
    }
}

/// Why the plugin directory could not be set up at startup.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The plugin directory is missing or cannot be listed.
    #[error(
        "cannot read the plugin directory {}: {source} (create it, or set `plugin-dir` in the config or pass --plugins)",
        path.display()
    )]
    Directory {
        /// The plugin directory, made absolute.
        path: PathBuf,
        /// What the operating system answered.
        source: std::io::Error,
    },
    /// The file watcher (inotify on Linux) could not be set up on the directory.
    #[error(
        "cannot watch the plugin directory {}: {source} (on Linux, raise fs.inotify.max_user_watches / max_user_instances if they are exhausted)",
        path.display()
    )]
    Watch {
        /// The plugin directory.
        path: PathBuf,
        /// What the watcher reported.
        source: notify::Error,
    },
    /// The directory fails the trust check: not owned by the daemon's user or root, writable
    /// by others, or not a real directory.
    #[error("the plugin directory is not safe to load plugins from: {0}")]
    Untrusted(#[from] TrustError),
    /// The blocking task that loads the plugins panicked or was cancelled.
    #[error("the plugin loading task failed: {0}; this is a bug in forewarn")]
    Task(#[from] tokio::task::JoinError),
}

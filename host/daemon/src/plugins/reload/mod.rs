//! The watched plugin directory: loads `NAME.wasm` (+ `NAME.toml`) at startup and again when
//! they change, debounced, validated off the async runtime and swapped in atomically.
//!
//! How it stays safe:
//! - Every change is keyed by plugin name and waits for `debounce` of quiet before the files
//!   are read; a file whose size or modification time moves while it is read is "still being
//!   written" and is tried again after another quiet period.
//! - A file renamed into place (the documented way to deploy) is complete the moment it
//!   appears: it is loaded after `rename_settle` (20 ms, so a manifest and a component
//!   renamed together load together), unless the other file's quiet period is running.
//! - A version is only published after `Runtime::load` accepted it (a complete component of
//!   the right world) and its manifest parsed; otherwise the previous version stays live and
//!   the failure (file and reason) is logged and kept in [`PluginSet::load_errors`] until the
//!   plugin loads again or its `.wasm` is removed.
//! - Each published [`PluginSet`] is a new `Arc`: calls already running hold their own
//!   `Plugin` clone and finish on the version they started with.
//! - The plugin directory may be deleted and created again (or swapped by a rename): when it
//!   goes, its plugins unload and its path is looked for every `missing_dir_poll` until it
//!   is back, watched afresh and loaded. A periodic rescan catches anything the kernel
//!   dropped.

mod dir_watch;
mod examine;
mod options;
mod reloader;

use std::path::Path;
use std::sync::Arc;

use forewarn_platform::trust::{self, Owners};
use forewarn_runtime::Runtime;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use options::{ReloadError, ReloadOptions};

use crate::plugins::set::PluginSet;
use dir_watch::{DirWatcher, list_stems};
use reloader::Reloader;

/// The live plugin set, kept in step with the plugin directory until stopped or dropped.
pub struct PluginDirectory {
    sender: Arc<watch::Sender<Arc<PluginSet>>>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl PluginDirectory {
    /// Loads every plugin in `dir`, publishes the set, and starts watching `dir` for
    /// changes. Fails only if `dir` cannot be read or watched; broken plugin files are
    /// reported in the set's `load_errors` and the log.
    pub async fn start(
        runtime: Runtime,
        dir: &Path,
        options: ReloadOptions,
    ) -> Result<PluginDirectory, ReloadError> {
        let dir = std::path::absolute(dir).map_err(|source| ReloadError::Directory {
            path: dir.to_path_buf(),
            source,
        })?;
        if let Err(source) = std::fs::read_dir(&dir) {
            return Err(ReloadError::Directory { path: dir, source });
        }
        trust::check_dir(&dir, Owners::DaemonOrRoot)?;
        let (signals_in, signals) = mpsc::unbounded_channel();
        let watcher = DirWatcher::new(&dir, signals_in)?;
        let mut reloader = Reloader::new(runtime, dir.clone(), options, watcher);
        let stems = list_stems(&dir).map_err(|source| ReloadError::Directory {
            path: dir.clone(),
            source,
        })?;
        reloader
            .load_now(stems, std::time::Instant::now(), true)
            .await?;
        let sender = reloader.sender.clone();
        let stop = CancellationToken::new();
        let task = tokio::spawn(reloader.run(signals, stop.clone()));
        Ok(PluginDirectory {
            sender,
            stop,
            task: Some(task),
        })
    }

    /// A receiver of every plugin set published from now on (starting with the current one).
    pub fn subscribe(&self) -> watch::Receiver<Arc<PluginSet>> {
        self.sender.subscribe()
    }

    /// The plugin set live now.
    pub fn current(&self) -> Arc<PluginSet> {
        self.sender.borrow().clone()
    }

    /// Stops watching; the last published set stays with its receivers.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ignored = task.await;
        }
    }
}

impl Drop for PluginDirectory {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

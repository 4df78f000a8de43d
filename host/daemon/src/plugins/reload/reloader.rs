//! The reloader: what is loaded, what failed, what waits for its quiet period, and the loop
//! that turns signals and timers into loads and published plugin sets. Every step takes the
//! time it runs at, so its timing is tested on made-up instants.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use forewarn_runtime::Runtime;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::dir_watch::{DirWatcher, Signal, WatchedDir, list_stems};
use super::examine::{Fingerprint, Outcome, examine};
use super::options::{ReloadError, ReloadOptions};
use crate::log_messages;
use crate::plugins::debounce::Debounce;
use crate::plugins::set::{self as plugins, LoadedPlugin, PluginSet};
use forewarn_manifest::FailurePolicy;

/// A plugin file that failed to load, as last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LoadFailure {
    path: PathBuf,
    reason: String,
    /// Its manifest was read and says `on-failure = "approve"`: it does not hold approvals.
    advisory: bool,
}

/// The watcher's state: what is loaded, what failed, what is waiting for quiet.
pub(super) struct Reloader<W: WatchedDir = DirWatcher> {
    runtime: Runtime,
    dir: PathBuf,
    options: ReloadOptions,
    watcher: W,
    pub(super) sender: Arc<watch::Sender<Arc<PluginSet>>>,
    loaded: BTreeMap<String, LoadedPlugin>,
    /// Per plugin stem: the file that failed and why.
    errors: BTreeMap<String, LoadFailure>,
    attempted: BTreeMap<String, Fingerprint>,
    /// Plugin stems waiting for their quiet period to end, with when it ends.
    pending: Debounce,
}

impl<W: WatchedDir> Reloader<W> {
    pub(super) fn new(runtime: Runtime, dir: PathBuf, options: ReloadOptions, watcher: W) -> Self {
        let pending = Debounce::new(options.debounce, options.rename_settle);
        Reloader {
            runtime,
            dir,
            options,
            watcher,
            sender: Arc::new(watch::channel(Arc::new(PluginSet::default())).0),
            loaded: BTreeMap::new(),
            errors: BTreeMap::new(),
            attempted: BTreeMap::new(),
            pending,
        }
    }

    pub(super) async fn run(
        mut self,
        mut signals: mpsc::UnboundedReceiver<Signal>,
        stop: CancellationToken,
    ) {
        let mut rescan = tokio::time::interval(self.options.rescan_interval);
        rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        rescan.tick().await;
        let mut look_for_dir = tokio::time::interval(self.options.missing_dir_poll);
        look_for_dir.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next_due = self.pending.next_due();
            let dir_missing = !self.watcher.is_watched();
            tokio::select! {
                () = stop.cancelled() => return,
                signal = signals.recv() => match signal {
                    Some(signal) => self.note(signal, Instant::now()),
                    None => return,
                },
                _ = rescan.tick() => self.periodic_rescan(Instant::now()),
                _ = look_for_dir.tick(), if dir_missing => self.look_for_dir(Instant::now()),
                () = sleep_until(next_due), if next_due.is_some() => {
                    if let Err(error) = self.load_due(Instant::now()).await {
                        tracing::error!(%error, "plugin reload failed");
                    }
                }
            }
        }
    }

    /// What a signal received at `now` starts.
    fn note(&mut self, signal: Signal, now: Instant) {
        match signal {
            Signal::Changed(stem) => self.mark(stem, now),
            Signal::RenamedIn(stem) => self.mark_complete(stem, now),
            Signal::Rescan => self.rescan(now),
        }
    }

    /// Starts (or restarts) the quiet period of one plugin.
    fn mark(&mut self, stem: String, now: Instant) {
        tracing::trace!(plugin = %stem, "plugin file changed");
        self.pending.mark(stem, now);
    }

    /// A plugin file arrived whole (renamed into place): due after the settle time, unless
    /// a period is already running for the plugin.
    fn mark_complete(&mut self, stem: String, now: Instant) {
        tracing::trace!(plugin = %stem, "plugin file renamed into place");
        self.pending.mark_complete(stem, now);
    }

    /// Watches the directory afresh and looks at every plugin on disk or loaded.
    fn rescan(&mut self, now: Instant) {
        let was_watching = self.watcher.is_watched();
        let present = self.watcher.rewatch();
        if !present && was_watching {
            tracing::warn!(dir = %self.dir.display(), "the plugin directory is gone: its plugins unload; forewarn loads it again when it is back");
        } else if present {
            tracing::info!(dir = %self.dir.display(), "rescanning the plugin directory");
        }
        self.mark_everything(now);
    }

    /// Every `rescan_interval`: looks at everything, in case a notification was lost.
    fn periodic_rescan(&mut self, now: Instant) {
        if !self.watcher.is_watched() {
            return self.look_for_dir(now);
        }
        self.mark_everything(now);
    }

    /// While the directory is missing: watch and load it as soon as it exists again.
    fn look_for_dir(&mut self, now: Instant) {
        if !self.dir.is_dir() || !self.watcher.rewatch() {
            return;
        }
        tracing::info!(dir = %self.dir.display(), "the plugin directory is back; loading it");
        self.mark_everything(now);
    }

    fn mark_everything(&mut self, now: Instant) {
        let on_disk = list_stems(&self.dir).unwrap_or_default();
        let known: Vec<String> = self
            .loaded
            .keys()
            .chain(self.errors.keys())
            .cloned()
            .chain(on_disk)
            .collect();
        for stem in known {
            self.mark(stem, now);
        }
    }

    /// Loads the plugins whose quiet period is over, then publishes once.
    async fn load_due(&mut self, now: Instant) -> Result<(), ReloadError> {
        let due = self.pending.take_due(now);
        self.load_now(due, now, false).await
    }

    /// Looks at each plugin's files now (off the async runtime) and publishes the new set
    /// if anything changed (or always, with `publish_anyway`: the initial load).
    pub(super) async fn load_now(
        &mut self,
        stems: impl IntoIterator<Item = String>,
        now: Instant,
        publish_anyway: bool,
    ) -> Result<(), ReloadError> {
        let mut changed = false;
        for stem in stems {
            let runtime = self.runtime.clone();
            let dir = self.dir.clone();
            let last = self.attempted.get(&stem).cloned();
            let name = stem.clone();
            let limits = self.options.file_limits;
            let outcome = tokio::task::spawn_blocking(move || {
                examine(&runtime, &dir, &name, last.as_ref(), limits)
            })
            .await?;
            changed |= self.apply(stem, outcome, now);
        }
        if changed || publish_anyway {
            self.publish();
        }
        if publish_anyway {
            self.evict_unused_cache_entries().await?;
        }
        Ok(())
    }

    /// Removes compiled-cache entries of plugins no longer in the directory (off the async
    /// runtime); logs how many.
    async fn evict_unused_cache_entries(&self) -> Result<(), ReloadError> {
        let keep: BTreeSet<String> = self
            .loaded
            .values()
            .map(|plugin| plugin.plugin.content_hash().to_owned())
            .collect();
        let runtime = self.runtime.clone();
        let evicted =
            tokio::task::spawn_blocking(move || runtime.evict_cached_except(&keep)).await?;
        if evicted > 0 {
            tracing::info!(
                evicted,
                "removed compiled-cache entries of plugins no longer present"
            );
        }
        Ok(())
    }

    /// Records one plugin's outcome; true if the published set must change.
    fn apply(&mut self, stem: String, outcome: Outcome, now: Instant) -> bool {
        match outcome {
            Outcome::Unchanged => false,
            Outcome::StillBeingWritten(path) => {
                tracing::debug!(file = %path.display(), "plugin file still being written; waiting for it to settle");
                self.mark(stem, now);
                false
            }
            Outcome::Absent => self.unload(&stem),
            Outcome::Loaded {
                plugin,
                fingerprint,
                elapsed,
            } => {
                self.attempted.insert(stem.clone(), fingerprint);
                self.errors.remove(&stem);
                log_loaded(&plugin, self.loaded.contains_key(&stem), elapsed);
                self.loaded.insert(stem, *plugin);
                true
            }
            Outcome::Failed {
                error,
                fingerprint,
                on_failure,
            } => {
                self.attempted.insert(stem.clone(), fingerprint);
                let path = error.path().to_path_buf();
                let reason = error.to_string();
                let kept = self
                    .loaded
                    .get(&stem)
                    .map(|plugin| plugin.plugin.content_hash()[..12].to_owned());
                match &kept {
                    Some(hash) => {
                        tracing::error!(file = %path.display(), kept_version = %hash, "{reason}; the previous version of the plugin stays live")
                    }
                    None => tracing::error!(file = %path.display(), "{reason}"),
                }
                let failure = LoadFailure {
                    path,
                    reason,
                    advisory: on_failure == Some(FailurePolicy::Approve),
                };
                let before = self.errors.insert(stem, failure.clone());
                before != Some(failure)
            }
        }
    }

    fn unload(&mut self, stem: &str) -> bool {
        self.attempted.remove(stem);
        let had_error = self.errors.remove(stem).is_some();
        let Some(plugin) = self.loaded.remove(stem) else {
            return had_error;
        };
        tracing::info!(
            plugin = plugin.name(),
            "plugin unloaded: its .wasm file was removed (calls in flight finish)"
        );
        true
    }

    fn publish(&mut self) {
        let errors = self
            .errors
            .values()
            .map(|failure| (failure.path.clone(), failure.reason.clone()))
            .collect();
        let advisory = self
            .errors
            .values()
            .filter(|failure| failure.advisory)
            .map(|failure| failure.path.clone())
            .collect();
        let set = PluginSet::new(self.loaded.values().cloned().collect())
            .with_load_errors(errors)
            .with_advisory_load_errors(advisory);
        for warning in set.warnings() {
            tracing::warn!("{warning}");
        }
        if set.is_empty() {
            tracing::warn!(dir = %self.dir.display(), "no plugins are loaded: events are tracked and approved per policy only");
        }
        self.sender.send_replace(Arc::new(set));
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

fn log_loaded(plugin: &LoadedPlugin, replaced: bool, elapsed: Duration) {
    let file = match &plugin.source {
        plugins::PluginSource::File(path) => path.display().to_string(),
        plugins::PluginSource::Bundled => "bundled".to_owned(),
    };
    tracing::info!(
        plugin = plugin.name(),
        file,
        hash = &plugin.plugin.content_hash()[..12],
        cached = plugin.plugin.loaded_from_cache(),
        elapsed_ms = elapsed.as_millis() as u64,
        replaced,
        subscribe = %crate::log_fields::list(&plugin.manifest.subscribe),
        budget = %crate::log_fields::duration(plugin.manifest.budget),
        "{}",
        if replaced {
            log_messages::PLUGIN_RELOADED
        } else {
            log_messages::PLUGIN_LOADED
        }
    );
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use forewarn_runtime::{HostServices, RuntimeConfig};

    use super::*;

    /// The directory's watcher as the reloader sees it: watched while `present` says the
    /// directory is there.
    struct StandInWatcher {
        present: Arc<AtomicBool>,
        watched: bool,
    }

    impl WatchedDir for StandInWatcher {
        fn is_watched(&self) -> bool {
            self.watched
        }

        fn rewatch(&mut self) -> bool {
            self.watched = self.present.load(Ordering::SeqCst);
            self.watched
        }
    }

    const QUIET: Duration = Duration::from_millis(250);
    const SETTLE: Duration = Duration::from_millis(20);
    const MS: Duration = Duration::from_millis(1);

    /// A reloader of `dir` holding `broken.wasm` (which fails to load, fast: its load error
    /// shows the load happened), the directory watched while `present`.
    fn reloader(dir: &Path, present: &Arc<AtomicBool>) -> Reloader<StandInWatcher> {
        std::fs::write(dir.join("broken.wasm"), b"not a component").expect("write the plugin");
        let runtime =
            Runtime::new(RuntimeConfig::default(), HostServices::default()).expect("a runtime");
        let options = ReloadOptions {
            debounce: QUIET,
            rename_settle: SETTLE,
            ..ReloadOptions::default()
        };
        let watcher = StandInWatcher {
            present: present.clone(),
            watched: true,
        };
        Reloader::new(runtime, dir.to_path_buf(), options, watcher)
    }

    fn load_failed(reloader: &Reloader<StandInWatcher>) -> bool {
        reloader
            .sender
            .borrow()
            .load_errors()
            .keys()
            .any(|path| path.ends_with("broken.wasm"))
    }

    #[tokio::test]
    async fn a_changed_plugin_loads_once_its_files_were_quiet_for_the_whole_period() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut reloader = reloader(dir.path(), &Arc::new(AtomicBool::new(true)));
        let t0 = Instant::now();
        reloader.note(Signal::Changed("broken".into()), t0);
        reloader.load_due(t0 + QUIET - MS).await.expect("load");
        assert!(
            !load_failed(&reloader),
            "loaded before its quiet period ended"
        );
        // A second change restarts the period.
        reloader.note(Signal::Changed("broken".into()), t0 + 200 * MS);
        reloader.load_due(t0 + QUIET).await.expect("load");
        assert!(
            !load_failed(&reloader),
            "a change 200 ms in restarts the period"
        );
        assert_eq!(reloader.pending.next_due(), Some(t0 + 200 * MS + QUIET));
        reloader
            .load_due(t0 + 200 * MS + QUIET)
            .await
            .expect("load");
        assert!(load_failed(&reloader), "loaded (and failed) once quiet");
        assert_eq!(reloader.pending.next_due(), None, "nothing left to do");
    }

    #[tokio::test]
    async fn a_file_renamed_into_place_loads_after_the_settle_time() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut reloader = reloader(dir.path(), &Arc::new(AtomicBool::new(true)));
        let t0 = Instant::now();
        reloader.note(Signal::RenamedIn("broken".into()), t0);
        reloader.load_due(t0 + SETTLE - MS).await.expect("load");
        assert!(!load_failed(&reloader));
        reloader.load_due(t0 + SETTLE).await.expect("load");
        assert!(
            load_failed(&reloader),
            "a complete file waits only the settle time"
        );
    }

    #[tokio::test]
    async fn a_directory_that_goes_unloads_its_plugins_and_loads_them_again_when_back() {
        let parent = tempfile::tempdir().expect("a temporary directory");
        let dir = parent.path().join("plugins.d");
        std::fs::create_dir(&dir).expect("create the plugin directory");
        let present = Arc::new(AtomicBool::new(true));
        let mut reloader = reloader(&dir, &present);
        let t0 = Instant::now();
        reloader.note(Signal::Changed("broken".into()), t0);
        reloader.load_due(t0 + QUIET).await.expect("load");
        assert!(load_failed(&reloader));

        // The directory is deleted: the watcher reports it, what it held unloads.
        std::fs::remove_dir_all(&dir).expect("delete the plugin directory");
        present.store(false, Ordering::SeqCst);
        let t1 = t0 + Duration::from_secs(1);
        reloader.note(Signal::Rescan, t1);
        assert!(!reloader.watcher.is_watched());
        reloader.load_due(t1 + QUIET).await.expect("load");
        assert!(
            !load_failed(&reloader),
            "a plugin whose directory is gone is not listed"
        );
        // Looked for while missing: nothing to do until it is back.
        reloader.look_for_dir(t1 + Duration::from_secs(1));
        assert_eq!(reloader.pending.next_due(), None);

        // It is back: watched afresh, its plugins loaded again.
        std::fs::create_dir(&dir).expect("create the plugin directory again");
        std::fs::write(dir.join("broken.wasm"), b"still not a component").expect("write");
        present.store(true, Ordering::SeqCst);
        let t2 = t1 + Duration::from_secs(2);
        reloader.periodic_rescan(t2);
        assert!(reloader.watcher.is_watched());
        reloader.load_due(t2 + QUIET).await.expect("load");
        assert!(
            load_failed(&reloader),
            "the directory's plugins are loaded again"
        );
    }
}

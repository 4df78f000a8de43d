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

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use forewarn_runtime::Runtime;
use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind, RenameMode};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use forewarn_runtime::trust::{self, FileRules, Owners, TrustError};

use crate::log_messages;
use crate::plugins::debounce::Debounce;
use crate::plugins::manifest::{FailurePolicy, PluginManifest};
use crate::plugins::set::{
    self as plugins, LoadedPlugin, PluginFileLimits, PluginLoadError, PluginSet,
};

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
        reloader.load_now(stems, true).await?;
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

/// What a watcher notification means for the reloader.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Signal {
    /// A file of this plugin (by file stem) changed, appeared or went away.
    Changed(String),
    /// A file of this plugin was renamed into the directory: complete, nothing to wait for.
    RenamedIn(String),
    /// The directory itself changed (deleted, created, renamed) or events were lost.
    Rescan,
}

/// The notify watcher on the plugin directory. Only the directory is watched (not its
/// parent, which would be `/etc`): its deletion or move is an event on it, its return is
/// found by looking (`missing_dir_poll`).
struct DirWatcher {
    watcher: RecommendedWatcher,
    dir: PathBuf,
    /// Whether `dir` itself is watched now (false after it was deleted or moved away).
    watching_dir: bool,
}

impl DirWatcher {
    fn new(dir: &Path, signals: mpsc::UnboundedSender<Signal>) -> Result<DirWatcher, ReloadError> {
        let watched = dir.to_path_buf();
        let handler = move |result: notify::Result<notify::Event>| {
            for signal in signals_of(&watched, result) {
                let _closed = signals.send(signal);
            }
        };
        let watcher =
            notify::recommended_watcher(handler).map_err(|source| ReloadError::Watch {
                path: dir.to_path_buf(),
                source,
            })?;
        let mut dir_watcher = DirWatcher {
            watcher,
            dir: dir.to_path_buf(),
            watching_dir: false,
        };
        dir_watcher
            .watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|source| ReloadError::Watch {
                path: dir.to_path_buf(),
                source,
            })?;
        dir_watcher.watching_dir = true;
        Ok(dir_watcher)
    }

    /// Watches the directory again (a new inode after it was recreated); false if it is not
    /// there now.
    fn rewatch_dir(&mut self) -> bool {
        // After a deletion notify has already dropped the watch (WatchNotFound); after a
        // move it still follows the moved-away inode, which must stop.
        let _not_watched = self.watcher.unwatch(&self.dir);
        self.watching_dir = match self.watcher.watch(&self.dir, RecursiveMode::NonRecursive) {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(dir = %self.dir.display(), %error, "plugin directory not watchable now");
                false
            }
        };
        self.watching_dir
    }
}

/// The signals one notify event carries for the plugin directory `dir`.
fn signals_of(dir: &Path, result: notify::Result<notify::Event>) -> Vec<Signal> {
    let event = match result {
        Ok(event) => event,
        Err(error) => {
            tracing::warn!(%error, "plugin directory watcher error; rescanning the directory");
            return vec![Signal::Rescan];
        }
    };
    if event.need_rescan() {
        return vec![Signal::Rescan];
    }
    if is_read_only_access(&event.kind) {
        return Vec::new();
    }
    let renamed_in = renamed_in_path(&event);
    event
        .paths
        .iter()
        .filter_map(|path| {
            let signal = signal_for_path(dir, path)?;
            match signal {
                Signal::Changed(stem) if Some(path) == renamed_in => Some(Signal::RenamedIn(stem)),
                other => Some(other),
            }
        })
        .collect()
}

/// The path a rename put in place: the only path of a move into the directory, the second
/// of a rename within it (whose first, the old name, is a change like any other).
fn renamed_in_path(event: &notify::Event) -> Option<&PathBuf> {
    match event.kind {
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => event.paths.first(),
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => event.paths.get(1),
        _ => None,
    }
}

/// Opening and reading files (forewarn's own reads among them) changes nothing.
fn is_read_only_access(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => false,
        EventKind::Access(_) => true,
        _ => false,
    }
}

fn signal_for_path(dir: &Path, path: &Path) -> Option<Signal> {
    if path == dir {
        return Some(Signal::Rescan);
    }
    if path.parent() != Some(dir) || !plugins::is_watched_file(path) {
        return None;
    }
    Some(Signal::Changed(file_stem(path)?))
}

fn file_stem(path: &Path) -> Option<String> {
    path.file_stem()
        .and_then(|stem| stem.to_str())
        .map(str::to_owned)
}

/// The stems of every watched file in `dir`.
fn list_stems(dir: &Path) -> std::io::Result<BTreeSet<String>> {
    let mut stems = BTreeSet::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if plugins::is_watched_file(&path)
            && let Some(stem) = file_stem(&path)
        {
            stems.insert(stem);
        }
    }
    Ok(stems)
}

/// What was on disk for one plugin the last time it was tried: the SHA-256 of the
/// component and of the manifest (if any). Identical content is not tried twice.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    wasm: [u8; 32],
    manifest: Option<[u8; 32]>,
}

/// The result of looking at one plugin's files.
enum Outcome {
    /// No `NAME.wasm`: the plugin is not (or no longer) installed.
    Absent,
    /// The same content as the last attempt (loaded or failed): nothing to do.
    Unchanged,
    /// A file changed while it was read: try again after the next quiet period.
    StillBeingWritten(PathBuf),
    Loaded {
        plugin: Box<LoadedPlugin>,
        fingerprint: Fingerprint,
        elapsed: Duration,
    },
    Failed {
        error: PluginLoadError,
        fingerprint: Fingerprint,
        /// The `on-failure` of the manifest read with the failed file, when it was read.
        on_failure: Option<FailurePolicy>,
    },
}

/// A plugin file that failed to load, as last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LoadFailure {
    path: PathBuf,
    reason: String,
    /// Its manifest was read and says `on-failure = "approve"`: it does not hold approvals.
    advisory: bool,
}

/// The watcher's state: what is loaded, what failed, what is waiting for quiet.
struct Reloader {
    runtime: Runtime,
    dir: PathBuf,
    options: ReloadOptions,
    watcher: DirWatcher,
    sender: Arc<watch::Sender<Arc<PluginSet>>>,
    loaded: BTreeMap<String, LoadedPlugin>,
    /// Per plugin stem: the file that failed and why.
    errors: BTreeMap<String, LoadFailure>,
    attempted: BTreeMap<String, Fingerprint>,
    /// Plugin stems waiting for their quiet period to end, with when it ends.
    pending: Debounce,
}

impl Reloader {
    fn new(
        runtime: Runtime,
        dir: PathBuf,
        options: ReloadOptions,
        watcher: DirWatcher,
    ) -> Reloader {
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

    async fn run(mut self, mut signals: mpsc::UnboundedReceiver<Signal>, stop: CancellationToken) {
        let mut rescan = tokio::time::interval(self.options.rescan_interval);
        rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        rescan.tick().await;
        let mut look_for_dir = tokio::time::interval(self.options.missing_dir_poll);
        look_for_dir.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next_due = self.pending.next_due();
            let dir_missing = !self.watcher.watching_dir;
            tokio::select! {
                () = stop.cancelled() => return,
                signal = signals.recv() => match signal {
                    Some(signal) => self.note(signal),
                    None => return,
                },
                _ = rescan.tick() => self.periodic_rescan(),
                _ = look_for_dir.tick(), if dir_missing => self.look_for_dir(),
                () = sleep_until(next_due), if next_due.is_some() => {
                    if let Err(error) = self.load_due().await {
                        tracing::error!(%error, "plugin reload failed");
                    }
                }
            }
        }
    }

    fn note(&mut self, signal: Signal) {
        match signal {
            Signal::Changed(stem) => self.mark(stem),
            Signal::RenamedIn(stem) => self.mark_complete(stem),
            Signal::Rescan => self.rescan(),
        }
    }

    /// Starts (or restarts) the quiet period of one plugin.
    fn mark(&mut self, stem: String) {
        tracing::trace!(plugin = %stem, "plugin file changed");
        self.pending.mark(stem, Instant::now());
    }

    /// A plugin file arrived whole (renamed into place): due after the settle time, unless
    /// a period is already running for the plugin.
    fn mark_complete(&mut self, stem: String) {
        tracing::trace!(plugin = %stem, "plugin file renamed into place");
        self.pending.mark_complete(stem, Instant::now());
    }

    /// Watches the directory afresh and looks at every plugin on disk or loaded.
    fn rescan(&mut self) {
        let was_watching = self.watcher.watching_dir;
        let present = self.watcher.rewatch_dir();
        if !present && was_watching {
            tracing::warn!(dir = %self.dir.display(), "the plugin directory is gone: its plugins unload; forewarn loads it again when it is back");
        } else if present {
            tracing::info!(dir = %self.dir.display(), "rescanning the plugin directory");
        }
        self.mark_everything();
    }

    fn periodic_rescan(&mut self) {
        if !self.watcher.watching_dir {
            return self.look_for_dir();
        }
        self.mark_everything();
    }

    /// While the directory is missing: watch and load it as soon as it exists again.
    fn look_for_dir(&mut self) {
        if !self.dir.is_dir() || !self.watcher.rewatch_dir() {
            return;
        }
        tracing::info!(dir = %self.dir.display(), "the plugin directory is back; loading it");
        self.mark_everything();
    }

    fn mark_everything(&mut self) {
        let on_disk = list_stems(&self.dir).unwrap_or_default();
        let known: Vec<String> = self
            .loaded
            .keys()
            .chain(self.errors.keys())
            .cloned()
            .chain(on_disk)
            .collect();
        for stem in known {
            self.mark(stem);
        }
    }

    /// Loads the plugins whose quiet period is over, then publishes once.
    async fn load_due(&mut self) -> Result<(), ReloadError> {
        let due = self.pending.take_due(Instant::now());
        self.load_now(due, false).await
    }

    /// Looks at each plugin's files now (off the async runtime) and publishes the new set
    /// if anything changed (or always, with `publish_anyway`: the initial load).
    async fn load_now(
        &mut self,
        stems: impl IntoIterator<Item = String>,
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
            changed |= self.apply(stem, outcome);
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
    fn apply(&mut self, stem: String, outcome: Outcome) -> bool {
        match outcome {
            Outcome::Unchanged => false,
            Outcome::StillBeingWritten(path) => {
                tracing::debug!(file = %path.display(), "plugin file still being written; waiting for it to settle");
                self.mark(stem);
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

/// Reads one plugin's files and, if they differ from the last attempt, loads them. Blocking.
/// Files that are not trusted (links, FIFOs, devices, oversized, writable by others) fail
/// that plugin only, and the version already loaded stays live.
fn examine(
    runtime: &Runtime,
    dir: &Path,
    stem: &str,
    last: Option<&Fingerprint>,
    limits: PluginFileLimits,
) -> Outcome {
    let wasm = dir.join(format!("{stem}.wasm"));
    let manifest_path = dir.join(format!("{stem}.toml"));
    let bytes = match read_settled(&wasm, limits.wasm_rules()) {
        Ok(Settled::Absent) => return Outcome::Absent,
        Ok(Settled::Moving) => return Outcome::StillBeingWritten(wasm),
        Ok(Settled::Bytes(bytes)) => bytes,
        Err(source) => {
            let fingerprint = Fingerprint {
                wasm: [0; 32],
                manifest: None,
            };
            let error = PluginLoadError::Untrusted(source);
            return Outcome::Failed {
                error,
                fingerprint,
                on_failure: None,
            };
        }
    };
    let manifest_text = match read_settled(&manifest_path, limits.manifest_rules()) {
        Ok(Settled::Absent) => None,
        Ok(Settled::Moving) => return Outcome::StillBeingWritten(manifest_path),
        Ok(Settled::Bytes(text)) => Some(text),
        Err(source) => {
            let fingerprint = Fingerprint {
                wasm: sha256(&bytes),
                manifest: None,
            };
            let error = PluginLoadError::Untrusted(source);
            return Outcome::Failed {
                error,
                fingerprint,
                on_failure: None,
            };
        }
    };
    let fingerprint = Fingerprint {
        wasm: sha256(&bytes),
        manifest: manifest_text.as_deref().map(sha256),
    };
    if last == Some(&fingerprint) {
        return Outcome::Unchanged;
    }
    let started = Instant::now();
    let manifest = match read_manifest(&manifest_path, manifest_text.as_deref()) {
        Ok(manifest) => manifest,
        Err(error) => {
            return Outcome::Failed {
                error,
                fingerprint,
                on_failure: None,
            };
        }
    };
    let on_failure = manifest.on_failure;
    match plugins::load_plugin_bytes(runtime, &wasm, &bytes, manifest) {
        Ok(plugin) => Outcome::Loaded {
            plugin: Box::new(plugin),
            fingerprint,
            elapsed: started.elapsed(),
        },
        Err(error) => Outcome::Failed {
            error,
            fingerprint,
            on_failure: Some(on_failure),
        },
    }
}

/// The manifest of the text read (the defaults without one).
fn read_manifest(
    manifest_path: &Path,
    manifest_text: Option<&[u8]>,
) -> Result<PluginManifest, PluginLoadError> {
    let manifest = match manifest_text {
        None => PluginManifest::default(),
        Some(raw) => {
            let text = std::str::from_utf8(raw).map_err(|_| {
                PluginLoadError::Manifest(crate::plugins::manifest::ManifestError::Invalid {
                    path: manifest_path.to_path_buf(),
                    message: "not UTF-8 text; save the manifest as UTF-8".into(),
                })
            })?;
            PluginManifest::from_text(manifest_path, text)?
        }
    };
    Ok(manifest)
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// A file's content, read only if it did not change while being read.
enum Settled {
    Absent,
    /// Its size or modification time changed between the two looks: still being written.
    Moving,
    Bytes(Vec<u8>),
}

/// Reads `path` if it is a trusted regular file (see [`trust::read_trusted_file`]),
/// comparing its size and modification time before and after the read.
fn read_settled(path: &Path, rules: FileRules) -> Result<Settled, TrustError> {
    let Some(before) = look_at(path)? else {
        return Ok(Settled::Absent);
    };
    let bytes = match trust::read_trusted_file(path, rules) {
        Ok(bytes) => bytes,
        Err(TrustError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {
            return Ok(Settled::Absent);
        }
        Err(error) => return Err(error),
    };
    let Some(after) = look_at(path)? else {
        return Ok(Settled::Absent);
    };
    let same_size = before.len() == after.len() && after.len() == bytes.len() as u64;
    let same_time = before.modified().ok() == after.modified().ok();
    if same_size && same_time {
        Ok(Settled::Bytes(bytes))
    } else {
        Ok(Settled::Moving)
    }
}

/// The metadata of `path` itself (a link is not followed), or None if it is absent.
fn look_at(path: &Path) -> Result<Option<std::fs::Metadata>, TrustError> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) => Ok(Some(metadata)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TrustError::Io {
            action: "inspect",
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind, paths: &[&str]) -> notify::Result<notify::Event> {
        let mut event = notify::Event::new(kind);
        for path in paths {
            event = event.add_path(PathBuf::from(path));
        }
        Ok(event)
    }

    #[test]
    fn plugin_files_signal_their_plugin() {
        let dir = Path::new("/etc/forewarn/plugins.d");
        let modify = EventKind::Modify(notify::event::ModifyKind::Any);
        assert_eq!(
            signals_of(
                dir,
                event(modify, &["/etc/forewarn/plugins.d/lb-drain.wasm"])
            ),
            [Signal::Changed("lb-drain".into())]
        );
        assert_eq!(
            signals_of(
                dir,
                event(modify, &["/etc/forewarn/plugins.d/lb-drain.toml"])
            ),
            [Signal::Changed("lb-drain".into())]
        );
        for ignored in [
            "/etc/forewarn/plugins.d/.lb-drain.wasm.swp",
            "/etc/forewarn/plugins.d/lb-drain.wasm.tmp",
            "/etc/forewarn/plugins.d/lb-drain.wasm~",
            "/etc/forewarn/plugins.d/README.md",
            "/etc/forewarn/forewarn.toml",
            "/etc/forewarn/plugins.d/sub/x.wasm",
        ] {
            assert!(
                signals_of(dir, event(modify, &[ignored])).is_empty(),
                "{ignored}"
            );
        }
    }

    #[test]
    fn a_file_renamed_into_place_is_complete_and_its_old_name_a_change() {
        let dir = Path::new("/p");
        let moved_in = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert_eq!(
            signals_of(dir, event(moved_in, &["/p/a.wasm"])),
            [Signal::RenamedIn("a".into())]
        );
        let within = EventKind::Modify(ModifyKind::Name(RenameMode::Both));
        assert_eq!(
            signals_of(dir, event(within, &["/p/.a.wasm.tmp", "/p/a.wasm"])),
            [Signal::RenamedIn("a".into())]
        );
        assert_eq!(
            signals_of(dir, event(within, &["/p/a.toml", "/p/b.toml"])),
            [Signal::Changed("a".into()), Signal::RenamedIn("b".into())]
        );
        // Moved away (an editor's backup rename): the file is gone, wait for its return.
        let moved_away = EventKind::Modify(ModifyKind::Name(RenameMode::From));
        assert_eq!(
            signals_of(dir, event(moved_away, &["/p/a.toml"])),
            [Signal::Changed("a".into())]
        );
    }

    #[test]
    fn the_directory_itself_changing_means_rescan() {
        let dir = Path::new("/etc/forewarn/plugins.d");
        let removed = EventKind::Remove(notify::event::RemoveKind::Folder);
        assert_eq!(
            signals_of(dir, event(removed, &["/etc/forewarn/plugins.d"])),
            [Signal::Rescan]
        );
        let failed: notify::Result<notify::Event> = Err(notify::Error::generic("queue overflow"));
        assert_eq!(signals_of(dir, failed), [Signal::Rescan]);
    }

    #[test]
    fn reads_are_not_changes() {
        let dir = Path::new("/p");
        let open = EventKind::Access(AccessKind::Open(AccessMode::Any));
        let closed_read = EventKind::Access(AccessKind::Close(AccessMode::Read));
        let closed_write = EventKind::Access(AccessKind::Close(AccessMode::Write));
        assert!(signals_of(dir, event(open, &["/p/a.wasm"])).is_empty());
        assert!(signals_of(dir, event(closed_read, &["/p/a.wasm"])).is_empty());
        assert_eq!(
            signals_of(dir, event(closed_write, &["/p/a.wasm"])),
            [Signal::Changed("a".into())]
        );
    }

    #[test]
    fn settled_read_sees_absent_and_present_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.wasm");
        assert!(matches!(
            read_settled(&path, PluginFileLimits::default().wasm_rules()).unwrap(),
            Settled::Absent
        ));
        std::fs::write(&path, b"abc").unwrap();
        assert!(
            matches!(read_settled(&path, PluginFileLimits::default().wasm_rules()).unwrap(), Settled::Bytes(bytes) if bytes == b"abc")
        );
    }
}

//! The plugins' key-value store on disk behind the WIT host functions `state-get`, `state-set`
//! and `state-delete`: one JSON file per plugin, bounded, written crash-safely.
//!
//! Each plugin's map lives in `DIR/<plugin>.json` as `{ "key": "<hex of the value>" }` and
//! is rewritten with [`crate::durable_file::write_atomically`] on every change, so a `set` that
//! returned Ok survives a crash. All files are loaded at [`KeyValueFiles::open`]; reads
//! are served from memory, from a snapshot that a write replaces once it is on disk: a read
//! never waits for a write (nor for a disk that is slow to take it).
//!
//! Since each write rewrites the whole file (up to a few MiB), each is charged its file's
//! size against its call's [`DiskBudget`]: one call cannot turn 64 small writes into 64
//! rewrites of a large file. Over time, each plugin's writes are bounded by its disk write
//! budget ([`StateWriteRate`]: writes and bytes per minute), whatever its calls do.
//!
//! A disk that refuses a write (full, read-only, immutable, failing) fails that write with
//! the error and its fix, which the plugin sees; reads go on answering the last state
//! written, and the next write tries the disk again. The streak is shown in `/status` and
//! `/metrics` and logged once (docs/operations.md, "When the disk is full").

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use forewarn_runtime::{DiskBudget, STATE_DISK_BYTES_PER_CALL};

use crate::durable_file::{self, DurableFileError};
use crate::log_messages;
use crate::plugins::key_value_write_rate::{
    OverBudget, STATE_WRITE_BURST, STATE_WRITE_BURST_BYTES, STATE_WRITE_BYTES_PER_MINUTE,
    STATE_WRITES_PER_MINUTE, StateWriteRate,
};
use crate::storage_health::StorageHealth;
use forewarn_manifest::{MAX_PLUGIN_NAME_BYTES, name_problem};

/// Longest key a plugin may use, in bytes.
pub(crate) const MAX_KEY_BYTES: usize = 256;
/// Largest value a plugin may store under one key, in bytes.
pub(crate) const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Most a plugin may store in total (keys plus values, in bytes).
pub(crate) const MAX_TOTAL_BYTES: usize = 1024 * 1024;

/// How much state each plugin may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyValueLimits {
    pub max_key_bytes: usize,
    pub max_value_bytes: usize,
    /// Sum over all entries of key length plus value length (raw bytes, not as encoded).
    pub max_total_bytes: usize,
}

impl Default for KeyValueLimits {
    fn default() -> Self {
        KeyValueLimits {
            max_key_bytes: MAX_KEY_BYTES,
            max_value_bytes: MAX_VALUE_BYTES,
            max_total_bytes: MAX_TOTAL_BYTES,
        }
    }
}

/// Why a state operation failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyValueFilesError {
    /// The plugin name cannot be used as a file name.
    #[error(
        "plugin name {name:?} is not usable for its state file: {problem}; plugin names may use \
         only a-z, 0-9, '_' and '-', up to {MAX_PLUGIN_NAME_BYTES} bytes (rename the plugin)"
    )]
    InvalidPluginName { name: String, problem: &'static str },
    /// A limit of [`KeyValueLimits`] would be exceeded; nothing was changed.
    #[error("plugin {plugin:?} is over its state quota: {detail}")]
    OverQuota { plugin: String, detail: String },
    /// The plugin wrote too much to disk lately ([`StateWriteRate`]); nothing was changed.
    #[error(
        "plugin {plugin:?} is over its disk write budget of {STATE_WRITES_PER_MINUTE} state \
         writes and {} MiB a minute (bursts of {STATE_WRITE_BURST} writes, {} MiB; each write \
         rewrites its state file and syncs it): this write was not stored; the next is allowed \
         in {}; write less often (keep related values under one key, write once per call, do \
         not write a value that did not change)",
        STATE_WRITE_BYTES_PER_MINUTE / (1024 * 1024),
        STATE_WRITE_BURST_BYTES / (1024 * 1024),
        humantime::format_duration(whole_millis(*retry_in))
    )]
    OverWriteBudget { plugin: String, retry_in: Duration },
    /// The state file could not be read or written.
    #[error("the state was not stored (reads still answer the value stored before): {0}")]
    Storage(#[from] DurableFileError),
    /// The plugin's state file could not be read at start: writes would replace what it
    /// holds, so they are refused until forewarn restarts with the disk readable.
    #[error(
        "the state file of plugin {plugin:?} could not be read when forewarn started ({error}); \
         its writes are refused so they cannot replace it: fix the disk, then restart forewarn"
    )]
    Unreadable { plugin: String, error: String },
    /// A state file exists but does not hold a state map (it was moved aside first).
    #[error(
        "the state file of plugin {plugin:?} was unreadable and was moved to {}; the plugin \
         starts with empty state (inspect or delete that file)",
        quarantined.display()
    )]
    Quarantined {
        plugin: String,
        quarantined: PathBuf,
    },
}

type StateMap = BTreeMap<String, Vec<u8>>;

/// How a plugin's encoded state reaches its file: [`durable_file::write_atomically`], or in
/// tests a writer that counts the bytes or blocks.
type WriteFile = dyn Fn(&Path, &[u8]) -> Result<(), DurableFileError> + Send + Sync;

/// Every plugin's durable key/value state. Safe to share between threads (`&self` methods).
/// Each plugin has its own write lock, held while its file is written: one plugin's writes
/// (and fsyncs) never wait for another's, and reads wait for none.
pub(crate) struct KeyValueFiles {
    dir: PathBuf,
    limits: KeyValueLimits,
    plugins: Mutex<HashMap<String, Arc<PluginKeyValues>>>,
    write_file: Arc<WriteFile>,
    /// Plugins whose file could not be read at start, with the error: their writes are refused.
    unreadable: HashMap<String, String>,
    /// Where the streak of failed writes and the refused ones are shown.
    health: Arc<StorageHealth>,
    /// The time, for the write budgets (a test moves it).
    clock: Arc<Clock>,
}

/// Where the store reads the time.
type Clock = dyn Fn() -> Instant + Send + Sync;

/// One plugin's state: the map as it is on disk, which reads take without waiting, the
/// lock that puts the plugin's writes one after the other, and its disk write budget.
struct PluginKeyValues {
    /// The map as last written. Replaced whole once a write is on disk; locked only to
    /// clone or replace the `Arc`, never across I/O.
    snapshot: Mutex<Arc<StateMap>>,
    /// Held by the plugin's write in progress, across its file write (and still by one
    /// that its call gave up on): later writes wait here, reads never do. It guards the
    /// plugin's disk write budget.
    writing: Mutex<StateWriteRate>,
}

impl PluginKeyValues {
    fn new(map: StateMap, now: Instant) -> Self {
        PluginKeyValues {
            snapshot: Mutex::new(Arc::new(map)),
            writing: Mutex::new(StateWriteRate::new(now)),
        }
    }

    /// The map as last written.
    fn snapshot(&self) -> Arc<StateMap> {
        Arc::clone(&lock(&self.snapshot))
    }

    /// Makes `map`, now on disk, what reads see.
    fn publish(&self, map: StateMap) {
        *lock(&self.snapshot) = Arc::new(map);
    }
}

impl KeyValueFiles {
    /// Opens the store in `dir` (created with mode 0700 if needed) with the default limits.
    pub(crate) fn open(dir: &Path) -> Result<Self, KeyValueFilesError> {
        Self::open_with_limits(dir, KeyValueLimits::default())
    }

    /// Opens the store in `dir` and loads every plugin's file. Unparsable files are moved
    /// aside to `<plugin>.json.corrupt-<unix-secs>` and logged as errors; that plugin starts
    /// empty. Files whose names are not plugin names are left alone.
    ///
    /// A directory that cannot be created, or a file that cannot be read (or moved aside),
    /// does not stop the start: it is logged, the plugins concerned start empty, and their
    /// writes fail (a missing directory is created by the first write that can). Only a
    /// directory or file that another user could have written is refused.
    pub(crate) fn open_with_limits(
        dir: &Path,
        limits: KeyValueLimits,
    ) -> Result<Self, KeyValueFilesError> {
        match durable_file::create_private_dir(dir) {
            Ok(()) => {}
            Err(error @ DurableFileError::Io { .. }) => {
                tracing::error!(%error, "{}", log_messages::PLUGIN_STATE_NOT_WRITABLE)
            }
            Err(untrusted) => return Err(untrusted.into()),
        }
        let now = Instant::now();
        let mut plugins = HashMap::new();
        let mut unreadable = HashMap::new();
        for plugin in plugin_files_in(dir) {
            match load_plugin(dir, &plugin) {
                Ok(map) => {
                    plugins.insert(plugin, Arc::new(PluginKeyValues::new(map, now)));
                }
                Err(error @ KeyValueFilesError::Quarantined { .. }) => tracing::error!("{error}"),
                Err(KeyValueFilesError::Storage(error @ DurableFileError::Io { .. })) => {
                    tracing::error!(plugin = %plugin, %error, "cannot read a plugin's state file: the plugin starts with empty state, and its writes are refused so they cannot replace the file");
                    unreadable.insert(plugin, error.to_string());
                }
                Err(error) => return Err(error),
            }
        }
        Ok(KeyValueFiles {
            dir: dir.to_path_buf(),
            limits,
            plugins: Mutex::new(plugins),
            write_file: Arc::new(durable_file::write_atomically),
            unreadable,
            health: Arc::default(),
            clock: Arc::new(Instant::now),
        })
    }

    /// The store reporting to `health` (shared with `/status` and `/metrics`).
    pub(crate) fn with_health(self, health: Arc<StorageHealth>) -> Self {
        KeyValueFiles { health, ..self }
    }

    /// The store reading the time from `clock` (for the write budgets).
    #[cfg(test)]
    fn with_clock(self, clock: Arc<Clock>) -> Self {
        KeyValueFiles { clock, ..self }
    }

    /// The store with `write_file` in place of [`durable_file::write_atomically`].
    #[cfg(test)]
    fn with_writer(self, write_file: Arc<WriteFile>) -> Self {
        KeyValueFiles { write_file, ..self }
    }

    /// The value `plugin` stored under `key`, if any. Invalid names simply have no state.
    /// Never waits for a write: a write in progress is seen once it is on disk.
    pub(crate) fn get(&self, plugin: &str, key: &str) -> Option<Vec<u8>> {
        let entry = self.table().get(plugin)?.clone();
        entry.snapshot().get(key).cloned()
    }

    /// Stores `value` under `key` for `plugin`; durable when this returns Ok, with the bytes
    /// written to disk. Fails without changing anything if a limit would be exceeded (the
    /// state quota, or `budget` by the file's size) or the file cannot be written.
    pub(crate) fn set(
        &self,
        plugin: &str,
        key: &str,
        value: &[u8],
        budget: DiskBudget,
    ) -> Result<u64, KeyValueFilesError> {
        validate_plugin_name(plugin)?;
        self.check_entry(plugin, key, value)?;
        let entry = self.entry(plugin);
        let mut rate = lock(&entry.writing);
        let current = entry.snapshot();
        if current.get(key).map(Vec::as_slice) == Some(value) {
            return Ok(0);
        }
        let mut map = StateMap::clone(&current);
        map.insert(key.to_owned(), value.to_vec());
        self.check_total(plugin, &map)?;
        let written = self.persist(plugin, &map, budget, &mut rate)?;
        entry.publish(map);
        Ok(written)
    }

    /// Removes `key` from `plugin`'s state; durable when this returns Ok, with the bytes
    /// written to disk (charged to `budget` like a `set`). Removing a key that is not there
    /// is Ok and writes nothing.
    pub(crate) fn delete(
        &self,
        plugin: &str,
        key: &str,
        budget: DiskBudget,
    ) -> Result<u64, KeyValueFilesError> {
        validate_plugin_name(plugin)?;
        let Some(entry) = self.table().get(plugin).cloned() else {
            return Ok(0);
        };
        let mut rate = lock(&entry.writing);
        let current = entry.snapshot();
        if !current.contains_key(key) {
            return Ok(0);
        }
        let mut map = StateMap::clone(&current);
        map.remove(key);
        let written = self.persist(plugin, &map, budget, &mut rate)?;
        entry.publish(map);
        Ok(written)
    }

    /// Bytes `plugin` uses against [`KeyValueLimits::max_total_bytes`].
    #[cfg(test)]
    pub(crate) fn usage(&self, plugin: &str) -> usize {
        let Some(entry) = self.table().get(plugin).cloned() else {
            return 0;
        };
        total_bytes(&entry.snapshot())
    }

    /// Locks the table of plugins, held only to find (or add) one plugin's state.
    fn table(&self) -> MutexGuard<'_, HashMap<String, Arc<PluginKeyValues>>> {
        lock(&self.plugins)
    }

    /// `plugin`'s state, created empty on first use.
    fn entry(&self, plugin: &str) -> Arc<PluginKeyValues> {
        let now = (self.clock)();
        self.table()
            .entry(plugin.to_owned())
            .or_insert_with(|| Arc::new(PluginKeyValues::new(StateMap::new(), now)))
            .clone()
    }

    fn check_entry(&self, plugin: &str, key: &str, value: &[u8]) -> Result<(), KeyValueFilesError> {
        if key.len() > self.limits.max_key_bytes {
            return Err(over_quota(
                plugin,
                format!(
                    "key of {} bytes is longer than the limit of {} bytes per key \
                     (max-key-bytes)",
                    key.len(),
                    self.limits.max_key_bytes
                ),
            ));
        }
        if value.len() > self.limits.max_value_bytes {
            return Err(over_quota(
                plugin,
                format!(
                    "value of {} bytes for key {key:?} is larger than the limit of {} bytes per \
                     value (max-value-bytes)",
                    value.len(),
                    self.limits.max_value_bytes
                ),
            ));
        }
        Ok(())
    }

    fn check_total(&self, plugin: &str, map: &StateMap) -> Result<(), KeyValueFilesError> {
        let total = total_bytes(map);
        if total <= self.limits.max_total_bytes {
            return Ok(());
        }
        Err(over_quota(
            plugin,
            format!(
                "storing this would bring its state to {total} bytes, over the limit of {} bytes \
                 per plugin (max-total-bytes); delete keys it no longer needs",
                self.limits.max_total_bytes
            ),
        ))
    }

    /// Rewrites `plugin`'s file with `map` if its size fits the call's `budget` and the
    /// plugin's disk write budget `rate`; the bytes written.
    fn persist(
        &self,
        plugin: &str,
        map: &StateMap,
        budget: DiskBudget,
        rate: &mut StateWriteRate,
    ) -> Result<u64, KeyValueFilesError> {
        if let Some(error) = self.unreadable.get(plugin) {
            return Err(KeyValueFilesError::Unreadable {
                plugin: plugin.to_owned(),
                error: error.clone(),
            });
        }
        let path = plugin_path(&self.dir, plugin);
        let encoded: BTreeMap<&str, String> = map
            .iter()
            .map(|(key, value)| (key.as_str(), hex::encode(value)))
            .collect();
        let bytes = durable_file::encode_json(&path, &encoded)?;
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if !budget.allows(size) {
            return Err(over_disk_budget(plugin, size, budget));
        }
        let now = (self.clock)();
        if let Err(OverBudget { retry_in }) = rate.check(now) {
            self.refused_over_budget(plugin, rate, now);
            return Err(KeyValueFilesError::OverWriteBudget {
                plugin: plugin.to_owned(),
                retry_in,
            });
        }
        let written = durable_file::create_private_dir(&self.dir)
            .and_then(|()| (self.write_file)(&path, &bytes));
        if let Err(error) = written {
            self.write_failed(plugin, &error);
            return Err(error.into());
        }
        rate.charge(size, now);
        self.write_landed(plugin, size);
        Ok(size)
    }

    /// Counts a write refused over `plugin`'s disk write budget, and says so at most once a
    /// minute per plugin.
    fn refused_over_budget(&self, plugin: &str, rate: &mut StateWriteRate, now: Instant) {
        self.health.update_plugin_state(|health| {
            *health
                .refused_over_budget
                .entry(plugin.to_owned())
                .or_default() += 1;
        });
        if let Some(refused) = rate.summary_due(now) {
            tracing::warn!(
                plugin,
                refused = refused.count,
                over_ms = forewarn_imds::millis(refused.over),
                writes_per_minute = STATE_WRITES_PER_MINUTE,
                bytes_per_minute = STATE_WRITE_BYTES_PER_MINUTE,
                "{}",
                log_messages::PLUGIN_STATE_OVER_BUDGET
            );
        }
    }

    /// A write failed on the disk: the streak begins (logged once) or goes on.
    fn write_failed(&self, plugin: &str, error: &DurableFileError) {
        let mut first = false;
        self.health.update_plugin_state(|health| {
            first = health.writable;
            health.writable = false;
            health.write_failures += 1;
            health.last_error = Some(error.to_string());
            if first {
                health.not_writable_since = Some(SystemTime::now());
            }
        });
        if first {
            tracing::error!(plugin, %error, "{}", log_messages::PLUGIN_STATE_NOT_WRITABLE);
        }
    }

    /// A write reached the disk: a streak of failures, if any, is over (logged once).
    fn write_landed(&self, plugin: &str, size: u64) {
        let mut failures = None;
        self.health.update_plugin_state(|health| {
            if !health.writable {
                failures = Some(health.write_failures);
            }
            health.writable = true;
            health.not_writable_since = None;
            health.last_error = None;
            // The file and its directory.
            health.syncs += 2;
            health.bytes += size;
        });
        if let Some(failed_writes) = failures {
            tracing::warn!(
                plugin,
                failed_writes,
                "{}",
                log_messages::PLUGIN_STATE_WRITABLE_AGAIN
            );
        }
    }
}

/// `duration` rounded up to whole milliseconds, for messages.
fn whole_millis(duration: Duration) -> Duration {
    let millis = duration.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// A write refused because its call has written too much already: each write rewrites
/// the plugin's whole state file.
fn over_disk_budget(plugin: &str, size: u64, budget: DiskBudget) -> KeyValueFilesError {
    over_quota(
        plugin,
        format!(
            "this write would rewrite its state file of {size} bytes, and this call may write \
             only {} more of its {STATE_DISK_BYTES_PER_CALL} bytes of state per call (each \
             state-set or state-delete rewrites the whole file); write fewer times per call \
             (keep related values under one key, write once at the end of the call), or keep \
             less state",
            budget.remaining
        ),
    )
}

/// Checks that `name` is safe as a file name (see [`name_problem`]).
pub(crate) fn validate_plugin_name(name: &str) -> Result<(), KeyValueFilesError> {
    match name_problem(name) {
        None => Ok(()),
        Some(problem) => Err(KeyValueFilesError::InvalidPluginName {
            name: name.to_owned(),
            problem,
        }),
    }
}

/// Locks `mutex`. A panic while one of the store's locks is held cannot leave what it
/// guards inconsistent (a snapshot is replaced whole, and only once it is on disk), so a
/// poisoned lock is used as is.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn over_quota(plugin: &str, detail: String) -> KeyValueFilesError {
    KeyValueFilesError::OverQuota {
        plugin: plugin.to_owned(),
        detail,
    }
}

fn total_bytes(map: &StateMap) -> usize {
    map.iter().map(|(key, value)| key.len() + value.len()).sum()
}

fn plugin_path(dir: &Path, plugin: &str) -> PathBuf {
    dir.join(format!("{plugin}.json"))
}

/// The plugin names that have a `<plugin>.json` file in `dir` (none when it cannot be
/// listed: said in the log).
fn plugin_files_in(dir: &Path) -> Vec<String> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            if error.kind() != std::io::ErrorKind::NotFound {
                let error = journal_io("list the directory", dir, error);
                tracing::error!(%error, "cannot list the plugin state directory: plugins start with empty state");
            }
            return Vec::new();
        }
    };
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(plugin) = file_name.to_str().and_then(|n| n.strip_suffix(".json")) else {
            continue;
        };
        if validate_plugin_name(plugin).is_ok() {
            names.push(plugin.to_owned());
        }
    }
    names.sort();
    names
}

/// Loads one plugin's map after removing a stale `.tmp`; quarantines an unreadable file.
fn load_plugin(dir: &Path, plugin: &str) -> Result<StateMap, KeyValueFilesError> {
    let path = plugin_path(dir, plugin);
    if let Err(error) = durable_file::remove_stale_tmp(&path) {
        // A read-only directory keeps it; the next write replaces it.
        tracing::warn!(%error, "cannot remove a plugin state file a crash left");
    }
    let bytes = match durable_file::read_if_exists(&path) {
        Ok(bytes) => bytes,
        // Could not be read (not: could not be trusted): the file is kept as it is.
        Err(DurableFileError::Untrusted(forewarn_platform::trust::TrustError::Io {
            source,
            ..
        })) => {
            return Err(journal_io("read", &path, source));
        }
        Err(error) => return Err(error.into()),
    };
    let Some(bytes) = bytes else {
        return Ok(StateMap::new());
    };
    match decode_map(&bytes) {
        Some(map) => Ok(map),
        None => Err(KeyValueFilesError::Quarantined {
            plugin: plugin.to_owned(),
            quarantined: durable_file::quarantine(&path)?,
        }),
    }
}

fn decode_map(bytes: &[u8]) -> Option<StateMap> {
    let encoded: BTreeMap<String, String> = serde_json::from_slice(bytes).ok()?;
    encoded
        .into_iter()
        .map(|(key, value)| Some((key, hex::decode(value).ok()?)))
        .collect()
}

fn journal_io(action: &'static str, path: &Path, error: std::io::Error) -> KeyValueFilesError {
    KeyValueFilesError::Storage(DurableFileError::Io {
        action,
        path: path.to_path_buf(),
        error,
    })
}

#[cfg(test)]
mod tests;

//! The plugin directory's change notifications (notify: inotify on Linux), turned into
//! [`Signal`]s for the reloader, and the listing of the plugin files in the directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind, RenameMode};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::options::ReloadError;
use crate::plugins::set::{self as plugins};

/// What a watcher notification means for the reloader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Signal {
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
pub(super) struct DirWatcher {
    watcher: RecommendedWatcher,
    dir: PathBuf,
    /// Whether `dir` itself is watched now (false after it was deleted or moved away).
    watching_dir: bool,
}

impl DirWatcher {
    pub(super) fn new(
        dir: &Path,
        signals: mpsc::UnboundedSender<Signal>,
    ) -> Result<DirWatcher, ReloadError> {
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

/// What the reloader needs of the directory's watcher besides its signals (which come on a
/// channel): whether the directory is watched now, and watching it afresh. [`DirWatcher`] in
/// the daemon; a stand-in in the tests.
pub(super) trait WatchedDir: Send + 'static {
    /// Whether the directory itself is watched now (false after it was deleted or moved).
    fn is_watched(&self) -> bool;
    /// Watches the directory again (a new inode after it was recreated); false if it is not
    /// there now.
    fn rewatch(&mut self) -> bool;
}

impl WatchedDir for DirWatcher {
    fn is_watched(&self) -> bool {
        self.watching_dir
    }

    fn rewatch(&mut self) -> bool {
        self.rewatch_dir()
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
pub(super) fn list_stems(dir: &Path) -> std::io::Result<BTreeSet<String>> {
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
}

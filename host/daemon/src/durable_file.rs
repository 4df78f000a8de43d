//! A durable file: one serde value kept as JSON in `DIR/NAME.json`, replaced crash-safely
//! (write a temporary file, fsync, rename, fsync the directory) on every commit.
//!
//! [`write_atomically`] is the crash-safe write itself; the per-plugin state store uses it too.
//! After a crash, a reader sees either the previous file or the new one, never a mix.

use std::fs;
use std::io::{self, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use forewarn_platform::trust::{self, FileRules, Owners, TrustError};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::storage_health::{SpaceCause, SpaceProblem};

/// A durable-state file could not be read, written or moved.
#[derive(Debug, thiserror::Error)]
pub enum DurableFileError {
    /// A filesystem operation failed.
    #[error("could not {action} {}: {error}; {}", path.display(), fix_for(error))]
    Io {
        /// What forewarn was doing, as a verb phrase ("write", "create the directory", …).
        action: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// What the operating system answered.
        error: io::Error,
    },
    /// A file or directory another user could have written, or a link (never followed).
    #[error(transparent)]
    Untrusted(#[from] TrustError),
    /// The value could not be turned into JSON (a bug in the value's type, not the disk).
    #[error("could not encode the state for {}: {error}", path.display())]
    Encode {
        /// The file the value was to be written to (left unchanged).
        path: PathBuf,
        /// What serde_json refused.
        error: serde_json::Error,
    },
}

impl DurableFileError {
    /// An I/O error of `action` on `path`.
    pub(crate) fn io(action: &'static str, path: &Path, error: io::Error) -> Self {
        DurableFileError::Io {
            action,
            path: path.to_path_buf(),
            error,
        }
    }

    /// Why a write to the state directory failed, in a word (`Other` for what is not the
    /// filesystem's answer), with this error as the details.
    pub(crate) fn space_problem(&self) -> SpaceProblem {
        let cause = match self {
            DurableFileError::Io { error, .. } => SpaceCause::of(error),
            DurableFileError::Untrusted(_) | DurableFileError::Encode { .. } => SpaceCause::Other,
        };
        SpaceProblem {
            cause,
            detail: self.to_string(),
        }
    }
}

/// The advice printed after an I/O error, by its kind.
fn fix_for(error: &io::Error) -> &'static str {
    if forewarn_platform::file_access::is_device_error(error) {
        return "the disk reports an I/O error: check the system log (`dmesg` on Linux, the \
                System event log on Windows) and the disk holding the state directory";
    }
    match error.kind() {
        io::ErrorKind::PermissionDenied => {
            "check that the user forewarn runs as owns the state directory and may write to it \
             (an immutable file or directory is refused the same way: `lsattr`, `chattr -i`), \
             or point forewarn at another state directory"
        }
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            "the disk is full: free some space on the filesystem holding the state directory"
        }
        io::ErrorKind::ReadOnlyFilesystem => {
            "the filesystem is read-only: remount it read-write, or point forewarn at a state \
             directory on a writable one"
        }
        io::ErrorKind::NotADirectory | io::ErrorKind::IsADirectory => {
            "something else is in the way at that path: move it, or point forewarn at another \
             state directory"
        }
        _ => "check the state directory's filesystem and permissions",
    }
}

/// What [`DurableFile::open`] found.
#[derive(Debug)]
pub struct OpenOutcome<T> {
    /// The value last committed, or None when there was none (or it was unreadable).
    pub value: Option<T>,
    /// Where an unreadable file was moved to. When Some, the caller should log it loudly:
    /// the daemon starts without the state that file held.
    pub quarantined: Option<PathBuf>,
}

/// One value of type `T`, stored durably as `DIR/NAME.json`.
#[derive(Debug)]
pub struct DurableFile<T> {
    dir: PathBuf,
    path: PathBuf,
    value_type: PhantomData<fn(&T)>,
}

impl<T: Serialize + DeserializeOwned> DurableFile<T> {
    /// Opens (creating `dir` with mode 0700 if needed) the journal `dir/name.json` and loads
    /// the value last committed. A leftover `name.json.tmp` from a crash mid-write is
    /// removed. A file that cannot be parsed is moved aside to
    /// `name.json.corrupt-<unix-secs>` and reported in [`OpenOutcome::quarantined`], so the
    /// daemon keeps protecting the VM instead of refusing to start.
    pub fn open(
        dir: &Path,
        name: &str,
    ) -> Result<(DurableFile<T>, OpenOutcome<T>), DurableFileError> {
        create_private_dir(dir)?;
        let path = dir.join(format!("{name}.json"));
        remove_stale_tmp(&path)?;
        let file = DurableFile {
            dir: dir.to_path_buf(),
            path,
            value_type: PhantomData,
        };
        let outcome = file.load()?;
        Ok((file, outcome))
    }

    /// Replaces the stored value with `value`; when this returns Ok, the value survives a
    /// crash or power loss.
    pub fn commit(&mut self, value: &T) -> Result<(), DurableFileError> {
        let bytes = encode_json(&self.path, value)?;
        write_atomically(&self.path, &bytes)
    }

    /// The file the value lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory holding the file.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn load(&self) -> Result<OpenOutcome<T>, DurableFileError> {
        let Some(bytes) = read_if_exists(&self.path)? else {
            return Ok(OpenOutcome {
                value: None,
                quarantined: None,
            });
        };
        match serde_json::from_slice(&bytes) {
            Ok(value) => Ok(OpenOutcome {
                value: Some(value),
                quarantined: None,
            }),
            Err(_) => Ok(OpenOutcome {
                value: None,
                quarantined: Some(quarantine(&self.path)?),
            }),
        }
    }
}

/// Serializes `value` as pretty JSON (people read these files when something went wrong).
pub(crate) fn encode_json<V: Serialize>(
    path: &Path,
    value: &V,
) -> Result<Vec<u8>, DurableFileError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|error| DurableFileError::Encode {
        path: path.to_path_buf(),
        error,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Replaces `path` with `bytes` crash-safely: writes `path.tmp` (mode 0600), fsyncs it,
/// renames it over `path`, and fsyncs the directory. Readers see the old or the new
/// content, never a partial file. Callers must not write the same `path` concurrently.
/// A write that fails removes its partial temporary file, so a full disk is not left fuller.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), DurableFileError> {
    let tmp = tmp_path(path);
    let staged = write_synced(&tmp, bytes).and_then(|()| {
        fs::rename(&tmp, path)
            .map_err(|error| DurableFileError::io("rename into place", &tmp, error))
    });
    if let Err(error) = staged {
        // Best effort: on a read-only or immutable directory it cannot be removed either.
        let _ignored = fs::remove_file(&tmp);
        return Err(error);
    }
    sync_parent_dir(path)
}

/// `path` with `.tmp` appended: where [`write_atomically`] stages its content.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// Removes a `.tmp` left by a crash mid-write; the real file still holds the last commit.
pub(crate) fn remove_stale_tmp(path: &Path) -> Result<(), DurableFileError> {
    let tmp = tmp_path(path);
    match fs::remove_file(&tmp) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(DurableFileError::io("remove the leftover", &tmp, error)),
    }
}

/// Reads `path`, or None when it does not exist.
pub(crate) fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, DurableFileError> {
    let rules = FileRules {
        owners: Owners::DaemonOnly,
        max_bytes: DURABLE_FILE_MAX_BYTES,
        max_setting: "(none: move the file away)",
    };
    match trust::read_trusted_file(path, rules) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(TrustError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(DurableFileError::Untrusted(error)),
    }
}

/// Largest journal or state file read (a plugin's state is at most 1 MiB, hex-encoded).
pub(crate) const DURABLE_FILE_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// Moves an unreadable file to `path.corrupt-<unix-secs>` (with `-N` appended if that
/// exists already) and returns where it went.
pub(crate) fn quarantine(path: &Path) -> Result<PathBuf, DurableFileError> {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let base = format!("{}.corrupt-{secs}", path.display());
    let mut target = PathBuf::from(&base);
    let mut counter = 1;
    while target.exists() {
        target = PathBuf::from(format!("{base}-{counter}"));
        counter += 1;
    }
    fs::rename(path, &target)
        .map_err(|error| DurableFileError::io("move aside the unreadable", path, error))?;
    sync_parent_dir(path)?;
    Ok(target)
}

/// Creates `dir` and its parents with mode 0700, then refuses it if another user owns it
/// or its group or others may write it.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), DurableFileError> {
    trust::ensure_private_dir(dir).map_err(|error| match error {
        TrustError::Io { source, .. } => DurableFileError::io("create the directory", dir, source),
        untrusted => DurableFileError::Untrusted(untrusted),
    })
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), DurableFileError> {
    // Mode 0600, and O_NOFOLLOW: a link planted at the temporary name is not followed.
    let mut file = trust::create_options()
        .open(path)
        .map_err(|error| DurableFileError::io("create", path, error))?;
    file.write_all(bytes)
        .map_err(|error| DurableFileError::io("write", path, error))?;
    file.sync_all()
        .map_err(|error| DurableFileError::io("flush to disk", path, error))
}

/// Makes a rename or removal in `path`'s directory durable (`file_access::sync_dir`:
/// nothing to do on Windows).
pub(crate) fn sync_parent_dir(path: &Path) -> Result<(), DurableFileError> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    forewarn_platform::file_access::sync_dir(dir)
        .map_err(|error| DurableFileError::io("flush to disk the directory", dir, error))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::thread;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct State {
        counter: u64,
        note: String,
    }

    fn state(counter: u64) -> State {
        State {
            counter,
            note: "x".repeat(4096),
        }
    }

    fn open(dir: &Path) -> (DurableFile<State>, OpenOutcome<State>) {
        DurableFile::open(dir, "state").expect("opens")
    }

    #[test]
    fn round_trip_survives_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut journal, outcome) = open(dir.path());
        assert_eq!(outcome.value, None);
        assert_eq!(outcome.quarantined, None);
        journal.commit(&state(1)).expect("commits");
        journal.commit(&state(2)).expect("commits");
        let (_, reopened) = open(dir.path());
        assert_eq!(reopened.value, Some(state(2)));
        assert_eq!(journal.path(), dir.path().join("state.json"));
    }

    // not on Windows: checks Unix modes 0700 and 0600; a Windows private directory is an ACL (forewarn-platform's tests)
    #[cfg(unix)]
    #[test]
    fn creates_missing_dir_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let nested = dir.path().join("a/b");
        let (mut journal, _) = open(&nested);
        journal.commit(&state(1)).expect("commits");
        let mode = fs::metadata(&nested).expect("exists").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let file_mode = fs::metadata(journal.path())
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(file_mode & 0o777, 0o600);
    }

    // not on Windows: makes the link with std::os::unix::fs::symlink; a Windows symbolic link needs a privilege test accounts lack
    #[cfg(unix)]
    #[test]
    fn a_symlinked_journal_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let elsewhere = dir.path().join("elsewhere.json");
        fs::write(&elsewhere, b"{\"counter\": 1}").expect("writes");
        let journal_dir = dir.path().join("journal");
        create_private_dir(&journal_dir).expect("creates");
        let path = journal_dir.join("state.json");
        std::os::unix::fs::symlink(&elsewhere, &path).expect("links");
        let Err(error) = DurableFile::<State>::open(&journal_dir, "state") else {
            panic!("a symlinked journal was opened");
        };
        let text = error.to_string();
        assert!(text.contains("symbolic link"), "{text}");
        assert!(text.contains(&path.display().to_string()), "{text}");
    }

    // not on Windows: sets a Unix group-write bit; Wine models only the Everyone entry of a DACL (docs/windows.md)
    #[cfg(unix)]
    #[test]
    fn a_group_writable_journal_dir_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o770)).expect("chmod");
        let Err(error) = DurableFile::<State>::open(dir.path(), "state") else {
            panic!("a group-writable journal directory was accepted");
        };
        let text = error.to_string();
        assert!(text.contains("chmod 700"), "{text}");
    }

    #[test]
    fn crash_between_write_and_rename_keeps_old_value() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut journal, _) = open(dir.path());
        journal.commit(&state(1)).expect("commits");
        // A crash after the new content was written (even completely) but before rename.
        let tmp = dir.path().join("state.json.tmp");
        fs::write(&tmp, encode_json(&tmp, &state(2)).expect("encodes")).expect("writes tmp");
        let (_, reopened) = open(dir.path());
        assert_eq!(reopened.value, Some(state(1)));
        assert!(!tmp.exists(), "the stale tmp is removed");
    }

    #[test]
    fn half_written_stale_tmp_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut journal, _) = open(dir.path());
        journal.commit(&state(7)).expect("commits");
        fs::write(dir.path().join("state.json.tmp"), b"{\"counter\": 8, \"no").expect("writes");
        let (mut journal, reopened) = open(dir.path());
        assert_eq!(reopened.value, Some(state(7)));
        assert_eq!(reopened.quarantined, None);
        journal.commit(&state(9)).expect("commits after recovery");
        assert_eq!(open(dir.path()).1.value, Some(state(9)));
    }

    #[test]
    fn corrupt_file_is_quarantined_not_lost() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        fs::write(&path, b"{ not json").expect("writes");
        let (mut journal, outcome) = open(dir.path());
        assert_eq!(outcome.value, None);
        let moved = outcome.quarantined.expect("quarantined");
        let name = moved
            .file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with("state.json.corrupt-"), "{name}");
        assert_eq!(fs::read(&moved).expect("kept"), b"{ not json");
        assert!(!path.exists());
        journal.commit(&state(1)).expect("commits");
        assert_eq!(open(dir.path()).1.value, Some(state(1)));
    }

    #[test]
    fn second_corruption_in_the_same_second_keeps_both() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.json");
        fs::write(&path, b"first").expect("writes");
        let first = open(dir.path()).1.quarantined.expect("quarantined");
        fs::write(&path, b"second").expect("writes");
        let second = open(dir.path()).1.quarantined.expect("quarantined");
        assert_ne!(first, second);
        assert_eq!(fs::read(&first).expect("kept"), b"first");
        assert_eq!(fs::read(&second).expect("kept"), b"second");
    }

    #[test]
    fn wrong_shape_is_quarantined_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("state.json"), b"{\"counter\": \"ten\"}").expect("writes");
        assert!(open(dir.path()).1.quarantined.is_some());
    }

    #[cfg_attr(
        windows,
        ignore = "Wine cannot rename over a file another handle holds open (Windows can, with FILE_SHARE_DELETE): run by the Linux suite"
    )]
    #[test]
    fn readers_never_see_a_partial_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut journal, _) = open(dir.path());
        journal.commit(&state(0)).expect("commits");
        let path = journal.path().to_path_buf();
        let done = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicUsize::new(0));
        let reader = {
            let (done, reads) = (Arc::clone(&done), Arc::clone(&reads));
            thread::spawn(move || {
                let mut last = 0;
                while !done.load(Ordering::Acquire) {
                    let bytes = fs::read(&path).expect("the file is always there");
                    let read: State = serde_json::from_slice(&bytes).expect("always whole");
                    assert!(
                        read.counter >= last,
                        "went back from {last} to {}",
                        read.counter
                    );
                    last = read.counter;
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        for counter in 1..=500 {
            journal.commit(&state(counter)).expect("commits");
        }
        done.store(true, Ordering::Release);
        reader.join().expect("reader saw only whole files");
        assert!(reads.load(Ordering::Relaxed) > 0);
        assert_eq!(open(dir.path()).1.value, Some(state(500)));
    }

    #[cfg_attr(
        windows,
        ignore = "Windows answers Access denied where this test expects the Linux error: run by the Linux suite"
    )]
    #[test]
    fn error_names_path_cause_and_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut journal, _) = open(dir.path());
        // A directory where the tmp file goes fails even for root, unlike permissions.
        fs::create_dir(dir.path().join("state.json.tmp")).expect("mkdir");
        let message = journal
            .commit(&state(1))
            .expect_err("cannot write")
            .to_string();
        assert!(message.contains("state.json.tmp"), "{message}");
        assert!(message.contains("os error"), "{message}");
        assert!(
            message.contains("something else is in the way"),
            "{message}"
        );
    }

    // not on Windows: os error 13 is Linux's EACCES (Windows' 13 is ERROR_INVALID_DATA)
    #[cfg(unix)]
    #[test]
    fn fix_advice_covers_permissions() {
        let error = DurableFileError::io(
            "create",
            Path::new("/var/lib/forewarn/state.json.tmp"),
            io::Error::from_raw_os_error(13),
        );
        let message = error.to_string();
        assert!(
            message.contains("Permission denied (os error 13)"),
            "{message}"
        );
        assert!(message.contains("may write to it"), "{message}");
    }

    #[test]
    fn fix_advice_covers_disk_full() {
        let error = DurableFileError::io(
            "write",
            Path::new("/var/lib/forewarn/state.json.tmp"),
            io::Error::from(io::ErrorKind::StorageFull),
        );
        let message = error.to_string();
        assert!(
            message.contains("/var/lib/forewarn/state.json.tmp"),
            "{message}"
        );
        assert!(message.contains("disk is full"), "{message}");
    }
}

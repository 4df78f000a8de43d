//! Who may change a file the daemon trusts (a plugin, its manifest, the state journal, the
//! compile cache): its owner, and who besides may write it. On Unix, the owner's uid and the
//! group and other write bits; on Windows, the owner's SID and the allow entries of the
//! DACL. Also: private directories, and opening files without following links.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::Path;

// not on Windows: the Unix implementation (owner uid, mode bits) and its tests; file_access/windows.rs is Windows' (its DACL tests run under Wine)
#[cfg(unix)]
#[path = "file_access/unix.rs"]
mod imp;
#[cfg(windows)]
#[path = "file_access/windows.rs"]
mod imp;

/// Whose files are trusted besides the daemon's own account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owners {
    /// Only the daemon's account: its state and cache.
    DaemonOnly,
    /// The daemon's account or the administrators (root on Unix; SYSTEM or the
    /// Administrators group on Windows): configuration an administrator installs.
    DaemonOrRoot,
}

/// Why a path's owner or writers are not trusted, in words ready for a message: "PATH is
/// owned by {owner}, not by {expected}", "PATH is writable by {who} ({how})", and the
/// command that fixes it.
#[derive(Debug)]
pub enum Distrust {
    /// The path belongs to someone else.
    Owner {
        /// Who owns it: "uid 1001", "S-1-5-21-…-1001 (VM\\alice)".
        owner: String,
        /// Who should: "the daemon's user (uid 0) or root".
        expected: String,
        /// The command that fixes it.
        fix: String,
    },
    /// Someone besides the trusted accounts may write it.
    Writable {
        /// Who may write it: "everyone", "its group", "Everyone (S-1-1-0)".
        who: String,
        /// How: "mode 0777", "its access control list allows it".
        how: String,
        /// The command that fixes it.
        fix: String,
    },
    /// Its owner or permissions could not be read.
    Unreadable(io::Error),
}

/// Checks who owns `path` (with `metadata`, or the open `file` where the platform reads
/// the owner from the handle) and who else may write it.
pub fn check(
    path: &Path,
    metadata: &Metadata,
    file: Option<&File>,
    owners: Owners,
) -> Result<(), Distrust> {
    imp::check(path, metadata, file, owners)
}

/// What `metadata` describes, in words: "directory", "symbolic link", "FIFO (named pipe)",
/// "socket", "device" or "file".
pub fn kind_of(metadata: &Metadata) -> &'static str {
    imp::kind_of(metadata)
}

/// Creates `dir` and its missing parents so that only the daemon's account (and, on
/// Windows, SYSTEM and the administrators) may use them: mode 0700 on Unix; a protected
/// DACL on the first directory created on Windows, which the others inherit.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    imp::create_private_dir(dir)
}

/// Creates `dir` and its missing parents readable by everyone, writable by its owner (mode
/// 0755 on Unix; the parent's inherited DACL on Windows): what an administrator's plugin
/// directory holds.
pub fn create_shared_dir(dir: &Path) -> io::Result<()> {
    imp::create_shared_dir(dir)
}

/// Options that open an existing file for reading without following a link (Unix:
/// `O_NOFOLLOW | O_NONBLOCK`, so a FIFO does not block; Windows: the reparse point itself).
/// Check the opened file's metadata: a link or special file is then seen as such.
pub fn read_options() -> OpenOptions {
    imp::read_options()
}

/// Options that create (or truncate) a file for writing, private to the daemon's account
/// (mode 0600 on Unix; the private directory's inherited DACL on Windows), never through a
/// symbolic link.
pub fn create_options() -> OpenOptions {
    let mut options = imp::no_follow_write_options();
    options.write(true).create(true).truncate(true);
    options
}

/// Options that open a file for appending (created private when missing), never through
/// a symbolic link.
pub fn append_options() -> OpenOptions {
    let mut options = imp::no_follow_write_options();
    options.create(true).append(true);
    options
}

/// Options that open a file for writing at chosen offsets (created private when missing,
/// never truncated), never through a symbolic link.
pub fn write_options() -> OpenOptions {
    let mut options = imp::no_follow_write_options();
    options.create(true).write(true);
    options
}

/// Options that create a new file (failing when it exists) readable by everyone (mode 0644
/// on Unix; the directory's inherited DACL on Windows), never through a symbolic link.
pub fn create_new_shared_options() -> OpenOptions {
    let mut options = imp::create_new_shared_options();
    options.write(true).create_new(true);
    options
}

/// Writes all of `bytes` at `offset` of `file`, whatever its cursor (`pwrite` on Unix; an
/// overlapped-offset `WriteFile` on Windows, which also moves the cursor: use one or the
/// other on a file, not both).
pub fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    imp::write_all_at(file, bytes, offset)
}

/// An exclusive hold on a directory, given up when dropped: `flock` on the directory itself
/// on Unix; on Windows the directory opened with no sharing of writes. Ok(None) when
/// another process holds it.
pub fn try_lock_dir(dir: &Path) -> io::Result<Option<DirLock>> {
    imp::try_lock_dir(dir).map(|held| held.map(|file| DirLock { _file: file }))
}

/// Flushes `dir`'s entries (a file just created or renamed in it) to disk: `fsync` of the
/// directory on Unix; nothing on Windows, where NTFS journals the rename itself and a
/// directory cannot be opened for flushing.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    imp::sync_dir(dir)
}

/// Lets everyone run `path` (mode 0755 on Unix: a script written out by `plugin new`);
/// nothing on Windows, where a file runs by its extension.
pub fn make_executable(path: &Path) -> io::Result<()> {
    imp::make_executable(path)
}

/// Whether `error` is the disk itself failing (EIO on Unix; a device I/O or CRC error on
/// Windows), not a permission, space or naming problem.
pub fn is_device_error(error: &io::Error) -> bool {
    imp::is_device_error(error)
}

/// Held by [`try_lock_dir`]; the hold ends when this is dropped.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_directory_is_held_by_one_holder_at_a_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = try_lock_dir(dir.path()).expect("opens");
        assert!(first.is_some(), "the first hold is taken");
        assert!(
            try_lock_dir(dir.path()).expect("opens").is_none(),
            "a second hold waits for the first"
        );
        // Files are still created in a held directory (the daemon's watcher, the install).
        std::fs::write(dir.path().join("p.wasm"), b"x").expect("writes inside");
        drop(first);
        assert!(try_lock_dir(dir.path()).expect("opens").is_some());
    }

    #[test]
    fn writes_at_an_offset_land_there_whatever_the_cursor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal.log");
        let file = write_options().open(&path).expect("creates");
        write_all_at(&file, b"first line\n", 0).expect("writes");
        write_all_at(&file, b"second\n", 11).expect("writes");
        write_all_at(&file, b"SECOND", 11).expect("overwrites");
        drop(file);
        let reopened = write_options()
            .open(&path)
            .expect("opens again, not truncated");
        drop(reopened);
        let mut text = String::new();
        File::open(&path)
            .and_then(|mut file| file.read_to_string(&mut text))
            .expect("reads");
        assert_eq!(text, "first line\nSECOND\n");
    }
}

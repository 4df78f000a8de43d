//! Owner and mode bits.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::{Distrust, Owners};

/// The daemon's effective user id.
fn daemon_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

pub(super) fn check(
    path: &Path,
    metadata: &Metadata,
    _file: Option<&File>,
    owners: Owners,
) -> Result<(), Distrust> {
    let expected = daemon_uid();
    let owner = metadata.uid();
    let root_allowed = owners == Owners::DaemonOrRoot;
    if owner != expected && !(root_allowed && owner == 0) {
        let root = if root_allowed { " or root" } else { "" };
        return Err(Distrust::Owner {
            owner: format!("uid {owner}"),
            expected: format!("the daemon's user (uid {expected}){root}"),
            fix: format!("chown {expected} {}", path.display()),
        });
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o022 == 0 {
        return Ok(());
    }
    let who = if mode & 0o002 != 0 {
        "everyone"
    } else {
        "its group"
    };
    let fix = if metadata.is_dir() { "700" } else { "go-w" };
    Err(Distrust::Writable {
        who: who.to_owned(),
        how: format!("mode {mode:04o}"),
        fix: format!("chmod {fix} {}", path.display()),
    })
}

pub(super) fn kind_of(metadata: &Metadata) -> &'static str {
    let file_type = metadata.file_type();
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_symlink() {
        "symbolic link"
    } else if file_type.is_fifo() {
        "FIFO (named pipe)"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_char_device() || file_type.is_block_device() {
        "device"
    } else {
        "file"
    }
}

pub(super) fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

pub(super) fn read_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    options
}

pub(super) fn no_follow_write_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

pub(super) fn create_shared_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
}

pub(super) fn create_new_shared_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

pub(super) fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

pub(super) fn try_lock_dir(dir: &Path) -> io::Result<Option<File>> {
    use std::os::fd::AsRawFd;
    let file = File::open(dir)?;
    // SAFETY: flock on a descriptor this function owns and keeps open for the call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(Some(file));
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(None),
        _ => Err(error),
    }
}

pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

pub(super) fn make_executable(path: &Path) -> io::Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
}

pub(super) fn is_device_error(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_private_dir_is_trusted_and_a_world_writable_one_is_not() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("state").join("cache");
        create_private_dir(&dir).unwrap();
        let metadata = fs::metadata(&dir).unwrap();
        assert!(check(&dir, &metadata, None, Owners::DaemonOnly).is_ok());
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let metadata = fs::metadata(&dir).unwrap();
        match check(&dir, &metadata, None, Owners::DaemonOnly) {
            Err(Distrust::Writable { who, how, fix }) => {
                assert_eq!((who.as_str(), how.as_str()), ("everyone", "mode 0777"));
                assert_eq!(fix, format!("chmod 700 {}", dir.display()));
            }
            other => panic!("{other:?}"),
        }
    }
}

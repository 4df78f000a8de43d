//! Who may write the files the daemon trusts: directories and files must belong to the
//! daemon's account (or an administrator) and be writable by no one else; links and special
//! files are refused. The owner and writer checks are the platform's
//! ([`crate::file_access`]: owner and mode bits on Unix, owner and DACL on
//! Windows); the rules and the messages are the same everywhere.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

pub use crate::file_access::Owners;
use crate::file_access::{self, Distrust};

/// Why a path is not trusted. Every message names the path and the command that fixes it.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The path belongs to another account.
    #[error(
        "{} is owned by {owner}, not by {expected}: whoever owns it controls what the daemon \
         runs. Fix: `{fix}`",
        path.display()
    )]
    Owner {
        /// The path checked.
        path: PathBuf,
        /// Who owns it ("uid 1001"; on Windows the account and its SID).
        owner: String,
        /// Who should ("the daemon's user (uid 0) or root").
        expected: String,
        /// The command that fixes it (`chown …`, `icacls … /setowner …`).
        fix: String,
    },
    /// Someone besides the owner may write the path.
    #[error(
        "{} is writable by {who} ({how}): anyone there could change what the daemon runs. \
         Fix: `{fix}`",
        path.display()
    )]
    Writable {
        /// The path checked.
        path: PathBuf,
        /// Who may write it: "its group", "everyone", "Everyone (S-1-1-0)", ...
        who: String,
        /// How: "mode 0777", "its access control list allows it".
        how: String,
        /// The command that fixes it (`chmod …`, `icacls …`).
        fix: String,
    },
    /// The path is a symbolic link.
    #[error(
        "{} is a symbolic link; forewarn does not follow links here. Fix: replace the link \
         with the {kind} itself",
        path.display()
    )]
    Symlink {
        /// The path checked.
        path: PathBuf,
        /// What was expected there: "file" or "directory".
        kind: &'static str,
    },
    /// The path is of another kind than expected (a directory, a socket, ...).
    #[error(
        "{} is a {found}, not a {expected}; forewarn reads only {expected}s here. Fix: remove \
         it or replace it with a {expected}",
        path.display()
    )]
    NotRegular {
        /// The path checked.
        path: PathBuf,
        /// What it is.
        found: &'static str,
        /// What it should be.
        expected: &'static str,
    },
    /// The file is larger than its limit.
    #[error(
        "{} is {size} bytes, more than the limit of {limit} bytes. Fix: use a smaller file, or \
         raise `{setting}` in the daemon config",
        path.display()
    )]
    TooLarge {
        /// The path checked.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
        /// The daemon setting that raises the limit.
        setting: &'static str,
    },
    /// Reading or creating the path failed.
    #[error("cannot {action} {}: {source} (check that it exists and the daemon may read it)", path.display())]
    Io {
        /// What was attempted: "read", "create", ...
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl TrustError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            TrustError::Owner { path, .. }
            | TrustError::Writable { path, .. }
            | TrustError::Symlink { path, .. }
            | TrustError::NotRegular { path, .. }
            | TrustError::TooLarge { path, .. }
            | TrustError::Io { path, .. } => path,
        }
    }

    fn io(action: &'static str, path: &Path, source: std::io::Error) -> TrustError {
        TrustError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Creates `dir` (and its parents) private to the daemon's account when missing (mode 0700
/// on Unix, a protected DACL on Windows), then checks it is a real directory of the
/// daemon's account that no one else may write.
pub fn ensure_private_dir(dir: &Path) -> Result<(), TrustError> {
    file_access::create_private_dir(dir)
        .map_err(|error| TrustError::io("create the directory", dir, error))?;
    check_dir(dir, Owners::DaemonOnly)
}

/// Checks that `dir` is a directory (not a link to one) owned as `owners` says, and
/// writable by no one else.
pub fn check_dir(dir: &Path, owners: Owners) -> Result<(), TrustError> {
    let metadata = fs::symlink_metadata(dir)
        .map_err(|error| TrustError::io("inspect the directory", dir, error))?;
    if metadata.file_type().is_symlink() {
        return Err(TrustError::Symlink {
            path: dir.to_path_buf(),
            kind: "directory",
        });
    }
    if !metadata.is_dir() {
        return Err(TrustError::NotRegular {
            path: dir.to_path_buf(),
            found: kind_of(&metadata),
            expected: "directory",
        });
    }
    check_owner_and_writers(dir, &metadata, None, owners)
}

/// Checks who owns `path` and who besides may write it (the open `file`, if any, is where
/// the platform reads them from).
fn check_owner_and_writers(
    path: &Path,
    metadata: &fs::Metadata,
    file: Option<&File>,
    owners: Owners,
) -> Result<(), TrustError> {
    let path_buf = || path.to_path_buf();
    match file_access::check(path, metadata, file, owners) {
        Ok(()) => Ok(()),
        Err(Distrust::Owner {
            owner,
            expected,
            fix,
        }) => Err(TrustError::Owner {
            path: path_buf(),
            owner,
            expected,
            fix,
        }),
        Err(Distrust::Writable { who, how, fix }) => Err(TrustError::Writable {
            path: path_buf(),
            who,
            how,
            fix,
        }),
        Err(Distrust::Unreadable(error)) => Err(TrustError::io(
            "read the owner and permissions of",
            path,
            error,
        )),
    }
}

fn kind_of(metadata: &fs::Metadata) -> &'static str {
    file_access::kind_of(metadata)
}

/// What [`read_trusted_file`] may accept.
#[derive(Debug, Clone, Copy)]
pub struct FileRules {
    /// Who may own the file.
    pub owners: Owners,
    /// Largest size accepted, in bytes.
    pub max_bytes: u64,
    /// The config setting that raises `max_bytes`, named in the error.
    pub max_setting: &'static str,
}

/// Reads `path` when it is a regular file (no link, FIFO or device: opened without
/// following a link and without blocking, then checked on the open file), owned as the rules say,
/// writable by no one else, and at most `max_bytes` long (also while reading).
pub fn read_trusted_file(path: &Path, rules: FileRules) -> Result<Vec<u8>, TrustError> {
    let link =
        fs::symlink_metadata(path).map_err(|error| TrustError::io("inspect", path, error))?;
    if link.file_type().is_symlink() {
        return Err(TrustError::Symlink {
            path: path.to_path_buf(),
            kind: "file",
        });
    }
    let file = file_access::read_options()
        .open(path)
        .map_err(|error| TrustError::io("open", path, error))?;
    let metadata = file
        .metadata()
        .map_err(|error| TrustError::io("inspect", path, error))?;
    if !metadata.is_file() {
        return Err(TrustError::NotRegular {
            path: path.to_path_buf(),
            found: kind_of(&metadata),
            expected: "regular file",
        });
    }
    check_owner_and_writers(path, &metadata, Some(&file), rules.owners)?;
    read_capped(file, path, &rules, metadata.len())
}

fn read_capped(
    file: File,
    path: &Path,
    rules: &FileRules,
    size: u64,
) -> Result<Vec<u8>, TrustError> {
    let too_large = |size| TrustError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit: rules.max_bytes,
        setting: rules.max_setting,
    };
    if size > rules.max_bytes {
        return Err(too_large(size));
    }
    let mut bytes = Vec::new();
    // One byte more than allowed tells a file that grew since the check.
    file.take(rules.max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|error| TrustError::io("read", path, error))?;
    let read = bytes.len() as u64;
    if read > rules.max_bytes {
        return Err(too_large(read));
    }
    Ok(bytes)
}

/// Options that create (or truncate) a file for writing, private to the daemon's account
/// (mode 0600 on Unix), never through a symbolic link.
pub fn create_options() -> OpenOptions {
    file_access::create_options()
}

/// Options that open a file for appending (created private when missing), never through
/// a symbolic link.
pub fn append_options() -> OpenOptions {
    file_access::append_options()
}

// not on Windows: Unix mode bits, symbolic links and FIFOs; Windows' DACL checks are forewarn-platform's file_access tests, run under Wine
#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const RULES: FileRules = FileRules {
        owners: Owners::DaemonOnly,
        max_bytes: 16,
        max_setting: "limits.test",
    };

    #[test]
    fn a_group_writable_dir_is_refused_naming_path_and_fix() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o770)).unwrap();
        let error = ensure_private_dir(dir.path()).unwrap_err();
        assert!(matches!(error, TrustError::Writable { .. }), "{error}");
        let text = error.to_string();
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
        assert!(text.contains("chmod 700"), "{text}");
    }

    #[test]
    fn a_new_dir_is_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state/nested");
        ensure_private_dir(&state).unwrap();
        let mode = fs::metadata(&state).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn links_fifos_and_large_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let error = read_trusted_file(&link, RULES).unwrap_err();
        assert!(matches!(error, TrustError::Symlink { .. }), "{error}");
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let error = read_trusted_file(&fifo, RULES).unwrap_err();
        assert!(matches!(error, TrustError::NotRegular { .. }), "{error}");
        let large = dir.path().join("large");
        fs::write(&large, [0u8; 17]).unwrap();
        let error = read_trusted_file(&large, RULES).unwrap_err();
        assert!(error.to_string().contains("limits.test"), "{error}");
        let fine = dir.path().join("fine");
        fs::write(&fine, b"ok").unwrap();
        fs::set_permissions(&fine, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_trusted_file(&fine, RULES).unwrap(), b"ok");
    }

    #[test]
    fn a_world_writable_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("open.toml");
        fs::write(&path, b"x").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
        let error = read_trusted_file(&path, RULES).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("everyone") && text.contains("chmod go-w"),
            "{text}"
        );
    }

    #[test]
    fn creating_through_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_options().open(&link).is_err());
        assert_eq!(fs::read(&target).unwrap(), b"keep");
    }
}

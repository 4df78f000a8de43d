//! Space set aside for the journal's change log: blocks allocated to the file beyond its end
//! (`fallocate` with `FALLOC_FL_KEEP_SIZE`), so appends land in them even once the
//! filesystem is full. The one place that knows how a platform preallocates.

use std::fs::File;
use std::io;

/// Allocates the bytes `offset..offset + len` of `file` without changing its size. Fails
/// with `ErrorKind::Unsupported` where the platform or the filesystem cannot, and with the
/// filesystem's error (a full disk) otherwise; nothing is allocated then.
pub fn preallocate(file: &File, offset: u64, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: fallocate on a descriptor this `File` owns and keeps open for the call.
        let result =
            unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, offset, len) };
        if result == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
                Err(io::Error::from(io::ErrorKind::Unsupported))
            }
            _ => Err(error),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, offset, len);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// Where the blocks allocated to `file` end, as far as its metadata tells (its size or,
/// with space preallocated beyond it, its allocated blocks).
pub fn allocated_end(file: &File) -> io::Result<u64> {
    let metadata = file.metadata()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Ok(metadata.len().max(metadata.blocks().saturating_mul(512)))
    }
    #[cfg(not(unix))]
    Ok(metadata.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preallocated_space_keeps_the_size_and_counts_as_allocated() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = File::create(dir.path().join("log")).expect("creates");
        match preallocate(&file, 0, 256 * 1024) {
            Ok(()) => {
                assert_eq!(file.metadata().expect("stat").len(), 0);
                assert!(allocated_end(&file).expect("stat") >= 256 * 1024);
            }
            // A filesystem without fallocate (some overlay or network ones): nothing to check.
            Err(error) if error.kind() == io::ErrorKind::Unsupported => {}
            Err(error) => panic!("preallocation failed: {error}"),
        }
    }
}

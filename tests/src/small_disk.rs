//! A small filesystem of its own for a test's state directory: a `tmpfs` mounted on a
//! temporary directory (the test command runs as root), which the test fills, frees, makes
//! read-only and writable again, and which is unmounted when dropped.
//!
//! Where mounting is impossible (not root, no `mount`, a container without the capability),
//! [`SmallDisk::mount`] says why, and [`small_disk_or_fail!`] fails the test with that and
//! the fix: a test that needs a full disk never passes without one.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs of a fixed size, unmounted on drop.
#[derive(Debug)]
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

/// The file [`SmallDisk::fill`] writes.
const FILLER: &str = "filler";

impl SmallDisk {
    /// Mounts a tmpfs of `size` (a `mount -o size=` value: "64m") on a fresh temporary
    /// directory; Err says why it cannot, and what to do.
    pub fn mount(size: &str) -> Result<SmallDisk, String> {
        let dir =
            tempfile::tempdir().map_err(|error| format!("no temporary directory: {error}"))?;
        let output = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .map_err(|error| format!("cannot run `mount`: {error}"))?;
        if !output.status.success() {
            return Err(format!(
                "`mount -t tmpfs` failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(SmallDisk { dir })
    }

    /// Where the filesystem is mounted.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the filesystem until writes fail with ENOSPC (in 1 MiB, then 4 KiB pieces).
    pub fn fill(&self) {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .expect("create the filler file");
        for piece in [1024 * 1024, 4096, 1] {
            let bytes = vec![0x5a; piece];
            loop {
                match file.write_all(&bytes).and_then(|()| file.sync_data()) {
                    Ok(()) => continue,
                    Err(error) if error.raw_os_error() == Some(28) => break,
                    Err(error) => panic!("filling {}: {error}", self.path().display()),
                }
            }
        }
        let probe = File::create(self.path().join("probe")).and_then(|mut probe| {
            probe.write_all(&[0; 4096])?;
            probe.sync_all()
        });
        let _ignored = fs::remove_file(self.path().join("probe"));
        assert!(
            probe.as_ref().is_err_and(|e| e.raw_os_error() == Some(28)),
            "the filesystem is not full: {probe:?}"
        );
    }

    /// Frees what [`SmallDisk::fill`] took.
    pub fn free(&self) {
        match fs::remove_file(self.filler()) {
            Ok(()) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => panic!("freeing {}: {error}", self.path().display()),
        }
    }

    /// Remounts the filesystem read-only (no process may have a file open for writing on it).
    pub fn read_only(&self) -> Result<(), String> {
        self.remount("remount,ro")
    }

    /// Remounts the filesystem read-write.
    pub fn writable(&self) -> Result<(), String> {
        self.remount("remount,rw")
    }

    fn remount(&self, options: &str) -> Result<(), String> {
        let output = Command::new("mount")
            .args(["-o", options])
            .arg(self.path())
            .output()
            .map_err(|error| format!("cannot run `mount`: {error}"))?;
        match output.status.success() {
            true => Ok(()),
            false => Err(format!(
                "`mount -o {options}` failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )),
        }
    }

    fn filler(&self) -> PathBuf {
        self.path().join(FILLER)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a daemon killed a moment ago may still hold files open.
        let _ignored = Command::new("umount").arg("-l").arg(self.path()).output();
    }
}

/// What a test that cannot mount its small disk says: the problem, then the fix.
pub fn cannot_mount_message(reason: &str) -> String {
    format!(
        "this test needs a small filesystem of its own to fill, and cannot make one: {reason}\n\
         fix: run the tests as root, or with CAP_SYS_ADMIN (a container started with \
         `--cap-add SYS_ADMIN`), as CI runs tests/run.sh; `mount -t tmpfs` must work"
    )
}

/// Mounts a [`SmallDisk`] of `$size`, or fails the calling test saying why and how to fix it
/// (run as root): it never returns without the disk.
#[macro_export]
macro_rules! small_disk_or_fail {
    ($size:expr) => {
        match $crate::small_disk::SmallDisk::mount($size) {
            Ok(disk) => disk,
            Err(reason) => panic!("{}", $crate::small_disk::cannot_mount_message(&reason)),
        }
    };
}

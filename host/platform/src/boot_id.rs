//! Which boot of the machine this is: a value that changes at every boot and at no other
//! time, so the daemon can tell a restart of itself from a reboot of the VM (the downtime of
//! a Reboot or Redeploy is measured from the last durable heartbeat of the previous boot).
//!
//! Linux: `/proc/sys/kernel/random/boot_id`, a random UUID the kernel draws at boot.
//! Windows: not known yet ([`BootId::current`] says [`BootIdReading::Unknown`]); the
//! boot time (`GetTickCount64` against the wall clock) would do, but it cannot be tested
//! here under Wine, whose tick count is the Wine server's, so the seam says "unknown" rather
//! than guess — a reboot then shows no downtime, and the record says why.
//!
//! Tests present another boot: [`BOOT_ID_FILE_VARIABLE`] names a file whose first line is
//! read instead (for tests only; a daemon in production never sets it).

use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming a file read instead of the system's boot id, **for
/// tests only** (`FOREWARN_BOOT_ID_FILE=/tmp/x/boot-id forewarn run …`): a test starts the
/// daemon again with another id in that file to stand for a reboot of the VM.
pub const BOOT_ID_FILE_VARIABLE: &str = "FOREWARN_BOOT_ID_FILE";

/// A boot's identity: text that is equal for every reading within one boot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BootId(String);

impl BootId {
    /// The id as read (trimmed).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// An id from text (a heartbeat file's), trimmed; None when empty.
    pub fn from_text(text: &str) -> Option<BootId> {
        let text = text.trim();
        (!text.is_empty()).then(|| BootId(text.to_owned()))
    }

    /// This boot's id: [`BOOT_ID_FILE_VARIABLE`]'s file when the variable is set, else the
    /// system's.
    pub fn current() -> BootIdReading {
        match std::env::var_os(BOOT_ID_FILE_VARIABLE) {
            Some(path) => read_from(&PathBuf::from(path)),
            None => system_boot_id(),
        }
    }
}

impl fmt::Display for BootId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What reading the boot id gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootIdReading {
    /// The id of this boot.
    Known(BootId),
    /// It cannot be told on this system, or the read failed; the text says why, for the
    /// outcome record ("downtime not measured: …").
    Unknown(String),
}

/// The first line of `path`, as an id.
fn read_from(path: &Path) -> BootIdReading {
    match std::fs::read_to_string(path) {
        Ok(text) => match text.lines().next().and_then(BootId::from_text) {
            Some(id) => BootIdReading::Known(id),
            None => BootIdReading::Unknown(format!("{} is empty", path.display())),
        },
        Err(error) => BootIdReading::Unknown(format!("cannot read {}: {error}", path.display())),
    }
}

#[cfg(target_os = "linux")]
fn system_boot_id() -> BootIdReading {
    read_from(Path::new("/proc/sys/kernel/random/boot_id"))
}

// Windows (and any other system): not told yet; see the module's comment.
#[cfg(not(target_os = "linux"))]
fn system_boot_id() -> BootIdReading {
    BootIdReading::Unknown(
        "this system's boot id is not read yet (only Linux's /proc/sys/kernel/random/boot_id)"
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_gives_one_answer_within_a_boot() {
        let first = system_boot_id();
        assert_eq!(system_boot_id(), first);
        let linux = cfg!(target_os = "linux");
        match first {
            BootIdReading::Known(id) => assert_eq!((linux, id.as_str().len()), (true, 36), "{id}"),
            BootIdReading::Unknown(why) => assert!(!linux, "Linux has a boot id: {why}"),
        }
    }

    #[test]
    fn a_file_stands_for_another_boot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("boot-id");
        std::fs::write(&path, "  other-boot \nsecond line").unwrap();
        assert_eq!(
            read_from(&path),
            BootIdReading::Known(BootId("other-boot".into()))
        );
        std::fs::write(&path, "\n").unwrap();
        assert!(matches!(read_from(&path), BootIdReading::Unknown(_)));
        let missing = read_from(&dir.path().join("missing"));
        let BootIdReading::Unknown(why) = missing else {
            panic!("a missing file is no id");
        };
        assert!(why.contains("cannot read"), "{why}");
    }
}

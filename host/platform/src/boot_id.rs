//! Which boot of the machine this is: a value that changes at every boot and at no other
//! time, so the daemon can tell a restart of itself from a reboot of the VM (the downtime of
//! a Reboot or Redeploy is measured from the last durable heartbeat of the previous boot).
//!
//! Linux: `/proc/sys/kernel/random/boot_id`, a random UUID the kernel draws at boot.
//! Windows: the boot time, the wall clock less the time since boot (`GetTickCount64`), to
//! the second (`windows-boot-at:UNIX_SECONDS`). Two readings of one boot differ by the wall
//! clock's corrections since the first, so they are the same boot when they are at most
//! [`BOOT_TIME_TOLERANCE`] apart ([`BootId::same_boot`]); a wall clock set by more than
//! that between two starts of the daemon reads as a reboot (the record's downtime then
//! says so: it measures the daemon's absence).
//!
//! Tests present another boot: [`BOOT_ID_FILE_VARIABLE`] names a file whose first line is
//! read instead (for tests only; a daemon in production never sets it).

use std::fmt;
use std::path::{Path, PathBuf};

/// The environment variable naming a file read instead of the system's boot id, **for
/// tests only** (`FOREWARN_BOOT_ID_FILE=/tmp/x/boot-id forewarn run …`): a test starts the
/// daemon again with another id in that file to stand for a reboot of the VM.
pub const BOOT_ID_FILE_VARIABLE: &str = "FOREWARN_BOOT_ID_FILE";

/// How far apart two boot times may be and still be one boot (Windows: NTP's corrections of
/// the wall clock move the boot time computed from it).
pub const BOOT_TIME_TOLERANCE_SECS: u64 = 120;
/// [`BOOT_TIME_TOLERANCE_SECS`] as a duration.
pub const BOOT_TIME_TOLERANCE: std::time::Duration =
    std::time::Duration::from_secs(BOOT_TIME_TOLERANCE_SECS);

/// How a boot id made from a boot time starts.
const BOOT_TIME_PREFIX: &str = "windows-boot-at:";

/// A boot's identity: text that is equal for every reading within one boot (or, for a boot
/// time, within [`BOOT_TIME_TOLERANCE`]: [`BootId::same_boot`]).
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

    /// The id of the boot that began `uptime` before `now` (wall clock): its time to the
    /// second.
    pub fn from_boot_time(now: std::time::SystemTime, uptime: std::time::Duration) -> BootId {
        let booted = now
            .checked_sub(uptime)
            .and_then(|booted| booted.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |since| since.as_secs());
        BootId(format!("{BOOT_TIME_PREFIX}{booted}"))
    }

    /// Whether `previous` (a heartbeat's id) names this boot: the same text, or boot times
    /// at most [`BOOT_TIME_TOLERANCE`] apart.
    pub fn same_boot(&self, previous: &str) -> bool {
        let previous = previous.trim();
        if self.0 == previous {
            return true;
        }
        let seconds = |id: &str| id.strip_prefix(BOOT_TIME_PREFIX)?.parse::<u64>().ok();
        match (seconds(&self.0), seconds(previous)) {
            (Some(now), Some(before)) => now.abs_diff(before) <= BOOT_TIME_TOLERANCE_SECS,
            _ => false,
        }
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

#[cfg(windows)]
fn system_boot_id() -> BootIdReading {
    // SAFETY: GetTickCount64 takes nothing and cannot fail.
    let uptime_ms = unsafe { windows_sys::Win32::System::SystemInformation::GetTickCount64() };
    BootIdReading::Known(BootId::from_boot_time(
        std::time::SystemTime::now(),
        std::time::Duration::from_millis(uptime_ms),
    ))
}

// Any other system: not told; the record says why.
#[cfg(not(any(target_os = "linux", windows)))]
fn system_boot_id() -> BootIdReading {
    BootIdReading::Unknown(
        "this system's boot id is not read (Linux's /proc/sys/kernel/random/boot_id and Windows' boot time are)"
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_gives_one_answer_within_a_boot() {
        let BootIdReading::Known(first) = system_boot_id() else {
            panic!("Linux and Windows have a boot id");
        };
        let BootIdReading::Known(second) = system_boot_id() else {
            panic!("read once, read again");
        };
        assert!(second.same_boot(first.as_str()), "{first} then {second}");
        match cfg!(windows) {
            true => assert!(first.as_str().starts_with(BOOT_TIME_PREFIX), "{first}"),
            false => assert_eq!(first.as_str().len(), 36, "{first}"),
        }
    }

    #[test]
    fn boot_times_are_one_boot_within_the_tolerance_and_ids_only_when_equal() {
        use std::time::{Duration, UNIX_EPOCH};
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let booted = BootId::from_boot_time(now, Duration::from_secs(3_600));
        assert_eq!(booted.as_str(), "windows-boot-at:1799996400");
        // The same boot read later, after NTP moved the wall clock by 90 s.
        let later = BootId::from_boot_time(
            now + Duration::from_secs(600 + 90),
            Duration::from_secs(3_600 + 600),
        );
        assert!(later.same_boot(booted.as_str()), "{later} vs {booted}");
        // A new boot: up 10 minutes, read an hour later.
        let rebooted =
            BootId::from_boot_time(now + Duration::from_secs(3_600), Duration::from_secs(600));
        assert!(
            !rebooted.same_boot(booted.as_str()),
            "{rebooted} vs {booted}"
        );
        let uuid = BootId::from_text("6b3c…").expect("an id");
        assert!(uuid.same_boot("6b3c…"));
        assert!(!uuid.same_boot("7d4e…"));
        assert!(!uuid.same_boot(booted.as_str()));
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

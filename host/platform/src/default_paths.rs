//! Where forewarn keeps its files unless the config says otherwise: `/etc/forewarn` and
//! `/var/lib/forewarn` on Linux; `%ProgramData%\forewarn` on Windows.

use std::path::PathBuf;

/// The config file read when none is given.
pub fn config_file() -> PathBuf {
    config_dir().join("forewarn.toml")
}

/// The plugin directory.
pub fn plugin_dir() -> PathBuf {
    config_dir().join("plugins.d")
}

/// The state directory (journal, plugin key-value store, compile cache).
pub fn state_dir() -> PathBuf {
    #[cfg(unix)]
    {
        PathBuf::from("/var/lib/forewarn")
    }
    #[cfg(windows)]
    {
        program_data().join("state")
    }
}

/// Where the Windows service writes its rotating log files (on Linux, journald keeps the log).
pub fn log_dir() -> PathBuf {
    #[cfg(unix)]
    {
        PathBuf::from("/var/log/forewarn")
    }
    #[cfg(windows)]
    {
        program_data().join("logs")
    }
}

fn config_dir() -> PathBuf {
    #[cfg(unix)]
    {
        PathBuf::from("/etc/forewarn")
    }
    #[cfg(windows)]
    {
        program_data()
    }
}

/// `ProgramData\forewarn`: the known folder `FOLDERID_ProgramData` (`C:\ProgramData`), as
/// Windows' own services find it. The `%ProgramData%` variable is the fallback only: a
/// process's environment can say otherwise (Wine gives a service `C:\users\Public`).
#[cfg(windows)]
fn program_data() -> PathBuf {
    known_program_data()
        .or_else(|| std::env::var_os("ProgramData").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(r"C:\ProgramData"))
        .join("forewarn")
}

/// The `FOLDERID_ProgramData` known folder, or None when the shell cannot say.
#[cfg(windows)]
fn known_program_data() -> Option<PathBuf> {
    use windows_sys::Win32::System::Com::CoTaskMemFree;
    use windows_sys::Win32::UI::Shell::{
        FOLDERID_ProgramData, KF_FLAG_DEFAULT, SHGetKnownFolderPath,
    };

    let mut raw: *mut u16 = std::ptr::null_mut();
    // SAFETY: a valid GUID, no token (the default user), and an out pointer the shell fills
    // with a string allocated by CoTaskMemAlloc (or null), freed below in every case.
    let result = unsafe {
        SHGetKnownFolderPath(
            &FOLDERID_ProgramData,
            KF_FLAG_DEFAULT as u32,
            std::ptr::null_mut(),
            &mut raw,
        )
    };
    let path = (result >= 0 && !raw.is_null())
        // SAFETY: on success `raw` is a NUL-terminated UTF-16 string.
        .then(|| PathBuf::from(unsafe { crate::wide_text::from_wide_ptr(raw) }));
    // SAFETY: `raw` came from the shell's allocator or is null; both are fine to free.
    unsafe { CoTaskMemFree(raw.cast_const().cast()) };
    path.filter(|path| path.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    // not on Windows: Linux's package paths; windows_paths_are_under_program_data checks Windows'
    #[cfg(unix)]
    #[test]
    fn linux_paths_are_the_packages() {
        assert_eq!(config_file(), PathBuf::from("/etc/forewarn/forewarn.toml"));
        assert_eq!(plugin_dir(), PathBuf::from("/etc/forewarn/plugins.d"));
        assert_eq!(state_dir(), PathBuf::from("/var/lib/forewarn"));
    }

    #[cfg(windows)]
    #[test]
    fn windows_paths_are_under_program_data() {
        for path in [config_file(), plugin_dir(), state_dir(), log_dir()] {
            let text = path.display().to_string();
            assert!(text.contains(r"ProgramData\forewarn"), "{text}");
        }
    }
}

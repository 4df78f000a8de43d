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

/// `%ProgramData%\forewarn` (`C:\ProgramData\forewarn` when the variable is unset).
#[cfg(windows)]
fn program_data() -> PathBuf {
    std::env::var_os("ProgramData")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(r"C:\ProgramData"))
        .join("forewarn")
}

#[cfg(test)]
mod tests {
    use super::*;

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

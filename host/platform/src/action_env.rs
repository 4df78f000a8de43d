//! The environment an operator action inherits from the daemon: an allow-list; everything
//! else (`NOTIFY_SOCKET`, `WATCHDOG_*`, `INVOCATION_ID`, credentials, proxies…) is cleared.

/// The variables an action inherits, on Unix.
#[cfg(unix)]
pub const ALLOWED: &[&str] = &["PATH", "LANG", "TZ"];
/// The variables an action inherits, on Windows: the search path and what Windows programs
/// need to start at all (`SystemRoot` for Winsock and COM, `ComSpec` for `cmd`).
#[cfg(windows)]
pub const ALLOWED: &[&str] = &[
    "PATH",
    "PATHEXT",
    "SystemRoot",
    "SystemDrive",
    "windir",
    "ComSpec",
    "TEMP",
    "TMP",
    "TZ",
];

/// Prefixes of variables an action inherits too (the locale categories `LC_*`).
pub const ALLOWED_PREFIXES: &[&str] = &["LC_"];

/// Whether an action may see the daemon's variable `name`. Windows compares names
/// without regard to case, as Windows itself does (`Path` is `PATH`).
pub fn is_allowed(name: &str) -> bool {
    let same = |allowed: &str| match cfg!(windows) {
        true => allowed.eq_ignore_ascii_case(name),
        false => allowed == name,
    };
    ALLOWED.iter().any(|allowed| same(allowed))
        || ALLOWED_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_service_manager_variables_are_not_allowed() {
        for name in [
            "NOTIFY_SOCKET",
            "WATCHDOG_USEC",
            "AWS_SECRET_ACCESS_KEY",
            "HTTPS_PROXY",
        ] {
            assert!(!is_allowed(name), "{name}");
        }
        for name in ["PATH", "TZ", "LC_ALL"] {
            assert!(is_allowed(name), "{name}");
        }
    }

    #[cfg(windows)]
    #[test]
    fn windows_names_match_without_case() {
        assert!(is_allowed("Path"));
        assert!(is_allowed("SYSTEMROOT"));
    }
}

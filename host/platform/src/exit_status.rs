//! What ended a child process.

use std::process::ExitStatus;

/// The signal that ended the child, if one did (Unix); always `None` on Windows, where a
/// killed process has an exit code like any other.
pub fn signal(status: &ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        std::os::unix::process::ExitStatusExt::signal(status)
    }
    #[cfg(windows)]
    {
        let _ = status;
        None
    }
}

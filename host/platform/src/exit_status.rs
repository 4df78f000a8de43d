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

/// Whether the child was ended for using up its CPU-time limit
/// ([`crate::process_tree::Limits::cpu_seconds`]): SIGXCPU on Unix (or the SIGKILL the
/// kernel sends at the hard limit a second later cannot be told from another SIGKILL, so
/// only SIGXCPU counts), the exit code `ERROR_NOT_ENOUGH_QUOTA` (1816) a Job Object's
/// process-time limit ends a process with on Windows.
pub fn cpu_time_limit_reached(status: &ExitStatus) -> bool {
    #[cfg(unix)]
    {
        signal(status) == Some(libc::SIGXCPU)
    }
    #[cfg(windows)]
    {
        /// `ERROR_NOT_ENOUGH_QUOTA`, the exit code of a process its job's time limit ended.
        const ERROR_NOT_ENOUGH_QUOTA: i32 = 1816;
        status.code() == Some(ERROR_NOT_ENOUGH_QUOTA)
    }
}

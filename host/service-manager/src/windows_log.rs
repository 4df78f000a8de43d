//! The Windows service's log: a service has no console, so its lines go to a file under
//! `%ProgramData%\forewarn\logs`, a new one each day (`forewarn.YYYY-MM-DD.log`), the last
//! 14 kept. The directory is created private (SYSTEM, Administrators, the service account).

use anyhow::Context;
use tracing_appender::rolling::{RollingFileAppender, Rotation};

/// Days of log files kept.
pub(super) const LOG_FILES_KEPT: usize = 14;

/// The rotating file writer, its directory created when missing.
pub(super) fn writer() -> anyhow::Result<RollingFileAppender> {
    let dir = forewarn_platform::default_paths::log_dir();
    forewarn_platform::file_access::create_private_dir(&dir)
        .with_context(|| format!("cannot create the log directory {}", dir.display()))?;
    RollingFileAppender::builder()
        .rotation(Rotation::DAILY)
        .filename_prefix("forewarn")
        .filename_suffix("log")
        .max_log_files(LOG_FILES_KEPT)
        .build(&dir)
        .with_context(|| format!("cannot open a log file in {}", dir.display()))
}

//! Waiting until the operating system asks the process to stop: SIGINT or SIGTERM on Unix
//! (systemd stops a unit with SIGTERM); Ctrl-C, Ctrl-Break, the console closing or the
//! system shutting down on Windows (a service is stopped through the Service Control
//! Manager instead, see the host's `service_manager`).

/// Waits for a stop request and returns what it was ("SIGTERM", "Ctrl-C", …). When the
/// process cannot listen for the termination request, waits for Ctrl-C alone and says so
/// in `cannot_listen` first.
pub async fn wait(cannot_listen: impl FnOnce(&str, std::io::Error)) -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = match signal(SignalKind::terminate()) {
            Ok(terminate) => terminate,
            Err(error) => {
                cannot_listen("SIGTERM", error);
                let _ignored = tokio::signal::ctrl_c().await;
                return "SIGINT";
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => "SIGINT",
            _ = terminate.recv() => "SIGTERM",
        }
    }
    #[cfg(windows)]
    {
        use tokio::signal::windows::{ctrl_break, ctrl_close, ctrl_shutdown};
        let streams = (ctrl_break(), ctrl_close(), ctrl_shutdown());
        let (Ok(mut brk), Ok(mut close), Ok(mut shutdown)) = streams else {
            cannot_listen(
                "Ctrl-Break, the console closing and shutdown",
                std::io::Error::other("the console control handler could not be set"),
            );
            let _ignored = tokio::signal::ctrl_c().await;
            return "Ctrl-C";
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => "Ctrl-C",
            _ = brk.recv() => "Ctrl-Break",
            _ = close.recv() => "the console closing",
            _ = shutdown.recv() => "the system shutting down",
        }
    }
}

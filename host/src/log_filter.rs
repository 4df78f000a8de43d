//! Which log lines the daemon writes, wherever they go (stderr for journald, or the
//! Windows service's log file): `FOREWARN_LOG` if set, else `info`.

use tracing_subscriber::EnvFilter;

/// The daemon's filter: `FOREWARN_LOG` (default `info`), with the noisy dependencies held
/// back.
pub fn daemon_filter() -> EnvFilter {
    EnvFilter::try_from_env("FOREWARN_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info"))
        // At trace level wasmtime-wasi logs every host call with its arguments, which
        // would let a plugin's stdout flood reach the log unbounded.
        .add_directive(
            "wasmtime_wasi=debug"
                .parse()
                .expect("a valid static directive"),
        )
        // notify reports a deleted plugin directory at INFO; forewarn logs that itself.
        .add_directive("notify=warn".parse().expect("a valid static directive"))
}

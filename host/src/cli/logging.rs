//! Where the daemon's log goes: stderr as text or JSON lines (`--log-format`), or, for
//! `demo` and `plugin test`, the warnings and errors routed into the printed timeline.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::Directive;
#[cfg(feature = "simulator")]
use tracing_subscriber::layer::SubscriberExt;
#[cfg(feature = "simulator")]
use tracing_subscriber::util::SubscriberInitExt;

#[cfg(feature = "simulator")]
use crate::cli::demo_log::DemoLogLayer;

/// `--log-format`: human-readable text, or one JSON object per line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[allow(missing_docs)] // a variant's doc comment would become its help in `forewarn --help`
pub enum LogFormat {
    Text,
    Json,
}

/// Where the log goes: stderr, or the timeline `demo` and `plugin test` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTarget {
    /// The daemon's log on stderr, in `--log-format` (`FOREWARN_LOG` filters, default info).
    Stderr(LogFormat),
    /// Warnings and errors become timeline lines (`FOREWARN_LOG` filters, default warn);
    /// plugins' own lines reach the timeline through the daemon instead.
    #[cfg(feature = "simulator")]
    Timeline,
}

/// Installs the global subscriber; call once, before the async runtime starts.
pub fn init(target: LogTarget) {
    match target {
        #[cfg(feature = "simulator")]
        LogTarget::Timeline => init_timeline(),
        LogTarget::Stderr(format) => init_stderr(format),
    }
}

#[cfg(feature = "simulator")]
fn init_timeline() {
    let filter = EnvFilter::try_from_env("FOREWARN_LOG")
        .unwrap_or_else(|_| EnvFilter::new("warn"))
        .add_directive(directive(forewarn_runtime::PLUGIN_LOG_TARGET, "off"));
    let _ignored = tracing_subscriber::registry()
        .with(filter)
        .with(DemoLogLayer)
        .try_init();
}

fn init_stderr(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(daemon_filter())
        .with_writer(std::io::stderr);
    // Every field value escaped and cut, whatever it holds (log_format.rs).
    match format {
        LogFormat::Text => builder
            .fmt_fields(forewarn_daemon::log_format::EscapedFields)
            .init(),
        LogFormat::Json => builder
            .event_format(forewarn_daemon::log_format::EscapedJson)
            .init(),
    }
}

/// Logs to `writer` (the Windows service's log file) as text or JSON lines, with the
/// daemon's filter and escaping, never colour.
pub fn init_file<W>(format: LogFormat, writer: W)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_env_filter(daemon_filter())
        .with_writer(writer);
    let _already = match format {
        LogFormat::Text => builder
            .fmt_fields(forewarn_daemon::log_format::EscapedFields)
            .try_init(),
        LogFormat::Json => builder
            .event_format(forewarn_daemon::log_format::EscapedJson)
            .try_init(),
    };
}

/// The daemon's filter, wherever its lines go: `FOREWARN_LOG` (default `info`), with the
/// noisy dependencies held back.
fn daemon_filter() -> EnvFilter {
    EnvFilter::try_from_env("FOREWARN_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info"))
        // At trace level wasmtime-wasi logs every host call with its arguments, which
        // would let a plugin's stdout flood reach the log unbounded.
        .add_directive(directive("wasmtime_wasi", "debug"))
        // notify reports a deleted plugin directory at INFO; forewarn logs that itself.
        .add_directive(directive("notify", "warn"))
}

fn directive(target: &str, level: &str) -> Directive {
    format!("{target}={level}")
        .parse()
        .expect("a target and a level make a valid directive")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_directives_parse() {
        for (target, level) in [
            (forewarn_runtime::PLUGIN_LOG_TARGET, "off"),
            ("wasmtime_wasi", "debug"),
            ("notify", "warn"),
        ] {
            assert_eq!(
                directive(target, level).to_string(),
                format!("{target}={level}")
            );
        }
    }
}

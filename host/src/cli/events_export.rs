//! `forewarn events export`: the outcome records as JSON Lines, one record a line, or as
//! CloudEvents 1.0 (structured JSON, one event a line, the record its `data`), for a log
//! pipeline or an event bus; `--since 7d` keeps the records that changed in the last 7 days.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use crate::cli::outcome_records::{CloudEvent, changed_since, fetch_records};
use crate::cli::status_command::DaemonArgs;

/// The form of the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// One record a line, as `/status/events` holds it.
    Jsonl,
    /// One CloudEvents 1.0 event a line (structured mode, JSON).
    Cloudevents,
}

/// `forewarn events export`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only the records that changed within this long ("24h", "7d"). Default: every record.
    #[arg(long, value_parser = humantime::parse_duration)]
    since: Option<Duration>,
    /// The form: JSON Lines of records, or CloudEvents 1.0.
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    format: ExportFormat,
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// Prints the records, one a line.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let view = fetch_records(&args.daemon).await?;
    let records = changed_since(view.records, args.since, SystemTime::now());
    for record in &records {
        let line = match args.format {
            ExportFormat::Jsonl => serde_json::to_string(record)?,
            ExportFormat::Cloudevents => {
                serde_json::to_string(&CloudEvent::of(record, &view.vm_name))?
            }
        };
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn takes_a_duration_and_a_format() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&["--since", "7d", "--format", "cloudevents"]).expect("parses");
        assert_eq!(args.since, Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(args.format, ExportFormat::Cloudevents);
        let args = parse::<Args>(&[]).expect("parses");
        assert_eq!((args.since, args.format), (None, ExportFormat::Jsonl));
        assert!(parse::<Args>(&["--since", "soon"]).is_err());
    }
}

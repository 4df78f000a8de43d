//! `forewarn events list`: one line per outcome record the running daemon keeps (first
//! seen, id, type, stage, verdict), the oldest first; `--json` prints `/status/events` as
//! the daemon answered.

use std::process::ExitCode;

use crate::cli::outcome_records::{fetch_records, list_line};
use crate::cli::status_command::DaemonArgs;

/// `forewarn events list`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// Prints the records.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let view = fetch_records(&args.daemon).await?;
    if args.daemon.json {
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(ExitCode::SUCCESS);
    }
    if view.records.is_empty() {
        println!("no outcome records yet: one is written for each event the daemon sees");
    }
    for record in &view.records {
        println!("{}", list_line(record));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn parses_the_daemon_options() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&["--admin", "127.0.0.1:9555", "--json"]).expect("parses");
        assert!(args.daemon.json);
    }
}

//! `forewarn events show ID`: the outcome record of one event (its newest, when IMDS used
//! the id twice) as text, or as JSON with `--json`.

use std::process::ExitCode;

use crate::cli::outcome_records::{fetch_records, render_record};
use crate::cli::status_command::DaemonArgs;

/// `forewarn events show`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The event's id (IMDS's EventId), as `forewarn events list` shows it.
    id: String,
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// Prints the record, or fails naming the ids there are.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let view = fetch_records(&args.daemon).await?;
    let id = args.id.trim();
    let Some(record) = view
        .records
        .iter()
        .rev()
        .find(|record| record.event_id.as_str().eq_ignore_ascii_case(id))
    else {
        anyhow::bail!(
            "no outcome record of event {id}: `forewarn events list` shows the {} kept (the oldest go first, `[outcomes] keep`)",
            view.records.len()
        );
    };
    if args.daemon.json {
        println!("{}", serde_json::to_string_pretty(record)?);
    } else {
        print!("{}", render_record(record));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn takes_the_id() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&["E1", "--json"]).expect("parses");
        assert_eq!(args.id, "E1");
        assert!(parse::<Args>(&[]).is_err(), "the id is needed");
    }
}

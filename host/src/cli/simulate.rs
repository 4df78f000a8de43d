//! `forewarn simulate`: serves a simulated IMDS Scheduled Events endpoint (and its console)
//! that plays a scenario, or lists the built-in scenarios.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context;

/// `forewarn simulate`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Scenario: a built-in name or a path to a TOML or JSON scenario file.
    #[arg(long, default_value = forewarn_simulator::DEFAULT_SCENARIO)]
    scenario: String,
    /// How many times faster than real time the scenario runs.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Keep serving after the scenario is over (until Ctrl-C).
    #[arg(long)]
    stay: bool,
    /// Hold the scenario's clock at 0 until the first GET of scheduledevents: a daemon that
    /// takes a while to start still sees every event from its start.
    #[arg(long)]
    start_on_first_poll: bool,
}

/// Serves the scenario until it is over (or Ctrl-C; with `--stay`, only Ctrl-C).
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.list {
        list_scenarios();
        return Ok(ExitCode::SUCCESS);
    }
    let scenario = forewarn_simulator::load_scenario(&args.scenario)?;
    let simulator = forewarn_simulator::spawn(forewarn_simulator::SimulatorConfig {
        listen: args.listen,
        scenario,
        speed: args.speed,
    })
    .await
    .context("cannot start the simulator")?;
    if args.start_on_first_poll {
        simulator.hold_until_first_poll();
    }
    say(&format!(
        "simulating IMDS at {} (scenario {}, speed {}x)",
        simulator.base_url(),
        args.scenario,
        args.speed
    ));
    say(&format!(
        "console: {}/ (start scenarios, generate events, inject faults, watch requests)",
        simulator.base_url()
    ));
    let interrupted = async {
        let _ignored = tokio::signal::ctrl_c().await;
    };
    if args.stay {
        interrupted.await;
    } else {
        tokio::select! {
            () = simulator.finished() => say("scenario finished"),
            () = interrupted => {}
        }
    }
    simulator.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

fn list_scenarios() {
    let mut out = std::io::stdout().lock();
    for (name, description) in forewarn_simulator::builtin_scenarios() {
        // A closed pipe (`| head`) just ends the listing.
        if writeln!(out, "{name:<24} {description}").is_err() {
            break;
        }
    }
}

/// A line on stdout; a reader that went away (a test that read the address and closed the
/// pipe, `| head`) must not stop the simulator.
fn say(line: &str) {
    let _ignored = writeln!(std::io::stdout().lock(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_args::{assert_consistent, parse};

    #[test]
    fn defaults_play_the_default_scenario_in_real_time_on_port_8080() {
        assert_consistent::<Args>();
        let args = parse::<Args>(&[]).expect("parses");
        assert_eq!(args.listen, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!(args.scenario, forewarn_simulator::DEFAULT_SCENARIO);
        assert_eq!(args.speed, 1.0);
        assert!(!args.list && !args.stay);
        let error = parse::<Args>(&["--listen", "localhost"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation);
    }
}

//! `bench-drain`: how long a drain takes behind a real HAProxy, probe-aware against a fixed
//! window, in one run. Each round drills a Reboot twice (`forewarn_test_support::drain_drill`):
//! with today's lb-drain as shipped (the drain ends when HAProxy has noticed, plus the
//! connection drain) and with lb-drain as built against contract 0.2.0 with its manifest of
//! then (`host/tests/fixtures/wit-0.2.0`: a fixed 15 s window). The figures: from the event's
//! appearance to HAProxy's DOWN, to the stop action and to the approval at IMDS; and the
//! requests that failed (a client sends one every 10 ms through HAProxy without retries).

use std::path::Path;
use std::time::Duration;

use anyhow::bail;
use forewarn_bench::{forewarn_binary, percentile, ratio, sorted};
use forewarn_simulator::Transition;
use forewarn_test_support::drain_drill::{DrillOutcome, LbDrain, run_drill};

/// Rounds of the two drills, alternated (`BENCH_DRAIN_ROUNDS` to change).
const ROUNDS: usize = 3;

/// The figures of one drill.
struct Figures {
    down: Duration,
    stop: Duration,
    approval: Duration,
    sent: usize,
    failed: usize,
}

fn figures(drill: &DrillOutcome) -> anyhow::Result<Figures> {
    let appeared = drill.at(Transition::Appeared);
    let since = |at: u64| Duration::from_millis(at.saturating_sub(appeared));
    let (Some(down), Some(approval)) = (drill.down_at(), drill.approved_at()) else {
        bail!(
            "HAProxy never saw vm-a DOWN, or IMDS saw no approval: {}",
            drill.daemon.describe_for_failure()
        );
    };
    Ok(Figures {
        down: since(down),
        stop: since(drill.stopped_at),
        approval: since(approval),
        sent: drill.sent.len(),
        failed: drill.failed().len(),
    })
}

fn main() -> anyhow::Result<()> {
    let forewarn = forewarn_binary()?;
    let rounds = std::env::var("BENCH_DRAIN_ROUNDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(ROUNDS);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../host/tests/fixtures/wit-0.2.0");
    let kinds = [
        (
            "probe-aware (lb-drain today, as shipped)",
            LbDrain::shipped(),
        ),
        (
            "fixed window (lb-drain 0.2.0, drain-seconds = 15)",
            LbDrain::from_dir(&fixture),
        ),
    ];
    let mut measured: Vec<Vec<Figures>> = vec![Vec::new(), Vec::new()];
    for round in 1..=rounds {
        for (index, (label, lb_drain)) in kinds.iter().enumerate() {
            eprintln!("round {round}/{rounds}: {label}");
            let drill = run_drill(&forewarn, "Reboot", "5m", lb_drain);
            measured[index].push(figures(&drill)?);
        }
    }
    println!(
        "| lb-drain | appearance → HAProxy DOWN | → stop action | → approval at IMDS | requests failed |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let mut stops = Vec::new();
    for ((label, _), runs) in kinds.iter().zip(&measured) {
        let median = |pick: fn(&Figures) -> Duration| {
            percentile(&sorted(runs.iter().map(pick).collect()), 50)
        };
        let (sent, failed): (usize, usize) = runs.iter().fold((0, 0), |(sent, failed), run| {
            (sent + run.sent, failed + run.failed)
        });
        let stop = median(|run| run.stop);
        stops.push(stop);
        println!(
            "| {label} | {:.1} s | {:.1} s | {:.1} s | {failed} of {sent} |",
            median(|run| run.down).as_secs_f64(),
            stop.as_secs_f64(),
            median(|run| run.approval).as_secs_f64(),
        );
    }
    println!(
        "\nmedians of {rounds} rounds; the fixed window stops the app {:.1}× later",
        ratio(stops[1], stops[0])
    );
    Ok(())
}

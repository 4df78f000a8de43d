//! `bench-dispatch`: what the daemon adds around a plugin — a call beside the same logic run
//! natively, document → first call and last approval → POST latency, and fan-out growth.
//!
//! Everything runs in this one process (simulator, daemon loop, plugins) so that instants
//! are comparable to the microsecond. Figures for BENCHMARKS.md; no assertions on time.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail};
use forewarn_bench::{micros, percentile, ratio, row, sorted};
use forewarn_daemon::durable_file::DurableFile;
use forewarn_daemon::pipeline::state::DaemonState;
use forewarn_daemon::plugins::set::load_plugin_bytes;
use forewarn_host::bundled::bundled_plugins;
use forewarn_imds::unix_ms;
use forewarn_manifest::{ConfigValue, PluginManifest};
use forewarn_runtime::wit::latest::{Context, Decision, Phase, ScheduledEvent};
use forewarn_runtime::{
    CallContext, CallFailure, CallOutcome, HostServices, PluginSettings, Runtime, RuntimeConfig,
};
use forewarn_simulator::Scenario;
use forewarn_test_support::fixtures::{sample_context, sample_event};
use forewarn_test_support::guests::NOOP;

const WARM_UP_CALLS: usize = 200;
const JOURNAL_COMMITS: usize = 200;
const OVERHEAD_CALLS: usize = 2000;
const CALL_BUDGET: Duration = Duration::from_secs(10);
/// Events of the latency run, one appearing every `LATENCY_SPACING`.
const LATENCY_EVENTS: usize = 300;
const LATENCY_SPACING: Duration = Duration::from_millis(100);
/// Repetitions of each fan-out shape.
const FAN_OUT_ROUNDS: usize = 15;

#[path = "bench_dispatch/in_process_daemon.rs"]
mod in_process_daemon;
#[path = "bench_dispatch/large_document.rs"]
mod large_document;
use in_process_daemon::{Bench, Feed};

/// Preempts found by the real poller (`bench-dispatch detection`): how many, how often the
/// poller asks (forewarn's default), and how far apart they appear (not a multiple of the
/// interval, so they land at every phase of it).
const DETECTION_EVENTS: usize = 200;
const DETECTION_POLL: Duration = Duration::from_secs(1);
const DETECTION_SPACING: Duration = Duration::from_millis(1370);
/// How long after an event's appearance the feeder fetches the document.
const FETCH_AFTER: Duration = Duration::from_millis(2);
/// How long to wait for the daemon to get somewhere before giving up.
const PATIENCE: Duration = Duration::from_secs(30);

fn main() -> anyhow::Result<()> {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the tokio runtime")?;
    tokio.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let work = tempfile::tempdir().context("could not create a temporary directory")?;
    let runtime = Runtime::new(
        RuntimeConfig {
            cache_dir: Some(work.path().join("cache")),
            ..RuntimeConfig::default()
        },
        HostServices::default(),
    )?;
    let noop = std::fs::read(NOOP).with_context(|| format!("could not read {NOOP}"))?;
    println!("# forewarn dispatch figures\n");
    // `bench-dispatch fan-out` measures the fan-out alone (for a profiler);
    // `bench-dispatch detection` the Preempts found by the real poller (about 5 minutes);
    // `bench-dispatch large-document` documents of 10, 1 000 and 7 500 events polled by the
    // real binary (about 4 minutes; `cargo build --workspace` first).
    match std::env::args().nth(1).as_deref() {
        Some("fan-out") => return measure_fan_out(&runtime, &noop, work.path()).await,
        Some("detection") => return measure_detection(&runtime, work.path()).await,
        Some("large-document") => {
            let only: Vec<String> = std::env::args().skip(2).collect();
            return large_document::measure_large_documents(work.path(), &only).await;
        }
        _ => {}
    }
    measure_call_overhead(&runtime, &noop).await?;
    measure_journal_commit(work.path())?;
    measure_latency(&runtime, &noop, work.path()).await?;
    measure_fan_out(&runtime, &noop, work.path()).await?;
    Ok(())
}

// ---- plugin call overhead -------------------------------------------------------------

async fn measure_call_overhead(runtime: &Runtime, noop: &[u8]) -> anyhow::Result<()> {
    let plugin = runtime.load("noop", noop, PluginSettings::default())?;
    let wasm = time_calls(|| async {
        plugin
            .call(
                &sample_event(),
                Phase::Prepare,
                &sample_context(),
                CALL_BUDGET,
            )
            .await
    })
    .await?;
    let native = time_calls(|| async {
        native_call(
            &sample_event(),
            Phase::Prepare,
            &sample_context(),
            CALL_BUDGET,
        )
        .await
    })
    .await?;
    println!(
        "## Plugin call overhead ({OVERHEAD_CALLS} sequential calls after {WARM_UP_CALLS} warm-up)\n"
    );
    println!("| path | median | p99 | max |");
    println!("|---|---:|---:|---:|");
    print_row("wasm: instantiate + call of the no-op plugin", &wasm);
    print_row(
        "native: the same logic as a Rust fn, same async path",
        &native,
    );
    println!(
        "\nratio wasm / native: median {:.0}x, p99 {:.0}x\n",
        ratio(percentile(&wasm, 50), percentile(&native, 50)),
        ratio(percentile(&wasm, 99), percentile(&native, 99)),
    );
    Ok(())
}

async fn time_calls<F, Fut>(mut call: F) -> anyhow::Result<Vec<Duration>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = CallOutcome>,
{
    for _ in 0..WARM_UP_CALLS {
        call().await;
    }
    let mut times = Vec::with_capacity(OVERHEAD_CALLS);
    for _ in 0..OVERHEAD_CALLS {
        let started = Instant::now();
        let outcome = call().await;
        times.push(started.elapsed());
        if outcome.answer != Ok(Decision::Approve) {
            bail!("the call did not approve: {:?}", outcome.answer);
        }
    }
    times.sort();
    Ok(times)
}

/// `Plugin::call` without wasm: the same deadline, context, timeout and outcome, with the
/// no-op plugin's logic (approve) as a plain Rust function.
async fn native_call(
    event: &ScheduledEvent,
    phase: Phase,
    context: &CallContext,
    budget: Duration,
) -> CallOutcome {
    let started = Instant::now();
    let deadline = started + budget;
    let wit_context = Context {
        vm_name: context.vm_name.clone(),
        affects_this_vm: context.affects_this_vm,
        deadline_unix_ms: unix_ms(SystemTime::now() + budget),
        attempt: context.attempt,
        until_not_before_ms: None,
        vm: context.vm,
    };
    let result = tokio::time::timeout_at(deadline.into(), async {
        std::hint::black_box(native_noop(event, phase, &wit_context))
    })
    .await;
    CallOutcome {
        answer: result.map_err(|_elapsed| CallFailure::BudgetExceeded { budget }),
        elapsed: started.elapsed(),
        logs: Vec::new(),
    }
}

fn native_noop(_event: &ScheduledEvent, _phase: Phase, _context: &Context) -> Decision {
    Decision::Approve
}

// ---- journal commit --------------------------------------------------------------------

/// One journal commit (serialize, write a temporary file, fsync, rename, fsync the
/// directory), which the loop does before every action and after every answer.
fn measure_journal_commit(work: &Path) -> anyhow::Result<()> {
    let (mut journal, _) =
        DurableFile::<DaemonState>::open(&work.join("journal-bench"), "journal")?;
    let state = DaemonState::default();
    let mut times = Vec::with_capacity(JOURNAL_COMMITS);
    for _ in 0..JOURNAL_COMMITS {
        let started = Instant::now();
        journal.commit(&state)?;
        times.push(started.elapsed());
    }
    println!("## Journal commit of an empty state ({JOURNAL_COMMITS} commits)\n");
    println!("| span | median | p99 | max |");
    println!("|---|---:|---:|---:|");
    print_row("write + fsync + rename + fsync(dir)", &sorted(times));
    println!();
    Ok(())
}

// ---- dispatch latency -----------------------------------------------------------------

/// When things happened to one event, as seen in this process.
#[derive(Debug, Default, Clone)]
struct EventTimes {
    fetch_started: Option<Instant>,
    handed_over: Option<Instant>,
    first_call: Option<Instant>,
    last_approval: Option<Instant>,
    last_approval_wall: Option<SystemTime>,
    approved: Option<Instant>,
}

async fn measure_latency(runtime: &Runtime, noop: &[u8], work: &Path) -> anyhow::Result<()> {
    let scenario = spaced_scenario(LATENCY_EVENTS, LATENCY_SPACING)?;
    let plugins = load_noops(runtime, noop, 1)?;
    let mut bench = Bench::start(scenario, plugins, &work.join("latency"), Feed::ByHand).await?;
    let ids = bench.event_ids();
    let bench_started = bench.started;
    let appear_at: Vec<Duration> = bench
        .simulator
        .scenario()
        .events
        .iter()
        .map(|event| event.appear_at)
        .collect();
    for (index, id) in ids.iter().enumerate() {
        bench.sleep_until(appear_at[index] + FETCH_AFTER).await;
        bench.feed(std::slice::from_ref(id)).await?;
    }
    bench.wait_until_approved(&ids).await?;
    let approvals = bench.simulator.snapshot().approvals;
    let times = bench.stop().await;

    let mut slowest: Vec<(Duration, Duration)> = Vec::new();
    let mut fetch_to_call = Vec::new();
    let mut handover_to_call = Vec::new();
    let mut approval_to_approved = Vec::new();
    let mut approval_to_received = Vec::new();
    for id in &ids {
        let Some(event) = times.get(id) else {
            bail!("no times recorded for {id}");
        };
        let (Some(fetch), Some(handed), Some(call), Some(last), Some(done)) = (
            event.fetch_started,
            event.handed_over,
            event.first_call,
            event.last_approval,
            event.approved,
        ) else {
            bail!("incomplete times for {id}: {event:?}");
        };
        fetch_to_call.push(call - fetch);
        slowest.push((call - handed, fetch.duration_since(bench_started)));
        handover_to_call.push(call - handed);
        approval_to_approved.push(done - last);
        let received = approvals
            .iter()
            .find(|record| record.accepted && record.event_id.eq_ignore_ascii_case(id))
            .map(|record| record.at_unix_ms);
        if let (Some(received_ms), Some(wall)) = (received, event.last_approval_wall) {
            let answered_ms = unix_ms(wall);
            approval_to_received.push(Duration::from_millis(
                received_ms.saturating_sub(answered_ms),
            ));
        }
    }
    println!(
        "## Dispatch latency ({} events, one every {} ms, one no-op plugin; poll interval excluded)\n",
        ids.len(),
        LATENCY_SPACING.as_millis()
    );
    println!("| span | p50 | p99 | max |");
    println!("|---|---:|---:|---:|");
    print_row(
        "document: GET started → first plugin call",
        &sorted(fetch_to_call),
    );
    print_row(
        "document: parsed document handed to the loop → first plugin call",
        &sorted(handover_to_call),
    );
    print_row(
        "approval: last plugin approval → POST answered and journaled",
        &sorted(approval_to_approved),
    );
    print_row(
        "approval: last plugin approval → POST received by IMDS (ms clock)",
        &sorted(approval_to_received),
    );
    slowest.sort_by_key(|(latency, _)| std::cmp::Reverse(*latency));
    let listed: Vec<String> = slowest
        .iter()
        .take(6)
        .map(|(latency, at)| format!("{} at {:.1} s", micros(*latency), at.as_secs_f64()))
        .collect();
    println!(
        "\nslowest hand-overs (latency at seconds into the run): {}\n",
        listed.join(", ")
    );
    Ok(())
}

// ---- fan-out --------------------------------------------------------------------------

async fn measure_fan_out(runtime: &Runtime, noop: &[u8], work: &Path) -> anyhow::Result<()> {
    println!(
        "## Fan-out: document handed to the loop → every event approved at IMDS ({FAN_OUT_ROUNDS} rounds each)\n"
    );
    println!("| plugins | events in the document | p50 | p99 | max | p50 ÷ (plugins × events) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let shapes = [
        (1, 1),
        (10, 1),
        (50, 1),
        (1, 10),
        (1, 100),
        (3, 10),
        (3, 100),
    ];
    for (plugin_count, event_count) in shapes {
        let plugins = load_noops(runtime, noop, plugin_count)?;
        let mut times = Vec::with_capacity(FAN_OUT_ROUNDS);
        for round in 0..FAN_OUT_ROUNDS {
            let scenario = spaced_scenario(event_count, Duration::ZERO)?;
            let dir = work.join(format!("fan-out-{plugin_count}-{event_count}-{round}"));
            let mut bench = Bench::start(scenario, plugins.clone(), &dir, Feed::ByHand).await?;
            let ids = bench.event_ids();
            let appear = bench.simulator.scenario().events[0].appear_at;
            bench.sleep_until(appear + FETCH_AFTER).await;
            bench.feed(&ids).await?;
            let handed = bench.handed_over(&ids[0])?;
            let done = bench.wait_until_approved(&ids).await?;
            times.push(done - handed);
            bench.stop().await;
        }
        let times = sorted(times);
        let per_call = percentile(&times, 50) / (plugin_count * event_count) as u32;
        println!(
            "| {plugin_count} | {event_count} | {} | {} | {} | {} |",
            micros(percentile(&times, 50)),
            micros(percentile(&times, 99)),
            micros(times[times.len() - 1]),
            micros(per_call),
        );
    }
    println!();
    Ok(())
}

// ---- detection to approval, with the real poller ---------------------------------------

/// From a Preempt being in the document IMDS serves to the approval POST arriving there,
/// with forewarn's poller at its default interval and three bundled plugins that approve at
/// once. Both instants are on the simulator's
/// scenario clock, so the figure includes the wait for the next poll.
async fn measure_detection(runtime: &Runtime, work: &Path) -> anyhow::Result<()> {
    let scenario = preempt_scenario(DETECTION_EVENTS, DETECTION_SPACING)?;
    let plugins = load_bundled_trio(runtime)?;
    let names: Vec<String> = plugins
        .iter()
        .map(|plugin| plugin.name().to_owned())
        .collect();
    let mut bench = Bench::start(
        scenario,
        plugins,
        &work.join("detection"),
        Feed::Poller(DETECTION_POLL),
    )
    .await?;
    let ids = bench.event_ids();
    let scenario = bench.simulator.scenario();
    // The approvals are awaited (with PATIENCE) from the moment the last event appears.
    let last_appears = scenario.events.iter().map(|event| event.appear_at).max();
    bench.sleep_until(last_appears.unwrap_or_default()).await;
    bench.wait_until_approved(&ids).await?;
    let approvals = bench.simulator.snapshot().approvals;
    bench.stop().await;
    let mut latencies = Vec::with_capacity(ids.len());
    for event in &scenario.events {
        let received = approvals
            .iter()
            .find(|record| record.accepted && record.event_id.eq_ignore_ascii_case(event.id()))
            .with_context(|| format!("no accepted approval of {}", event.id()))?;
        let appeared_ms = event.appear_at.as_millis() as u64;
        latencies.push(Duration::from_millis(
            received.at_scenario_ms.saturating_sub(appeared_ms),
        ));
    }
    let latencies = sorted(latencies);
    println!(
        "## Detection to approval ({} Preempts, one every {} ms; poller every {} ms; plugins {})\n",
        ids.len(),
        DETECTION_SPACING.as_millis(),
        DETECTION_POLL.as_millis(),
        names.join(", ")
    );
    println!("| span | p50 | p99 | max |");
    println!("|---|---:|---:|---:|");
    print_row(
        "in the document at IMDS → approval POST received (scenario clock, ms)",
        &latencies,
    );
    let p99 = percentile(&latencies, 99);
    let target = DETECTION_POLL + Duration::from_millis(10);
    println!(
        "\np99 {} against the target poll interval + 10 ms = {}: {}\n",
        micros(p99),
        micros(target),
        if p99 <= target { "met" } else { "not met" }
    );
    Ok(())
}

/// lb-drain (no drain window), checkpoint and graceful-shutdown (nothing configured): the
/// bundled plugins, each approving at once.
fn load_bundled_trio(
    runtime: &Runtime,
) -> anyhow::Result<Vec<forewarn_daemon::plugins::set::LoadedPlugin>> {
    bundled_plugins()
        .into_iter()
        .filter(|plugin| ["lb-drain", "checkpoint", "graceful-shutdown"].contains(&plugin.name))
        .map(|plugin| {
            let mut manifest = plugin.parsed_manifest()?;
            if plugin.name == "lb-drain" {
                // The shipped 15 s drain window would be the figure; no window approves at once.
                manifest
                    .config
                    .insert("drain-seconds".into(), ConfigValue::Integer(0));
            }
            let path = PathBuf::from(format!("{}.wasm", plugin.name));
            load_plugin_bytes(runtime, &path, plugin.wasm, manifest)
                .map_err(|error| anyhow::anyhow!("{error}"))
        })
        .collect()
}

/// `count` Platform Reboots, the first at 300 ms and then one every `spacing`, each with a
/// 15-minute notice and gone 500 ms after it starts.
fn spaced_scenario(count: usize, spacing: Duration) -> anyhow::Result<Scenario> {
    spaced_events("Reboot", "15m", count, spacing)
}

/// `count` Preempts (Spot evictions, 30 s notice) for this VM, as [`spaced_scenario`].
fn preempt_scenario(count: usize, spacing: Duration) -> anyhow::Result<Scenario> {
    spaced_events("Preempt", "30s", count, spacing)
}

fn spaced_events(
    event_type: &str,
    notice: &str,
    count: usize,
    spacing: Duration,
) -> anyhow::Result<Scenario> {
    let mut text = String::from("name = \"bench\"\nend_after = \"1s\"\n");
    for index in 0..count {
        let appear = Duration::from_millis(300) + spacing * index as u32;
        text.push_str(&format!(
            "\n[[events]]\ntype = \"{event_type}\"\nappear_at = \"{}ms\"\nnotice = \"{notice}\"\nruns_for = \"500ms\"\n",
            appear.as_millis()
        ));
    }
    Ok(Scenario::from_toml(&text, "bench")?)
}

/// `count` copies of the no-op plugin, `noop-00`, `noop-01`, …, all independent.
fn load_noops(
    runtime: &Runtime,
    noop: &[u8],
    count: usize,
) -> anyhow::Result<Vec<forewarn_daemon::plugins::set::LoadedPlugin>> {
    (0..count)
        .map(|index| {
            let path = PathBuf::from(format!("noop-{index:02}.wasm"));
            load_plugin_bytes(runtime, &path, noop, PluginManifest::default())
                .map_err(|error| anyhow::anyhow!("{error}"))
        })
        .collect()
}

// ---- small helpers --------------------------------------------------------------------

fn print_row(label: &str, sorted_times: &[Duration]) {
    println!("{}", row(label, sorted_times));
}

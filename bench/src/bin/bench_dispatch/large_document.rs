//! `bench-dispatch large-document`: what a document of many events costs the daemon — the
//! real `forewarn` binary polling the simulator every second — as CPU per polled document and
//! as gaps between polls, measured at the simulator's request log, for 10 (the baseline),
//! 1 000 and 7 500 events, each in two loads:
//!
//! - `unchanged`: the events are announced three days ahead, so they wait for the lead time,
//!   and the document stays the same: what each poll costs;
//! - `one change a second`: the same, and a new event joins them every second, so every
//!   poll brings a document that differs by one event;
//! - `preparing`: the events are 15 minutes ahead and a probe plugin defers every prepare
//!   call (asked again after 1.5 s): plugin answers stream into the loop the whole time
//!   (the CPU is mostly plugin calls; the figure that matters is the gaps).
//!
//! CPU is counted over a 20 s window once the first document's work is done; the gaps are
//! every gap between two GETs from the events' appearance to the end of that window.
//!
//! The 7 500-event document is 0.99 MB, under the 1 MiB forewarn reads: events in the
//! 2017-08-01 shape, without `ResourceType` (`omit_fields`), with ids of six characters.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use forewarn_bench::proc_stats::{clock_ticks_per_second, process_cpu};
use forewarn_bench::{forewarn_binary, micros, percentile, ratio, sorted};
use forewarn_simulator::{Scenario, SimulatorConfig, SimulatorHandle};
use forewarn_test_support::guests::PROBE;
use forewarn_test_support::harness::{Daemon, DaemonConfig, ProbePlugin, write_plugin_dir};

/// Event counts measured; the first is the baseline the others are compared with.
const SIZES: [usize; 3] = [10, 1_000, 7_500];
/// How long after the events appear the measurement starts (the first document's work).
const WARM_UP: Duration = Duration::from_secs(8);
/// How long CPU and polls are counted.
const WINDOW: Duration = Duration::from_secs(20);
/// When the events appear (scenario time): the daemon has polled the empty document by then.
const APPEAR_AT: Duration = Duration::from_secs(3);

/// What the events make the daemon do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    Unchanged,
    OneChangeASecond,
    Preparing,
}

impl Load {
    fn name(self) -> &'static str {
        match self {
            Load::Unchanged => "unchanged (3 d ahead)",
            Load::OneChangeASecond => "one new event a second (3 d ahead)",
            Load::Preparing => "preparing (a plugin defers)",
        }
    }

    fn notice(self) -> &'static str {
        match self {
            Load::Unchanged | Load::OneChangeASecond => "3d",
            Load::Preparing => "15m",
        }
    }
}

/// How many events join, one a second, under [`Load::OneChangeASecond`]: one per poll of
/// the warm-up and the window.
const JOINING: u64 = 40;

/// One run's figures.
struct Figures {
    events: usize,
    document_bytes: usize,
    cpu: Duration,
    polls: usize,
    gaps: Vec<Duration>,
}

impl Figures {
    fn cpu_per_poll(&self) -> Duration {
        self.cpu / u32::try_from(self.polls.max(1)).unwrap_or(u32::MAX)
    }

    fn cores(&self) -> f64 {
        self.cpu.as_secs_f64() / WINDOW.as_secs_f64()
    }
}

/// Runs every size in every load and prints the table for BENCHMARKS.md. `only` (the
/// arguments after `large-document`: a load's first word, `unchanged`, `one` or
/// `preparing`, and an event count) runs one case alone, for a profiler.
pub(crate) async fn measure_large_documents(work: &Path, only: &[String]) -> anyhow::Result<()> {
    let binary = forewarn_binary()?;
    let ticks = clock_ticks_per_second()?;
    println!(
        "## Large documents: the daemon polling every 1 s ({} s window after {} s warm-up)\n",
        WINDOW.as_secs(),
        WARM_UP.as_secs()
    );
    println!(
        "| load | events | document | CPU per polled document | CPU (cores) | polls in the window | gap p50 | gap p99 | gap max | CPU per document ÷ baseline |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let chosen = |load: Load, events: usize| match only {
        [word, count] => load.name().starts_with(word.as_str()) && *count == events.to_string(),
        _ => true,
    };
    for load in [Load::Unchanged, Load::OneChangeASecond, Load::Preparing] {
        let mut baseline: Option<Duration> = None;
        for events in SIZES.into_iter().filter(|events| chosen(load, *events)) {
            let dir = work.join(format!("large-{events}-{load:?}"));
            let figures = run_one(&binary, ticks, &dir, events, load).await?;
            let per_poll = figures.cpu_per_poll();
            let base = *baseline.get_or_insert(per_poll);
            let gaps = sorted(figures.gaps.clone());
            println!(
                "| {} | {} | {:.2} MB | {} | {:.2} | {} | {} | {} | {} | {:.1}x |",
                load.name(),
                figures.events,
                figures.document_bytes as f64 / 1e6,
                micros(per_poll),
                figures.cores(),
                figures.polls,
                micros(percentile(&gaps, 50)),
                micros(percentile(&gaps, 99)),
                micros(gaps.last().copied().unwrap_or_default()),
                ratio(per_poll, base),
            );
        }
    }
    println!();
    Ok(())
}

async fn run_one(
    binary: &Path,
    ticks: u64,
    dir: &Path,
    events: usize,
    load: Load,
) -> anyhow::Result<Figures> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let simulator = forewarn_simulator::spawn(SimulatorConfig {
        listen: "127.0.0.1:0".parse()?,
        scenario: scenario(events, load)?,
        speed: 1.0,
    })
    .await?;
    let started = Instant::now();
    let plugins = dir.join("plugins");
    let probes = match load {
        Load::Unchanged | Load::OneChangeASecond => Vec::new(),
        Load::Preparing => vec![ProbePlugin::new("busy", "defer").subscribe(&["Reboot"])],
    };
    write_plugin_dir(&plugins, Path::new(PROBE), &probes);
    let config = DaemonConfig {
        poll_interval: "1s".into(),
        ..DaemonConfig::vm_a(dir, plugins, &simulator.base_url())
    };
    let config_path = dir.join("forewarn.toml");
    config.write(&config_path);
    let mut daemon = Daemon::start(binary, &config_path);
    tokio::time::sleep_until((started + APPEAR_AT + WARM_UP).into()).await;
    let window_start = now_unix_ms();
    let cpu_before = process_cpu(daemon.pid(), ticks)?;
    tokio::time::sleep(WINDOW).await;
    let cpu_after = process_cpu(daemon.pid(), ticks)?;
    let window_end = now_unix_ms();
    let state = simulator.snapshot();
    if daemon.has_exited() {
        bail!("the daemon exited: {}", daemon.describe_for_failure());
    }
    daemon.kill();
    let document_bytes = document_size(&simulator).await?;
    simulator.shutdown().await;
    let gets: Vec<u64> = state
        .requests
        .iter()
        .filter(|request| request.method == "GET" && request.path.ends_with("scheduledevents"))
        .map(|request| request.at_unix_ms)
        .collect();
    let polls = gets
        .iter()
        .filter(|at| (window_start..window_end).contains(*at))
        .count();
    // Gaps from the events' appearance on (the first document's work included), and from
    // the last GET to the end: a poll that never came is a gap too.
    let appeared = state.started_at_unix_ms + millis(APPEAR_AT);
    let since_appearance: Vec<u64> = gets.into_iter().filter(|at| *at >= appeared).collect();
    let mut gaps: Vec<Duration> = since_appearance
        .windows(2)
        .map(|pair| Duration::from_millis(pair[1].saturating_sub(pair[0])))
        .collect();
    if let Some(last) = since_appearance.last() {
        gaps.push(Duration::from_millis(window_end.saturating_sub(*last)));
    }
    Ok(Figures {
        events,
        document_bytes,
        cpu: cpu_after.saturating_sub(cpu_before),
        polls,
        gaps,
    })
}

/// `count` Reboots for vm-a, appearing at [`APPEAR_AT`], in the trimmed shape.
fn scenario(count: usize, load: Load) -> anyhow::Result<Scenario> {
    let mut text = String::from(
        "name = \"large\"\nopen_ended = true\nshape = \"2017-08-01\"\nomit_fields = [\"ResourceType\"]\n",
    );
    for index in 0..count {
        text.push_str(&format!(
            "\n[[events]]\nid = \"e{index:05}\"\ntype = \"Reboot\"\nresources = [\"vm-a\"]\nappear_at = \"{}ms\"\nnotice = \"{}\"\n",
            APPEAR_AT.as_millis(),
            load.notice()
        ));
    }
    if load == Load::OneChangeASecond {
        for second in 1..=JOINING {
            text.push_str(&format!(
                "\n[[events]]\nid = \"j{second:02}\"\ntype = \"Reboot\"\nresources = [\"vm-a\"]\nappear_at = \"{}ms\"\nnotice = \"3d\"\n",
                (APPEAR_AT + Duration::from_secs(second)).as_millis()
            ));
        }
    }
    Ok(Scenario::from_toml(&text, "large")?)
}

/// The size of the document the simulator serves now.
async fn document_size(simulator: &SimulatorHandle) -> anyhow::Result<usize> {
    let client = forewarn_imds::ImdsClient::new(forewarn_imds::ClientConfig {
        base_url: simulator.base_url(),
        max_requests_per_second: 100,
        ..forewarn_imds::ClientConfig::default()
    })
    .map_err(|error| anyhow::anyhow!("cannot build the IMDS client: {}", error.0))?;
    Ok(client.fetch_events().await?.raw.len())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn now_unix_ms() -> u64 {
    forewarn_test_support::harness::now_unix_ms()
}

//! `bench-goals`: the figures of three speed goals that end-to-end tests used to assert as
//! timed bounds (issue 44; the tests now assert the behaviour with deadlines far away), each
//! against a baseline measured in the same run, with the real `forewarn` binary:
//!
//! - `readyz`: `/readyz` probes from 127.0.0.2, one at a time, while nothing else talks to
//!   the admin port (the baseline) and while 127.0.0.1 holds 300 idle connections and reopens
//!   each one closed (`e2e_operations::a_peer_holding_hundreds_of_idle_connections_cannot_starve_readyz`);
//! - `memory`: a plugin whose on-start touches 60 MiB is removed: how long until `/status` no
//!   longer lists it (the baseline: the unload itself) and until the daemon's RSS is back
//!   within 8 MiB of what it was before the plugin came (`e2e_reload::a_removed_plugin_gives_its_memory_back`);
//! - `preempt`: a Preempt's stop action, from the Preempt's appearance: with 30 s of notice
//!   among 7 500 Reboots a plugin defers, polled every second, against the same with 10
//!   Reboots (the gaps between polls too; `e2e_short_notice::a_7500_event_document_…`); and
//!   with 3 s of notice through the bundled chain (lb-drain, checkpoint, graceful-shutdown),
//!   polled every 250 ms, against graceful-shutdown alone
//!   (`e2e_short_notice::a_three_second_preempt_runs_the_stop_action_before_the_event_starts`).
//!
//! With no argument, all three. Figures for BENCHMARKS.md; no assertions on time.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use forewarn_bench::proc_stats::{load_average, rss_kib};
use forewarn_bench::{forewarn_binary, micros, percentile, ratio, row, sorted};
use forewarn_simulator::{StateSnapshot, Transition};
use forewarn_test_support::guests::PROBE;
use forewarn_test_support::harness::{
    Daemon, DaemonConfig, ProbePlugin, Simulator, http_get, install_bundled_plugin,
    write_plugin_dir,
};

/// How long to wait for the daemon to get somewhere before giving up.
const PATIENCE: Duration = Duration::from_secs(60);

fn main() -> anyhow::Result<()> {
    let binary = forewarn_binary()?;
    let which = std::env::args().nth(1);
    let rounds: usize = match std::env::args().nth(2) {
        Some(text) => text.parse().with_context(|| {
            format!("the rounds (second argument) must be a number, not {text}")
        })?,
        None => 3,
    };
    println!("# forewarn speed goals (bench-goals)\n");
    println!(
        "Load average at the start: {:.2}\n",
        load_average().unwrap_or(f64::NAN)
    );
    match which.as_deref() {
        Some("readyz") => readyz(&binary),
        Some("memory") => memory(&binary, rounds),
        Some("preempt") => preempt(&binary, rounds),
        None | Some("all") => {
            readyz(&binary)?;
            memory(&binary, rounds)?;
            preempt(&binary, rounds)
        }
        Some(other) => bail!(
            "unknown measurement {other}: run bench-goals with readyz, memory, preempt or all \
             (then, optionally, the rounds: bench-goals preempt 5)"
        ),
    }
}

/// Polls `check` every few ms until it gives a value; fails after [`PATIENCE`] with `what`.
fn wait<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> anyhow::Result<T> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check() {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("gave up after {PATIENCE:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ---- /readyz under a starving peer --------------------------------------------------------

/// Probes of each half.
const PROBES: usize = 200;
/// Idle connections the starving peer keeps open (reopening those the daemon closes).
const STARVING_CONNECTIONS: usize = 300;
/// Each probe's time-out: far beyond any answer.
const PROBE_PATIENCE: Duration = Duration::from_secs(30);
/// The goal the test used to assert: an answer within a second.
const PROBE_GOAL: Duration = Duration::from_secs(1);

fn readyz(binary: &Path) -> anyhow::Result<()> {
    let work = tempfile::tempdir().context("could not create a temporary directory")?;
    let simulator = Simulator::builder(binary).scenario("idle").start();
    let plugin_dir = work.path().join("plugins");
    std::fs::create_dir_all(&plugin_dir)?;
    let config = work.path().join("forewarn.toml");
    DaemonConfig::vm_a(work.path(), plugin_dir, &simulator.base_url).write(&config);
    let daemon = Daemon::start(binary, &config);
    let admin: SocketAddr = daemon
        .admin_address(PATIENCE)
        .parse()
        .context("the admin address is not host:port")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("could not start a tokio runtime")?;
    let source: IpAddr = "127.0.0.2".parse()?;
    let probe_all = || -> anyhow::Result<Vec<Duration>> {
        (0..PROBES)
            .map(|_| probe_readyz(&runtime, source, admin))
            .collect()
    };
    // Warm-up: the first connections of a fresh daemon.
    for _ in 0..20 {
        probe_readyz(&runtime, source, admin)?;
    }
    let alone = sorted(probe_all()?);

    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let starving = {
        let (stop, opened) = (stop.clone(), opened.clone());
        std::thread::spawn(move || starve(admin, STARVING_CONNECTIONS, &stop, &opened))
    };
    wait("the starving peer's connections", || {
        (opened.load(Ordering::Relaxed) >= STARVING_CONNECTIONS).then_some(())
    })?;
    let starved = probe_all();
    stop.store(true, Ordering::Relaxed);
    let _joined = starving.join();
    let starved = sorted(starved?);

    println!(
        "## /readyz from 127.0.0.2 ({PROBES} probes one at a time, each after 20 warm-up; \
         {STARVING_CONNECTIONS} idle connections from 127.0.0.1, {} opened in all)\n",
        opened.load(Ordering::Relaxed)
    );
    println!("| admin port | median | p99 | max | within {PROBE_GOAL:?} | p99 ÷ alone |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (label, times) in [
        ("no other client (baseline)", &alone),
        ("a peer holding 300 idle connections", &starved),
    ] {
        let within = times.iter().filter(|time| **time <= PROBE_GOAL).count();
        println!(
            "{} {within} of {PROBES} | {:.1}× |",
            row(label, times),
            ratio(percentile(times, 99), percentile(&alone, 99))
        );
    }
    println!();
    Ok(())
}

/// One `GET /readyz` from `source`: how long until the whole answer (200 or 503) was read.
fn probe_readyz(
    runtime: &tokio::runtime::Runtime,
    source: IpAddr,
    admin: SocketAddr,
) -> anyhow::Result<Duration> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let started = Instant::now();
    let probe = async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(source, 0))?;
        let mut stream = socket.connect(admin).await?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<Vec<u8>, std::io::Error>(answer)
    };
    let answer = runtime
        .block_on(async { tokio::time::timeout(PROBE_PATIENCE, probe).await })
        .with_context(|| format!("/readyz did not answer within {PROBE_PATIENCE:?}"))?
        .context("/readyz probe failed")?;
    if !(answer.starts_with(b"HTTP/1.1 200") || answer.starts_with(b"HTTP/1.1 503")) {
        bail!(
            "/readyz answered {:?}",
            String::from_utf8_lossy(&answer[..answer.len().min(80)])
        );
    }
    Ok(started.elapsed())
}

/// Holds up to `connections` idle connections to `admin` from 127.0.0.1 until `stop`,
/// reopening each one the daemon closes; counts every connection it opened.
fn starve(admin: SocketAddr, connections: usize, stop: &AtomicBool, opened: &AtomicUsize) {
    use std::io::Read;
    let mut held: Vec<Option<std::net::TcpStream>> = (0..connections).map(|_| None).collect();
    while !stop.load(Ordering::Relaxed) {
        for slot in &mut held {
            let closed = match slot {
                None => true,
                Some(stream) => match stream.read(&mut [0u8; 64]) {
                    Ok(0) => true,
                    Ok(_) => false,
                    Err(error) => error.kind() != std::io::ErrorKind::WouldBlock,
                },
            };
            if closed {
                *slot = std::net::TcpStream::connect(admin)
                    .ok()
                    .filter(|stream| stream.set_nonblocking(true).is_ok());
                if slot.is_some() {
                    opened.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ---- memory given back -----------------------------------------------------------------

/// KiB (what /proc gives) in a MiB.
const KIB_PER_MIB: u64 = 1024;

fn memory(binary: &Path, rounds: usize) -> anyhow::Result<()> {
    let work = tempfile::tempdir().context("could not create a temporary directory")?;
    let simulator = Simulator::builder(binary).scenario("idle").start();
    let plugin_dir = work.path().join("plugins.d");
    std::fs::create_dir_all(&plugin_dir)?;
    let config = work.path().join("forewarn.toml");
    DaemonConfig::vm_a(work.path(), plugin_dir.clone(), &simulator.base_url).write(&config);
    let plugins_listed = |admin: &str| -> Option<usize> {
        let body = http_get(admin, "/status").ok()?;
        let status: serde_json::Value = serde_json::from_str(&body).ok()?;
        (status["phase"] == "running").then(|| status["plugins"].as_array().map_or(0, Vec::len))
    };
    let component = forewarn_test_support::generated::ManyMemories {
        extra_memories: 15,
        initial_pages: 64,
        grow_pages: 0,
        touch_on_start: true,
    }
    .component();
    let mut unloaded = Vec::new();
    let mut given_back = Vec::new();
    let mut peaks = Vec::new();
    let mut baselines = Vec::new();
    for round in 0..rounds {
        // A daemon of its own each round: one that loaded the plugin before does not run
        // its on-start again (the pages would not be touched).
        let daemon = Daemon::start(binary, &config);
        let admin = daemon.admin_address(PATIENCE);
        let pid = daemon.pid();
        wait("the daemon running", || {
            plugins_listed(&admin).filter(|count| *count == 0)
        })?;
        let baseline = rss_kib(pid)?;
        let temporary = plugin_dir.join(".many-memories.wasm.tmp");
        // New content each round: the same bytes again are not started again (no on-start).
        std::fs::write(&temporary, tagged(&component, round))?;
        std::fs::rename(&temporary, plugin_dir.join("many-memories.wasm"))?;
        let peak = wait("the plugin's 60 MiB in the daemon's RSS", || {
            rss_kib(pid)
                .ok()
                .filter(|rss| *rss > baseline + 50 * KIB_PER_MIB)
        })
        .with_context(|| {
            format!(
                "RSS {} KiB (before the plugin {baseline} KiB); /status: {}",
                rss_kib(pid).unwrap_or_default(),
                http_get(&admin, "/status").unwrap_or_default()
            )
        })?;
        wait("the plugin listed in /status", || {
            plugins_listed(&admin).filter(|count| *count == 1)
        })?;
        std::fs::remove_file(plugin_dir.join("many-memories.wasm"))?;
        let removed = Instant::now();
        let mut gone = None;
        let mut back = None;
        wait("the plugin gone and the RSS back within 8 MiB", || {
            if gone.is_none() && plugins_listed(&admin) == Some(0) {
                gone = Some(removed.elapsed());
            }
            if back.is_none() && rss_kib(pid).is_ok_and(|rss| rss <= baseline + 8 * KIB_PER_MIB) {
                back = Some(removed.elapsed());
            }
            gone.zip(back)
        })?;
        let (gone, back) = gone.zip(back).context("both instants were taken")?;
        unloaded.push(gone);
        given_back.push(back);
        peaks.push(peak);
        baselines.push(baseline);
    }
    let unloaded = sorted(unloaded);
    let given_back = sorted(given_back);
    println!(
        "## A removed plugin's 60 MiB given back ({rounds} rounds; daemon RSS before the plugin \
         {:.1}–{:.1} MiB, with it {:.1}–{:.1} MiB)\n",
        mib(&baselines, false),
        mib(&baselines, true),
        mib(&peaks, false),
        mib(&peaks, true)
    );
    println!("| from the removal to | median | p99 | max | median ÷ unload |");
    println!("|---|---:|---:|---:|---:|");
    for (label, times) in [
        ("the plugin gone from /status (baseline)", &unloaded),
        ("the RSS within 8 MiB of before", &given_back),
    ] {
        println!(
            "{} {:.1}× |",
            row(label, times),
            ratio(percentile(times, 50), percentile(&unloaded, 50))
        );
    }
    println!();
    Ok(())
}

/// `component` with a custom section (id 0) named `bench-round` holding `round`: the same
/// behaviour, new content.
fn tagged(component: &[u8], round: usize) -> Vec<u8> {
    let name = b"bench-round";
    let payload = round.to_le_bytes();
    let body_len = 1 + name.len() + payload.len();
    let mut bytes = component.to_vec();
    // Both lengths are below 128: one LEB128 byte each.
    bytes.extend([0u8, u8::try_from(body_len).unwrap_or(127)]);
    bytes.push(u8::try_from(name.len()).unwrap_or(127));
    bytes.extend_from_slice(name);
    bytes.extend_from_slice(&payload);
    bytes
}

/// The smallest (or largest) of `kib`, in MiB.
fn mib(kib: &[u64], largest: bool) -> f64 {
    let pick = if largest {
        kib.iter().max()
    } else {
        kib.iter().min()
    };
    pick.copied().unwrap_or_default() as f64 / KIB_PER_MIB as f64
}

// ---- a Preempt's stop action -----------------------------------------------------------

/// One case of `preempt`: what the daemon has beside the Preempt, and how it is set up.
#[derive(Debug, Clone, Copy)]
enum Case {
    /// A 30 s Preempt appearing at 14 s among `reboots` Reboots (appearing at 2 s, 15 minutes
    /// ahead) that a probe plugin defers; graceful-shutdown alone for the Preempt; 1 s polls.
    AmongReboots { reboots: usize },
    /// A 3 s Preempt appearing at 5 s; 250 ms polls; `chain`: lb-drain (15 s), checkpoint,
    /// then graceful-shutdown, as shipped, else graceful-shutdown alone.
    ThreeSeconds { chain: bool },
}

impl Case {
    fn label(self) -> String {
        match self {
            Case::AmongReboots { reboots } => {
                format!("30 s Preempt among {reboots} deferred Reboots, 1 s polls")
            }
            Case::ThreeSeconds { chain: false } => {
                "3 s Preempt, graceful-shutdown alone, 250 ms polls".to_owned()
            }
            Case::ThreeSeconds { chain: true } => {
                "3 s Preempt, the bundled chain (lb-drain, checkpoint, graceful-shutdown)"
                    .to_owned()
            }
        }
    }

    fn scenario(self) -> String {
        match self {
            Case::AmongReboots { reboots } => {
                let mut text = String::from(
                    "name = \"large-document\"\nend_after = \"1s\"\nshape = \"2017-08-01\"\n\
                     omit_fields = [\"ResourceType\"]\n",
                );
                for index in 0..reboots {
                    text.push_str(&format!(
                        "\n[[events]]\nid = \"e{index:05}\"\ntype = \"Reboot\"\n\
                         resources = [\"vm-a\"]\nappear_at = \"2s\"\nnotice = \"15m\"\n"
                    ));
                }
                text.push_str(
                    "\n[[events]]\nid = \"preempt\"\ntype = \"Preempt\"\nresources = [\"vm-a\"]\n\
                     appear_at = \"14s\"\nnotice = \"30s\"\nruns_for = \"3s\"\n",
                );
                text
            }
            Case::ThreeSeconds { .. } => "name = \"three-seconds\"\nend_after = \"2s\"\n\n\
                 [[events]]\nid = \"preempt\"\ntype = \"Preempt\"\nappear_at = \"5s\"\n\
                 notice = \"3s\"\nruns_for = \"3s\"\n"
                .to_owned(),
        }
    }
}

/// One run's figures: the stop action after the Preempt appeared, the Preempt's start after
/// the stop action, and the poll gaps from the first events' appearance to the stop.
struct Run {
    stop: Duration,
    before_start: Option<Duration>,
    gaps: Vec<Duration>,
}

fn preempt(binary: &Path, rounds: usize) -> anyhow::Result<()> {
    let pairs = [
        [
            Case::AmongReboots { reboots: 10 },
            Case::AmongReboots { reboots: 7_500 },
        ],
        [
            Case::ThreeSeconds { chain: false },
            Case::ThreeSeconds { chain: true },
        ],
    ];
    println!(
        "## A Preempt's stop action, from its appearance at the simulator ({rounds} rounds a case)\n"
    );
    println!(
        "| case | stop action: median | max | median ÷ baseline | stop → the start (least) | poll gap p99 | max |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for pair in pairs {
        let mut baseline = None;
        for case in pair {
            let runs: Vec<Run> = (0..rounds)
                .map(|_| run_preempt(binary, case))
                .collect::<anyhow::Result<_>>()?;
            let stops = sorted(runs.iter().map(|run| run.stop).collect());
            let median = percentile(&stops, 50);
            let base = *baseline.get_or_insert(median);
            let least_before_start = runs.iter().filter_map(|run| run.before_start).min();
            let gaps = sorted(runs.iter().flat_map(|run| run.gaps.clone()).collect());
            println!(
                "| {} | {} | {} | {:.1}× | {} | {} | {} |",
                case.label(),
                micros(median),
                micros(stops.last().copied().unwrap_or_default()),
                ratio(median, base),
                least_before_start.map_or("after it".to_owned(), micros),
                micros(percentile(&gaps, 99)),
                micros(gaps.last().copied().unwrap_or_default()),
            );
        }
    }
    println!();
    Ok(())
}

fn run_preempt(binary: &Path, case: Case) -> anyhow::Result<Run> {
    let work = tempfile::tempdir().context("could not create a temporary directory")?;
    let simulator = Simulator::builder(binary)
        .scenario_text(&case.scenario())
        .start_on_first_poll()
        .start();
    let plugin_dir = work.path().join("plugins");
    std::fs::create_dir_all(&plugin_dir)?;
    let stopped = work.path().join("stopped");
    let actions = format!(
        "[actions.stop-app]\nargv = [\"sh\", \"-c\", \"date +%s%3N > {}\"]\ntimeout = \"5s\"\n",
        stopped.display()
    );
    let graceful = |subscribe: &str, after: &str| {
        format!(
            "subscribe = [{subscribe}]\n{after}budget = \"10s\"\n[config]\n\
             stop-action = \"stop-app\"\n[capabilities]\nactions = [\"stop-app\"]\n"
        )
    };
    let poll_interval = match case {
        Case::AmongReboots { .. } => {
            write_plugin_dir(
                &plugin_dir,
                Path::new(PROBE),
                &[ProbePlugin::new("busy", "defer").subscribe(&["Reboot"])],
            );
            install_bundled_plugin(
                &plugin_dir,
                "graceful-shutdown",
                Some(&graceful("\"Preempt\"", "")),
            );
            "1s"
        }
        Case::ThreeSeconds { chain } => {
            if chain {
                install_bundled_plugin(&plugin_dir, "lb-drain", None);
                install_bundled_plugin(&plugin_dir, "checkpoint", None);
                install_bundled_plugin(
                    &plugin_dir,
                    "graceful-shutdown",
                    Some(&graceful(
                        "\"Reboot\", \"Redeploy\", \"Preempt\", \"Terminate\"",
                        "after = [\"lb-drain\", \"checkpoint\"]\n",
                    )),
                );
            } else {
                install_bundled_plugin(
                    &plugin_dir,
                    "graceful-shutdown",
                    Some(&graceful("\"Preempt\"", "")),
                );
            }
            "250ms"
        }
    };
    let config = DaemonConfig {
        extra: actions,
        poll_interval: poll_interval.to_owned(),
        prepare_lead_time: None,
        ..DaemonConfig::vm_a(work.path(), plugin_dir, &simulator.base_url)
    };
    let config_path = work.path().join("forewarn.toml");
    config.write(&config_path);
    let _daemon = Daemon::start(binary, &config_path);
    let stop_unix_ms: u64 = wait("the Preempt's stop action", || {
        std::fs::read_to_string(&stopped).ok()?.trim().parse().ok()
    })?;
    // The start comes at NotBefore or with the approval that follows the stop action.
    let state = wait("the Preempt's start at the simulator", || {
        let state = simulator.state();
        at(&state, "preempt", Transition::Started).map(|_| state)
    })?;
    let appeared = at(&state, "preempt", Transition::Appeared).context("no Appeared")?;
    let started = at(&state, "preempt", Transition::Started).context("no Started")?;
    let first_appeared = state
        .history
        .iter()
        .filter(|record| record.transition == Transition::Appeared)
        .map(|record| record.at_unix_ms)
        .min()
        .unwrap_or(appeared);
    let gets: Vec<u64> = state
        .requests
        .iter()
        .filter(|request| {
            request.method == "GET" && request.path.ends_with("/metadata/scheduledevents")
        })
        .map(|request| request.at_unix_ms)
        .filter(|at| (first_appeared..stop_unix_ms).contains(at))
        .collect();
    let gaps = gets
        .windows(2)
        .map(|pair| Duration::from_millis(pair[1] - pair[0]))
        .collect();
    Ok(Run {
        stop: Duration::from_millis(stop_unix_ms.saturating_sub(appeared)),
        before_start: started
            .checked_sub(stop_unix_ms)
            .filter(|_| started > stop_unix_ms)
            .map(Duration::from_millis),
        gaps,
    })
}

/// When `transition` first happened to `event_id` at the simulator (Unix ms).
fn at(state: &StateSnapshot, event_id: &str, transition: Transition) -> Option<u64> {
    state
        .history
        .iter()
        .find(|record| record.event_id == event_id && record.transition == transition)
        .map(|record| record.at_unix_ms)
}

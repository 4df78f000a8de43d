//! `measure-runtime`: the plugin runtime's figures for BENCHMARKS.md — cold compile and cached
//! load of each plugin, fresh instance + call of each (on demand, pooled, made ahead), and how late a loop is cut off.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use forewarn_runtime::wit::latest::Phase;
use forewarn_runtime::{
    CallFailure, HostServices, InstanceAllocation, InstanceTiming, Plugin, PluginSettings, Runtime,
    RuntimeConfig,
};
use forewarn_test_support::fixtures::{sample_context, sample_event};
use forewarn_test_support::guests::{NOOP, PROBE};

const COLD_COMPILES: usize = 5;
const CACHED_LOADS: usize = 20;
const WARM_UP_CALLS: usize = 100;
const NOOP_CALLS: usize = 2000;
const LARGE_CALLS: usize = 200;
const LOOP_CALLS: usize = 20;
const LOOP_BUDGET: Duration = Duration::from_millis(50);
const CALL_BUDGET: Duration = Duration::from_secs(10);

/// The bundled plugins, built beside the test guests by the same nested wasm build.
const BUNDLED: &[&str] = &["lb_drain.wasm", "checkpoint.wasm", "graceful_shutdown.wasm"];

fn main() -> anyhow::Result<()> {
    let calls_only = std::env::args().any(|arg| arg == "--calls");
    let paths = plugin_paths()?;
    println!("# forewarn plugin runtime figures\n");
    if !calls_only {
        measure_loading(&paths)?;
    }
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the tokio runtime")?;
    let runtime = Runtime::new(RuntimeConfig::default(), HostServices::default())?;
    tokio.block_on(measure_calls(&paths))?;
    if !calls_only {
        tokio.block_on(measure_loop_cut_off(&runtime))?;
    }
    Ok(())
}

/// The components to measure: the command-line arguments, or the bundled plugins.
fn plugin_paths() -> anyhow::Result<Vec<PathBuf>> {
    let given: Vec<PathBuf> = std::env::args_os()
        .skip(1)
        .filter(|arg| arg != "--calls")
        .map(PathBuf::from)
        .collect();
    if !given.is_empty() {
        return Ok(given);
    }
    let dir = Path::new(PROBE)
        .parent()
        .context("the probe's path has no directory")?;
    let bundled: Vec<PathBuf> = BUNDLED.iter().map(|name| dir.join(name)).collect();
    if let Some(missing) = bundled.iter().find(|path| !path.exists()) {
        bail!(
            "{} does not exist: build the bundled plugins first (`cargo build -p forewarn-host`), \
             or pass the .wasm files to measure as arguments",
            missing.display()
        );
    }
    Ok(bundled.into_iter().chain([PathBuf::from(NOOP)]).collect())
}

fn measure_loading(paths: &[PathBuf]) -> anyhow::Result<()> {
    println!("## Loading (median of {COLD_COMPILES} cold compiles, {CACHED_LOADS} cached loads)\n");
    println!("| component | size | cold compile + load | load from disk cache |");
    println!("|---|---:|---:|---:|");
    let cold_runtime = Runtime::new(RuntimeConfig::default(), HostServices::default())?;
    let cache_dir = tempfile_dir()?;
    let cached_runtime = Runtime::new(
        RuntimeConfig {
            cache_dir: Some(cache_dir.clone()),
            ..RuntimeConfig::default()
        },
        HostServices::default(),
    )?;
    for path in paths {
        let (name, bytes) = read_component(path)?;
        let cold = median(&time_loads(&cold_runtime, &bytes, COLD_COMPILES, false)?);
        time_loads(&cached_runtime, &bytes, 1, false)?;
        let cached = median(&time_loads(&cached_runtime, &bytes, CACHED_LOADS, true)?);
        println!(
            "| {name} | {} KiB | {} | {} |",
            bytes.len() / 1024,
            millis(cold),
            millis(cached)
        );
    }
    println!();
    std::fs::remove_dir_all(&cache_dir)
        .with_context(|| format!("could not remove {}", cache_dir.display()))?;
    Ok(())
}

/// Times `count` loads of `bytes`, checking each came from the cache (or not) as expected.
fn time_loads(
    runtime: &Runtime,
    bytes: &[u8],
    count: usize,
    from_cache: bool,
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        let plugin = runtime.load("measured", bytes, PluginSettings::default())?;
        times.push(started.elapsed());
        if plugin.loaded_from_cache() != from_cache {
            bail!("expected loaded_from_cache = {from_cache}, got the opposite");
        }
    }
    Ok(times)
}

/// Fresh instance + call of every measured component (and the no-op plugin): made at the
/// call with the on-demand allocator (the baseline: forewarn before issue 19), made at the
/// call from the pool, and made ahead of the call from the pool (what forewarn ships).
async fn measure_calls(paths: &[PathBuf]) -> anyhow::Result<()> {
    let at_call = |instance_allocation| RuntimeConfig {
        instance_allocation,
        instance_timing: InstanceTiming::AtCall,
        ..RuntimeConfig::default()
    };
    let on_demand = Runtime::new(
        at_call(InstanceAllocation::OnDemand),
        HostServices::default(),
    )?;
    let pooling = Runtime::new(
        at_call(InstanceAllocation::Pooling),
        HostServices::default(),
    )?;
    let shipped = Runtime::new(RuntimeConfig::default(), HostServices::default())?;
    println!("## Fresh instance + call (median of sequential calls after a warm-up)\n");
    println!(
        "Made ahead: each call is timed once the background task has made its instance (calls \
         spaced as the daemon's are); the instance is still fresh and serves that call only.\n"
    );
    println!(
        "| component | size | calls | on demand, at call (baseline) | pooled, at call | pooled, made ahead (shipped) | shipped ÷ baseline | shipped p99 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut all: Vec<PathBuf> = paths.to_vec();
    if !all.iter().any(|path| path == Path::new(NOOP)) {
        all.push(PathBuf::from(NOOP));
    }
    for path in &all {
        let (name, bytes) = read_component(path)?;
        let count = calls_for(bytes.len());
        let baseline = match time_calls(&on_demand, &bytes, count, Timing::AtCall).await {
            Ok(times) => times,
            Err(error) => {
                println!(
                    "| {name} | {} KiB | — | failed: {error:#} | | | | |",
                    bytes.len() / 1024
                );
                continue;
            }
        };
        let pooled = time_calls(&pooling, &bytes, count, Timing::AtCall).await?;
        let ahead = time_calls(&shipped, &bytes, count, Timing::Ahead).await?;
        let (base_median, ahead_median) = (median(&baseline), median(&ahead));
        println!(
            "| {name} | {} KiB | {count} | {} | {} | {} | {:.2} | {} |",
            bytes.len() / 1024,
            micros(base_median),
            micros(median(&pooled)),
            micros(ahead_median),
            ahead_median.as_secs_f64() / base_median.as_secs_f64(),
            micros(percentile(&ahead, 99)),
        );
    }
    println!();
    Ok(())
}

/// Whether a timed call waits for its instance to be made ahead of it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Timing {
    AtCall,
    Ahead,
}

/// A component's file name and bytes.
fn read_component(path: &Path) -> anyhow::Result<(String, Vec<u8>)> {
    let bytes =
        std::fs::read(path).with_context(|| format!("could not read {}", path.display()))?;
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((name, bytes))
}

/// Sequential calls to time: fewer for the large (Python, JavaScript) components.
fn calls_for(size: usize) -> usize {
    if size > 1024 * 1024 {
        LARGE_CALLS
    } else {
        NOOP_CALLS
    }
}

/// Loads `bytes` into `runtime`, warms it up, and times `count` fresh-instance calls
/// (sorted); with `Timing::Ahead`, each once its instance is ready.
async fn time_calls(
    runtime: &Runtime,
    bytes: &[u8],
    count: usize,
    timing: Timing,
) -> anyhow::Result<Vec<Duration>> {
    let plugin = runtime.load("measured", bytes, PluginSettings::default())?;
    for _ in 0..WARM_UP_CALLS.min(count) {
        call(&plugin, CALL_BUDGET).await?;
    }
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        if timing == Timing::Ahead {
            plugin.prepare_next().await;
            if !plugin.has_ready_instance().await {
                bail!("no instance was made ahead of the call");
            }
        }
        let call_started = Instant::now();
        call(&plugin, CALL_BUDGET).await?;
        times.push(call_started.elapsed());
    }
    times.sort();
    Ok(times)
}

async fn measure_loop_cut_off(runtime: &Runtime) -> anyhow::Result<()> {
    let bytes = std::fs::read(PROBE).with_context(|| format!("could not read {PROBE}"))?;
    let settings = PluginSettings {
        config: BTreeMap::from([("mode".to_owned(), "loop".to_owned())]),
        ..PluginSettings::default()
    };
    let looping = runtime.load("loop", &bytes, settings)?;
    let mut late = Vec::with_capacity(LOOP_CALLS);
    for _ in 0..LOOP_CALLS {
        let outcome = looping
            .call(
                &sample_event(),
                Phase::Prepare,
                &sample_context(),
                LOOP_BUDGET,
            )
            .await;
        if outcome.answer
            != Err(CallFailure::BudgetExceeded {
                budget: LOOP_BUDGET,
            })
        {
            bail!("the looping probe was not cut off: {:?}", outcome.answer);
        }
        late.push(outcome.elapsed.saturating_sub(LOOP_BUDGET));
    }
    late.sort();
    println!(
        "## Cut-off of an infinite loop ({LOOP_CALLS} calls, {} ms budget)\n",
        LOOP_BUDGET.as_millis()
    );
    println!("- after its deadline, median: {}", millis(median(&late)));
    println!(
        "- after its deadline, max: {}",
        millis(late[late.len() - 1])
    );
    Ok(())
}

async fn call(plugin: &Plugin, budget: Duration) -> anyhow::Result<()> {
    let outcome = plugin
        .call(&sample_event(), Phase::Prepare, &sample_context(), budget)
        .await;
    match outcome.answer {
        Ok(_) => Ok(()),
        Err(failure) => bail!("the call failed: {}", failure.reason()),
    }
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// The `percent`th percentile of sorted `times`.
fn percentile(times: &[Duration], percent: usize) -> Duration {
    let index = (times.len() * percent / 100).min(times.len() - 1);
    times[index]
}

fn micros(duration: Duration) -> String {
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// A fresh directory for the compile cache under the system's temp dir.
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("forewarn-measure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    Ok(dir)
}

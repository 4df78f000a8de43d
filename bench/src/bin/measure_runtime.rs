//! `measure-runtime`: the plugin runtime's figures for BENCHMARKS.md — cold compile and cached
//! load of each plugin, instantiate + call overhead of a no-op plugin, and how late a loop is cut off.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use forewarn_runtime::wit::latest::Phase;
use forewarn_runtime::{CallFailure, HostServices, Plugin, PluginSettings, Runtime, RuntimeConfig};
use forewarn_test_support::fixtures::{sample_context, sample_event};
use forewarn_test_support::guests::{NOOP, PROBE};

const COLD_COMPILES: usize = 5;
const CACHED_LOADS: usize = 20;
const WARM_UP_CALLS: usize = 100;
const NOOP_CALLS: usize = 2000;
const LOOP_CALLS: usize = 20;
const LOOP_BUDGET: Duration = Duration::from_millis(50);
const CALL_BUDGET: Duration = Duration::from_secs(10);

/// The bundled plugins, built beside the test guests by the same nested wasm build.
const BUNDLED: &[&str] = &["lb_drain.wasm", "checkpoint.wasm", "graceful_shutdown.wasm"];

fn main() -> anyhow::Result<()> {
    let paths = plugin_paths()?;
    println!("# forewarn plugin runtime figures\n");
    measure_loading(&paths)?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the tokio runtime")?;
    let runtime = Runtime::new(RuntimeConfig::default(), HostServices::default())?;
    tokio.block_on(measure_noop_calls(&runtime))?;
    tokio.block_on(measure_loop_cut_off(&runtime))?;
    Ok(())
}

/// The components to measure: the command-line arguments, or the bundled plugins.
fn plugin_paths() -> anyhow::Result<Vec<PathBuf>> {
    let given: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
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
        },
        HostServices::default(),
    )?;
    for path in paths {
        let bytes =
            std::fs::read(path).with_context(|| format!("could not read {}", path.display()))?;
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
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

async fn measure_noop_calls(runtime: &Runtime) -> anyhow::Result<()> {
    let bytes = std::fs::read(NOOP).with_context(|| format!("could not read {NOOP}"))?;
    let noop = runtime.load("noop", &bytes, PluginSettings::default())?;
    for _ in 0..WARM_UP_CALLS {
        call(&noop, CALL_BUDGET).await?;
    }
    let mut times = Vec::with_capacity(NOOP_CALLS);
    let started = Instant::now();
    for _ in 0..NOOP_CALLS {
        let call_started = Instant::now();
        call(&noop, CALL_BUDGET).await?;
        times.push(call_started.elapsed());
    }
    let total = started.elapsed();
    times.sort();
    println!("## Instantiate + call of the no-op plugin ({NOOP_CALLS} sequential calls)\n");
    println!("- median: {} µs", times[times.len() / 2].as_micros());
    println!("- p99: {} µs", percentile(&times, 99).as_micros());
    println!("- max: {} µs", times[times.len() - 1].as_micros());
    println!(
        "- throughput: {:.0} calls/s (one caller)\n",
        NOOP_CALLS as f64 / total.as_secs_f64()
    );
    Ok(())
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

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// A fresh directory for the compile cache under the system's temp dir.
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("forewarn-measure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    Ok(dir)
}

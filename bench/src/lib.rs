//! forewarn-bench's shared pieces: the statistics the benchmark binaries print.
//! (measure-runtime keeps its own index-based median and percentile, as its figures were taken.)

use std::time::Duration;

/// The `percent`th percentile of sorted `times` (nearest rank); zero when there are none.
pub fn percentile(times: &[Duration], percent: usize) -> Duration {
    if times.is_empty() {
        return Duration::ZERO;
    }
    let rank = (times.len() * percent).div_ceil(100).max(1);
    times[rank.min(times.len()) - 1]
}

/// `times` sorted, shortest first.
pub fn sorted(mut times: Vec<Duration>) -> Vec<Duration> {
    times.sort();
    times
}

/// How many times longer `left` is than `right`.
pub fn ratio(left: Duration, right: Duration) -> f64 {
    left.as_secs_f64() / right.as_secs_f64().max(1e-9)
}

/// A duration in µs below 1 ms, in ms above.
pub fn micros(duration: Duration) -> String {
    if duration >= Duration::from_millis(10) {
        return format!("{:.1} ms", duration.as_secs_f64() * 1000.0);
    }
    if duration >= Duration::from_millis(1) {
        return format!("{:.2} ms", duration.as_secs_f64() * 1000.0);
    }
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

/// A Markdown table row: `label`, then the median, p99 and maximum of sorted `times`.
pub fn row(label: &str, times: &[Duration]) -> String {
    let max = times.last().copied().unwrap_or_default();
    format!(
        "| {label} | {} | {} | {} |",
        micros(percentile(times, 50)),
        micros(percentile(times, 99)),
        micros(max)
    )
}

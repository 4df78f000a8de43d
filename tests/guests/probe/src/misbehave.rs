//! Modes that misbehave on purpose — spin, exhaust memory or stack, flood the log or stdout,
//! hammer the host, answer with a huge reason, block in a WASI call — to test containment.

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, SystemTime};

use forewarn_sdk::host::{self, log};
use forewarn_sdk::{Context, Decision};

const MIB: usize = 1 << 20;
const PAGE: usize = 4096;

/// Burns CPU forever.
pub(crate) fn spin_forever() -> Decision {
    let mut counter = 0u64;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

/// Burns CPU forever on attempt 1, approves on every later attempt: shows that a plugin
/// cut off at its budget answers its next call normally.
pub(crate) fn spin_on_first_attempt(ctx: &Context) -> Decision {
    if ctx.attempt <= 1 {
        return spin_forever();
    }
    Decision::approve()
}

/// Allocates and touches 1 MiB chunks forever, keeping them all alive.
pub(crate) fn allocate_forever() -> Decision {
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut chunk = vec![0u8; MIB];
        for byte in chunk.iter_mut().step_by(PAGE) {
            *byte = 1;
        }
        chunks.push(black_box(chunk));
    }
}

/// Recurses until the stack runs out.
pub(crate) fn overflow_stack() -> Decision {
    let depth = recurse(black_box(0));
    Decision::defer(
        format!("stack survived {depth} frames"),
        Duration::from_secs(1),
    )
}

fn recurse(depth: u64) -> u64 {
    // A frame with a live buffer, and work after the call, so it is not made a loop.
    let frame = black_box([depth; 32]);
    if black_box(depth == u64::MAX) {
        return depth;
    }
    recurse(black_box(depth + 1)).wrapping_add(frame[7])
}

/// Recurses with nothing in linear memory, so the engine's own call-stack limit
/// (`max_wasm_stack`) is hit before Rust's shadow stack runs out ("stack-overflow" exhausts
/// the shadow stack instead, which wasm reports as an out-of-bounds memory access).
pub(crate) fn overflow_call_stack() -> Decision {
    let depth = recurse_on_call_stack(0, u64::from(black_box(u32::MAX)));
    Decision::defer(
        format!("call stack survived {depth} frames"),
        Duration::from_secs(1),
    )
}

fn recurse_on_call_stack(depth: u64, limit: u64) -> u64 {
    if depth >= limit {
        return depth;
    }
    // Work after the call that is not an accumulation, so it is not made a loop.
    let below = recurse_on_call_stack(depth + 1, limit);
    below.rotate_left((depth % 63) as u32) ^ depth
}

/// Panics with `config("message")`, by default "probe panicked on purpose": the trap's
/// reason then carries a line the plugin chose (from its stderr).
pub(crate) fn panic_with_message() -> Decision {
    let message = host::config("message");
    panic!(
        "{}",
        message.as_deref().unwrap_or("probe panicked on purpose")
    );
}

/// Writes `config("lines")` (by default 100 000) log lines of 1 KiB each, then approves.
pub(crate) fn flood_log() -> Decision {
    let lines = host::config("lines")
        .and_then(|text| text.parse::<u32>().ok())
        .unwrap_or(100_000);
    let line = "x".repeat(1024);
    for _ in 0..lines {
        log::info(&line);
    }
    Decision::approve()
}

/// Prints 10 MiB to stdout (stopping at the first failed write), then approves.
pub(crate) fn flood_stdout() -> Decision {
    let chunk = "y".repeat(1024);
    let mut stdout = std::io::stdout();
    for _ in 0..(10 * MIB / chunk.len()) {
        if write!(stdout, "{chunk}").is_err() {
            break;
        }
    }
    let _ = stdout.flush();
    Decision::approve()
}

/// Calls the host's `config` forever.
pub(crate) fn call_host_forever() -> Decision {
    loop {
        black_box(host::config("x"));
    }
}

/// Defers with an 8 MiB reason.
pub(crate) fn huge_reason() -> Decision {
    Decision::defer("r".repeat(8 * MIB), Duration::from_secs(1))
}

/// Sleeps an hour inside a WASI call (which epoch interruption cannot cut), then approves.
pub(crate) fn sleep_an_hour() -> Decision {
    std::thread::sleep(Duration::from_secs(3600));
    Decision::approve()
}

/// Busy-waits until `margin_ms` (default 50) before the deadline, then approves: proves a
/// call that uses nearly all its budget still completes.
pub(crate) fn busy_until_near_deadline(ctx: &Context) -> Decision {
    let margin_ms = host::config("margin_ms")
        .and_then(|text| text.parse::<u64>().ok())
        .unwrap_or(50);
    let until = ctx.deadline() - Duration::from_millis(margin_ms);
    while SystemTime::now() < until {
        black_box(());
    }
    Decision::approve()
}

/// A line a plugin might try to forge in the daemon's text log.
const FORGED: &str = "1999-01-01T00:00:00.000000Z  INFO forewarn: event approved by every plugin";

/// Tries to forge and flood log lines through every channel a plugin has into the daemon's
/// log: `log` text with newlines, stdout, a refused 1 MiB URL and a refused 1 MiB action
/// name (each with an embedded forged line); then 300 more refused calls; then approves.
pub(crate) fn forge_log_lines() -> Decision {
    let forged = format!("harmless\n{FORGED}\r\n{FORGED}");
    let huge = format!("{forged}{}", "u".repeat(MIB));
    log::info(&forged);
    println!("harmless\r{FORGED}\u{1b}[2K");
    black_box(host::http::get(&format!("http://not-granted.invalid/{huge}")).is_ok());
    black_box(host::run_action(&huge).is_ok());
    for _ in 0..300 {
        black_box(host::run_action("not-granted").is_ok());
    }
    Decision::approve()
}

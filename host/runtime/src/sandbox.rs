//! The sandbox a plugin call runs in: a WASI context that grants nothing (no files, no
//! sockets, no environment, no arguments, no stdin) and captures stdout/stderr, bounded.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

use crate::mutex::lock;
use forewarn_events::truncate;

/// How much of a call's stdout and stderr (each) is kept for the log; the rest is counted
/// and dropped, so a plugin that floods its output cannot exhaust the daemon's memory.
pub(crate) const CAPTURE_LIMIT: usize = 16 * 1024;

/// How Rust's standard library starts the line it prints after a panic message.
const BACKTRACE_HINT: &str = "note: run with `RUST_BACKTRACE=";

/// What StarlingMonkey (the JavaScript engine of componentize-js) prints as it aborts, after
/// the uncaught exception's own line.
const JS_ABORT_NOTICE: &str = "Redirecting call to abort() to mozalloc_abort";

/// What a Rust panic's first line holds between the thread's name and the location.
const PANICKED_AT: &str = " panicked at ";

/// Builds the WASI context for one call: clocks and randomness only, output captured.
pub(crate) fn wasi_context(stdout: &CapturedOutput, stderr: &CapturedOutput) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}

/// A stdout or stderr stream that keeps the first `CAPTURE_LIMIT` bytes and counts the rest.
/// Writes never fail, so a chatty plugin is not broken by the cap, only trimmed.
#[derive(Clone, Default)]
pub(crate) struct CapturedOutput {
    inner: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    dropped: u64,
}

impl CapturedOutput {
    /// The bytes kept so far and the number of bytes dropped.
    pub(crate) fn take(&self) -> (Vec<u8>, u64) {
        let mut captured = lock(&self.inner);
        (std::mem::take(&mut captured.kept), captured.dropped)
    }

    /// The line that says why the call failed, without consuming the output: the last
    /// non-empty line, with what the languages' runtimes print after it skipped (Rust's
    /// backtrace hint, StarlingMonkey's abort notice), a thrown JavaScript string unquoted,
    /// and a Rust panic's message followed by its location (`boom at src/lib.rs:33:20`).
    pub(crate) fn crash_line(&self) -> Option<String> {
        let captured = lock(&self.inner);
        let text = String::from_utf8_lossy(&captured.kept);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|line| {
                !line.is_empty() && !line.starts_with(BACKTRACE_HINT) && *line != JS_ABORT_NOTICE
            })
            .collect();
        let line = match rust_panic(&lines) {
            Some(panic) => panic,
            None => unquoted(lines.last()?),
        };
        Some(truncate(&line, 300).to_owned())
    }

    fn append(&self, bytes: &[u8]) {
        let mut captured = lock(&self.inner);
        let room = CAPTURE_LIMIT.saturating_sub(captured.kept.len());
        let kept = bytes.len().min(room);
        captured.kept.extend_from_slice(&bytes[..kept]);
        captured.dropped += (bytes.len() - kept) as u64;
    }
}

/// A Rust panic in the last lines: "MESSAGE at LOCATION" from `thread '…' panicked at
/// LOCATION:` and the message line after it.
fn rust_panic(lines: &[&str]) -> Option<String> {
    let at = lines.iter().rposition(|line| {
        line.starts_with("thread '") && line.contains(PANICKED_AT) && line.ends_with(':')
    })?;
    let header = lines[at];
    let start = header.find(PANICKED_AT)? + PANICKED_AT.len();
    let location = &header[start..header.len() - 1];
    let message = lines.get(at + 1)?;
    Some(format!("{message} at {location}"))
}

/// A JavaScript exception that is a string is printed with its quotes: the text inside them.
fn unquoted(line: &str) -> String {
    let Some(inner) = line
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    else {
        return line.to_owned();
    };
    inner.replace("\\\"", "\"").replace("\\\\", "\\")
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for CapturedOutput {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturedOutput {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CapturedOutput {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_the_first_bytes_and_counts_the_rest() {
        let output = CapturedOutput::default();
        output.append(&vec![b'a'; CAPTURE_LIMIT - 1]);
        output.append(b"bcd");
        let (kept, dropped) = output.take();
        assert_eq!(kept.len(), CAPTURE_LIMIT);
        assert_eq!(kept.last(), Some(&b'b'));
        assert_eq!(dropped, 2);
    }

    #[test]
    fn a_rust_panic_is_its_message_at_its_location() {
        let output = CapturedOutput::default();
        output.append(
            b"thread '<unnamed>' (1) panicked at src/lib.rs:33:20:\nprobe panicked on purpose\n\
              note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
        );
        assert_eq!(
            output.crash_line().as_deref(),
            Some("probe panicked on purpose at src/lib.rs:33:20")
        );
    }

    #[test]
    fn a_thrown_javascript_string_is_unquoted_and_the_abort_notice_skipped() {
        let output = CapturedOutput::default();
        output.append(
            b"onEvent@plugin.bundle.js:113:7\n\
              \"plugin threw TypeError: x is \\\"undefined\\\" at thrower.js:4:9\"\n\
              Redirecting call to abort() to mozalloc_abort\n",
        );
        assert_eq!(
            output.crash_line().as_deref(),
            Some("plugin threw TypeError: x is \"undefined\" at thrower.js:4:9")
        );
    }

    #[test]
    fn other_output_gives_its_last_line() {
        let output = CapturedOutput::default();
        output.append(b"Traceback (most recent call last):\n  ...\nplugin raised ValueError: boom at raiser.py:5, in helper\n\n");
        assert_eq!(
            output.crash_line().as_deref(),
            Some("plugin raised ValueError: boom at raiser.py:5, in helper")
        );
        assert_eq!(CapturedOutput::default().crash_line(), None);
    }
}

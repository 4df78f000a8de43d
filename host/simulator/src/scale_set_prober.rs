//! The thin I/O side of the scale set's Application Health extension: every tick it asks
//! the engine which probes are due (`ScaleSetModel::probes_due`, in scenario time), sends
//! each as a plain HTTP/1.1 GET with the extension's timeout (wall time), and hands what came
//! back to the model (`Engine::record_probe`), which decides what it means.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::engine::Engine;
use crate::scale_set::ProbeOutcome;

/// How often the prober looks for due probes (wall time).
const PROBER_TICK: Duration = Duration::from_millis(20);
/// Most bytes of an answer read (a probe's answer is a line of JSON).
const PROBE_ANSWER_MAX: usize = 64 * 1024;

/// Probes until the simulator shuts down (nothing is due while the scenario playing has no
/// scale set; one the console starts later is probed).
pub(crate) async fn run_prober(engine: Arc<Engine>) {
    let mut stop = engine.subscribe_shutdown();
    let mut interval = tokio::time::interval(PROBER_TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.wait_for(|stop| *stop) => return,
        }
        for (vm, address, path, timeout) in engine.scale_set_probes_due() {
            let engine = Arc::clone(&engine);
            tokio::spawn(async move {
                let outcome = probe(&address, &path, timeout).await;
                engine.record_probe(&vm, &outcome);
            });
        }
    }
}

/// One GET of `http://address/path`, within `timeout`.
pub(crate) async fn probe(address: &str, path: &str, timeout: Duration) -> ProbeOutcome {
    match tokio::time::timeout(timeout, exchange(address, path)).await {
        Err(_elapsed) => ProbeOutcome::TimedOut,
        Ok(Err(error)) => ProbeOutcome::Failed(error.to_string()),
        Ok(Ok((status, body))) => ProbeOutcome::Answered { status, body },
    }
}

async fn exchange(address: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(address).await?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nUser-Agent: ApplicationHealthExtension\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 || answer.len() >= PROBE_ANSWER_MAX {
            break;
        }
        answer.extend_from_slice(&chunk[..read]);
    }
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| std::io::Error::other("the answer has no HTTP status line"))?;
    let chunked = head.lines().any(|line| {
        line.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

/// A chunked body's content.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

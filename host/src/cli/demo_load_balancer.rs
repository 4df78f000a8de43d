//! The demo's load balancer: it probes the daemon's `/readyz` the way HAProxy's `check inter
//! 250ms fall 3 rise 2` would, so lb-drain's drain ends when the load balancer has taken the
//! VM out (contract 0.3.0's `drain-progress`), and the timeline says when it took the VM out
//! and put it back. It balances nothing: the demo has one VM.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cli::demo_workload::WorkloadNote;

/// How often `/readyz` is probed (HAProxy's `inter`).
const PROBE_INTERVAL: Duration = Duration::from_millis(250);
/// Failed probes in a row that take the VM out (HAProxy's `fall`; lb-drain's
/// `unhealthy-threshold` in the demo).
pub(crate) const FALL: u32 = 3;
/// Passing probes in a row that put it back (HAProxy's `rise`).
const RISE: u32 = 2;
/// How long one probe may take before it counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Whether the load balancer sends the VM traffic, with the probes counted towards a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rotation {
    /// In rotation; `failed` probes in a row so far.
    In { failed: u32 },
    /// Out of rotation; `passed` probes in a row so far.
    Out { passed: u32 },
}

impl Rotation {
    /// The rotation after one probe's answer, and the note to show when it changed.
    fn probed(self, ready: bool) -> (Rotation, Option<WorkloadNote>) {
        match (self, ready) {
            (Rotation::In { .. }, true) => (Rotation::In { failed: 0 }, None),
            (Rotation::In { failed }, false) if failed + 1 >= FALL => (
                Rotation::Out { passed: 0 },
                Some(WorkloadNote::OutOfRotation {
                    failed_probes: FALL,
                }),
            ),
            (Rotation::In { failed }, false) => (Rotation::In { failed: failed + 1 }, None),
            (Rotation::Out { .. }, false) => (Rotation::Out { passed: 0 }, None),
            (Rotation::Out { passed }, true) if passed + 1 >= RISE => (
                Rotation::In { failed: 0 },
                Some(WorkloadNote::BackInRotation {
                    passed_probes: RISE,
                }),
            ),
            (Rotation::Out { passed }, true) => (Rotation::Out { passed: passed + 1 }, None),
        }
    }
}

/// The running load balancer; [`DemoLoadBalancer::shutdown`] stops it.
pub(crate) struct DemoLoadBalancer {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl DemoLoadBalancer {
    /// Starts probing `http://{admin}/readyz`; `notes` gets a line when the VM leaves or joins
    /// the rotation.
    pub(crate) fn start(admin: SocketAddr, notes: mpsc::UnboundedSender<WorkloadNote>) -> Self {
        let stop = CancellationToken::new();
        let task = tokio::spawn(probe_until_stopped(admin, notes, stop.clone()));
        DemoLoadBalancer { stop, task }
    }

    /// Stops probing.
    pub(crate) async fn shutdown(self) {
        self.stop.cancel();
        let _ignored = self.task.await;
    }
}

async fn probe_until_stopped(
    admin: SocketAddr,
    notes: mpsc::UnboundedSender<WorkloadNote>,
    stop: CancellationToken,
) {
    let mut rotation = Rotation::In { failed: 0 };
    let mut ticks = tokio::time::interval(PROBE_INTERVAL);
    // A probe slower than the interval delays the next one, as a load balancer's would: no
    // burst of catch-up probes.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        // Until the endpoint listens there is nothing to probe: not a failed check.
        let Some(ready) = probe(admin).await else {
            continue;
        };
        let (next, note) = rotation.probed(ready);
        rotation = next;
        if let Some(note) = note {
            // The printer may be gone at the very end; a lost note is fine then.
            let _ignored = notes.send(note);
        }
    }
}

/// One `GET /readyz`: `Some(true)` for a 200, `Some(false)` for any other answer or one that
/// took too long, `None` when nothing listens.
async fn probe(admin: SocketAddr) -> Option<bool> {
    let mut stream = TcpStream::connect(admin).await.ok()?;
    let request =
        format!("GET /readyz HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n").into_bytes();
    let answered = tokio::time::timeout(PROBE_TIMEOUT, async {
        stream.write_all(&request).await.ok()?;
        let mut status_line = [0_u8; 12];
        stream.read_exact(&mut status_line).await.ok()?;
        Some(status_line.ends_with(b" 200"))
    })
    .await;
    Some(matches!(answered, Ok(Some(true))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn play(answers: &[bool]) -> Vec<WorkloadNote> {
        let mut rotation = Rotation::In { failed: 0 };
        let mut notes = Vec::new();
        for &ready in answers {
            let (next, note) = rotation.probed(ready);
            rotation = next;
            notes.extend(note);
        }
        notes
    }

    #[test]
    fn the_vm_leaves_after_fall_failed_probes_in_a_row_and_returns_after_rise_passes() {
        assert_eq!(play(&[false, false, true, false, false]), vec![]);
        assert_eq!(
            play(&[false, false, false, true, false, true, true]),
            vec![
                WorkloadNote::OutOfRotation { failed_probes: 3 },
                WorkloadNote::BackInRotation { passed_probes: 2 },
            ]
        );
    }

    #[tokio::test]
    async fn a_probe_of_a_closed_port_is_no_answer_and_a_503_is_a_failed_check() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut request = [0_u8; 16];
            let _read = stream.read(&mut request).await;
            stream
                .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
                .await
                .expect("answer");
        });
        assert_eq!(probe(address).await, Some(false));
        server.await.expect("server");
        assert_eq!(probe(address).await, None);
    }
}

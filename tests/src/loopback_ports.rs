//! Loopback ports a test process keeps for servers whose address must be known before they
//! start and must survive a restart (etcd members, an admin endpoint).
//!
//! A port found by binding `127.0.0.1:0` and releasing it lies in the kernel's ephemeral
//! range: while the server is down (before its start, between a kill and a restart) any
//! outgoing connection on the machine may be given it as its source port, and any other
//! server binding port 0 may get it. With test binaries running several at once that
//! happened (CI, stop 54: a restarted etcd member found its port taken and the cluster never
//! became healthy). The ports handed out here lie *below* the ephemeral range, where the
//! kernel never hands out ports by itself, and each is held by a file lock under the temp dir
//! for the life of the process that took it, so no other test process picks it meanwhile.
//! The locks go with the process (the kernel releases them), so a killed run leaves nothing
//! that blocks the next.

use std::fs::{File, OpenOptions};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Mutex;

/// The lowest port handed out: above the well-known ports the test servers use (Azurite's
/// 10000-10002, a registry's 5000, Prometheus's 9090).
const LOWEST: u16 = 16_384;
/// Where the range ends when the kernel's ephemeral range cannot be read (Linux's default).
const EPHEMERAL_START_DEFAULT: u16 = 32_768;

/// The locks of the ports this process holds; never released before it exits.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// A loopback `127.0.0.1:PORT` that is free now, that the kernel will not give to anybody
/// else, and that no other test process takes while this one runs.
pub fn free_loopback_address() -> String {
    let (lowest, end) = port_range();
    let span = u32::from(end - lowest);
    let start = start_offset(span);
    for step in 0..span {
        let port = lowest + ((start + step) % span) as u16;
        if let Some(lock) = take(port) {
            HELD.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(lock);
            return format!("127.0.0.1:{port}");
        }
    }
    panic!(
        "no loopback port between {lowest} and {end} is free: every one is bound or locked by \
         another test process (locks in {}); end the other test runs or free some ports",
        lock_dir().display()
    )
}

/// `[LOWEST, start of the ephemeral range)`.
fn port_range() -> (u16, u16) {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(EPHEMERAL_START_DEFAULT);
    if ephemeral_start > LOWEST + 1_024 {
        (LOWEST, ephemeral_start)
    } else {
        (1_024, EPHEMERAL_START_DEFAULT.max(ephemeral_start))
    }
}

/// Where in the range this process starts looking: spread by process id and time, so that
/// test processes starting together rarely try the same ports first.
fn start_offset(span: u32) -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.subsec_nanos())
        .unwrap_or(0);
    std::process::id().wrapping_mul(7_919).wrapping_add(nanos) % span
}

fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("forewarn-test-ports")
}

/// The lock of `port` when no other process holds it and the port can be bound now.
fn take(port: u16) -> Option<File> {
    let dir = lock_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("{port}.lock")))
        .ok()?;
    lock.try_lock().ok()?;
    let listener = TcpListener::bind(("127.0.0.1", port)).ok()?;
    drop(listener);
    Some(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice() {
        let (_, ephemeral_start) = port_range();
        let addresses: Vec<String> = (0..50).map(|_| free_loopback_address()).collect();
        let mut unique = addresses.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), addresses.len(), "{addresses:?}");
        for address in &addresses {
            let port: u16 = address
                .rsplit(':')
                .next()
                .and_then(|port| port.parse().ok())
                .expect("a port");
            assert!(
                port < ephemeral_start,
                "{address} is in the ephemeral range"
            );
        }
    }

    #[test]
    fn a_port_locked_by_someone_else_is_not_taken() {
        let address = free_loopback_address();
        let port: u16 = address
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port");
        // Another open file description of the same lock file is another holder, as another
        // process would be: it cannot take the lock.
        assert!(
            take(port).is_none(),
            "{address} was handed out while locked"
        );
    }
}

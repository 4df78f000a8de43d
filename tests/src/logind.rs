//! A stand-in for systemd-logind on a private system bus, for the shutdown tests: the real
//! `dbus-daemon` (Debian's `dbus-daemon`) on a socket in a temporary directory, and on it,
//! served by this process, logind's documented `org.freedesktop.login1.Manager` interface as
//! far as forewarn uses it (<https://systemd.io/INHIBITOR_LOCKS/>): `Inhibit` hands out the
//! write end of a pipe and watches the read end, so the instant every copy of the lock is
//! closed is recorded as the lock's release; `PrepareForShutdown` is sent when the test
//! says; `InhibitDelayMaxUSec` is what the test chose.
//!
//! Debian's elogind is not used: installing it here removes chromium and 13 other packages
//! (`apt-get install -s elogind`), and it must be the machine's one session manager.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tempfile::TempDir;

use crate::harness::{ChildGuard, now_unix_ms, wait_for};

/// One lock `Inhibit` handed out.
#[derive(Debug, Clone)]
pub struct InhibitorLock {
    /// What it inhibits ("shutdown").
    pub what: String,
    /// Who took it.
    pub who: String,
    /// "delay" or "block".
    pub mode: String,
    /// When it was handed out, Unix ms.
    pub taken_at: u64,
    /// When every copy of it was closed, Unix ms.
    pub released_at: Option<u64>,
}

type Locks = Arc<Mutex<Vec<InhibitorLock>>>;

// zbus::interface adds a public method of its own, undocumented.
#[allow(missing_docs)]
mod manager {
    use super::*;

    pub(super) struct Manager {
        pub(super) locks: Locks,
        pub(super) delay_max: Duration,
    }

    #[zbus::interface(name = "org.freedesktop.login1.Manager")]
    impl Manager {
        /// Hands out a lock: the write end of a pipe whose read end is watched for its close.
        fn inhibit(
            &self,
            what: &str,
            who: &str,
            _why: &str,
            mode: &str,
        ) -> zbus::fdo::Result<zbus::zvariant::OwnedFd> {
            let (mut read_end, write_end) =
                std::io::pipe().map_err(|error| zbus::fdo::Error::Failed(error.to_string()))?;
            let index = {
                let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
                locks.push(InhibitorLock {
                    what: what.to_owned(),
                    who: who.to_owned(),
                    mode: mode.to_owned(),
                    taken_at: now_unix_ms(),
                    released_at: None,
                });
                locks.len() - 1
            };
            let locks = self.locks.clone();
            // The read end sees end-of-file once every copy of the write end is closed: the
            // holder closed its lock (or exited).
            std::thread::spawn(move || {
                let mut sink = [0_u8; 64];
                while read_end.read(&mut sink).is_ok_and(|read| read > 0) {}
                let mut locks = locks.lock().unwrap_or_else(|p| p.into_inner());
                locks[index].released_at = Some(now_unix_ms());
            });
            Ok(zbus::zvariant::OwnedFd::from(OwnedFd::from(write_end)))
        }

        /// Sent when a shutdown begins (true) or is called off (false).
        #[zbus(signal)]
        pub(super) async fn prepare_for_shutdown(
            emitter: &zbus::object_server::SignalEmitter<'_>,
            start: bool,
        ) -> zbus::Result<()>;

        /// The longest a shutdown waits for delay locks, in microseconds.
        #[zbus(property, name = "InhibitDelayMaxUSec")]
        fn inhibit_delay_max_usec(&self) -> u64 {
            u64::try_from(self.delay_max.as_micros()).unwrap_or(u64::MAX)
        }
    }
}
use manager::Manager;

/// The private bus and the stand-in logind on it, gone when dropped.
pub struct FakeLogind {
    _dir: TempDir,
    _bus: ChildGuard,
    address: String,
    runtime: tokio::runtime::Runtime,
    connection: zbus::Connection,
    locks: Locks,
}

impl FakeLogind {
    /// Starts `dbus-daemon` and serves logind on it, holding shutdowns for at most
    /// `delay_max` (its `InhibitDelayMaxUSec`).
    pub fn start(delay_max: Duration) -> FakeLogind {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let socket: PathBuf = dir.path().join("system_bus_socket");
        let address = format!("unix:path={}", socket.display());
        // `--print-address` prints once the bus listens: a socket file alone may not accept
        // yet (bound, not listening), which refused a connection now and then.
        let mut bus = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile", "--print-address=1"])
            .arg(format!("--address={address}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot run dbus-daemon ({error}): the shutdown tests need it; install it \
                     with `apt-get install dbus-daemon` (tests/run.sh does)"
                )
            });
        let printed = bus.stdout.take().expect("dbus-daemon's stdout, piped");
        let bus = ChildGuard::new(bus);
        let mut listening = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(printed), &mut listening)
            .expect("read dbus-daemon's address");
        assert!(
            listening.starts_with("unix:"),
            "dbus-daemon printed no address (it exited?): {listening:?}"
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime for the stand-in logind");
        let locks: Locks = Arc::default();
        let manager = Manager {
            locks: locks.clone(),
            delay_max,
        };
        let connection = runtime
            .block_on(async {
                zbus::connection::Builder::address(address.as_str())?
                    .name("org.freedesktop.login1")?
                    .serve_at("/org/freedesktop/login1", manager)?
                    .build()
                    .await
            })
            .expect("serve org.freedesktop.login1 on the private bus");
        FakeLogind {
            _dir: dir,
            _bus: bus,
            address,
            runtime,
            connection,
            locks,
        }
    }

    /// The bus address: the daemon's `DBUS_SYSTEM_BUS_ADDRESS`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Every lock handed out so far.
    pub fn locks(&self) -> Vec<InhibitorLock> {
        self.locks.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The locks handed out and not released.
    pub fn held(&self) -> Vec<InhibitorLock> {
        self.locks()
            .into_iter()
            .filter(|lock| lock.released_at.is_none())
            .collect()
    }

    /// Waits until `who` holds a delay lock on shutdown.
    pub fn wait_for_delay_lock(&self, who: &str, timeout: Duration) -> InhibitorLock {
        wait_for(timeout, "a delay lock on shutdown", || {
            self.held()
                .into_iter()
                .find(|lock| lock.who == who && lock.what == "shutdown" && lock.mode == "delay")
                .ok_or_else(|| format!("locks so far: {:?}", self.locks()))
        })
    }

    /// Sends `PrepareForShutdown(start)`, as logind does when a shutdown begins (true) or is
    /// called off (false); returns when it was sent, Unix ms.
    pub fn prepare_for_shutdown(&self, start: bool) -> u64 {
        self.runtime
            .block_on(async {
                let server = self.connection.object_server();
                let manager = server
                    .interface::<_, Manager>("/org/freedesktop/login1")
                    .await?;
                Manager::prepare_for_shutdown(manager.signal_emitter(), start).await
            })
            .expect("send PrepareForShutdown");
        now_unix_ms()
    }

    /// Waits until no lock is held any more (logind would go on with the shutdown) and
    /// returns when the last was released, Unix ms.
    pub fn wait_all_released(&self, timeout: Duration) -> u64 {
        wait_for(timeout, "every inhibitor lock released", || {
            let locks = self.locks();
            if locks.is_empty() || locks.iter().any(|lock| lock.released_at.is_none()) {
                return Err(format!("locks: {locks:?}"));
            }
            Ok(locks.iter().filter_map(|lock| lock.released_at).max())
        })
        .expect("a release instant")
    }
}

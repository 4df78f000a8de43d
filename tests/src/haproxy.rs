//! A real HAProxy on loopback health-checking forewarn's `/readyz`, the small app servers it
//! balances, and a client sending requests through it without retries: what the drain tests
//! and the drain benchmark measure lb-drain against. HAProxy's own view of the server (UP,
//! DOWN) is read from its stats socket, every change recorded with its time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::harness::{ChildGuard, now_unix_ms, wait_for};

/// The haproxy binary; fails the test (not skips it) when it is missing.
pub fn find_haproxy() -> PathBuf {
    for candidate in [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    panic!(
        "HAProxy is not installed: this test runs a real load balancer against forewarn's \
         /readyz. Install it with `apt-get install -y haproxy` (tests/run.sh does)."
    );
}

/// How HAProxy checks vm-a: `GET /readyz` at `readyz` (forewarn's admin address) every
/// `inter`, down after `fall` failures, up after `rise` successes.
#[derive(Debug, Clone)]
pub struct HealthCheck {
    /// forewarn's admin address (`host:port`).
    pub readyz: String,
    /// HAProxy's `inter`, e.g. "1s".
    pub inter: &'static str,
    /// HAProxy's `fall`.
    pub fall: u32,
    /// HAProxy's `rise`.
    pub rise: u32,
}

/// What HAProxy balances: with `apps`, a frontend on `frontend` sends requests round robin to
/// vm-a (checked on forewarn's `/readyz`) and vm-b (checked on its own app); without, the
/// backend only checks vm-a.
#[derive(Debug, Clone)]
pub struct Balanced {
    /// Where HAProxy listens for the client (`host:port`).
    pub frontend: String,
    /// vm-a's app server.
    pub vm_a_app: String,
    /// vm-b's app server.
    pub vm_b_app: String,
}

/// HAProxy running with a backend `app` whose server `vm-a` is health-checked on forewarn's
/// `/readyz`. A thread records every change of vm-a's status seen on the stats socket.
pub struct Haproxy {
    _process: ChildGuard,
    socket: PathBuf,
    history: Arc<Mutex<Vec<(u64, String)>>>,
    stop: Arc<AtomicBool>,
    watcher: Option<JoinHandle<()>>,
}

impl Haproxy {
    /// Starts HAProxy with its config and stats socket in `dir`; waits for the socket.
    pub fn start(dir: &Path, check: &HealthCheck, balanced: Option<&Balanced>) -> Haproxy {
        let binary = find_haproxy();
        let socket = dir.join("haproxy.sock");
        let config = dir.join("haproxy.cfg");
        std::fs::write(&config, config_text(&socket, check, balanced)).expect("write haproxy.cfg");
        let child = Command::new(&binary)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let process = ChildGuard::new(child);
        wait_for(Duration::from_secs(10), "HAProxy's stats socket", || {
            server_status(&socket, "vm-a")
        });
        let history = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = std::thread::spawn({
            let socket = socket.clone();
            let history = history.clone();
            let stop = stop.clone();
            move || record_status_changes(&socket, &history, &stop)
        });
        Haproxy {
            _process: process,
            socket,
            history,
            stop,
            watcher: Some(watcher),
        }
    }

    /// vm-a's status now ("UP", "DOWN", "UP 1/2", …), or what went wrong reading it.
    pub fn status(&self) -> String {
        server_status(&self.socket, "vm-a").unwrap_or_else(|error| error)
    }

    /// `server`'s status now.
    pub fn status_of(&self, server: &str) -> String {
        server_status(&self.socket, server).unwrap_or_else(|error| error)
    }

    /// Every (Unix ms, status) change of vm-a seen so far.
    pub fn history(&self) -> Vec<(u64, String)> {
        self.history.lock().expect("history lock").clone()
    }

    /// Waits until vm-a is UP; when it was seen so (Unix ms).
    pub fn wait_up(&self, timeout: Duration) -> u64 {
        wait_for(timeout, "HAProxy to see vm-a UP", || {
            match self.status().as_str() {
                "UP" => Ok(now_unix_ms()),
                other => Err(other.to_owned()),
            }
        })
    }

    /// Waits until `server` is UP.
    pub fn wait_server_up(&self, server: &str, timeout: Duration) {
        wait_for(timeout, "HAProxy to see the server UP", || {
            match self.status_of(server).as_str() {
                "UP" => Ok(()),
                other => Err(format!("{server}: {other}")),
            }
        });
    }

    /// The first time vm-a was recorded with `status` at or after `since` (Unix ms).
    pub fn first_since(&self, since: u64, status: &str) -> Option<u64> {
        self.history()
            .iter()
            .find(|(at, seen)| *at >= since && seen == status)
            .map(|(at, _)| *at)
    }

    /// Waits until the recorded history shows vm-a with `status` at or after `since`; when.
    /// The recorded history, not the live status: the watcher samples on its own thread.
    pub fn wait_status_since(&self, since: u64, status: &str, timeout: Duration) -> u64 {
        wait_for(timeout, "HAProxy to see vm-a change", || {
            self.first_since(since, status)
                .ok_or_else(|| format!("no {status} since {since}: {:?}", self.history()))
        })
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(watcher) = self.watcher.take() {
            let _ignored = watcher.join();
        }
    }
}

fn config_text(socket: &Path, check: &HealthCheck, balanced: Option<&Balanced>) -> String {
    let HealthCheck {
        readyz,
        inter,
        fall,
        rise,
    } = check;
    let timing = format!("inter {inter} fall {fall} rise {rise}");
    let mut text = format!(
        "global\n    stats socket {} mode 600 level admin\n\n\
         defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    \
         timeout server 5s\n    retries 0\n\n",
        socket.display()
    );
    match balanced {
        None => text.push_str(&format!(
            "backend app\n    option httpchk GET /readyz\n    http-check expect status 200\n    \
             server vm-a {readyz} check {timing}\n"
        )),
        Some(Balanced {
            frontend,
            vm_a_app,
            vm_b_app,
        }) => {
            let (readyz_host, readyz_port) = readyz.rsplit_once(':').expect("host:port");
            text.push_str(&format!(
                "frontend web\n    bind {frontend}\n    default_backend app\n\n\
                 backend app\n    balance roundrobin\n    option httpchk GET /readyz\n    \
                 http-check expect status 200\n    \
                 server vm-a {vm_a_app} check addr {readyz_host} port {readyz_port} {timing}\n    \
                 server vm-b {vm_b_app} check {timing}\n"
            ));
        }
    }
    text
}

fn record_status_changes(socket: &Path, history: &Mutex<Vec<(u64, String)>>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        if let Ok(status) = server_status(socket, "vm-a") {
            let mut history = history.lock().expect("history lock");
            if history.last().is_none_or(|(_, last)| last != &status) {
                history.push((now_unix_ms(), status));
            }
        }
        // A sampling period, not a synchronisation: HAProxy's state is read 50 times a second.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `status` column of backend `app`, server `server`, from `show stat`.
fn server_status(socket: &Path, server: &str) -> Result<String, String> {
    let mut stream = UnixStream::connect(socket).map_err(|error| format!("connect: {error}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|error| error.to_string())?;
    stream
        .write_all(b"show stat\n")
        .map_err(|error| format!("send: {error}"))?;
    let mut csv = String::new();
    stream
        .read_to_string(&mut csv)
        .map_err(|error| format!("read: {error}"))?;
    let mut lines = csv.lines();
    let header = lines.next().ok_or("empty answer")?;
    let columns: Vec<&str> = header.trim_start_matches("# ").split(',').collect();
    let status_column = columns
        .iter()
        .position(|name| *name == "status")
        .ok_or_else(|| format!("no status column in {header}"))?;
    lines
        .map(|line| line.split(',').collect::<Vec<_>>())
        .find(|fields| fields.first() == Some(&"app") && fields.get(1) == Some(&server))
        .and_then(|fields| fields.get(status_column).map(|status| (*status).to_owned()))
        .ok_or_else(|| format!("no app/{server} row in {csv}"))
}

/// A small HTTP server answering every GET with 200 and its name, as its own process (so an
/// action can kill it and start it again).
pub const APP_SERVER_PY: &str = r#"
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

name = sys.argv[2].encode()

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(name)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(name)

    def log_message(self, *args):
        pass

host, port = sys.argv[1].rsplit(":", 1)
ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
"#;

/// One request through the load balancer and how it went.
#[derive(Debug, Clone)]
pub struct Sent {
    /// When it was sent (Unix ms).
    pub at: u64,
    /// The answering server's name (its body), or what went wrong.
    pub outcome: Result<String, String>,
}

/// A client sending one request after the other through `frontend`, each on a new
/// connection, without retries, until stopped.
pub struct LoadClient {
    sent: Arc<Mutex<Vec<Sent>>>,
    stop: Arc<AtomicBool>,
    worker: Option<JoinHandle<()>>,
}

impl LoadClient {
    /// Starts sending to `frontend` (`host:port`) every `every`.
    pub fn start(frontend: &str, every: Duration) -> LoadClient {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let worker = std::thread::spawn({
            let frontend = frontend.to_owned();
            let sent = sent.clone();
            let stop = stop.clone();
            move || {
                while !stop.load(Ordering::SeqCst) {
                    let at = now_unix_ms();
                    let outcome = send_one(&frontend);
                    sent.lock().expect("sent lock").push(Sent { at, outcome });
                    // The request rate, not a synchronisation.
                    std::thread::sleep(every);
                }
            }
        });
        LoadClient {
            sent,
            stop,
            worker: Some(worker),
        }
    }

    /// Every request so far.
    pub fn sent(&self) -> Vec<Sent> {
        self.sent.lock().expect("sent lock").clone()
    }

    /// Waits until `server` answered `count` requests sent at or after `since` (Unix ms).
    pub fn wait_answered_by(&self, server: &str, since: u64, count: usize, timeout: Duration) {
        wait_for(timeout, "requests answered by the server", || {
            let answered = self
                .sent()
                .iter()
                .filter(|sent| sent.at >= since && sent.outcome.as_deref() == Ok(server))
                .count();
            if answered >= count {
                Ok(())
            } else {
                Err(format!("{answered} of {count} answered by {server}"))
            }
        });
    }

    /// Stops the client; every request it sent.
    pub fn stop(mut self) -> Vec<Sent> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(worker) = self.worker.take() {
            let _ignored = worker.join();
        }
        self.sent()
    }
}

impl Drop for LoadClient {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(worker) = self.worker.take() {
            let _ignored = worker.join();
        }
    }
}

/// One GET through the load balancer: the body of a 200, else what went wrong.
fn send_one(frontend: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(frontend).map_err(|error| format!("connect: {error}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|error| error.to_string())?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n")
        .map_err(|error| format!("send: {error}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(|error| format!("read: {error}"))?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status_line = head.lines().next().unwrap_or_default();
    if !status_line.contains(" 200 ") {
        return Err(status_line.to_owned());
    }
    Ok(body.to_owned())
}

/// Writes [`APP_SERVER_PY`] to `dir/app.py`; its path.
pub fn write_app_script(dir: &Path) -> PathBuf {
    let script = dir.join("app.py");
    std::fs::write(&script, APP_SERVER_PY).expect("write app.py");
    script
}

/// A shell command starting the app server `name` on `address` in the background and writing
/// its pid to `pid_file`: what a start action runs.
pub fn app_start_command(script: &Path, address: &str, name: &str, pid_file: &Path) -> String {
    format!(
        "python3 {} {address} {name} </dev/null >/dev/null 2>&1 & echo $! > {}",
        script.display(),
        pid_file.display()
    )
}

/// Runs [`app_start_command`] and waits until the server answers.
pub fn start_app(script: &Path, address: &str, name: &str, pid_file: &Path) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(app_start_command(script, address, name, pid_file))
        .status()
        .expect("start the app server");
    assert!(status.success(), "starting the app server: {status}");
    wait_for(Duration::from_secs(20), "the app server to answer", || {
        send_one(address)
    });
}

/// Kills the process whose pid `pid_file` holds, if any (a test's cleanup).
pub fn kill_pid_file(pid_file: &Path) {
    let Some(pid) = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
    else {
        return;
    };
    let _ignored = Command::new("kill").arg("-9").arg(pid.to_string()).status();
}

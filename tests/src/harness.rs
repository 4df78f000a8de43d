//! The one harness of forewarn's end-to-end tests, which run the real `forewarn` binary.
//!
//! Shaped as builder → config → running instance:
//! - [`Simulator::builder`]: a `forewarn simulate` with a scenario (built-in name, file, or
//!   TOML text), a speed and faults;
//! - [`TestEnv::builder`]: a simulator, a probe plugin directory, a daemon config (policy,
//!   poll interval) in a temp dir; [`TestEnvBuilder::prepare`] writes everything
//!   ([`Setup`]), [`TestEnvBuilder::start`] also starts the daemon ([`TestEnv`]);
//! - [`Daemon`]: `forewarn run` with its JSON log read live; the oracles match the log's
//!   `message` field for equality with [`forewarn_daemon::log_messages`] constants;
//! - checks shared by every file: [`same_id`], [`transition_at`] (and
//!   [`transition_at_unix_ms`]), [`accepted_approvals`],
//!   [`assert_polite`], [`now_unix_ms`], [`wait_for`].
//!
//! The binary's path comes from the caller, once per test file: [`forewarn_binary!`](crate::forewarn_binary)
//! (`env!("CARGO_BIN_EXE_forewarn")` exists only in the host's integration tests). Every
//! child process is killed when its guard is dropped, so a failing test leaks nothing.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use forewarn_daemon::log_messages::{
    ADMIN_LISTENING, APPROVED_AT_IMDS, EVENT_TRANSITION, PLUGIN_CALL_FAILED,
    PLUGIN_CALL_FAILED_CONSENT, PLUGIN_DECISION,
};
use forewarn_simulator::{ApprovalRecord, StateSnapshot, Transition};
use tempfile::TempDir;

/// The path of the `forewarn` binary cargo built for the calling integration test
/// (`CARGO_BIN_EXE_forewarn`, as a `&'static Path`).
#[macro_export]
macro_rules! forewarn_binary {
    () => {
        ::std::path::Path::new(env!("CARGO_BIN_EXE_forewarn"))
    };
}

/// The workspace's root directory (where `packaging/` and `docs/` are).
pub fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .to_path_buf()
}

/// Now, in Unix milliseconds (the unit of every timestamp the simulator and the log carry).
pub fn now_unix_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

pub use crate::loopback_ports::free_loopback_address;

/// Whether two EventIds are the same (IMDS ids compare case-insensitively).
pub fn same_id(left: &str, right: &str) -> bool {
    left.eq_ignore_ascii_case(right)
}

/// When `transition` of `event_id` first happened at the simulator, in scenario ms.
pub fn transition_at(state: &StateSnapshot, event_id: &str, transition: Transition) -> Option<u64> {
    state
        .history
        .iter()
        .find(|record| same_id(&record.event_id, event_id) && record.transition == transition)
        .map(|record| record.at_scenario_ms)
}

/// When `transition` of `event_id` first happened at the simulator, in Unix ms.
pub fn transition_at_unix_ms(
    state: &StateSnapshot,
    event_id: &str,
    transition: Transition,
) -> Option<u64> {
    state
        .history
        .iter()
        .find(|record| same_id(&record.event_id, event_id) && record.transition == transition)
        .map(|record| record.at_unix_ms)
}

/// The accepted approvals of `event_id` at the simulator, oldest first.
pub fn accepted_approvals<'a>(state: &'a StateSnapshot, event_id: &str) -> Vec<&'a ApprovalRecord> {
    state
        .approvals
        .iter()
        .filter(|approval| approval.accepted && same_id(&approval.event_id, event_id))
        .collect()
}

/// No sliding one-second window at the simulator holds more than 5 requests (IMDS's limit).
/// The simulator stamps each request when it arrives, before any injected delay, which is
/// how IMDS counts them.
pub fn assert_polite(state: &StateSnapshot) {
    let instants: Vec<u64> = state
        .requests
        .iter()
        .map(|request| request.at_unix_ms)
        .collect();
    let most = max_requests_per_second(&instants);
    assert!(
        most <= 5,
        "{most} requests arrived within one second at the simulator (IMDS allows 5): {}",
        summarize_state(state)
    );
}

/// How often [`wait_for`] looks again.
pub const POLL_EVERY: Duration = Duration::from_millis(50);

/// Polls `check` every [`POLL_EVERY`] until it returns `Ok`, and returns that value. Panics
/// after `timeout`, naming `what` was awaited and the last thing `check` reported seeing.
pub fn wait_for<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let seen = match check() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen}");
        }
        std::thread::sleep(POLL_EVERY);
    }
}

/// [`wait_for`] with a yes/no condition; `describe` says what was seen when it is false.
pub fn wait_until(
    timeout: Duration,
    what: &str,
    mut condition: impl FnMut() -> bool,
    mut describe: impl FnMut() -> String,
) {
    wait_for(timeout, what, || {
        if condition() { Ok(()) } else { Err(describe()) }
    });
}

/// A child process killed (SIGKILL) and reaped when dropped.
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
}

impl ChildGuard {
    /// Guards `child`: it is killed when the guard is dropped.
    pub fn new(child: Child) -> ChildGuard {
        ChildGuard { child: Some(child) }
    }

    /// The operating system's process id.
    pub fn id(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// Kills the process with SIGKILL and waits for it; doing it twice is harmless.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ignored = child.kill();
            let _ignored = child.wait();
        }
    }

    /// Whether the process has exited (and reaps it if so).
    pub fn has_exited(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A running `forewarn simulate`.
#[derive(Debug)]
pub struct Simulator {
    process: ChildGuard,
    /// `http://127.0.0.1:PORT`, the IMDS base URL for the first VM.
    pub base_url: String,
    /// Holds the scenario file written from text, for as long as the simulator runs.
    _scenario_dir: Option<TempDir>,
}

/// What a [`SimulatorBuilder`] plays.
#[derive(Debug, Clone)]
enum ScenarioSource {
    /// A built-in scenario's name, or a scenario file's path.
    Named(String),
    /// A scenario's TOML text.
    Text(String),
}

/// Configures a [`Simulator`]: scenario, speed, faults. Made by [`Simulator::builder`].
#[derive(Debug, Clone)]
pub struct SimulatorBuilder {
    binary: PathBuf,
    scenario: ScenarioSource,
    speed: f64,
    faults: Vec<String>,
    start_on_first_poll: bool,
}

impl SimulatorBuilder {
    /// Plays a built-in scenario (by name) or a scenario file (by path).
    pub fn scenario(mut self, name_or_path: &str) -> SimulatorBuilder {
        self.scenario = ScenarioSource::Named(name_or_path.to_owned());
        self
    }

    /// Plays a scenario given as TOML text (written to a temp file the simulator keeps).
    pub fn scenario_text(mut self, toml: &str) -> SimulatorBuilder {
        self.scenario = ScenarioSource::Text(toml.to_owned());
        self
    }

    /// Scenario time runs `speed` times faster than the wall clock (default 1).
    pub fn speed(mut self, speed: f64) -> SimulatorBuilder {
        self.speed = speed;
        self
    }

    /// Adds a `[[faults]]` table with these TOML lines, e.g. `kind = "status"\nstatus = 429`
    /// (for a scenario given as text).
    pub fn fault(mut self, table: &str) -> SimulatorBuilder {
        self.faults.push(table.to_owned());
        self
    }

    /// Holds the scenario's clock at 0 until the first GET of scheduledevents
    /// (`--start-on-first-poll`): the scenario's windows count from the daemon's first poll,
    /// not from however long the daemon took to start on a busy machine.
    pub fn start_on_first_poll(mut self) -> SimulatorBuilder {
        self.start_on_first_poll = true;
        self
    }

    /// Starts `forewarn simulate --listen 127.0.0.1:0 --stay` with the scenario and speed.
    pub fn start(self) -> Simulator {
        let (scenario, dir) = match self.scenario {
            ScenarioSource::Named(name) => {
                assert!(
                    self.faults.is_empty(),
                    "faults are added to a scenario given as text, not to {name}"
                );
                (name, None)
            }
            ScenarioSource::Text(mut text) => {
                for fault in &self.faults {
                    let _ = write!(text, "\n[[faults]]\n{fault}\n");
                }
                let dir = tempfile::tempdir().expect("a temp dir for the scenario");
                let path = dir.path().join("scenario.toml");
                std::fs::write(&path, text).expect("write the scenario");
                (path.to_string_lossy().into_owned(), Some(dir))
            }
        };
        let mut simulator = Simulator::spawn(
            &self.binary,
            &scenario,
            self.speed,
            self.start_on_first_poll,
        );
        simulator._scenario_dir = dir;
        simulator
    }
}

impl Simulator {
    /// A builder for a simulator run by `binary` (see [`forewarn_binary!`](crate::forewarn_binary)): the default
    /// built-in scenario at speed 1, no faults added.
    pub fn builder(binary: &Path) -> SimulatorBuilder {
        SimulatorBuilder {
            binary: binary.to_owned(),
            scenario: ScenarioSource::Named(forewarn_simulator::DEFAULT_SCENARIO.to_owned()),
            speed: 1.0,
            faults: Vec::new(),
            start_on_first_poll: false,
        }
    }

    /// Starts `forewarn simulate --listen 127.0.0.1:0 --scenario SCENARIO --speed SPEED
    /// --stay` (and `--start-on-first-poll`) and reads the address from its first stdout line.
    fn spawn(binary: &Path, scenario: &str, speed: f64, start_on_first_poll: bool) -> Simulator {
        let mut command = Command::new(binary);
        command.arg("simulate");
        if start_on_first_poll {
            command.arg("--start-on-first-poll");
        }
        let mut child = command
            .args(["--listen", "127.0.0.1:0", "--stay"])
            .args(["--scenario", scenario, "--speed", &speed.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let stdout = child.stdout.take().expect("stdout is piped");
        let process = ChildGuard::new(child);
        let mut first_line = String::new();
        BufReader::new(stdout)
            .read_line(&mut first_line)
            .expect("read the simulator's first line");
        let base_url = parse_simulator_url(&first_line).unwrap_or_else(|| {
            panic!("unexpected first line from forewarn simulate: {first_line:?}")
        });
        Simulator {
            process,
            base_url,
            _scenario_dir: None,
        }
    }

    /// The simulator's process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// `host:port` of the simulator.
    pub fn address(&self) -> &str {
        self.base_url.trim_start_matches("http://")
    }

    /// `GET /simulator/state`, parsed.
    pub fn state(&self) -> StateSnapshot {
        let body = http_get(self.address(), "/simulator/state")
            .unwrap_or_else(|error| panic!("GET /simulator/state failed: {error}"));
        serde_json::from_str(&body)
            .unwrap_or_else(|error| panic!("cannot parse /simulator/state ({error}): {body}"))
    }

    /// Polls the state until `check` accepts it; panics after `timeout` with the last state's
    /// summary.
    pub fn wait_for_state(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&StateSnapshot) -> bool,
    ) -> StateSnapshot {
        wait_for(timeout, what, || {
            let state = self.state();
            if check(&state) {
                Ok(state)
            } else {
                Err(summarize_state(&state))
            }
        })
    }

    /// Waits until the simulator's history shows `transition` for `event_id`.
    pub fn wait_for_transition(
        &self,
        timeout: Duration,
        event_id: &str,
        transition: Transition,
    ) -> StateSnapshot {
        self.wait_for_state(
            timeout,
            &format!("{transition:?} of event {event_id} at the simulator"),
            |state| state.transitions_of(event_id).contains(&transition),
        )
    }

    /// `POST path` with an empty JSON object to one of the console's endpoints (e.g.
    /// `/simulator/events/ID/end`); the answer's status line, or why there was none.
    pub fn console_post(&self, path: &str) -> Result<String, String> {
        let address = self.address();
        let mut stream =
            TcpStream::connect(address).map_err(|error| format!("connect: {error}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|error| error.to_string())?;
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
             Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        );
        stream
            .write_all(request.as_bytes())
            .map_err(|error| format!("send: {error}"))?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .map_err(|error| format!("read: {error}"))?;
        Ok(answer.lines().next().unwrap_or_default().to_owned())
    }

    /// Ends a Started event now (the console's `POST /simulator/events/ID/end`): for a test
    /// that decides when the maintenance is over instead of waiting out its `runs_for`.
    pub fn end_event(&self, event_id: &str) {
        let answer = self
            .console_post(&format!("/simulator/events/{event_id}/end"))
            .unwrap_or_else(|error| panic!("ending {event_id}: {error}"));
        assert!(answer.contains(" 200"), "ending {event_id}: {answer}");
    }

    /// `POST /simulator/events` with `body` (JSON: `{"type": "Reboot",
    /// "not_before_seconds": 30}`, see the simulator's console): an event that appears now.
    /// Returns its id.
    pub fn generate_event(&self, body: &str) -> String {
        let answer = http_post_json(self.address(), "/simulator/events", body)
            .unwrap_or_else(|error| panic!("POST /simulator/events {body} failed: {error}"));
        let created: serde_json::Value = serde_json::from_str(&answer)
            .unwrap_or_else(|error| panic!("cannot parse {answer:?}: {error}"));
        created["event_id"]
            .as_str()
            .unwrap_or_else(|| panic!("no event_id in {answer}"))
            .to_owned()
    }

    /// Kills the simulator now.
    pub fn stop(&mut self) {
        self.process.kill();
    }
}

/// The `http://ADDR` in "simulating IMDS at http://ADDR (scenario …)".
pub fn parse_simulator_url(line: &str) -> Option<String> {
    let rest = line.split("simulating IMDS at ").nth(1)?;
    let url = rest.split_whitespace().next()?;
    url.starts_with("http://").then(|| url.to_owned())
}

/// A short account of a simulator state for failure messages.
pub fn summarize_state(state: &StateSnapshot) -> String {
    let mut text = format!(
        "scenario {} at {} ms (finished: {}), incarnation {}; events:",
        state.scenario, state.now_scenario_ms, state.finished, state.incarnation
    );
    for event in &state.events {
        let _ = write!(
            text,
            " [{} {} {}]",
            event.event_id, event.event_type, event.event_status
        );
    }
    let _ = write!(text, "; history:");
    for record in &state.history {
        let _ = write!(
            text,
            " {}:{:?}@{}",
            short_id(&record.event_id),
            record.transition,
            record.at_scenario_ms
        );
    }
    let _ = write!(text, "; approvals:");
    for approval in &state.approvals {
        let _ = write!(
            text,
            " {}:{}:{}@{}",
            short_id(&approval.event_id),
            approval.vm,
            approval.accepted,
            approval.at_scenario_ms
        );
    }
    let _ = write!(text, "; {} requests", state.requests.len());
    text
}

fn short_id(id: &str) -> &str {
    &id[..id.len().min(8)]
}

/// A minimal HTTP/1.1 GET over a fresh loopback connection (the simulator's /simulator
/// endpoints only), returning the body of a 200 answer.
pub fn http_get(address: &str, path: &str) -> Result<String, String> {
    http_get_with_headers(address, path, &[])
}

/// [`http_get`] sending `headers` too (e.g. `Metadata: true` for IMDS).
pub fn http_get_with_headers(
    address: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<String, String> {
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {address}\r\n{extra}Connection: close\r\n\r\n");
    exchange(address, &request, "HTTP/1.1 200")
        .map_err(|error| error.replace("not the answer wanted", "not a 200"))
}

/// Sends `request` over a fresh connection to `address`; the body of an answer whose status
/// line starts with `wanted`.
fn exchange(address: &str, request: &str, wanted: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(address).map_err(|error| format!("connect: {error}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|error| error.to_string())?;
    stream
        .write_all(request.as_bytes())
        .map_err(|error| format!("send: {error}"))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|error| format!("read: {error}"))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no header end in {response:?}"))?;
    if !head.starts_with(wanted) {
        return Err(format!("not the answer wanted: {head}: {body}"));
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(dechunk(body));
    }
    Ok(body.to_owned())
}

/// A minimal HTTP/1.1 POST of a JSON `body` over a fresh loopback connection, returning
/// the body of a 2xx answer.
pub fn http_post_json(address: &str, path: &str, body: &str) -> Result<String, String> {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    exchange(address, &request, "HTTP/1.1 2")
}

/// One HTTP/1.1 request as a test server read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRequest {
    /// `GET`, `PUT`, …
    pub method: String,
    /// The request target, e.g. `/status`.
    pub path: String,
    /// The body (`content-length` bytes).
    pub body: Vec<u8>,
}

/// Reads one request (line, headers, a `content-length` body) for a test's tiny server.
pub fn read_request(reader: &mut impl BufRead) -> std::io::Result<RawRequest> {
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut content_length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        if header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            content_length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body)?;
    let mut parts = request_line.split_whitespace();
    Ok(RawRequest {
        method: parts.next().unwrap_or("").to_owned(),
        path: parts.next().unwrap_or("").to_owned(),
        body,
    })
}

/// Decodes a chunked body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size_line, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size_line.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// One plugin for a test's plugin directory: the probe guest under `name`.
#[derive(Debug, Clone)]
pub struct ProbePlugin {
    /// The plugin's name (its file stem in the plugin directory).
    pub name: String,
    /// The probe's `mode` config value.
    pub mode: String,
    /// Event types it subscribes to; empty means the manifest's default (all).
    pub subscribe: Vec<String>,
    /// Plugins it runs after (`after` in its manifest).
    pub after: Vec<String>,
    /// e.g. "5s"; `None` keeps the default.
    pub budget: Option<String>,
    /// Its `on-failure` ("hold", "approve"); `None` keeps the default.
    pub on_failure: Option<String>,
    /// Further `[config]` values (key, TOML value text, e.g. "3" or "\"x\"").
    pub config: Vec<(String, String)>,
    /// Lines of its `[capabilities]` table, e.g. `azure-identity = ["https://storage.azure.com/"]`.
    pub capabilities: Vec<String>,
}

impl ProbePlugin {
    /// The probe named `name` in `mode`, subscribed to everything, after nobody.
    pub fn new(name: &str, mode: &str) -> ProbePlugin {
        ProbePlugin {
            name: name.to_owned(),
            mode: mode.to_owned(),
            subscribe: Vec::new(),
            after: Vec::new(),
            budget: None,
            on_failure: None,
            config: Vec::new(),
            capabilities: Vec::new(),
        }
    }

    /// Adds a line to its `[capabilities]` table.
    pub fn capability(mut self, line: &str) -> ProbePlugin {
        self.capabilities.push(line.to_owned());
        self
    }

    /// Subscribes it to these event types only.
    pub fn subscribe(mut self, types: &[&str]) -> ProbePlugin {
        self.subscribe = types.iter().map(|name| (*name).to_owned()).collect();
        self
    }

    /// Makes it run after these plugins.
    pub fn after(mut self, names: &[&str]) -> ProbePlugin {
        self.after = names.iter().map(|name| (*name).to_owned()).collect();
        self
    }

    /// Sets its budget ("5s", "500ms").
    pub fn budget(mut self, budget: &str) -> ProbePlugin {
        self.budget = Some(budget.to_owned());
        self
    }

    /// Sets its `on-failure` ("hold" or "approve").
    pub fn on_failure(mut self, policy: &str) -> ProbePlugin {
        self.on_failure = Some(policy.to_owned());
        self
    }

    /// Adds a `[config]` value; `value` is TOML (a number, or a quoted string).
    pub fn config(mut self, key: &str, value: &str) -> ProbePlugin {
        self.config.push((key.to_owned(), value.to_owned()));
        self
    }

    /// The manifest text (`NAME.toml`).
    pub fn manifest(&self) -> String {
        let mut text = String::new();
        if !self.subscribe.is_empty() {
            let _ = writeln!(text, "subscribe = {}", toml_list(&self.subscribe));
        }
        if !self.after.is_empty() {
            let _ = writeln!(text, "after = {}", toml_list(&self.after));
        }
        if let Some(budget) = &self.budget {
            let _ = writeln!(text, "budget = \"{budget}\"");
        }
        if let Some(policy) = &self.on_failure {
            let _ = writeln!(text, "on-failure = \"{policy}\"");
        }
        let _ = writeln!(text, "[config]\nmode = \"{}\"", self.mode);
        for (key, value) in &self.config {
            let _ = writeln!(text, "{key} = {value}");
        }
        if !self.capabilities.is_empty() {
            let _ = writeln!(text, "[capabilities]\n{}", self.capabilities.join("\n"));
        }
        text
    }
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("\"{item}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

/// Installs the bundled plugin `name` into `plugin_dir` with `manifest` as its NAME.toml, or
/// with its bundled manifest.
pub fn install_bundled_plugin(plugin_dir: &Path, name: &str, manifest: Option<&str>) {
    let plugin = forewarn_host::bundled::bundled_plugins()
        .into_iter()
        .find(|plugin| plugin.name == name)
        .unwrap_or_else(|| panic!("no bundled plugin named {name}"));
    let wasm = plugin_dir.join(format!("{name}.wasm"));
    std::fs::write(wasm, plugin.wasm).expect("write the plugin's wasm");
    let toml = plugin_dir.join(format!("{name}.toml"));
    std::fs::write(toml, manifest.unwrap_or(plugin.manifest)).expect("write the manifest");
}

/// Writes `dir/NAME.wasm` (a copy of `probe_wasm`) and `dir/NAME.toml` for each plugin.
pub fn write_plugin_dir(dir: &Path, probe_wasm: &Path, plugins: &[ProbePlugin]) {
    std::fs::create_dir_all(dir).expect("create the plugin directory");
    for plugin in plugins {
        std::fs::copy(probe_wasm, dir.join(format!("{}.wasm", plugin.name)))
            .unwrap_or_else(|error| panic!("copy {}: {error}", probe_wasm.display()));
        std::fs::write(dir.join(format!("{}.toml", plugin.name)), plugin.manifest())
            .expect("write a plugin manifest");
    }
}

/// A `policy.prepare-lead-time` longer than any test's notice: preparation starts at once.
pub const PREPARE_AT_ONCE: &str = "1h";

/// What goes into a daemon config file.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// `vm-name`.
    pub vm_name: String,
    /// `state-dir` (the journal, plugin state, compile cache).
    pub state_dir: PathBuf,
    /// `plugin-dir`.
    pub plugin_dir: PathBuf,
    /// `imds.url`: the simulator's base URL.
    pub imds_url: String,
    /// e.g. "250ms".
    pub poll_interval: String,
    /// Lines of the `[policy]` table, e.g. `approve-user-initiated = true`.
    pub policy: Vec<String>,
    /// Tables appended after `[policy]`, e.g. `[actions.stop-app]` with its keys.
    pub extra: String,
    /// `policy.prepare-lead-time`: "1h" by default, so that events announced minutes ahead
    /// are prepared at once, as most tests expect; None leaves the daemon's default
    /// ("auto"), for the tests of the lead time itself.
    pub prepare_lead_time: Option<String>,
}

impl DaemonConfig {
    /// vm-a against `imds_url`, its state in `dir/state`, plugins from `plugin_dir`,
    /// polling every 250 ms, no policy lines.
    pub fn vm_a(dir: &Path, plugin_dir: PathBuf, imds_url: &str) -> DaemonConfig {
        DaemonConfig {
            vm_name: "vm-a".into(),
            state_dir: dir.join("state"),
            plugin_dir,
            imds_url: imds_url.to_owned(),
            poll_interval: "250ms".into(),
            policy: Vec::new(),
            extra: String::new(),
            prepare_lead_time: Some(PREPARE_AT_ONCE.to_owned()),
        }
    }

    /// The config file's text. The admin endpoint listens on an ephemeral port so that
    /// daemons of parallel tests do not collide.
    pub fn to_toml(&self) -> String {
        let mut text = format!(
            "vm-name = \"{}\"\nstate-dir = \"{}\"\nplugin-dir = \"{}\"\n\n[imds]\nurl = \"{}\"\npoll-interval = \"{}\"\n\n[admin]\nlisten = \"127.0.0.1:0\"\n\n[policy]\n",
            self.vm_name,
            self.state_dir.display(),
            self.plugin_dir.display(),
            self.imds_url,
            self.poll_interval,
        );
        if let Some(lead) = &self.prepare_lead_time {
            let _ = writeln!(text, "prepare-lead-time = \"{lead}\"");
        }
        for line in &self.policy {
            let _ = writeln!(text, "{line}");
        }
        let _ = writeln!(text, "\n{}", self.extra);
        text
    }

    /// Writes the config to `path`.
    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.to_toml()).expect("write the daemon config");
    }
}

/// One JSON log line of the daemon, with its timestamp in Unix milliseconds.
#[derive(Debug, Clone)]
pub struct LogLine {
    /// When the line was logged (its `timestamp`), in ms since the Unix epoch.
    pub at_unix_ms: u64,
    /// The whole JSON object of the line.
    pub fields: serde_json::Value,
}

impl LogLine {
    /// A string field ("" when absent or not a string).
    pub fn text(&self, field: &str) -> &str {
        self.fields
            .get(field)
            .and_then(|value| value.as_str())
            .unwrap_or("")
    }

    /// The `message` field: compare it with the constants of `forewarn_daemon::log_messages`.
    pub fn message(&self) -> &str {
        self.text("message")
    }
}

/// One plugin decision as the daemon logged it ([`PLUGIN_DECISION`], or
/// [`PLUGIN_CALL_FAILED`] or [`PLUGIN_CALL_FAILED_CONSENT`] with `failure` set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginDecision {
    /// When it was logged, in ms since the Unix epoch.
    pub at_unix_ms: u64,
    /// The event decided on.
    pub event_id: String,
    /// The plugin that decided.
    pub plugin: String,
    /// The phase ("prepare", "started", "ended-after-start", "ended-without-start").
    pub phase: String,
    /// "approve" or "defer" (a failed call counts as a defer).
    pub decision: String,
    /// The defer or failure reason; empty for approve.
    pub reason: String,
    /// The failure kind for a failed call ("trap", "budget-exceeded", …), else "".
    pub failure: String,
}

impl PluginDecision {
    fn from_line(line: &LogLine) -> Option<PluginDecision> {
        let message = line.message();
        if ![
            PLUGIN_DECISION,
            PLUGIN_CALL_FAILED,
            PLUGIN_CALL_FAILED_CONSENT,
        ]
        .contains(&message)
        {
            return None;
        }
        Some(PluginDecision {
            at_unix_ms: line.at_unix_ms,
            event_id: line.text("event_id").to_owned(),
            plugin: line.text("plugin").to_owned(),
            phase: line.text("phase").to_owned(),
            decision: line.text("decision").to_owned(),
            reason: line.text("reason").to_owned(),
            failure: line.text("failure").to_owned(),
        })
    }
}

/// Everything the daemon wrote to stderr, split into parsed lines and the rest.
#[derive(Debug, Default)]
struct CapturedLog {
    lines: Vec<LogLine>,
    unparsed: Vec<String>,
    /// The daemon's stderr reached its end: the process exited (or closed it).
    closed: bool,
}

/// A running `forewarn --log-format json run --config PATH`, its stderr read on a thread.
#[derive(Debug)]
pub struct Daemon {
    process: ChildGuard,
    log: Arc<Mutex<CapturedLog>>,
    reader: Option<JoinHandle<()>>,
}

impl Daemon {
    /// Starts the daemon with `config` and `FOREWARN_LOG=info` (plus `extra_env`).
    pub fn start(binary: &Path, config: &Path) -> Daemon {
        Daemon::spawn(Command::new(binary), binary, config)
    }

    /// [`Daemon::start`] with the text log format (`--log-format text`): every line of its
    /// log is then in [`Daemon::unparsed`], as an operator reading journald would see it.
    pub fn start_with_text_log(binary: &Path, config: &Path) -> Daemon {
        Daemon::spawn_with(Command::new(binary), binary, config, "text", &[])
    }

    /// [`Daemon::start`] with extra environment variables (e.g. `NOTIFY_SOCKET`).
    pub fn start_with_env(binary: &Path, config: &Path, vars: &[(&str, &str)]) -> Daemon {
        let mut command = Command::new(binary);
        command.envs(vars.iter().copied());
        Daemon::spawn(command, binary, config)
    }

    /// [`Daemon::start`] with the daemon's file-descriptor limit (RLIMIT_NOFILE) set to
    /// `limit`: `sh` sets it with `ulimit -n`, then execs the daemon (same pid).
    pub fn start_with_fd_limit(binary: &Path, config: &Path, limit: u64) -> Daemon {
        Daemon::start_with_ulimit(binary, config, "-n", limit)
    }

    /// [`Daemon::start`] with the daemon's address space (RLIMIT_AS) limited to
    /// `limit_kib` KiB, as `ulimit -v` or systemd's `LimitAS=` does: `sh` sets it, then execs
    /// the daemon (same pid).
    pub fn start_with_address_space_limit(binary: &Path, config: &Path, limit_kib: u64) -> Daemon {
        Daemon::start_with_ulimit(binary, config, "-v", limit_kib)
    }

    /// `sh` sets `ulimit OPTION VALUE`, then execs the daemon (same pid).
    fn start_with_ulimit(binary: &Path, config: &Path, option: &str, value: u64) -> Daemon {
        let mut shell = Command::new("sh");
        shell
            .arg("-c")
            .arg(format!("ulimit {option} {value} && exec \"$0\" \"$@\""))
            .arg(binary);
        Daemon::spawn(shell, binary, config)
    }

    /// [`Daemon::start`] run by `wrapper` (a program and its arguments ending in `--`, e.g.
    /// `strace -o FILE --`), which runs the daemon as its child: [`Daemon::pid`] is then the
    /// wrapper's.
    pub fn start_under(wrapper: &[&str], binary: &Path, config: &Path) -> Daemon {
        let (program, arguments) = wrapper.split_first().expect("a wrapper program");
        let mut command = Command::new(program);
        command.args(arguments).arg(binary);
        Daemon::spawn(command, binary, config)
    }

    /// [`Daemon::start`] with more `forewarn run` arguments after `--config PATH`, e.g. the
    /// flags that override the config file (`--imds-url URL`, `--vm-name NAME`, …).
    pub fn start_with_args(binary: &Path, config: &Path, args: &[&str]) -> Daemon {
        Daemon::spawn_with(Command::new(binary), binary, config, "json", args)
    }

    /// [`Daemon::start`] through `command`, which runs the daemon's binary itself (e.g.
    /// Wine's loader with the Windows `forewarn.exe` as its first argument); `--log-format
    /// json run --config PATH` is appended.
    pub fn start_through(command: Command, config: &Path) -> Daemon {
        let program = PathBuf::from(command.get_program());
        Daemon::spawn(command, &program, config)
    }

    fn spawn(command: Command, binary: &Path, config: &Path) -> Daemon {
        Daemon::spawn_with(command, binary, config, "json", &[])
    }

    /// The daemon `command` runs, logging in `format` ("json" or "text"), with `args` after
    /// `--config PATH`.
    fn spawn_with(
        mut command: Command,
        binary: &Path,
        config: &Path,
        format: &str,
        args: &[&str],
    ) -> Daemon {
        let mut child = command
            .args(["--log-format", format, "run", "--config"])
            .arg(config)
            .args(args)
            .env("FOREWARN_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", binary.display()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(CapturedLog::default()));
        let reader = spawn_log_reader(stderr, log.clone());
        Daemon {
            process: ChildGuard::new(child),
            log,
            reader: Some(reader),
        }
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    /// SIGKILL, and wait until the process is gone and its log fully read.
    pub fn kill(&mut self) {
        self.process.kill();
        if let Some(reader) = self.reader.take() {
            let _ignored = reader.join();
        }
    }

    /// Whether the process has exited.
    pub fn has_exited(&mut self) -> bool {
        self.process.has_exited()
    }

    /// Every parsed log line so far.
    pub fn lines(&self) -> Vec<LogLine> {
        self.log.lock().expect("log lock").lines.clone()
    }

    /// Lines of stderr that were not JSON (panics, early errors).
    pub fn unparsed(&self) -> Vec<String> {
        self.log.lock().expect("log lock").unparsed.clone()
    }

    /// Every plugin decision logged so far, in log order.
    pub fn decisions(&self) -> Vec<PluginDecision> {
        let log = self.log.lock().expect("log lock");
        log.lines
            .iter()
            .filter_map(PluginDecision::from_line)
            .collect()
    }

    /// The daemon's [`EVENT_TRANSITION`] lines whose `transition` field is `transition`
    /// (`appeared`, `started`, `ended-after-start`, …).
    pub fn transitions(&self, transition: &str) -> Vec<LogLine> {
        self.lines_with_message(EVENT_TRANSITION)
            .into_iter()
            .filter(|line| line.text("transition") == transition)
            .collect()
    }

    /// The admin endpoint's `host:port`, from the daemon's [`ADMIN_LISTENING`] line; waits
    /// up to `timeout` for it.
    pub fn admin_address(&self, timeout: Duration) -> String {
        wait_for(timeout, "the admin endpoint's address in the log", || {
            self.lines_with_message(ADMIN_LISTENING)
                .first()
                .map(|line| line.text("address").to_owned())
                .ok_or_else(|| self.describe_for_failure())
        })
    }

    /// Polls until `plugin` has answered `phase` for `event_id` (any event when `None`);
    /// returns every decision so far.
    pub fn wait_for_phase(
        &self,
        timeout: Duration,
        event_id: Option<&str>,
        plugin: &str,
        phase: &str,
    ) -> Vec<PluginDecision> {
        let what = match event_id {
            Some(id) => format!("plugin {plugin} to answer {phase} for event {id}"),
            None => format!("plugin {plugin} to answer {phase}"),
        };
        self.wait_for_decisions(timeout, &what, |decisions| {
            decisions.iter().any(|d| {
                event_id.is_none_or(|id| same_id(&d.event_id, id))
                    && d.plugin == plugin
                    && d.phase == phase
            })
        })
    }

    /// Lines whose message is `message`.
    pub fn lines_with_message(&self, message: &str) -> Vec<LogLine> {
        let log = self.log.lock().expect("log lock");
        log.lines
            .iter()
            .filter(|line| line.message() == message)
            .cloned()
            .collect()
    }

    /// Polls until a line whose message is `message` has been read; returns every such line
    /// so far. For a line logged before an effect seen elsewhere (at the simulator, on the
    /// admin endpoint, in a file): the log is read on a thread, so the effect can be seen
    /// before the line has been read.
    pub fn wait_for_message(&self, timeout: Duration, message: &str) -> Vec<LogLine> {
        wait_for(timeout, &format!("a {message:?} line in the log"), || {
            let lines = self.lines_with_message(message);
            if lines.is_empty() {
                Err(self.describe_for_failure())
            } else {
                Ok(lines)
            }
        })
    }

    /// Polls the decisions until `check` accepts them; on timeout the message lists them.
    pub fn wait_for_decisions(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&[PluginDecision]) -> bool,
    ) -> Vec<PluginDecision> {
        wait_for(timeout, what, || {
            let decisions = self.decisions();
            if check(&decisions) {
                Ok(decisions)
            } else {
                Err(self.describe_for_failure())
            }
        })
    }

    /// The decisions and any warnings/errors, one per line, for failure messages.
    pub fn describe_for_failure(&self) -> String {
        let log = self.log.lock().expect("log lock");
        let mut text = String::from("daemon log:");
        for line in &log.lines {
            if let Some(decision) = PluginDecision::from_line(line) {
                let _ = write!(
                    text,
                    "\n  {} {} {} {} {:?}",
                    short_id(&decision.event_id),
                    decision.plugin,
                    decision.phase,
                    decision.decision,
                    decision.reason
                );
                continue;
            }
            let level = line.text("level");
            if level == "WARN" || level == "ERROR" || line.message() == APPROVED_AT_IMDS {
                let _ = write!(text, "\n  {level} {}", line.fields);
            }
        }
        for raw in &log.unparsed {
            let _ = write!(text, "\n  (raw) {raw}");
        }
        // Where it got to, whatever the level: a daemon stuck before its first poll logs
        // no warning, and its last lines say at which step it stopped.
        let last = log.lines.len().saturating_sub(LAST_LINES_SHOWN);
        let _ = write!(
            text,
            "\n  its last {} of {} lines:",
            log.lines.len() - last,
            log.lines.len()
        );
        for line in &log.lines[last..] {
            let _ = write!(text, "\n    {} {}", line.text("level"), line.message());
        }
        if log.closed {
            text.push_str("\n  its stderr is closed: the process exited");
        }
        text
    }
}

/// How many of the daemon's last log lines a failure shows, whatever their level.
const LAST_LINES_SHOWN: usize = 8;

fn spawn_log_reader(stderr: ChildStderr, log: Arc<Mutex<CapturedLog>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let parsed = parse_log_line(&line);
            let mut log = log.lock().expect("log lock");
            match parsed {
                Some(parsed) => log.lines.push(parsed),
                None => log.unparsed.push(line),
            }
        }
        log.lock().expect("log lock").closed = true;
    })
}

/// Parses one JSON log line of `tracing-subscriber` (flattened fields, RFC 3339 timestamp).
pub fn parse_log_line(line: &str) -> Option<LogLine> {
    let fields: serde_json::Value = serde_json::from_str(line).ok()?;
    let timestamp = fields.get("timestamp")?.as_str()?;
    let at = chrono::DateTime::parse_from_rfc3339(timestamp).ok()?;
    Some(LogLine {
        at_unix_ms: u64::try_from(at.timestamp_millis()).ok()?,
        fields,
    })
}

/// The largest number of requests in any 1-second window `[t, t + 1 s)` of `instants_ms`.
pub fn max_requests_per_second(instants_ms: &[u64]) -> usize {
    max_requests_in_window(instants_ms, 1000)
}

/// The largest number of `instants_ms` in any window `[t, t + window_ms)`.
pub fn max_requests_in_window(instants_ms: &[u64], window_ms: u64) -> usize {
    let mut sorted = instants_ms.to_vec();
    sorted.sort_unstable();
    let mut most = 0;
    let mut start = 0;
    for end in 0..sorted.len() {
        while sorted[end] - sorted[start] >= window_ms {
            start += 1;
        }
        most = most.max(end - start + 1);
    }
    most
}

/// How long a [`TestEnv`] waits for one thing unless told otherwise.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(20);

/// Configures a [`TestEnv`]: the simulator, the probe plugins, the daemon's config. Made by
/// [`TestEnv::builder`].
#[derive(Debug)]
pub struct TestEnvBuilder {
    binary: PathBuf,
    simulator: SimulatorBuilder,
    dir: Option<TempDir>,
    plugins: Vec<ProbePlugin>,
    vm_name: String,
    poll_interval: String,
    policy: Vec<String>,
    wait: Duration,
}

impl TestEnvBuilder {
    /// Plays a built-in scenario (by name) or a scenario file (by path).
    pub fn scenario(mut self, name_or_path: &str) -> TestEnvBuilder {
        self.simulator = self.simulator.scenario(name_or_path);
        self
    }

    /// Plays a scenario given as TOML text.
    pub fn scenario_text(mut self, toml: &str) -> TestEnvBuilder {
        self.simulator = self.simulator.scenario_text(toml);
        self
    }

    /// The simulator's speed (default 1).
    pub fn speed(mut self, speed: f64) -> TestEnvBuilder {
        self.simulator = self.simulator.speed(speed);
        self
    }

    /// Adds a `[[faults]]` table to the scenario text (see [`SimulatorBuilder::fault`]).
    pub fn fault(mut self, table: &str) -> TestEnvBuilder {
        self.simulator = self.simulator.fault(table);
        self
    }

    /// The scenario's clock starts at the daemon's first poll (see
    /// [`SimulatorBuilder::start_on_first_poll`]).
    pub fn start_on_first_poll(mut self) -> TestEnvBuilder {
        self.simulator = self.simulator.start_on_first_poll();
        self
    }

    /// Uses `dir` (already holding files the test wrote) instead of a fresh temp dir.
    pub fn in_dir(mut self, dir: TempDir) -> TestEnvBuilder {
        self.dir = Some(dir);
        self
    }

    /// The probe plugins of the plugin directory (none by default).
    pub fn plugins(mut self, plugins: &[ProbePlugin]) -> TestEnvBuilder {
        self.plugins = plugins.to_vec();
        self
    }

    /// The daemon's VM name (default `vm-a`).
    pub fn vm_name(mut self, vm_name: &str) -> TestEnvBuilder {
        self.vm_name = vm_name.to_owned();
        self
    }

    /// The daemon's poll interval (default `250ms`).
    pub fn poll_interval(mut self, poll_interval: &str) -> TestEnvBuilder {
        self.poll_interval = poll_interval.to_owned();
        self
    }

    /// Lines of the config's `[policy]` table, e.g. `approve-user-initiated = true`.
    pub fn policy(mut self, lines: &[&str]) -> TestEnvBuilder {
        self.policy
            .extend(lines.iter().map(|line| (*line).to_owned()));
        self
    }

    /// How long the [`TestEnv`]'s waits last (default [`DEFAULT_WAIT`]).
    pub fn wait(mut self, wait: Duration) -> TestEnvBuilder {
        self.wait = wait;
        self
    }

    /// Starts the simulator and writes the plugin directory and the daemon config; the
    /// daemon is not started.
    pub fn prepare(self) -> Setup {
        let dir = match self.dir {
            Some(dir) => dir,
            None => tempfile::tempdir().expect("temp dir"),
        };
        let simulator = self.simulator.start();
        let plugin_dir = dir.path().join("plugins");
        write_plugin_dir(&plugin_dir, Path::new(crate::guests::PROBE), &self.plugins);
        let config = dir.path().join("forewarn.toml");
        DaemonConfig {
            vm_name: self.vm_name,
            poll_interval: self.poll_interval,
            policy: self.policy,
            ..DaemonConfig::vm_a(dir.path(), plugin_dir, &simulator.base_url)
        }
        .write(&config);
        Setup {
            binary: self.binary,
            dir,
            simulator,
            config,
            wait: self.wait,
        }
    }

    /// [`TestEnvBuilder::prepare`], then starts the daemon.
    pub fn start(self) -> TestEnv {
        let setup = self.prepare();
        let daemon = setup.start_daemon();
        TestEnv {
            setup,
            daemon,
            earlier: Vec::new(),
        }
    }
}

/// A prepared environment: temp dir, running simulator, plugin directory, daemon config.
#[derive(Debug)]
pub struct Setup {
    binary: PathBuf,
    /// The temp dir: `plugins/`, `state/`, `forewarn.toml`.
    pub dir: TempDir,
    /// The running simulator.
    pub simulator: Simulator,
    /// The daemon config's path.
    pub config: PathBuf,
    /// How long waits last.
    pub wait: Duration,
}

impl Setup {
    /// Starts a daemon with the config.
    pub fn start_daemon(&self) -> Daemon {
        Daemon::start(&self.binary, &self.config)
    }

    /// Waits for the scenario's end; panics at once if `daemon` exits on the way.
    pub fn wait_finished(&self, daemon: &mut Daemon, timeout: Duration) -> StateSnapshot {
        wait_for(timeout, "the scenario to finish", || {
            if daemon.has_exited() {
                panic!("the daemon exited: {}", daemon.describe_for_failure());
            }
            let state = self.simulator.state();
            if state.finished {
                Ok(state)
            } else {
                Err(summarize_state(&state))
            }
        })
    }
}

/// A running environment: a [`Setup`] and its daemon.
#[derive(Debug)]
pub struct TestEnv {
    /// The simulator, temp dir and config.
    pub setup: Setup,
    /// The daemon running now.
    pub daemon: Daemon,
    /// The logs of daemons killed earlier in the test, oldest first.
    pub earlier: Vec<Daemon>,
}

impl TestEnv {
    /// A builder for an environment whose processes `binary` runs (see [`forewarn_binary!`](crate::forewarn_binary)):
    /// the default built-in scenario at speed 1, no plugins, vm-a polling every 250 ms.
    pub fn builder(binary: &Path) -> TestEnvBuilder {
        TestEnvBuilder {
            binary: binary.to_owned(),
            simulator: Simulator::builder(binary),
            dir: None,
            plugins: Vec::new(),
            vm_name: "vm-a".to_owned(),
            poll_interval: "250ms".to_owned(),
            policy: Vec::new(),
            wait: DEFAULT_WAIT,
        }
    }

    /// The simulator.
    pub fn simulator(&self) -> &Simulator {
        &self.setup.simulator
    }

    /// SIGKILLs the daemon; its log stays readable until the next restart.
    pub fn kill_daemon(&mut self) {
        self.daemon.kill();
    }

    /// Starts a new daemon with the same config and state directory (killing the old one).
    pub fn restart_daemon(&mut self) {
        self.daemon.kill();
        let fresh = self.setup.start_daemon();
        let old = std::mem::replace(&mut self.daemon, fresh);
        self.earlier.push(old);
    }

    /// `GET /simulator/state`.
    pub fn state(&self) -> StateSnapshot {
        self.setup.simulator.state()
    }

    /// Waits until the simulator's history shows `transition` for `event_id`.
    pub fn wait_for_transition(&self, event_id: &str, transition: Transition) -> StateSnapshot {
        self.setup
            .simulator
            .wait_for_transition(self.setup.wait, event_id, transition)
    }

    /// Waits until `plugin` has answered `phase` for `event_id`; every decision so far.
    pub fn wait_for_phase(&self, event_id: &str, plugin: &str, phase: &str) -> Vec<PluginDecision> {
        self.daemon
            .wait_for_phase(self.setup.wait, Some(event_id), plugin, phase)
    }

    /// A failure message's context: the simulator and the daemon log.
    pub fn context(&self) -> String {
        format!(
            "simulator: {}\n{}",
            summarize_state(&self.state()),
            self.daemon.describe_for_failure()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_simulator_address() {
        let line = "simulating IMDS at http://127.0.0.1:4321 (scenario x, speed 2x)\n";
        assert_eq!(
            parse_simulator_url(line).as_deref(),
            Some("http://127.0.0.1:4321")
        );
        assert_eq!(parse_simulator_url("something else"), None);
    }

    #[test]
    fn parses_a_json_log_line() {
        let line = r#"{"timestamp":"2026-01-02T03:04:05.678901Z","level":"INFO","message":"plugin decision","event_id":"E","plugin":"p","phase":"prepare","decision":"approve","reason":""}"#;
        let parsed = parse_log_line(line).unwrap();
        assert_eq!(parsed.at_unix_ms, 1_767_323_045_678);
        let decision = PluginDecision::from_line(&parsed).unwrap();
        assert_eq!(decision.plugin, "p");
        assert_eq!(decision.phase, "prepare");
        assert_eq!(decision.decision, "approve");
        assert!(parse_log_line("not json").is_none());
    }

    #[test]
    fn counts_requests_in_sliding_windows() {
        assert_eq!(max_requests_per_second(&[]), 0);
        assert_eq!(max_requests_per_second(&[0, 200, 400, 600, 800, 1000]), 5);
        assert_eq!(max_requests_per_second(&[0, 200, 400, 600, 800, 999]), 6);
        assert_eq!(max_requests_per_second(&[5000, 0, 10]), 2);
        assert_eq!(
            max_requests_in_window(&[0, 200, 400, 600, 800, 950], 900),
            5
        );
    }

    #[test]
    fn manifest_lists_what_was_set() {
        let manifest = ProbePlugin::new("second", "approve")
            .subscribe(&["Reboot"])
            .after(&["first"])
            .budget("2s")
            .config("attempts", "3")
            .manifest();
        assert_eq!(
            manifest,
            "subscribe = [\"Reboot\"]\nafter = [\"first\"]\nbudget = \"2s\"\n[config]\nmode = \"approve\"\nattempts = 3\n"
        );
    }

    #[test]
    fn dechunks_a_body() {
        assert_eq!(dechunk("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), "abcde");
    }
}

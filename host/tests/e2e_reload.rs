//! End-to-end tests of the watched plugin directory (`forewarn_daemon::plugins::reload`): hot reload,
//! partial and broken files, removal, manifest edits, the directory deleted and recreated.
//!
//! Most tests drive `PluginDirectory` in-process with a real runtime and a temp directory
//! and wait on the published plugin set (never on sleeps); one runs the real binary against
//! the simulator. `measure_reload_latency` (ignored) prints the figures in BENCHMARKS.md.

use forewarn_imds::PluginName;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use forewarn_daemon::plugins::reload::{PluginDirectory, ReloadOptions};
use forewarn_daemon::plugins::set::PluginSet;
use forewarn_runtime::wit::latest as wit;
use forewarn_runtime::{CallOutcome, HostServices, Plugin, Runtime, RuntimeConfig};
use forewarn_test_support::fixtures::sample_context;
use forewarn_test_support::guests;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

/// Generous: a debug build compiling a component on a busy 2-core machine.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A plugin directory in a temp dir, a runtime with a compile cache beside it.
struct Fixture {
    _temp: tempfile::TempDir,
    dir: PathBuf,
    runtime: Runtime,
}

impl Fixture {
    fn new() -> Fixture {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("plugins.d");
        std::fs::create_dir(&dir).unwrap();
        let config = RuntimeConfig {
            cache_dir: Some(temp.path().join("cache")),
            ..RuntimeConfig::default()
        };
        let runtime = Runtime::new(config, HostServices::default()).unwrap();
        Fixture {
            _temp: temp,
            dir,
            runtime,
        }
    }

    async fn start(&self) -> PluginDirectory {
        self.start_with(ReloadOptions::default()).await
    }

    async fn start_with(&self, options: ReloadOptions) -> PluginDirectory {
        PluginDirectory::start(self.runtime.clone(), &self.dir, options)
            .await
            .unwrap()
    }

    fn path(&self, file_name: &str) -> PathBuf {
        self.dir.join(file_name)
    }

    /// The documented way to deploy: write a temporary dotfile, then rename it into place.
    fn deploy(&self, file_name: &str, bytes: &[u8]) {
        let temporary = self.path(&format!(".{file_name}.tmp"));
        std::fs::write(&temporary, bytes).unwrap();
        std::fs::rename(&temporary, self.path(file_name)).unwrap();
    }

    /// Deploys the probe as `name` (content tagged `tag`) answering "defer: GREETING".
    fn deploy_probe(&self, name: &str, tag: &str, greeting: &str) -> String {
        self.deploy(
            &format!("{name}.toml"),
            greeting_manifest(greeting, "10s").as_bytes(),
        );
        let bytes = probe_bytes(tag);
        self.deploy(&format!("{name}.wasm"), &bytes);
        hash(&bytes)
    }
}

/// The probe guest with a custom section naming `tag`: the same behaviour, new content
/// (a new hash, so a new compile unless it was seen before).
fn probe_bytes(tag: &str) -> Vec<u8> {
    tagged(&std::fs::read(guests::PROBE).unwrap(), tag)
}

fn tagged(component: &[u8], tag: &str) -> Vec<u8> {
    let mut bytes = component.to_vec();
    bytes.extend(custom_section("forewarn-test-version", tag.as_bytes()));
    bytes
}

/// A custom section (id 0): valid at the top level of a component.
fn custom_section(name: &str, payload: &[u8]) -> Vec<u8> {
    let mut body = leb128(name.len());
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut section = vec![0u8];
    section.extend(leb128(body.len()));
    section.extend(body);
    section
}

fn leb128(mut value: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A probe manifest in "config" mode: every call defers with `greeting` as the reason.
fn greeting_manifest(greeting: &str, budget: &str) -> String {
    format!("budget = \"{budget}\"\n[config]\nmode = \"config\"\ngreeting = \"{greeting}\"\n")
}

fn slow_manifest(budget: &str) -> String {
    format!("budget = \"{budget}\"\n[config]\nmode = \"slow\"\n")
}

/// Waits (on the watch channel, not a sleep) until the published set satisfies `check`.
async fn wait_for_set(
    receiver: &mut watch::Receiver<Arc<PluginSet>>,
    what: &str,
    check: impl Fn(&PluginSet) -> bool,
) -> Arc<PluginSet> {
    let waited = tokio::time::timeout(TIMEOUT, async {
        loop {
            let set = receiver.borrow_and_update().clone();
            if check(&set) {
                return set;
            }
            receiver
                .changed()
                .await
                .expect("the plugin directory stopped publishing");
        }
    })
    .await;
    match waited {
        Ok(set) => set,
        Err(_) => panic!(
            "timed out after {TIMEOUT:?} waiting for {what}; last set: {}",
            describe(&receiver.borrow())
        ),
    }
}

fn describe(set: &PluginSet) -> String {
    let plugins: Vec<String> = set
        .all()
        .iter()
        .map(|plugin| format!("{}@{}", plugin.name(), &plugin.plugin.content_hash()[..12]))
        .collect();
    format!("plugins {plugins:?}, load errors {:?}", set.load_errors())
}

fn hash_of(set: &PluginSet, name: &str) -> Option<String> {
    set.get(&PluginName::from(name))
        .map(|plugin| plugin.plugin.content_hash().to_owned())
}

fn plugin(set: &PluginSet, name: &str) -> Plugin {
    set.get(&PluginName::from(name))
        .unwrap_or_else(|| panic!("{name} is not loaded: {}", describe(set)))
        .plugin
        .clone()
}

fn event() -> wit::ScheduledEvent {
    wit::ScheduledEvent {
        id: "reload-test-event".into(),
        event_type: wit::EventType::Reboot,
        event_type_raw: "Reboot".into(),
        resource_type: "VirtualMachine".into(),
        resources: vec!["vm-a".into()],
        status: wit::EventStatus::Scheduled,
        not_before_unix_ms: None,
        description: String::new(),
        source: wit::EventSource::Platform,
        duration_seconds: None,
    }
}

async fn call(plugin: &Plugin, budget: Duration) -> CallOutcome {
    let context = sample_context();
    plugin
        .call(&event(), wit::Phase::Prepare, &context, budget)
        .await
}

/// The answer as text: "approve", "defer: REASON", or "failed: …".
fn answer(outcome: &CallOutcome) -> String {
    match &outcome.answer {
        Ok(wit::Decision::Approve) => "approve".into(),
        Ok(wit::Decision::Defer(deferral)) => format!("defer: {}", deferral.reason),
        Err(failure) => format!("failed: {failure:?}"),
    }
}

async fn greeting_of(set: &PluginSet, name: &str) -> String {
    answer(&call(&plugin(set, name), Duration::from_secs(10)).await)
}

fn error_for<'a>(set: &'a PluginSet, path: &Path) -> Option<&'a String> {
    set.load_errors().get(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_load_takes_plugins_and_ignores_editor_files_and_dotfiles() {
    let fixture = Fixture::new();
    fixture.deploy_probe("alpha", "a", "from alpha");
    let probe = probe_bytes("ignored");
    for ignored in [
        ".beta.wasm",
        "gamma.wasm.swp",
        "delta.wasm~",
        "epsilon.wasm.tmp",
        "#zeta.wasm#",
        "eta.wat",
        "README",
    ] {
        std::fs::write(fixture.path(ignored), &probe).unwrap();
    }
    let directory = fixture.start().await;
    let set = directory.current();
    let names: Vec<&str> = set.all().iter().map(|plugin| plugin.name()).collect();
    assert_eq!(names, ["alpha"], "{}", describe(&set));
    assert!(set.load_errors().is_empty(), "{}", describe(&set));
    assert_eq!(greeting_of(&set, "alpha").await, "defer: from alpha");

    // Editor files written later are ignored too: no reload, no error.
    let mut receiver = directory.subscribe();
    receiver.borrow_and_update();
    std::fs::write(fixture.path(".alpha.wasm.swp"), b"half a file").unwrap();
    std::fs::write(fixture.path("alpha.wasm~"), b"backup").unwrap();
    // A real change afterwards is the first thing published.
    let new_hash = fixture.deploy_probe("alpha", "a2", "alpha again");
    let set = wait_for_set(&mut receiver, "the new alpha", |set| {
        hash_of(set, "alpha").as_deref() == Some(new_hash.as_str())
    })
    .await;
    assert!(set.load_errors().is_empty(), "{}", describe(&set));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_directory_at_startup_is_an_error_that_says_what_to_do() {
    let fixture = Fixture::new();
    let missing = fixture.path("not-there");
    let error = PluginDirectory::start(fixture.runtime.clone(), &missing, ReloadOptions::default())
        .await
        .err()
        .expect("a missing plugin directory is an error");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot read the plugin directory {}",
            missing.display()
        )),
        "{text}"
    );
    assert!(text.contains("set `plugin-dir`"), "{text}");
}

/// A loopback HTTP server that holds its first request until released: a gate a probe in
/// "http" mode waits at, so a call stays in flight for exactly as long as a test wants.
struct HttpGate {
    address: std::net::SocketAddr,
    /// Sends once the first request's head has arrived (the call is in flight).
    arrived: std::sync::mpsc::Receiver<()>,
    /// Dropped or sent to: the gate answers 200 and closes.
    release: Option<std::sync::mpsc::Sender<()>>,
    server: Option<std::thread::JoinHandle<()>>,
}

impl HttpGate {
    fn open() -> HttpGate {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (arrived_tx, arrived) = std::sync::mpsc::channel();
        let (release, release_rx) = std::sync::mpsc::channel::<()>();
        let server = std::thread::spawn(move || {
            let Ok((socket, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(socket.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|read| read > 0) && line != "\r\n" {
                line.clear();
            }
            let _ = arrived_tx.send(());
            let _ = release_rx.recv();
            let mut socket = socket;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        });
        HttpGate {
            address,
            arrived,
            release: Some(release),
            server: Some(server),
        }
    }

    /// The probe manifest: "http" mode to this gate, granted it, with `budget`.
    fn manifest(&self, budget: &str) -> String {
        format!(
            "budget = \"{budget}\"\n[config]\nmode = \"http\"\nurl = \"http://{}/gate\"\n\
             [capabilities]\nhttp = [\"{}\"]\n",
            self.address, self.address
        )
    }

    /// Waits (on the server, not a sleep) until the gated request has arrived.
    async fn wait_arrived(&self) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match self.arrived.try_recv() {
                Ok(()) => return,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    panic!("the gate closed before a request arrived")
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
            assert!(
                Instant::now() < deadline,
                "no request reached the gate within {TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn release(&mut self) {
        self.release.take();
        if let Some(server) = self.server.take() {
            server.join().unwrap();
        }
    }
}

impl Drop for HttpGate {
    fn drop(&mut self) {
        self.release.take();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_replaced_while_handling_an_event_finishes_on_the_old_version() {
    let fixture = Fixture::new();
    // v1's call waits at a gate (an HTTP request the test answers when it chooses), so it
    // is in flight until released, however long v2 takes to compile on a loaded machine.
    let mut gate = HttpGate::open();
    fixture.deploy("gate.toml", gate.manifest("5m").as_bytes());
    let v1_bytes = probe_bytes("v1");
    fixture.deploy("gate.wasm", &v1_bytes);
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();
    let v1 = plugin(&directory.current(), "gate");
    assert_eq!(v1.content_hash(), hash(&v1_bytes));
    let old_call = tokio::spawn(async move { call(&v1, Duration::from_secs(300)).await });
    gate.wait_arrived().await;

    let v2_hash = fixture.deploy_probe("gate", "v2", "version 2");
    let set = wait_for_set(&mut receiver, "gate v2", |set| {
        hash_of(set, "gate").as_deref() == Some(v2_hash.as_str())
    })
    .await;
    assert_eq!(
        greeting_of(&set, "gate").await,
        "defer: version 2",
        "the next call uses the new version"
    );
    assert!(
        !old_call.is_finished(),
        "the old call ended before it was let through the gate: {:?}",
        old_call.await.map(|outcome| answer(&outcome))
    );

    gate.release();
    let old = tokio::time::timeout(TIMEOUT, old_call)
        .await
        .expect("the old call ends once let through the gate")
        .unwrap();
    assert_eq!(
        answer(&old),
        "defer: http: status 200",
        "the call in flight completed on the version it started with (v1's http mode)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_rapid_rewrites_end_with_the_last_version_live() {
    let fixture = Fixture::new();
    fixture.deploy_probe("churn", "start", "start");
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();
    let mut last_hash = String::new();
    for round in 0..50 {
        let greeting = format!("round {round}");
        let bytes = probe_bytes(&format!("round-{round}"));
        if round % 2 == 0 {
            fixture.deploy("churn.toml", greeting_manifest(&greeting, "10s").as_bytes());
            fixture.deploy("churn.wasm", &bytes);
        } else {
            // Odd rounds overwrite in place, as a careless `cp` would.
            std::fs::write(
                fixture.path("churn.toml"),
                greeting_manifest(&greeting, "10s"),
            )
            .unwrap();
            std::fs::write(fixture.path("churn.wasm"), &bytes).unwrap();
        }
        last_hash = hash(&bytes);
    }
    let set = wait_for_set(&mut receiver, "the 50th version", |set| {
        hash_of(set, "churn").as_deref() == Some(last_hash.as_str())
            && set
                .get(&PluginName::from("churn"))
                .unwrap()
                .manifest
                .config
                .get("greeting")
                .map(|value| value.as_text())
                .as_deref()
                == Some("round 49")
    })
    .await;
    assert_eq!(greeting_of(&set, "churn").await, "defer: round 49");
    assert!(set.load_errors().is_empty(), "{}", describe(&set));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_file_leaves_the_old_version_live_and_reports_the_error() {
    let fixture = Fixture::new();
    let v1_hash = fixture.deploy_probe("lb", "v1", "v1");
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();

    let whole = probe_bytes("v2");
    std::fs::write(fixture.path("lb.wasm"), &whole[..whole.len() / 2]).unwrap();
    let wasm_path = fixture.path("lb.wasm");
    let set = wait_for_set(&mut receiver, "an error for the truncated lb.wasm", |set| {
        error_for(set, &wasm_path).is_some()
    })
    .await;
    let error = error_for(&set, &wasm_path).unwrap();
    assert!(
        error.contains(&wasm_path.display().to_string()),
        "the error names the file: {error}"
    );
    assert_eq!(
        hash_of(&set, "lb"),
        Some(v1_hash),
        "the old version stays live"
    );
    assert_eq!(greeting_of(&set, "lb").await, "defer: v1");

    // The complete file, later, replaces it and clears the error.
    let v3_hash = fixture.deploy_probe("lb", "v3", "v3");
    let set = wait_for_set(&mut receiver, "lb v3", |set| {
        hash_of(set, "lb").as_deref() == Some(v3_hash.as_str())
    })
    .await;
    assert!(set.load_errors().is_empty(), "{}", describe(&set));
    assert_eq!(greeting_of(&set, "lb").await, "defer: v3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_of_the_wrong_world_leaves_the_old_version_live_and_reports_the_error() {
    let fixture = Fixture::new();
    let v1_hash = fixture.deploy_probe("lb", "v1", "v1");
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();

    fixture.deploy("lb.wasm", &std::fs::read(guests::OTHER_WORLD).unwrap());
    let wasm_path = fixture.path("lb.wasm");
    let set = wait_for_set(
        &mut receiver,
        "an error for the wrong-world lb.wasm",
        |set| error_for(set, &wasm_path).is_some(),
    )
    .await;
    let error = error_for(&set, &wasm_path).unwrap();
    assert!(error.contains(&wasm_path.display().to_string()), "{error}");
    assert_eq!(hash_of(&set, "lb"), Some(v1_hash));
    assert_eq!(greeting_of(&set, "lb").await, "defer: v1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_manifest_leaves_the_old_version_live_and_names_file_line_and_key() {
    let fixture = Fixture::new();
    let v1_hash = fixture.deploy_probe("lb", "v1", "v1");
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();

    fixture.deploy("lb.toml", b"budget = \"5s\"\nbudgett = \"1s\"\n");
    let manifest_path = fixture.path("lb.toml");
    let set = wait_for_set(&mut receiver, "an error for lb.toml", |set| {
        error_for(set, &manifest_path).is_some()
    })
    .await;
    let error = error_for(&set, &manifest_path).unwrap();
    let expected = format!(
        "invalid plugin manifest {}: line 2: key `budgett`: unknown field `budgett`",
        manifest_path.display()
    );
    assert!(error.starts_with(&expected), "{error}");
    assert_eq!(hash_of(&set, "lb"), Some(v1_hash));
    assert_eq!(greeting_of(&set, "lb").await, "defer: v1");
}

/// Puts a symbolic link to `target` at `path`, the way a deploy would: made aside, renamed.
fn link_into_place(fixture: &Fixture, file_name: &str, target: &str) {
    let aside = fixture.path(&format!(".{file_name}.link"));
    std::os::unix::fs::symlink(target, &aside).unwrap();
    std::fs::rename(&aside, fixture.path(file_name)).unwrap();
}

/// Puts a FIFO at `path`, made aside and renamed into place.
fn fifo_into_place(fixture: &Fixture, file_name: &str) {
    let aside = fixture.path(&format!(".{file_name}.fifo"));
    let made = std::process::Command::new("mkfifo")
        .arg(&aside)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo failed");
    std::fs::rename(&aside, fixture.path(file_name)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_plugin_files_are_refused_and_the_rest_stays_live() {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Fixture::new();
    let mut hashes = std::collections::BTreeMap::new();
    for name in ["good", "zero", "fifo", "big", "open"] {
        hashes.insert(name, fixture.deploy_probe(name, "v1", name));
    }
    // A limit just above the probe, so an oversized file needs only a few more KiB.
    let mut options = ReloadOptions::default();
    options.file_limits.max_wasm_bytes = probe_bytes("v1").len() as u64 + 1024;
    let directory = PluginDirectory::start(fixture.runtime.clone(), &fixture.dir, options)
        .await
        .unwrap();
    let mut receiver = directory.subscribe();
    assert_eq!(
        directory.current().all().len(),
        5,
        "{}",
        describe(&directory.current())
    );

    link_into_place(&fixture, "zero.wasm", "/dev/zero");
    fifo_into_place(&fixture, "fifo.wasm");
    fixture.deploy("big.wasm", &tagged(&probe_bytes("v2"), &"x".repeat(4096)));
    let open = fixture.path("open.toml");
    let aside = fixture.path(".open.toml.tmp");
    std::fs::write(&aside, greeting_manifest("open v2", "10s")).unwrap();
    std::fs::set_permissions(&aside, std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::rename(&aside, &open).unwrap();

    let expected = [
        (fixture.path("zero.wasm"), "symbolic link"),
        (fixture.path("fifo.wasm"), "FIFO"),
        (fixture.path("big.wasm"), "max-plugin-size"),
        (open.clone(), "writable by everyone"),
    ];
    let set = wait_for_set(&mut receiver, "an error for each untrusted file", |set| {
        expected
            .iter()
            .all(|(path, _)| error_for(set, path).is_some())
    })
    .await;
    for (path, reason) in &expected {
        let error = error_for(&set, path).unwrap();
        assert!(error.contains(reason), "{}: {error}", path.display());
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(
            error.contains("Fix:"),
            "the error says how to fix it: {error}"
        );
    }
    for (name, hash) in &hashes {
        assert_eq!(
            hash_of(&set, name).as_ref(),
            Some(hash),
            "{name}: the old version stays live; {}",
            describe(&set)
        );
    }
    assert_eq!(greeting_of(&set, "good").await, "defer: good");
    assert_eq!(greeting_of(&set, "open").await, "defer: open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_file_goes_live_without_the_quiet_period_and_a_file_written_in_place_waits() {
    let fixture = Fixture::new();
    let written_v1 = fixture.deploy_probe("written", "w1", "w1");
    fixture.deploy_probe("renamed", "r1", "r1");
    // A debounce no test outlives: only a rename can go live before it ends.
    let options = ReloadOptions {
        debounce: Duration::from_secs(3600),
        ..ReloadOptions::default()
    };
    let directory = fixture.start_with(options).await;
    let mut receiver = directory.subscribe();

    // First a careless in-place write, then a deploy by rename; the watcher sees them in
    // that order, so when the renamed version is live the written one has been noted.
    std::fs::write(fixture.path("written.wasm"), probe_bytes("w2")).unwrap();
    let renamed_v2 = probe_bytes("r2");
    fixture.deploy("renamed.wasm", &renamed_v2);
    let renamed_v2 = hash(&renamed_v2);

    let set = wait_for_set(&mut receiver, "renamed v2 before the debounce", |set| {
        hash_of(set, "renamed").as_deref() == Some(renamed_v2.as_str())
    })
    .await;
    assert_eq!(
        hash_of(&set, "written"),
        Some(written_v1),
        "a file written in place waits for its quiet period"
    );
    assert!(set.load_errors().is_empty(), "{}", describe(&set));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_plain_copy_never_replaces_the_working_version() {
    let fixture = Fixture::new();
    let v1_hash = fixture.deploy_probe("lb", "v1", "v1");
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();
    let v2 = probe_bytes("v2");
    let v2_hash = hash(&v2);

    // Watch every published set while the copy runs: lb is always v1 or v2, never absent.
    let mut observer = directory.subscribe();
    let (v1_seen, v2_seen) = (v1_hash.clone(), v2_hash.clone());
    let observed = tokio::spawn(async move {
        let mut sets = 0;
        loop {
            let hash = hash_of(&observer.borrow_and_update(), "lb");
            sets += 1;
            assert!(
                hash.as_deref() == Some(v1_seen.as_str())
                    || hash.as_deref() == Some(v2_seen.as_str()),
                "lb was {hash:?}"
            );
            if hash.as_deref() == Some(v2_seen.as_str()) {
                return sets;
            }
            if observer.changed().await.is_err() {
                return sets;
            }
        }
    });

    // A slow copy: 8 KiB every 50 ms, with one stall longer than the debounce half-way.
    // The sleeps make the copy slow; they synchronise nothing.
    let path = fixture.path("lb.wasm");
    let (stalled_tx, stalled_rx) = std::sync::mpsc::channel();
    let (resume_tx, resume_rx) = std::sync::mpsc::channel::<()>();
    let copier = std::thread::spawn(move || {
        use std::io::Write;
        let mut file = std::fs::File::create(&path).unwrap();
        for (index, chunk) in v2.chunks(8 * 1024).enumerate() {
            file.write_all(chunk).unwrap();
            file.flush().unwrap();
            if index == 8 {
                stalled_tx.send(()).unwrap();
                resume_rx.recv().unwrap();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    tokio::task::spawn_blocking(move || stalled_rx.recv().unwrap())
        .await
        .unwrap();
    // While the copy is stalled half-way, the half file is tried, fails, and v1 stays.
    let wasm_path = fixture.path("lb.wasm");
    let set = wait_for_set(
        &mut receiver,
        "an error for the half-copied lb.wasm",
        |set| error_for(set, &wasm_path).is_some(),
    )
    .await;
    assert_eq!(hash_of(&set, "lb"), Some(v1_hash.clone()));
    assert_eq!(greeting_of(&set, "lb").await, "defer: v1");
    resume_tx.send(()).unwrap();
    tokio::task::spawn_blocking(move || copier.join().unwrap())
        .await
        .unwrap();

    // When the copy completes, the watcher tries again and v2 goes live; the error clears.
    let set = wait_for_set(&mut receiver, "lb v2 after the copy", |set| {
        hash_of(set, "lb").as_deref() == Some(v2_hash.as_str())
    })
    .await;
    assert!(set.load_errors().is_empty(), "{}", describe(&set));
    let sets = observed.await.unwrap();
    assert!(sets >= 2, "the observer saw v1 and then v2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_wasm_unloads_the_plugin_after_its_call_in_flight() {
    let fixture = Fixture::new();
    fixture.deploy("leaving.toml", slow_manifest("3s").as_bytes());
    fixture.deploy("leaving.wasm", &probe_bytes("leaving"));
    fixture.deploy_probe("staying", "staying", "still here");
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();
    let leaving = plugin(&directory.current(), "leaving");
    let in_flight = tokio::spawn(async move { call(&leaving, Duration::from_secs(3)).await });

    std::fs::remove_file(fixture.path("leaving.wasm")).unwrap();
    let set = wait_for_set(&mut receiver, "leaving unloaded", |set| {
        set.get(&PluginName::from("leaving")).is_none()
    })
    .await;
    assert_eq!(greeting_of(&set, "staying").await, "defer: still here");
    assert!(
        set.load_errors().is_empty(),
        "an orphan manifest is no error: {}",
        describe(&set)
    );
    assert_eq!(
        answer(&in_flight.await.unwrap()),
        "approve",
        "the call in flight finished"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_edit_changes_the_budget_live_without_a_compile() {
    let fixture = Fixture::new();
    fixture.deploy("lb.toml", greeting_manifest("hi", "3s").as_bytes());
    fixture.deploy("lb.wasm", &probe_bytes("same"));
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();
    let before = directory.current();
    assert_eq!(
        before.get(&PluginName::from("lb")).unwrap().manifest.budget,
        Duration::from_secs(3)
    );

    // Edited in place, as with an editor that writes the file directly.
    std::fs::write(fixture.path("lb.toml"), greeting_manifest("hi", "7s")).unwrap();
    let set = wait_for_set(&mut receiver, "the 7 s budget", |set| {
        set.get(&PluginName::from("lb"))
            .is_some_and(|plugin| plugin.manifest.budget == Duration::from_secs(7))
    })
    .await;
    let reloaded = &set.get(&PluginName::from("lb")).unwrap().plugin;
    assert_eq!(
        reloaded.content_hash(),
        before
            .get(&PluginName::from("lb"))
            .unwrap()
            .plugin
            .content_hash()
    );
    assert!(
        reloaded.loaded_from_cache(),
        "the same component comes from the compile cache"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_survives_the_directory_being_deleted_and_created_again() {
    let fixture = Fixture::new();
    fixture.deploy_probe("first", "first", "first");
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();
    for round in 0..2 {
        std::fs::remove_dir_all(&fixture.dir).unwrap();
        wait_for_set(
            &mut receiver,
            "every plugin unloaded with the directory",
            |set| set.is_empty(),
        )
        .await;

        std::fs::create_dir(&fixture.dir).unwrap();
        let name = format!("second-{round}");
        let greeting = format!("back {round}");
        let new_hash = fixture.deploy_probe(&name, &name, &greeting);
        let set = wait_for_set(
            &mut receiver,
            "the plugin in the recreated directory",
            |set| hash_of(set, &name).as_deref() == Some(new_hash.as_str()),
        )
        .await;
        assert_eq!(greeting_of(&set, &name).await, format!("defer: {greeting}"));
    }
    // A rename swap of the whole directory is seen too.
    let staging = fixture.dir.with_file_name("plugins.d.new");
    std::fs::create_dir(&staging).unwrap();
    let bytes = probe_bytes("swapped");
    std::fs::write(staging.join("swapped.wasm"), &bytes).unwrap();
    std::fs::remove_dir_all(&fixture.dir).unwrap();
    std::fs::rename(&staging, &fixture.dir).unwrap();
    let swapped_hash = hash(&bytes);
    let set = wait_for_set(&mut receiver, "the swapped-in directory", |set| {
        hash_of(set, "swapped").as_deref() == Some(swapped_hash.as_str()) && set.all().len() == 1
    })
    .await;
    assert!(set.load_errors().is_empty(), "{}", describe(&set));
}

/// The manifest examples in docs/plugin-directory.md parse, the one that lists every key
/// with its default value is exactly the defaults, and the plugins.lock example reads as a
/// lock file.
#[test]
fn the_documented_manifests_parse_and_the_defaults_are_the_defaults() {
    use forewarn_manifest::PluginManifest;
    let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/plugin-directory.md");
    let doc = std::fs::read_to_string(doc_path).unwrap();
    let blocks: Vec<&str> = doc
        .split("```toml\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap())
        .collect();
    assert_eq!(
        blocks.len(),
        3,
        "the doc's toml examples: two manifests, one lock file"
    );
    let defaults = PluginManifest::parse(blocks[0]).unwrap();
    assert_eq!(defaults, PluginManifest::default());
    for key in [
        "subscribe",
        "after",
        "budget",
        "memory",
        "[config]",
        "[capabilities]",
        "readiness",
        "http",
        "actions",
    ] {
        assert!(blocks[0].contains(key), "the full example shows {key}");
    }
    let example = PluginManifest::parse(blocks[1]).unwrap();
    assert_eq!(example.after, ["lb-drain"]);
    assert_eq!(example.runtime_settings().config["retries"], "3");
    // The lock example, without its `previous` table (which says "the same keys").
    let lock_text = blocks[2]
        .split("[plugins.disk-flush.previous]")
        .next()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(forewarn_supply::lock::Lockfile::path(dir.path()), lock_text).unwrap();
    let lock = forewarn_supply::lock::Lockfile::read(dir.path()).unwrap();
    assert!(lock.plugins.contains_key("disk-flush"), "{lock:?}");
}

/// The real binary: a deferring plugin holds a platform Reboot until a new version,
/// deployed by rename while the daemon runs, approves it.
#[test]
fn the_daemon_picks_up_a_new_plugin_version_without_restarting() {
    use forewarn_daemon::log_messages::PLUGIN_RELOADED;
    use forewarn_test_support::forewarn_binary;
    use forewarn_test_support::harness::{Daemon, DaemonConfig, Simulator, wait_for};
    let binary = forewarn_binary!();
    let temp = tempfile::tempdir().unwrap();
    let simulator = Simulator::builder(binary)
        .scenario_text(
            "name = \"held-reboot\"\ndescription = \"A platform Reboot that waits for approval.\"\nend_after = \"1h\"\n\n\
             [[events]]\ntype = \"Reboot\"\nsource = \"Platform\"\nappear_at = \"1s\"\nnotice = \"15m\"\nruns_for = \"1m\"\n",
        )
        .start();
    let plugin_dir = temp.path().join("plugins.d");
    std::fs::create_dir(&plugin_dir).unwrap();
    let fixture_deploy = |file_name: &str, bytes: &[u8]| {
        let temporary = plugin_dir.join(format!(".{file_name}.tmp"));
        std::fs::write(&temporary, bytes).unwrap();
        std::fs::rename(&temporary, plugin_dir.join(file_name)).unwrap();
    };
    fixture_deploy("gate.toml", b"[config]\nmode = \"defer\"\n");
    fixture_deploy("gate.wasm", &probe_bytes("defer"));
    let config = temp.path().join("forewarn.toml");
    DaemonConfig::vm_a(temp.path(), plugin_dir.clone(), &simulator.base_url).write(&config);
    let daemon = Daemon::start(binary, &config);
    daemon.wait_for_decisions(TIMEOUT, "gate deferring the reboot", |decisions| {
        decisions
            .iter()
            .any(|decision| decision.plugin == "gate" && decision.decision == "defer")
    });
    assert!(
        simulator.state().approvals.is_empty(),
        "nothing approved while gate defers"
    );

    fixture_deploy("gate.toml", b"[config]\nmode = \"approve\"\n");
    fixture_deploy("gate.wasm", &probe_bytes("approve"));
    let state = simulator.wait_for_state(TIMEOUT, "the reboot approved by the new gate", |state| {
        !state.approvals.is_empty()
    });
    assert!(
        state.approvals.iter().all(|approval| approval.accepted),
        "{:?}",
        state.approvals
    );
    // The approval can reach the simulator before the test has read the new gate's decision
    // from the daemon's output: wait for it, do not read once.
    let decisions = daemon.wait_for_decisions(TIMEOUT, "gate approving the reboot", |decisions| {
        decisions
            .iter()
            .any(|decision| decision.plugin == "gate" && decision.decision == "approve")
    });
    let last = decisions
        .iter()
        .rev()
        .find(|decision| decision.plugin == "gate")
        .unwrap();
    assert_eq!(
        last.decision,
        "approve",
        "{}",
        daemon.describe_for_failure()
    );
    let reloaded = wait_for(TIMEOUT, "a \"plugin reloaded\" log line", || {
        daemon
            .lines_with_message(PLUGIN_RELOADED)
            .into_iter()
            .next()
            .ok_or_else(|| daemon.describe_for_failure())
    });
    assert_eq!(reloaded.text("plugin"), "gate");
    assert!(
        reloaded.text("file").ends_with("gate.wasm"),
        "{:?}",
        reloaded.fields
    );
    assert!(
        reloaded
            .fields
            .get("cached")
            .is_some_and(|cached| cached.is_boolean()),
        "{:?}",
        reloaded.fields
    );
}

/// Prints the time from a rename into place to the new version being published and to its
/// first answer, for the bundled lb-drain: new content (compiled) and content seen before
/// (from the cache). Figures in BENCHMARKS.md ("Hot reload"); run it with
/// `RUST_BACKTRACE=0 cargo test -p forewarn-host --test e2e_reload -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a test: run it by hand for BENCHMARKS.md"]
async fn measure_reload_latency() {
    let lb_drain = forewarn_host::bundled::bundled_plugins()
        .into_iter()
        .find(|plugin| plugin.name == "lb-drain")
        .expect("lb-drain is bundled");
    let fixture = Fixture::new();
    fixture.deploy("lb-drain.toml", lb_drain.manifest.as_bytes());
    fixture.deploy("lb-drain.wasm", &tagged(lb_drain.wasm, "initial"));
    let directory = fixture.start().await;
    let mut receiver = directory.subscribe();
    let rounds = 9;
    let (mut compiled_live, mut compiled_answer) = (Vec::new(), Vec::new());
    let (mut cached_live, mut cached_answer) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let bytes = tagged(lb_drain.wasm, &format!("new-{round}"));
        let (live, answered) = time_to_answer(&fixture, &mut receiver, &bytes, false).await;
        compiled_live.push(live);
        compiled_answer.push(answered);
        let seen_before = tagged(lb_drain.wasm, "initial");
        let (live, answered) = time_to_answer(&fixture, &mut receiver, &seen_before, true).await;
        cached_live.push(live);
        cached_answer.push(answered);
    }
    // The baseline, in the same run: compiling the same kind of new content alone.
    let mut compile_alone = Vec::new();
    for round in 0..rounds {
        let bytes = tagged(lb_drain.wasm, &format!("compile-{round}"));
        compile_alone.push(compile_time(&bytes));
    }
    let defaults = ReloadOptions::default();
    println!(
        "lb-drain ({} bytes), debounce {:?}, rename settle {:?}, {rounds} rounds each; times from the rename",
        lb_drain.wasm.len(),
        defaults.debounce,
        defaults.rename_settle
    );
    println!(
        "compile alone (no cache):      {}",
        summary(&mut compile_alone)
    );
    println!(
        "new content, published:        {}",
        summary(&mut compiled_live)
    );
    println!(
        "new content, first answer:     {}",
        summary(&mut compiled_answer)
    );
    println!(
        "seen before, published:        {}",
        summary(&mut cached_live)
    );
    println!(
        "seen before, first answer:     {}",
        summary(&mut cached_answer)
    );
}

/// How long `Runtime::load` of `bytes` takes in a runtime without a compile cache.
fn compile_time(bytes: &[u8]) -> Duration {
    let runtime = Runtime::new(RuntimeConfig::default(), HostServices::default()).unwrap();
    let started = Instant::now();
    runtime
        .load("lb-drain", bytes, Default::default())
        .expect("lb-drain compiles");
    started.elapsed()
}

/// Deploys `bytes` as lb-drain.wasm; returns the time from the rename to the new version
/// being published, and to its first answer.
async fn time_to_answer(
    fixture: &Fixture,
    receiver: &mut watch::Receiver<Arc<PluginSet>>,
    bytes: &[u8],
    expect_cached: bool,
) -> (Duration, Duration) {
    let wanted = hash(bytes);
    let temporary = fixture.path(".lb-drain.wasm.tmp");
    std::fs::write(&temporary, bytes).unwrap();
    std::fs::rename(&temporary, fixture.path("lb-drain.wasm")).unwrap();
    let renamed = Instant::now();
    let set = wait_for_set(receiver, "the new lb-drain", |set| {
        hash_of(set, "lb-drain").as_deref() == Some(wanted.as_str())
    })
    .await;
    let live = renamed.elapsed();
    let plugin = plugin(&set, "lb-drain");
    assert_eq!(plugin.loaded_from_cache(), expect_cached);
    let outcome = call(&plugin, Duration::from_secs(10)).await;
    assert!(outcome.answer.is_ok(), "{}", answer(&outcome));
    (live, renamed.elapsed())
}

fn summary(samples: &mut [Duration]) -> String {
    samples.sort();
    let ms = |duration: Duration| duration.as_secs_f64() * 1000.0;
    format!(
        "median {:.0} ms (min {:.0}, max {:.0})",
        ms(samples[samples.len() / 2]),
        ms(samples[0]),
        ms(samples[samples.len() - 1])
    )
}

/// docs/plugin-directory.md: the directory is compared with what is loaded every 30 seconds,
/// so a change the kernel never reported still goes live. The change here is one inotify
/// never reports: the manifest rewritten in place through a hard link outside the directory
/// (a watch on a directory hears of changes made through that directory's own entries
/// only). The interval is 300 ms here instead of 30 s (`ReloadOptions::rescan_interval`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_rescan_catches_a_change_the_watcher_never_heard_of() {
    assert_eq!(
        ReloadOptions::default().rescan_interval,
        Duration::from_secs(30),
        "the documented interval"
    );
    let fixture = Fixture::new();
    let outside = fixture._temp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let manifest = outside.join("lb.toml");
    std::fs::write(&manifest, greeting_manifest("hi", "3s")).unwrap();
    std::fs::hard_link(&manifest, fixture.path("lb.toml")).unwrap();
    fixture.deploy("lb.wasm", &probe_bytes("rescanned"));
    let directory = fixture
        .start_with(ReloadOptions {
            rescan_interval: Duration::from_millis(300),
            ..ReloadOptions::default()
        })
        .await;
    let mut receiver = directory.subscribe();
    wait_for_set(&mut receiver, "lb with its 3 s budget", |set| {
        set.get(&PluginName::from("lb"))
            .is_some_and(|plugin| plugin.manifest.budget == Duration::from_secs(3))
    })
    .await;

    std::fs::write(&manifest, greeting_manifest("hi", "7s")).unwrap();
    let set = wait_for_set(
        &mut receiver,
        "the 7 s budget, found by the rescan",
        |set| {
            set.get(&PluginName::from("lb"))
                .is_some_and(|plugin| plugin.manifest.budget == Duration::from_secs(7))
        },
    )
    .await;
    assert!(set.load_errors().is_empty(), "{}", describe(&set));
}

/// docs/operations.md, "Readiness across restarts": a hold is released when its plugin is
/// removed from the directory or its manifest no longer grants `readiness`, and kept while
/// its file fails to load. Three plugins hold the VM out of rotation for a Reboot; `/status`
/// and `/readyz` are read after each change to the directory.
#[test]
fn a_readiness_hold_ends_with_its_plugin_or_its_grant_and_survives_a_load_error() {
    use forewarn_daemon::ops::status::StatusSnapshot;
    use forewarn_test_support::forewarn_binary;
    use forewarn_test_support::harness::{ProbePlugin, TestEnv, http_get, wait_for};
    let holder = |name: &str| ProbePlugin::new(name, "ready").capability("readiness = true");
    let env = TestEnv::builder(forewarn_binary!())
        .scenario_text(
            "name = \"holds\"\nend_after = \"1h\"\n\n[[events]]\ntype = \"Reboot\"\n\
             appear_at = \"1s\"\nnotice = \"15m\"\nruns_for = \"1m\"\n",
        )
        .plugins(&[holder("holder-a"), holder("holder-b"), holder("holder-c")])
        .start();
    let admin = env.daemon.admin_address(TIMEOUT);
    let plugin_dir = env.setup.dir.path().join("plugins");
    let deploy = |file_name: &str, bytes: &[u8]| {
        let temporary = plugin_dir.join(format!(".{file_name}.tmp"));
        std::fs::write(&temporary, bytes).unwrap();
        std::fs::rename(&temporary, plugin_dir.join(file_name)).unwrap();
    };
    let wait_for_holders = |wanted: &[&str]| {
        wait_for(TIMEOUT, &format!("/status held by {wanted:?}"), || {
            let body = http_get(&admin, "/status")?;
            let status: StatusSnapshot =
                serde_json::from_str(&body).map_err(|error| format!("{error}: {body}"))?;
            match status.readiness.held_by == wanted {
                true => Ok(status),
                false => Err(format!("held by {:?}", status.readiness.held_by)),
            }
        })
    };
    let readyz = || match http_get(&admin, "/readyz") {
        Ok(body) => body,
        Err(error) => error,
    };
    wait_for_holders(&["holder-a", "holder-b", "holder-c"]);
    assert!(readyz().contains(" 503"), "{}", readyz());

    std::fs::remove_file(plugin_dir.join("holder-a.wasm")).unwrap();
    wait_for_holders(&["holder-b", "holder-c"]);

    deploy("holder-b.toml", b"[config]\nmode = \"ready\"\n");
    wait_for_holders(&["holder-c"]);

    deploy("holder-c.wasm", b"not a component any more");
    let status = wait_for(TIMEOUT, "holder-c's load error in /status", || {
        let body = http_get(&admin, "/status")?;
        let status: StatusSnapshot =
            serde_json::from_str(&body).map_err(|error| format!("{error}: {body}"))?;
        match status.load_errors.is_empty() {
            false => Ok(status),
            true => Err(body),
        }
    });
    assert_eq!(status.readiness.held_by, ["holder-c"], "{status:?}");
    assert!(readyz().contains(" 503"), "{}", readyz());

    std::fs::remove_file(plugin_dir.join("holder-c.wasm")).unwrap();
    wait_for_holders(&[]);
    assert_eq!(readyz(), "ready\n");
}

// ---- memory given back (docs/operations.md, "The daemon's own memory") -----------------

/// The daemon's resident memory, from `/proc/PID/status` (VmRSS), in bytes.
fn daemon_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"));
    kib * 1024
}

const MIB: u64 = 1024 * 1024;

/// How long a removed plugin's memory may take to leave the daemon's RSS in the test: far
/// from what it takes, so that only memory that stays fails it.
const RSS_RETURN_DEADLINE: Duration = Duration::from_secs(120);

/// A component within the default 64 MiB cap: memory 0 and 15 more of 4 MiB each, every
/// page of which its `on-start` call (made when the plugin is loaded) writes to.
fn many_memories_plugin() -> Vec<u8> {
    forewarn_test_support::generated::ManyMemories {
        extra_memories: 15,
        initial_pages: 64,
        grow_pages: 0,
        touch_on_start: true,
    }
    .component()
}

/// The real binary: a plugin whose calls touch 60 MiB in 16 memories holds at most its cap
/// while loaded (shown in `/status`), and the daemon's RSS returns to its baseline after the
/// plugin's removal (issue 33: it stayed 125 MiB above it).
#[test]
fn a_removed_plugin_gives_its_memory_back() {
    use forewarn_test_support::forewarn_binary;
    use forewarn_test_support::harness::{Daemon, DaemonConfig, Simulator, http_get, wait_for};
    let binary = forewarn_binary!();
    let temp = tempfile::tempdir().unwrap();
    let simulator = Simulator::builder(binary).scenario("idle").start();
    let plugin_dir = temp.path().join("plugins.d");
    std::fs::create_dir(&plugin_dir).unwrap();
    let config = temp.path().join("forewarn.toml");
    DaemonConfig::vm_a(temp.path(), plugin_dir.clone(), &simulator.base_url).write(&config);
    let daemon = Daemon::start(binary, &config);
    let admin = daemon.admin_address(TIMEOUT);
    let pid = daemon.pid();
    let status = |admin: &str| -> serde_json::Value {
        let body = http_get(admin, "/status").unwrap_or_else(|error| panic!("{error}"));
        serde_json::from_str(&body).unwrap()
    };
    wait_for(TIMEOUT, "the daemon running", || {
        let now = status(&admin);
        (now["phase"] == "running")
            .then_some(())
            .ok_or(now.to_string())
    });
    let baseline = daemon_rss(pid);

    let deploy = |file_name: &str, bytes: &[u8]| {
        let temporary = plugin_dir.join(format!(".{file_name}.tmp"));
        std::fs::write(&temporary, bytes).unwrap();
        std::fs::rename(&temporary, plugin_dir.join(file_name)).unwrap();
    };
    deploy("many-memories.wasm", &many_memories_plugin());
    // Its on-start call wrote every page: the RSS rises by about 60 MiB.
    let with_plugin = wait_for(TIMEOUT, "the plugin's pages in the daemon's RSS", || {
        let rss = daemon_rss(pid);
        (rss > baseline + 50 * MIB)
            .then_some(rss)
            .ok_or(format!("{} MiB", rss / MIB))
    });
    // The on-start call may still be writing its last pages when the RSS passes 50 MiB:
    // wait for /status to show them too (on a loaded machine that comes later).
    let shown = wait_for(
        TIMEOUT,
        "/status to show the plugin's 60 MiB resident",
        || {
            let resident = status(&admin)["plugins"][0]["resident_bytes"].as_u64();
            resident
                .filter(|bytes| *bytes >= 50 * MIB)
                .ok_or(format!("resident_bytes {resident:?}"))
        },
    );

    std::fs::remove_file(plugin_dir.join("many-memories.wasm")).unwrap();
    let removed_at = Instant::now();
    // The memory must come back, whenever: the deadline is far from the milliseconds it
    // takes (`bench-goals memory` measures that, BENCHMARKS.md); before issue 33 it never did.
    let after_removal = wait_for(
        RSS_RETURN_DEADLINE,
        "the daemon's RSS back within 8 MiB of its baseline",
        || {
            let rss = daemon_rss(pid);
            (rss <= baseline + 8 * MIB).then_some(rss).ok_or(format!(
                "{} MiB (baseline {} MiB)",
                rss / MIB,
                baseline / MIB
            ))
        },
    );
    eprintln!(
        "daemon RSS: baseline {:.1} MiB, with the plugin {:.1} MiB (its memories {:.1} MiB in \
         /status), {:.1} MiB {} ms after its removal",
        baseline as f64 / MIB as f64,
        with_plugin as f64 / MIB as f64,
        shown as f64 / MIB as f64,
        after_removal as f64 / MIB as f64,
        removed_at.elapsed().as_millis()
    );
    assert!(
        (50 * MIB..=64 * MIB).contains(&shown),
        "/status shows {shown} bytes resident for a plugin that wrote 60 MiB under a 64 MiB cap"
    );
}

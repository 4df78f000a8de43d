//! End-to-end tests of plugins written in C, Python and JavaScript (plugins/examples/): each
//! is built with its SDK's one-command build script against the latest forewarn:plugin, checked,
//! and run by the real daemon, which calls its `on-start` once before any `on-event`.
//!
//! The toolchains come from `tests/install-language-toolchains.sh`; a missing one FAILS the
//! test with the command that installs it (never a silent skip). `measure_language_examples`
//! (ignored) prints the size, compile and call figures in docs/languages.md.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use forewarn_daemon::log_messages::PLUGIN_LOADED;
use forewarn_manifest::Capabilities;
use forewarn_runtime::wit::latest as wit;
use forewarn_runtime::{CallOutcome, HostServices, Plugin, PluginSettings, Runtime, RuntimeConfig};
use forewarn_test_support::fixtures::sample_context;
use forewarn_test_support::forewarn_binary;
use forewarn_test_support::harness::{Daemon, DaemonConfig, Simulator, wait_for};

/// Generous: a debug daemon compiling an 18 MiB component on a busy 2-core machine.
const TIMEOUT: Duration = Duration::from_secs(180);

/// One example plugin: its language, source, build script and the name it is deployed as.
#[derive(Clone, Copy, Debug)]
struct Example {
    language: &'static str,
    /// The argument of tests/install-language-toolchains.sh.
    toolchain: &'static str,
    build_script: &'static str,
    source: &'static str,
    name: &'static str,
}

const C_FREEZE_GATE: Example = Example {
    language: "C",
    toolchain: "c",
    build_script: "sdk/c/build.sh",
    source: "plugins/examples/c-freeze-gate/freeze_gate.c",
    name: "freeze-gate",
};

const PYTHON_WEBHOOK: Example = Example {
    language: "Python",
    toolchain: "python",
    build_script: "sdk/python/build.sh",
    source: "plugins/examples/python-webhook/webhook_notify.py",
    name: "webhook-notify",
};

const JS_COUNTER: Example = Example {
    language: "JavaScript",
    toolchain: "js",
    build_script: "sdk/js/build.sh",
    source: "plugins/examples/js-counter/counter.js",
    name: "counter",
};

/// A test plugin, not an example: it checks the JavaScript SDK's warm-up from inside.
const JS_WARM_UP_CHECK: Example = Example {
    language: "JavaScript",
    toolchain: "js",
    build_script: "sdk/js/build.sh",
    source: "host/tests/fixtures/js-warm-up-check.js",
    name: "warm-up-check",
};

fn repo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn binary() -> &'static Path {
    forewarn_binary!()
}

/// Builds the example once per test process with its build script; panics with the build's
/// output and the install command when the toolchain is missing or the build fails.
fn built(example: Example) -> PathBuf {
    static BUILT: OnceLock<Mutex<BTreeMap<&'static str, PathBuf>>> = OnceLock::new();
    let builds = BUILT.get_or_init(|| Mutex::new(BTreeMap::new()));
    // Held during the build: two tests needing one example build it once.
    let mut builds = builds
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(path) = builds.get(example.name) {
        return path.clone();
    }
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("language-examples");
    std::fs::create_dir_all(&out_dir).unwrap();
    let output = out_dir.join(format!("{}.wasm", example.name));
    let started = Instant::now();
    let result = Command::new("bash")
        .arg(repo_dir().join(example.build_script))
        .arg(repo_dir().join(example.source))
        .arg("-o")
        .arg(&output)
        .output()
        .unwrap_or_else(|error| panic!("cannot run bash {}: {error}", example.build_script));
    assert!(
        result.status.success(),
        "building the {} example failed ({}). If its toolchain is missing, install it with \
         `tests/install-language-toolchains.sh {}`.\nstdout:\n{}\nstderr:\n{}",
        example.language,
        result.status,
        example.toolchain,
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr),
    );
    eprintln!(
        "built the {} example in {:.1} s: {}",
        example.language,
        started.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&result.stdout).trim()
    );
    builds.insert(example.name, output.clone());
    output
}

/// A temp dir with a plugin directory holding `example` under its name with `manifest`.
struct Setup {
    temp: tempfile::TempDir,
    plugin_dir: PathBuf,
}

impl Setup {
    fn new(example: Example, manifest: &str) -> Setup {
        let temp = tempfile::tempdir().unwrap();
        let plugin_dir = temp.path().join("plugins.d");
        std::fs::create_dir(&plugin_dir).unwrap();
        std::fs::copy(
            built(example),
            plugin_dir.join(format!("{}.wasm", example.name)),
        )
        .unwrap();
        std::fs::write(plugin_dir.join(format!("{}.toml", example.name)), manifest).unwrap();
        Setup { temp, plugin_dir }
    }

    /// Starts the simulator on a scenario given as text.
    fn simulator(&self, scenario: &str) -> Simulator {
        Simulator::builder(binary()).scenario_text(scenario).start()
    }

    /// Starts the daemon for vm-a against `simulator`, state in the temp dir.
    fn daemon(&self, simulator: &Simulator) -> Daemon {
        let config = self.temp.path().join("forewarn.toml");
        DaemonConfig::vm_a(
            self.temp.path(),
            self.plugin_dir.clone(),
            &simulator.base_url,
        )
        .write(&config);
        Daemon::start(binary(), &config)
    }
}

/// The plugin's own log lines (what it passed to the `log` host call).
fn plugin_log_messages(daemon: &Daemon, plugin: &str) -> Vec<String> {
    daemon
        .lines()
        .iter()
        .filter(|line| {
            line.text("plugin") == plugin
                && line.text("target") == forewarn_runtime::PLUGIN_LOG_TARGET
        })
        .map(|line| line.message().to_owned())
        .collect()
}

/// The line each example logs in its `on-start` (what it was told of the VM), asserted to be
/// the plugin's first log line: on-start runs before any on-event.
fn assert_started_first(daemon: &Daemon, plugin: &str, vm: &str, first_run: bool) {
    let logged = plugin_log_messages(daemon, plugin);
    let expected = format!(
        "started on vm-a: {vm}, first run {}",
        if first_run { "yes" } else { "no" }
    );
    assert_eq!(
        logged.first(),
        Some(&expected),
        "{plugin}: {logged:?}\n{}",
        daemon.describe_for_failure()
    );
}

#[test]
fn forewarn_plugin_check_accepts_the_three_examples() {
    for example in [C_FREEZE_GATE, PYTHON_WEBHOOK, JS_COUNTER] {
        let output = Command::new(binary())
            .args(["plugin", "check"])
            .arg(built(example))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("a valid forewarn plugin"),
            "forewarn plugin check rejected the {} example ({}):\n{stdout}\n{}",
            example.language,
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains("exports: ")
                && stdout.contains(&format!(
                    "forewarn:plugin/handler@{}",
                    forewarn_runtime::wit::latest_version()
                )),
            "{stdout}"
        );
    }
}

/// C: a 5 s Freeze is under `max-freeze-seconds = 10` and is approved at IMDS; a 30 s Freeze
/// is deferred with a reason and never approved.
#[test]
fn c_example_approves_short_freezes_and_defers_long_ones() {
    let setup = Setup::new(
        C_FREEZE_GATE,
        "subscribe = [\"Freeze\"]\nbudget = \"5s\"\n\n[config]\nmax-freeze-seconds = 10\n",
    );
    let simulator = setup.simulator("name = \"freezes\"\ndescription = \"A short and a long Freeze.\"\nend_after = \"1h\"\n\n\
         [[events]]\ntype = \"Freeze\"\nsource = \"Platform\"\nappear_at = \"1s\"\nnotice = \"15m\"\nduration_seconds = 5\nruns_for = \"1m\"\n\n\
         [[events]]\ntype = \"Freeze\"\nsource = \"Platform\"\nappear_at = \"1s\"\nnotice = \"15m\"\nduration_seconds = 30\nruns_for = \"1m\"\n",
    );
    let daemon = setup.daemon(&simulator);
    let decisions =
        daemon.wait_for_decisions(TIMEOUT, "freeze-gate answering both Freezes", |decisions| {
            ["approve", "defer"].iter().all(|wanted| {
                decisions.iter().any(|decision| {
                    decision.plugin == "freeze-gate" && decision.decision == *wanted
                })
            })
        });
    let state = simulator.wait_for_state(TIMEOUT, "the short Freeze approved", |state| {
        !state.approvals.is_empty()
    });
    let events = &state.events;
    let short = events
        .iter()
        .find(|event| event.duration_in_seconds == 5)
        .expect("the 5 s Freeze");
    let long = events
        .iter()
        .find(|event| event.duration_in_seconds == 30)
        .expect("the 30 s Freeze");
    let approved: Vec<&str> = state
        .approvals
        .iter()
        .map(|approval| approval.event_id.as_str())
        .collect();
    assert_eq!(
        approved,
        [short.event_id.as_str()],
        "{}",
        daemon.describe_for_failure()
    );
    assert!(state.approvals[0].accepted);
    let deferral = decisions
        .iter()
        .find(|decision| decision.decision == "defer")
        .unwrap();
    assert_eq!(deferral.event_id, long.event_id);
    assert_eq!(deferral.reason, "Freeze of 30s is not shorter than 10s");
    let logged = plugin_log_messages(&daemon, "freeze-gate");
    assert!(
        logged.contains(&"approving a 5s Freeze (limit 10s)".to_owned()),
        "{logged:?}"
    );
    assert_started_first(
        &daemon,
        "freeze-gate",
        "priority regular, eviction policy none",
        true,
    );
    assert!(
        !simulator
            .state()
            .approvals
            .iter()
            .any(|approval| approval.event_id == long.event_id)
    );
}

/// What the test webhook received: one entry per request.
type Received = Arc<Mutex<Vec<Request>>>;

/// One request to the test webhook.
#[derive(Clone, Debug)]
struct Request {
    line: String,
    authorization: Option<String>,
    body: String,
}

/// A webhook on 127.0.0.1 that records each request and answers 200. Serves until the test
/// process ends; each connection is read with a timeout.
fn start_webhook() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let received: Received = Arc::default();
    let sink = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            if let Some(request) = read_request(stream) {
                sink.lock().unwrap().push(request);
            }
        }
    });
    (address, received)
}

fn read_request(mut stream: TcpStream) -> Option<Request> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line).ok()?;
    let mut content_length = 0;
    let mut authorization = None;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            content_length = value.trim().parse().ok()?;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("authorization")
        {
            authorization = Some(value.trim().to_owned());
        }
    }
    let mut body = vec![0; content_length];
    reader.read_exact(&mut body).ok()?;
    stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .ok()?;
    Some(Request {
        line: request_line.trim_end().to_owned(),
        authorization,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// The resource the Python example's token is for.
const STORAGE: &str = "https://storage.azure.com/";

/// Python: the plugin POSTs a JSON notice to the webhook on its allow-list, then approves;
/// the Reboot is approved at IMDS. The VM is a Spot VM (Delete by default): the VM info
/// reaches both on-start and on-event. The request carries a managed-identity token the
/// daemon fetched from the simulator's IMDS for the plugin.
#[test]
fn python_example_notifies_its_webhook_and_approves() {
    let (address, received) = start_webhook();
    let setup = Setup::new(
        PYTHON_WEBHOOK,
        &format!(
            "subscribe = [\"Reboot\"]\nbudget = \"10s\"\nmemory = \"256MiB\"\n\n[config]\nwebhook-url = \"http://{address}/maintenance\"\nwebhook-token-resource = \"{STORAGE}\"\n\n[capabilities]\nhttp = [\"{address}\"]\nazure-identity = [\"{STORAGE}\"]\n"
        ),
    );
    let spot = format!("priority = \"Spot\"\n{}", one_reboot("reboot"));
    let simulator = setup.simulator(&spot);
    let daemon = setup.daemon(&simulator);
    let state =
        simulator.wait_for_state(TIMEOUT, "the Reboot approved after the webhook", |state| {
            !state.approvals.is_empty()
        });
    let event_id = &state.events[0].event_id;
    assert_eq!(state.approvals[0].event_id, *event_id);
    let requests = received.lock().unwrap().clone();
    assert_eq!(
        requests.len(),
        1,
        "{requests:?}\n{}",
        daemon.describe_for_failure()
    );
    let request = &requests[0];
    assert_eq!(request.line, "POST /maintenance HTTP/1.1");
    let bearer = request.authorization.as_deref().unwrap_or_default();
    assert!(
        bearer.starts_with("Bearer ") && bearer.len() > "Bearer ".len() + 10,
        "{request:?}"
    );
    let notice: serde_json::Value = serde_json::from_str(&request.body).unwrap();
    assert_eq!(notice["event"], event_id.as_str());
    assert_eq!(notice["type"], "Reboot");
    assert_eq!(notice["vm"], "vm-a");
    assert_eq!(notice["affects-this-vm"], true);
    assert_eq!(notice["evictable"], true, "{notice}");
    assert_eq!(notice["eviction-deletes-disks"], true, "{notice}");
    let until = notice["until-not-before-ms"]
        .as_u64()
        .expect("until-not-before-ms");
    assert!(until > 0 && until <= 15 * 60 * 1000, "{notice}");
    // The approval can reach the simulator before the test has read the decision (and the
    // plugin's line before it) from the daemon's output: wait for it, do not read once.
    let decision = wait_for(TIMEOUT, "the decision of webhook-notify", || {
        daemon
            .decisions()
            .into_iter()
            .find(|decision| decision.plugin == "webhook-notify")
            .ok_or_else(|| daemon.describe_for_failure())
    });
    assert_eq!(
        (decision.decision.as_str(), decision.phase.as_str()),
        ("approve", "prepare"),
        "{decision:?}"
    );
    let logged = plugin_log_messages(&daemon, "webhook-notify");
    let expected = format!("notified http://{address}/maintenance of Reboot {event_id}");
    assert!(logged.contains(&expected), "{logged:?}");
    assert_started_first(
        &daemon,
        "webhook-notify",
        "priority spot, eviction policy delete",
        true,
    );
}

/// A scenario with one platform Reboot; `name` makes its EventId (derived from the name) new.
fn one_reboot(name: &str) -> String {
    format!(
        "name = \"{name}\"\ndescription = \"A platform Reboot.\"\nend_after = \"1h\"\n\n\
         [[events]]\ntype = \"Reboot\"\nsource = \"Platform\"\nappear_at = \"1s\"\nnotice = \"15m\"\nruns_for = \"1m\"\n"
    )
}

/// JavaScript: the counter survives a daemon restart (durable state), and the restarted
/// daemon loads the 12 MiB component from the compile cache in the state directory. Its
/// on-start runs in each run, told `first-run` only in the first (the second finds the journal).
#[test]
fn js_example_keeps_its_counter_across_restarts_and_the_restart_uses_the_compile_cache() {
    let setup = Setup::new(
        JS_COUNTER,
        "subscribe = [\"Reboot\"]\nbudget = \"10s\"\nmemory = \"128MiB\"\n",
    );
    let mut counts = Vec::new();
    let mut load_times = Vec::new();
    for run in 1..=2 {
        let simulator = setup.simulator(&one_reboot(&format!("reboot-{run}")));
        let started = Instant::now();
        let mut daemon = setup.daemon(&simulator);
        let loaded = wait_for(TIMEOUT, "a \"plugin loaded\" line", || {
            daemon
                .lines_with_message(PLUGIN_LOADED)
                .into_iter()
                .next()
                .ok_or_else(|| daemon.describe_for_failure())
        });
        load_times.push(started.elapsed());
        assert_eq!(loaded.text("plugin"), "counter");
        let cached = loaded.fields["cached"].as_bool();
        assert_eq!(cached, Some(run == 2), "run {run}: {:?}", loaded.fields);
        let state = simulator.wait_for_state(TIMEOUT, "the Reboot approved", |state| {
            !state.approvals.is_empty()
        });
        let event_id = &state.approvals[0].event_id;
        // The approval can reach the simulator before the test has read the plugin's line
        // from the daemon's output: wait for the line, do not read once.
        let ending = format!("Reboot {event_id} (attempt 1)");
        let line = wait_for(TIMEOUT, "the counter's line for the Reboot", || {
            let logged = plugin_log_messages(&daemon, "counter");
            logged
                .iter()
                .find(|message| message.ends_with(&ending))
                .cloned()
                .ok_or_else(|| format!("no counter line for {event_id}: {logged:?}"))
        });
        counts.push(line);
        assert_started_first(
            &daemon,
            "counter",
            "priority regular, eviction policy none",
            run == 1,
        );
        daemon.kill();
    }
    assert!(counts[0].starts_with("prepare #1: "), "{counts:?}");
    assert!(counts[1].starts_with("prepare #2: "), "{counts:?}");
    eprintln!(
        "daemon start to \"plugin loaded\": compiled {:?}, from the cache {:?}",
        load_times[0], load_times[1]
    );
}

/// JavaScript: the SDK's warm-up ran in the component bindings' own global while the snapshot
/// was taken (their lazily made classes are then in every fresh instance, which is what
/// brings a call of the counter example from 0.30 to 0.18 ms), and it is there in each call's
/// fresh instance, not only the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_sdk_warm_up_reaches_the_bindings_global_in_every_fresh_instance() {
    let bytes = std::fs::read(built(JS_WARM_UP_CHECK)).unwrap();
    let runtime = Runtime::new(RuntimeConfig::default(), HostServices::default()).unwrap();
    let settings = PluginSettings {
        memory_limit_bytes: 256 * 1024 * 1024,
        ..PluginSettings::default()
    };
    let plugin = runtime.load("warm-up-check", &bytes, settings).unwrap();
    for call in 1..=3 {
        let answer = call_answer(&plugin, wit::Phase::Prepare).await.answer;
        assert!(
            matches!(answer, Ok(wit::Decision::Approve)),
            "call {call}: {answer:?}"
        );
    }
}

// ---- Measurements (ignored): the figures in docs/languages.md ----

fn measured_event() -> wit::ScheduledEvent {
    wit::ScheduledEvent {
        id: "measure-event".into(),
        event_type: wit::EventType::Freeze,
        event_type_raw: "Freeze".into(),
        resource_type: "VirtualMachine".into(),
        resources: vec!["vm-a".into()],
        status: wit::EventStatus::Scheduled,
        not_before_unix_ms: Some(1_900_000_000_000),
        description: String::new(),
        source: wit::EventSource::Platform,
        duration_seconds: Some(5),
    }
}

/// One call of `plugin` with the measured event in `phase`, ten seconds of budget.
async fn call_answer(plugin: &Plugin, phase: wit::Phase) -> CallOutcome {
    let context = sample_context();
    plugin
        .call(&measured_event(), phase, &context, Duration::from_secs(10))
        .await
}

fn settings_for(example: Example, webhook: &str) -> PluginSettings {
    let mut settings = PluginSettings {
        memory_limit_bytes: 256 * 1024 * 1024,
        ..PluginSettings::default()
    };
    settings
        .config
        .insert("max-freeze-seconds".into(), "10".into());
    if example.name == PYTHON_WEBHOOK.name {
        settings.config.insert(
            "webhook-url".into(),
            format!("http://{webhook}/maintenance"),
        );
        settings.grants = Capabilities {
            http: vec![webhook.to_owned()],
            ..Capabilities::default()
        };
    }
    settings
}

fn load_timed(
    runtime: &Runtime,
    example: Example,
    bytes: &[u8],
    webhook: &str,
) -> (Plugin, Duration) {
    let started = Instant::now();
    let plugin = runtime
        .load(example.name, bytes, settings_for(example, webhook))
        .unwrap();
    (plugin, started.elapsed())
}

/// Prints, per example: size, load time with a cold and a warm compile cache, and the median
/// of many calls in the `started` phase, where every example approves at once (so the figure
/// is the cost of a call: a fresh instance, the event in, the decision out). `cargo test -p forewarn-host --test e2e_languages -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a test: run it by hand for docs/languages.md"]
async fn measure_language_examples() {
    let (webhook, _received) = start_webhook();
    for example in [C_FREEZE_GATE, PYTHON_WEBHOOK, JS_COUNTER] {
        let bytes = std::fs::read(built(example)).unwrap();
        let cache = tempfile::tempdir().unwrap();
        let runtime_with_cache = || {
            let config = RuntimeConfig {
                cache_dir: Some(cache.path().to_owned()),
                ..RuntimeConfig::default()
            };
            Runtime::new(config, HostServices::default()).unwrap()
        };
        let (cold_plugin, cold) = load_timed(&runtime_with_cache(), example, &bytes, &webhook);
        assert!(!cold_plugin.loaded_from_cache());
        let (plugin, cached) = load_timed(&runtime_with_cache(), example, &bytes, &webhook);
        assert!(plugin.loaded_from_cache());
        let calls = 200;
        let mut samples = Vec::with_capacity(calls);
        for _ in 0..calls {
            let outcome = call_answer(&plugin, wit::Phase::Started).await;
            assert!(
                matches!(outcome.answer, Ok(wit::Decision::Approve)),
                "{:?}",
                outcome.answer
            );
            samples.push(outcome.elapsed);
        }
        samples.sort();
        println!(
            "{:<11} {:>9.2} MiB  compile cold {:>6.0} ms  cached load {:>5.0} ms  call median {:>7.3} ms (p90 {:.3} ms, {calls} calls)",
            example.language,
            bytes.len() as f64 / (1024.0 * 1024.0),
            cold.as_secs_f64() * 1000.0,
            cached.as_secs_f64() * 1000.0,
            samples[calls / 2].as_secs_f64() * 1000.0,
            samples[calls * 9 / 10].as_secs_f64() * 1000.0,
        );
    }
}

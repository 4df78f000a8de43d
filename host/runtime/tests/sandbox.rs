//! Containment tests of the plugin runtime, driven directly (no daemon): round trips of every
//! event field, CPU and memory budgets, traps, the WASI sandbox, floods, host calls, rejection, cache.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use forewarn_manifest::Capabilities;
use forewarn_runtime::wit::latest::{
    Decision, EventSource, EventStatus, EventType, Phase, ScheduledEvent,
};
use forewarn_runtime::{
    CallContext, CallFailure, CallOutcome, DEFAULT_MEMORY_LIMIT, HostServices, LOG_BURST_LINES,
    LOG_LINE_MAX_BYTES, LOG_LINES_PER_CALL, LOG_LINES_PER_MINUTE, LoadError, MemoryKeyValueStore,
    PLUGIN_LOG_TARGET, Plugin, PluginSettings, REASON_MAX_BYTES, Readiness, Runtime, RuntimeConfig,
    STATE_WRITES_PER_CALL,
};
use forewarn_test_support::guests::{NOOP, OTHER_WORLD, PROBE};
use serde_json::{Value, json};
use tracing::instrument::WithSubscriber;

const MIB: u64 = 1024 * 1024;
/// A budget no well-behaved call comes near, even in a debug build on a busy machine.
const GENEROUS: Duration = Duration::from_secs(20);
/// How late after its budget a cut-off call may return and still count as "cut off".
const CUT_OFF_SLACK: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// One runtime for the tests that need no services of their own. Its compile cache (in a
/// temporary directory kept for the whole run) means the probe is compiled once, not per test.
fn shared_runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<(tempfile::TempDir, Runtime)> = OnceLock::new();
    let (_dir, runtime) = RUNTIME.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let config = RuntimeConfig {
            cache_dir: Some(dir.path().join("cache")),
            ..RuntimeConfig::default()
        };
        let runtime = Runtime::new(config, HostServices::default()).unwrap();
        (dir, runtime)
    });
    runtime
}

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|error| panic!("cannot read {path}: {error}"))
}

fn probe_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| read(PROBE))
}

fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

fn settings(pairs: &[(&str, &str)]) -> PluginSettings {
    PluginSettings {
        config: config(pairs),
        ..PluginSettings::default()
    }
}

/// Loads the probe into `runtime` as `name`, in `mode`, with `extra` config values.
fn probe_in(runtime: &Runtime, name: &str, mode: &str, extra: &[(&str, &str)]) -> Plugin {
    let mut pairs = vec![("mode", mode)];
    pairs.extend_from_slice(extra);
    load_ok(runtime, name, probe_bytes(), settings(&pairs))
}

/// Loads the probe into the shared runtime; the plugin is named after the mode.
fn probe(mode: &str) -> Plugin {
    probe_in(shared_runtime(), &format!("probe-{mode}"), mode, &[])
}

fn load_ok(runtime: &Runtime, name: &str, bytes: &[u8], settings: PluginSettings) -> Plugin {
    match runtime.load(name, bytes, settings) {
        Ok(plugin) => plugin,
        Err(error) => panic!("loading {name} failed: {error}"),
    }
}

fn sample_event() -> ScheduledEvent {
    ScheduledEvent {
        id: "602d9444-d2cd-49c7-8624-8643e7171297".into(),
        event_type: EventType::Reboot,
        event_type_raw: "Reboot".into(),
        resource_type: "VirtualMachine".into(),
        resources: vec!["vm-a".into(), "vm-b".into()],
        status: EventStatus::Scheduled,
        not_before_unix_ms: Some(1_700_000_000_000),
        description: "Virtual machine is going to be restarted as requested by authorized user."
            .into(),
        source: EventSource::User,
        duration_seconds: Some(-1),
    }
}

fn context(attempt: u32) -> CallContext {
    CallContext {
        vm_name: "vm-a".into(),
        affects_this_vm: true,
        attempt,
        vm: Default::default(),
    }
}

async fn call_with(plugin: &Plugin, attempt: u32, budget: Duration) -> CallOutcome {
    plugin
        .call(&sample_event(), Phase::Prepare, &context(attempt), budget)
        .await
}

async fn call(plugin: &Plugin) -> CallOutcome {
    call_with(plugin, 1, GENEROUS).await
}

/// The defer reason of an outcome; fails the test on anything else.
fn defer_reason(outcome: &CallOutcome) -> String {
    match &outcome.answer {
        Ok(Decision::Defer(deferral)) => deferral.reason.clone(),
        other => panic!("expected a defer, got {other:?}"),
    }
}

fn assert_approved(outcome: &CallOutcome) {
    assert_eq!(outcome.answer, Ok(Decision::Approve), "{outcome:?}");
}

/// Asserts that a call was cut off at `budget`: reported as such, not before the budget
/// was spent, and not long after.
fn assert_cut_off(outcome: &CallOutcome, budget: Duration) {
    assert_eq!(
        outcome.answer,
        Err(CallFailure::BudgetExceeded { budget }),
        "{outcome:?}"
    );
    assert!(
        outcome.elapsed >= budget,
        "cut off before its budget: {outcome:?}"
    );
    assert!(
        outcome.elapsed < budget + CUT_OFF_SLACK,
        "not cut off near its budget: {outcome:?}"
    );
}

fn trap_message(outcome: &CallOutcome) -> String {
    match &outcome.answer {
        Err(CallFailure::Trapped { message }) => message.clone(),
        other => panic!("expected a trap, got {other:?}"),
    }
}

fn unix_ms_now() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    u64::try_from(since.as_millis()).unwrap()
}

// ---------------------------------------------------------------------------------------
// Round trips: every field of the event, the phase and the context reach the plugin intact
// ---------------------------------------------------------------------------------------

fn event_type_name(event_type: EventType) -> &'static str {
    match event_type {
        EventType::Freeze => "freeze",
        EventType::Reboot => "reboot",
        EventType::Redeploy => "redeploy",
        EventType::Preempt => "preempt",
        EventType::Terminate => "terminate",
        EventType::Shutdown => "shutdown",
        EventType::Unknown => "unknown",
    }
}

fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Prepare => "prepare",
        Phase::Started => "started",
        Phase::EndedAfterStart => "ended-after-start",
        Phase::EndedWithoutStart => "ended-without-start",
    }
}

/// What the probe's "echo" mode must report for this call, minus the deadline.
fn expected_echo(event: &ScheduledEvent, phase: Phase, ctx: &CallContext) -> Value {
    json!({
        "id": event.id,
        "event_type": event_type_name(event.event_type),
        "event_type_raw": event.event_type_raw,
        "resource_type": event.resource_type,
        "resources": event.resources,
        "status": match event.status {
            EventStatus::Scheduled => "scheduled",
            EventStatus::Started => "started",
        },
        "not_before_unix_ms": event.not_before_unix_ms,
        "description": event.description,
        "source": match event.source {
            EventSource::Platform => "platform",
            EventSource::User => "user",
            EventSource::OperatingSystem => "operating-system",
            EventSource::Unknown => "unknown",
        },
        "duration_seconds": event.duration_seconds,
        "phase": phase_name(phase),
        "vm_name": ctx.vm_name,
        "affects_this_vm": ctx.affects_this_vm,
        "attempt": ctx.attempt,
    })
}

/// Calls the echo probe and checks every field it saw, the retry-after and the deadline.
async fn assert_echoes(plugin: &Plugin, event: &ScheduledEvent, phase: Phase, ctx: &CallContext) {
    let budget = GENEROUS;
    let before = unix_ms_now();
    let outcome = plugin.call(event, phase, ctx, budget).await;
    let after = unix_ms_now();
    let Ok(Decision::Defer(deferral)) = &outcome.answer else {
        panic!("echo must defer, got {outcome:?}");
    };
    let mut seen: Value = serde_json::from_str(&deferral.reason)
        .unwrap_or_else(|error| panic!("echo reason is not JSON ({error}): {}", deferral.reason));
    let deadline = seen
        .as_object_mut()
        .unwrap()
        .remove("deadline_unix_ms")
        .and_then(|value| value.as_u64())
        .expect("echo reports deadline_unix_ms");
    assert_eq!(seen, expected_echo(event, phase, ctx));
    assert_eq!(deferral.retry_after_ms, 1000 * ctx.attempt);
    let budget_ms = u64::try_from(budget.as_millis()).unwrap();
    assert!(
        deadline >= before + budget_ms && deadline <= after + budget_ms,
        "deadline {deadline} is not now + budget ({before}..={after} + {budget_ms})"
    );
}

#[tokio::test]
async fn approve_and_defer_round_trip() {
    assert_approved(&call(&probe("approve")).await);
    let deferred = call(&probe("defer")).await;
    let Ok(Decision::Defer(deferral)) = &deferred.answer else {
        panic!("{deferred:?}");
    };
    assert_eq!(deferral.reason, "not yet");
    assert_eq!(deferral.retry_after_ms, 1500);
}

#[tokio::test]
async fn every_event_type_status_and_source_reaches_the_plugin() {
    let echo = probe("echo");
    let types = [
        (
            EventType::Freeze,
            "Freeze",
            EventStatus::Scheduled,
            EventSource::Platform,
        ),
        (
            EventType::Reboot,
            "Reboot",
            EventStatus::Started,
            EventSource::User,
        ),
        (
            EventType::Redeploy,
            "Redeploy",
            EventStatus::Scheduled,
            EventSource::Unknown,
        ),
        (
            EventType::Preempt,
            "Preempt",
            EventStatus::Started,
            EventSource::Platform,
        ),
        (
            EventType::Terminate,
            "Terminate",
            EventStatus::Scheduled,
            EventSource::User,
        ),
        (
            EventType::Shutdown,
            "Shutdown",
            EventStatus::Scheduled,
            EventSource::OperatingSystem,
        ),
        (
            EventType::Unknown,
            "Hibernate-Ω",
            EventStatus::Scheduled,
            EventSource::Unknown,
        ),
    ];
    for (event_type, raw, status, source) in types {
        let event = ScheduledEvent {
            event_type,
            event_type_raw: raw.into(),
            status,
            source,
            ..sample_event()
        };
        assert_echoes(&echo, &event, Phase::Prepare, &context(1)).await;
    }
}

#[tokio::test]
async fn every_phase_and_attempt_reaches_the_plugin() {
    let echo = probe("echo");
    let phases = [
        Phase::Prepare,
        Phase::Started,
        Phase::EndedAfterStart,
        Phase::EndedWithoutStart,
    ];
    for (index, phase) in phases.into_iter().enumerate() {
        for attempt in [1, 2, 7, 4_000_000] {
            let ctx = CallContext {
                vm_name: format!("vm-{index}"),
                affects_this_vm: index % 2 == 0,
                attempt,
                vm: Default::default(),
            };
            assert_echoes(&echo, &sample_event(), phase, &ctx).await;
        }
    }
}

#[tokio::test]
async fn unicode_empty_and_optional_fields_round_trip() {
    let echo = probe("echo");
    let unicode = ScheduledEvent {
        id: "ид-🚧-42".into(),
        description: "Wartung für vm-ä 🚧 — 维护".into(),
        resources: vec!["vm-ä".into(), "vm-日本".into(), "".into()],
        resource_type: "VirtualMachine™".into(),
        ..sample_event()
    };
    let empty = ScheduledEvent {
        id: String::new(),
        event_type: EventType::Unknown,
        event_type_raw: String::new(),
        resource_type: String::new(),
        resources: Vec::new(),
        description: String::new(),
        not_before_unix_ms: None,
        duration_seconds: None,
        ..sample_event()
    };
    let durations = [
        None,
        Some(-1),
        Some(-5),
        Some(0),
        Some(i64::MAX),
        Some(i64::MIN),
    ];
    let unicode_ctx = CallContext {
        vm_name: "vm-ä 🚧".into(),
        affects_this_vm: false,
        attempt: 1,
        vm: Default::default(),
    };
    let empty_ctx = CallContext {
        vm_name: String::new(),
        affects_this_vm: false,
        attempt: 0,
        vm: Default::default(),
    };
    assert_echoes(&echo, &unicode, Phase::Prepare, &unicode_ctx).await;
    assert_echoes(&echo, &empty, Phase::EndedWithoutStart, &empty_ctx).await;
    for duration_seconds in durations {
        for not_before_unix_ms in [None, Some(0), Some(1_700_000_000_123), Some(u64::MAX)] {
            let event = ScheduledEvent {
                duration_seconds,
                not_before_unix_ms,
                ..sample_event()
            };
            assert_echoes(&echo, &event, Phase::Prepare, &context(3)).await;
        }
    }
}

// ---------------------------------------------------------------------------------------
// CPU budget
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_is_cut_off_while_another_plugin_keeps_answering() {
    let budget = Duration::from_millis(1500);
    let looping = probe("loop");
    let noop = load_ok(
        shared_runtime(),
        "noop",
        &read(NOOP),
        PluginSettings::default(),
    );
    let started = Instant::now();
    let looping_task = tokio::spawn({
        let looping = looping.clone();
        async move {
            let outcome = call_with(&looping, 1, budget).await;
            (outcome, started.elapsed())
        }
    });
    let noop_task = tokio::spawn(async move {
        let mut answers = Vec::new();
        for attempt in 1..=5 {
            answers.push(call_with(&noop, attempt, GENEROUS).await);
        }
        (answers, started.elapsed())
    });
    let (looped, noop_answered) = tokio::join!(looping_task, noop_task);
    let (looped, loop_finished) = looped.unwrap();
    let (answers, noop_finished) = noop_answered.unwrap();
    assert_cut_off(&looped, budget);
    for answer in &answers {
        assert_approved(answer);
    }
    assert!(
        noop_finished < loop_finished,
        "the second plugin's 5 answers ({noop_finished:?}) came only after the loop was cut off ({loop_finished:?})"
    );
    eprintln!(
        "loop cut off {:?} after its budget of {budget:?}",
        looped.elapsed - budget
    );
}

#[tokio::test]
async fn a_plugin_cut_off_answers_its_next_call_and_the_runtime_is_not_poisoned() {
    let budget = Duration::from_millis(300);
    let looping = probe("loop");
    assert_cut_off(&call_with(&looping, 1, budget).await, budget);
    assert_cut_off(&call_with(&looping, 2, budget).await, budget);

    // The same plugin instance (same settings): loops on attempt 1, approves on attempt 2.
    let first_only = probe("loop-first-attempt");
    assert_cut_off(&call_with(&first_only, 1, budget).await, budget);
    assert_approved(&call_with(&first_only, 2, budget).await);

    // And a fresh plugin of the same runtime is unaffected.
    assert_approved(&call(&probe("approve")).await);
}

#[tokio::test]
async fn a_host_call_loop_is_cut_off_at_its_budget() {
    let budget = Duration::from_millis(500);
    assert_cut_off(
        &call_with(&probe("host-call-loop"), 1, budget).await,
        budget,
    );
}

#[tokio::test]
async fn a_plugin_blocked_in_a_wasi_sleep_is_cut_off_by_the_wall_clock() {
    let budget = Duration::from_millis(500);
    assert_cut_off(&call_with(&probe("sleep"), 1, budget).await, budget);
    assert_approved(&call(&probe("approve")).await);
}

#[tokio::test]
async fn a_huge_budget_neither_panics_nor_hangs() {
    // `Instant + Duration::MAX` overflows: a call must clamp it, not panic.
    let outcome = call_with(&probe("approve"), 1, Duration::MAX).await;
    assert_approved(&outcome);
}

#[tokio::test]
async fn a_call_that_uses_most_of_its_budget_still_answers() {
    let plugin = probe_in(
        shared_runtime(),
        "probe-slow",
        "slow",
        &[("margin_ms", "2000")],
    );
    // Busy until 2 s before the deadline: 60 % of the budget spent, then an answer. The
    // answer has 2 s to come back (it needs a few ms): a loaded machine does not cut it off.
    let budget = Duration::from_millis(5000);
    let outcome = call_with(&plugin, 1, budget).await;
    assert_approved(&outcome);
    assert!(
        outcome.elapsed >= Duration::from_millis(2500),
        "{outcome:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Instances made ahead of their call
// ---------------------------------------------------------------------------------------

/// Calls `plugin` five times, some calls with their instance made ahead (checked ready)
/// and some without waiting for it (made at the call, or ahead if the background task was
/// quicker), and asserts that each answers with a deferral of `reason`.
async fn each_call_defers_with(plugin: &Plugin, reason: &str) {
    for made_ahead in [false, true, true, false, true] {
        if made_ahead {
            plugin.prepare_next().await;
            assert!(
                plugin.has_ready_instance().await,
                "no instance was made ahead"
            );
        }
        let outcome = call(plugin).await;
        assert_eq!(defer_reason(&outcome), reason, "{outcome:?}");
    }
}

#[tokio::test]
async fn every_call_gets_an_instance_no_call_used_before() {
    // Each instance serves one call, and finds its memory's image as built although the
    // slot's last call wrote over it (the pool copies the image into a slot it resets in
    // place).
    let plugin = probe("instance-calls");
    each_call_defers_with(&plugin, "instance-calls: 1, image word 5eedf00d").await;
}

#[tokio::test]
async fn calls_back_to_back_never_run_out_of_the_plugins_own_instance_pool() {
    // Each plugin has a pool of its own, sized for a call, the instance made ahead and a
    // few used ones being dropped. 200 calls in a row on one thread, never yielding to the
    // background tasks that drop used instances, must not use it up: past a few waiting,
    // a call drops its own.
    let plugin = probe("approve");
    for call in 0..200 {
        let outcome = call_with(&plugin, 1, GENEROUS).await;
        assert_eq!(
            outcome.answer,
            Ok(Decision::Approve),
            "call {call}: {outcome:?}"
        );
    }
}

#[tokio::test]
async fn no_call_finds_what_an_earlier_call_left_in_its_grown_memory() {
    // Each call grows its memory by 40 MiB and marks every 7th page: past the 32 MiB the pool
    // keeps mapped, and more separate runs than its reset scan takes at once. The slot is
    // reused call after call; every call must find its new pages zero.
    let plugin = probe("leftover-pages");
    each_call_defers_with(&plugin, "leftover-pages: 0 of 1463").await;
}

#[tokio::test]
async fn an_instance_made_ahead_runs_under_its_calls_budget() {
    // A loop in an instance made ahead is cut off at the call's budget...
    let looping = probe("loop");
    looping.prepare_next().await;
    assert!(looping.has_ready_instance().await);
    let budget = Duration::from_millis(200);
    assert_cut_off(&call_with(&looping, 1, budget).await, budget);
    // ...and a call longer than the time its instance was given to be made still answers:
    // the deadline is the call's, not the preparation's.
    let slow = probe_in(
        shared_runtime(),
        "probe-slow-ahead",
        "slow",
        &[("margin_ms", "2000")],
    );
    slow.prepare_next().await;
    assert!(slow.has_ready_instance().await);
    // Busy until 2 s before the deadline, past the preparation budget; then 2 s to answer.
    let budget = forewarn_runtime::PREPARE_BUDGET + Duration::from_millis(4000);
    let outcome = call_with(&slow, 1, budget).await;
    assert_approved(&outcome);
    assert!(
        outcome.elapsed > forewarn_runtime::PREPARE_BUDGET,
        "the call did not outlast the preparation budget: {outcome:?}"
    );
}

#[tokio::test]
async fn a_memory_cap_binds_an_instance_made_ahead() {
    let plugin = probe("oom");
    plugin.prepare_next().await;
    assert!(plugin.has_ready_instance().await);
    let outcome = call(&plugin).await;
    assert_eq!(
        outcome.answer,
        Err(CallFailure::MemoryExceeded {
            limit_bytes: DEFAULT_MEMORY_LIMIT
        }),
        "{outcome:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Memory cap and traps
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn allocating_past_the_default_cap_traps_and_the_host_goes_on() {
    let oom = probe("oom");
    let outcome = call(&oom).await;
    assert_eq!(
        outcome.answer,
        Err(CallFailure::MemoryExceeded {
            limit_bytes: DEFAULT_MEMORY_LIMIT
        }),
        "{outcome:?}"
    );
    assert_eq!(
        CallFailure::MemoryExceeded {
            limit_bytes: DEFAULT_MEMORY_LIMIT
        }
        .reason(),
        "memory limit exceeded (64 MiB)"
    );
    // Each call starts with a fresh instance: same failure again, and others unaffected.
    assert!(matches!(
        call(&oom).await.answer,
        Err(CallFailure::MemoryExceeded { .. })
    ));
    assert_approved(&call(&probe("approve")).await);
}

#[tokio::test]
async fn a_custom_small_memory_cap_is_enforced() {
    let limit_bytes = 8 * MIB;
    let oom_settings = PluginSettings {
        memory_limit_bytes: limit_bytes,
        ..settings(&[("mode", "oom")])
    };
    let small = load_ok(
        shared_runtime(),
        "probe-oom-8mib",
        probe_bytes(),
        oom_settings,
    );
    let outcome = call(&small).await;
    assert_eq!(
        outcome.answer,
        Err(CallFailure::MemoryExceeded { limit_bytes }),
        "{outcome:?}"
    );
    // The same cap leaves room for a plugin that behaves.
    let approve_settings = PluginSettings {
        memory_limit_bytes: limit_bytes,
        ..settings(&[("mode", "approve")])
    };
    let fits = load_ok(
        shared_runtime(),
        "probe-8mib",
        probe_bytes(),
        approve_settings,
    );
    assert_approved(&call(&fits).await);
}

/// Rust keeps its stack in linear memory (below the data, "stack-first"): overflowing it
/// runs below address 0 and traps as an out-of-bounds access before wasm's own call stack
/// is exhausted. Either way the call traps and the host goes on.
#[tokio::test]
async fn a_stack_overflow_traps() {
    let outcome = call(&probe("stack-overflow")).await;
    let message = trap_message(&outcome);
    assert!(
        message == "stack overflow" || message.contains("out of bounds memory access"),
        "{message}"
    );
    assert_approved(&call(&probe("approve")).await);
}

#[tokio::test]
async fn exhausting_the_wasm_call_stack_is_reported_as_a_stack_overflow() {
    let outcome = call(&probe("call-stack-overflow")).await;
    assert_eq!(
        outcome.answer,
        Err(CallFailure::Trapped {
            message: "stack overflow".into()
        }),
        "{outcome:?}"
    );
    assert_approved(&call(&probe("approve")).await);
}

#[tokio::test]
async fn a_panic_traps_with_the_panic_message() {
    let outcome = call(&probe("panic")).await;
    let message = trap_message(&outcome);
    assert!(
        message.contains("probe panicked on purpose"),
        "the trap does not carry the panic message: {message}"
    );
    assert_approved(&call(&probe("approve")).await);
}

// ---------------------------------------------------------------------------------------
// The WASI sandbox grants nothing
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn reading_etc_passwd_is_denied() {
    let reason = defer_reason(&call(&probe("read-file")).await);
    assert!(reason.starts_with("read-file: denied:"), "{reason}");
}

#[tokio::test]
async fn listing_the_root_directory_is_denied() {
    let reason = defer_reason(&call(&probe("list-root")).await);
    assert!(reason.starts_with("list-root: denied:"), "{reason}");
}

#[tokio::test]
async fn opening_a_tcp_socket_is_denied() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let plugin = probe_in(shared_runtime(), "probe-tcp", "tcp", &[("port", &port)]);
    let reason = defer_reason(&call(&plugin).await);
    assert!(reason.starts_with("tcp: denied:"), "{reason}");
    match listener.accept() {
        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, peer)) => panic!("the plugin connected to the listener from {peer}"),
        Err(error) => panic!("accept failed: {error}"),
    }
}

#[tokio::test]
async fn the_environment_is_not_inherited() {
    // The test process has an environment (PATH at least): the plugin must not see it.
    assert!(std::env::var_os("PATH").is_some());
    assert!(std::env::vars_os().count() > 0);
    let reason = defer_reason(&call(&probe("env")).await);
    assert_eq!(reason, "env: 0 vars, PATH=unset");
}

#[tokio::test]
async fn there_are_no_arguments() {
    assert!(std::env::args_os().count() > 0);
    let reason = defer_reason(&call(&probe("args")).await);
    assert_eq!(reason, "args: 0");
}

// ---------------------------------------------------------------------------------------
// Floods and huge answers are bounded
// ---------------------------------------------------------------------------------------

/// A `tracing` subscriber that writes plain-text lines into a shared buffer, everything at
/// debug level and above (as `FOREWARN_LOG=debug`). Not trace: wasmtime-wasi traces every
/// host call with its arguments, so at trace level a plugin's 10 MiB of stdout reach the log.
fn capturing_subscriber() -> (impl tracing::Subscriber + Send + Sync, Arc<Mutex<Vec<u8>>>) {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(shared_writer(&buffer))
        .finish();
    (subscriber, buffer)
}

/// As [`capturing_subscriber`], but one JSON object per event, so that tests read the
/// events' structured fields rather than their text.
fn capturing_json_subscriber() -> (impl tracing::Subscriber + Send + Sync, Arc<Mutex<Vec<u8>>>) {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(shared_writer(&buffer))
        .finish();
    (subscriber, buffer)
}

/// The `fields` of each JSON event a [`capturing_json_subscriber`] wrote.
fn captured_fields(buffer: &Mutex<Vec<u8>>) -> Vec<Value> {
    let bytes = buffer.lock().unwrap().clone();
    bytes
        .split(|byte| *byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice::<Value>(line).unwrap()["fields"].clone())
        .collect()
}

/// Makes writers that append to `buffer`.
fn shared_writer(buffer: &Arc<Mutex<Vec<u8>>>) -> impl Fn() -> SharedWriter + use<> {
    let buffer = buffer.clone();
    move || SharedWriter(buffer.clone())
}

struct SharedWriter(Arc<Mutex<Vec<u8>>>);

impl Write for SharedWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Calls `plugin` with every log line captured; returns the outcome and the log text.
async fn call_capturing_logs(plugin: &Plugin) -> (CallOutcome, String) {
    let (subscriber, buffer) = capturing_subscriber();
    let outcome = call(plugin).with_subscriber(subscriber).await;
    let text = String::from_utf8(buffer.lock().unwrap().clone()).unwrap();
    (outcome, text)
}

#[tokio::test]
async fn a_log_flood_is_bounded() {
    let (outcome, log) = call_capturing_logs(&probe("log-flood")).await;
    assert_approved(&outcome);
    let plugin_lines = log
        .lines()
        .filter(|line| line.contains(PLUGIN_LOG_TARGET) && line.contains("xxxxxxxx"))
        .count();
    let dropped_notices: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("dropped"))
        .collect();
    assert!(
        (1..=200).contains(&plugin_lines),
        "{plugin_lines} plugin log lines of the 100 000 the plugin wrote"
    );
    assert_eq!(dropped_notices.len(), 1, "{dropped_notices:?}");
    assert!(
        dropped_notices[0].contains(&format!("dropped_lines={}", 100_000 - plugin_lines)),
        "{}",
        dropped_notices[0]
    );
    // 200 lines of 1 KiB and change: nowhere near the 100 MiB the plugin tried to log.
    assert!(log.len() < 512 * 1024, "{} bytes of log", log.len());
}

#[tokio::test]
async fn a_plugin_logging_on_every_call_is_held_to_its_log_budget_over_time() {
    // 100 lines a call, under the per-call cap: only the budget over time limits them, as
    // for a plugin that defers with retry 0 and is asked again every 100 ms.
    const LINES: u32 = 100;
    let calls = LOG_BURST_LINES / LINES + 5;
    let load = || {
        let lines = LINES.to_string();
        probe_in(
            shared_runtime(),
            "probe-log-budget",
            "log-flood",
            &[("lines", &lines)],
        )
    };
    // Before the load: the budget fills from when the plugin is made, so `earned` below
    // must count from before then.
    let started = Instant::now();
    let plugin = load();
    let (subscriber, buffer) = capturing_json_subscriber();
    let kept = async {
        let mut kept = 0;
        for _ in 0..calls {
            let outcome = call(&plugin).await;
            assert_approved(&outcome);
            kept += outcome.logs.len() as u64;
        }
        // A reload of the same name keeps the budget its earlier version left.
        let outcome = call(&load()).await;
        kept + outcome.logs.len() as u64
    }
    .with_subscriber(subscriber)
    .await;
    let elapsed = started.elapsed();
    // Every line was either logged or dropped and counted.
    let attempted = u64::from((calls + 1) * LINES);
    let dropped = plugin.log_lines_over_budget();
    assert_eq!(kept + dropped, attempted, "{kept} kept, {dropped} dropped");
    // The burst was logged in full; beyond it, only what the rate earned meanwhile.
    let earned = elapsed.as_millis() as u64 * u64::from(LOG_LINES_PER_MINUTE) / 60_000 + 1;
    let burst = u64::from(LOG_BURST_LINES);
    assert!(
        (burst..=burst + earned).contains(&kept),
        "{kept} lines kept in {elapsed:?}: the budget allows {burst} + {earned}"
    );
    // One summary a minute says what was dropped.
    let summaries: Vec<Value> = captured_fields(&buffer)
        .into_iter()
        .filter(|fields| fields.get("budget_burst_lines").is_some())
        .collect();
    let most = 1 + elapsed.as_secs() / 60;
    assert!(
        (1..=most as usize).contains(&summaries.len()),
        "{summaries:?}"
    );
    let reported: u64 = summaries
        .iter()
        .map(|fields| fields["dropped_lines"].as_u64().unwrap())
        .sum();
    assert!((1..=dropped).contains(&reported), "{summaries:?}");
    assert_eq!(summaries[0]["plugin"], "probe-log-budget");
}

/// The forged line's date, written by the "log-forge" probe mode.
const FORGED_LINE_START: &str = "1999-01-01T00:00:00";

#[tokio::test]
async fn a_plugin_can_neither_forge_nor_flood_log_lines() {
    let (outcome, log) = call_capturing_logs(&probe("log-forge")).await;
    assert_approved(&outcome);
    let forged: Vec<&str> = log
        .lines()
        .filter(|line| line.trim_start().starts_with(FORGED_LINE_START))
        .collect();
    assert!(forged.is_empty(), "forged log lines: {forged:?}");
    // Everything a plugin puts in the log — its own lines, refused calls, stdout — is one
    // of its LOG_LINES_PER_CALL lines, plus the daemon's notices about what was dropped.
    let lines = log.lines().count();
    assert!(
        lines <= LOG_LINES_PER_CALL as usize + 5,
        "{lines} log lines from one call"
    );
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(
        longest <= LOG_LINE_MAX_BYTES + 1024,
        "a log line of {longest} bytes"
    );
    assert!(
        log.contains("dropped_lines="),
        "no notice of the dropped lines:\n{log}"
    );
}

#[tokio::test]
async fn a_stdout_flood_is_bounded() {
    let (outcome, log) = call_capturing_logs(&probe("stdout-flood")).await;
    assert_approved(&outcome);
    let kept: usize = log
        .lines()
        .filter(|line| line.contains(PLUGIN_LOG_TARGET))
        .map(|line| line.matches('y').count())
        .sum();
    assert!(
        kept > 0,
        "nothing of the plugin's stdout reached the log:\n{log}"
    );
    let dropped_notices: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("dropped"))
        .collect();
    assert_eq!(dropped_notices.len(), 1, "{dropped_notices:?}");
    assert!(
        dropped_notices[0].contains("stream=\"stdout\"")
            || dropped_notices[0].contains("stream=stdout")
    );
    // The plugin printed 10 MiB; the log got a bounded prefix of it.
    assert!(log.len() < 256 * 1024, "{} bytes of log", log.len());
}

#[tokio::test]
async fn a_huge_reason_is_truncated() {
    let outcome = call(&probe("huge-reason")).await;
    let reason = defer_reason(&outcome);
    assert!(
        reason.starts_with("rrrr"),
        "{}",
        &reason[..reason.len().min(40)]
    );
    assert!(reason.ends_with('…'), "a cut reason ends with an ellipsis");
    assert!(
        reason.len() <= REASON_MAX_BYTES,
        "a reason of {} bytes was kept; the cap is {REASON_MAX_BYTES}",
        reason.len()
    );
    assert!(
        reason.len() >= REASON_MAX_BYTES / 2,
        "{} bytes",
        reason.len()
    );
}

/// Text a plugin might hand back to forge a log line (a newline, then a line in the daemon's
/// text format) and to drive the operator's terminal (a carriage return; OSC 52, which sets
/// the clipboard).
const FORGING_TEXT: &str =
    "x\n1999-01-01T00:00:00Z  INFO forewarn: APPROVED\r\u{1b}]52;c;ZXZpbA==\u{7}";
/// `FORGING_TEXT` as the daemon keeps it: every control character written escaped.
const FORGING_TEXT_ESCAPED: &str =
    "x\\n1999-01-01T00:00:00Z  INFO forewarn: APPROVED\\r\\u{1b}]52;c;ZXZpbA==\\u{7}";

fn assert_no_control_characters(text: &str) {
    let found: Vec<char> = text.chars().filter(|c| c.is_control()).collect();
    assert!(found.is_empty(), "control characters {found:?} in {text:?}");
}

#[tokio::test]
async fn a_defer_reason_is_escaped_so_it_cannot_forge_log_lines() {
    // The probe defers naming a mode it does not know: the reason is plugin-chosen text.
    let plugin = probe_in(shared_runtime(), "probe-forged-reason", FORGING_TEXT, &[]);
    let reason = defer_reason(&call(&plugin).await);
    assert_no_control_characters(&reason);
    assert_eq!(
        reason,
        format!("unknown probe mode: {FORGING_TEXT_ESCAPED}")
    );
}

#[tokio::test]
async fn a_trap_message_is_escaped_so_it_cannot_forge_log_lines() {
    // A panic message's last line (what the reason quotes) without the newline: `\r` and
    // the escape sequence are what would reach the log.
    let (_, last_line) = FORGING_TEXT.split_once('\n').unwrap();
    let (_, escaped) = FORGING_TEXT_ESCAPED.split_once("\\n").unwrap();
    let plugin = probe_in(
        shared_runtime(),
        "probe-forged-panic",
        "panic",
        &[("message", last_line)],
    );
    let message = trap_message(&call(&plugin).await);
    assert_no_control_characters(&message);
    // The panic's message, escaped, then where it panicked (issue 51: one verdict per bug).
    assert!(
        message.contains(&format!(
            "({escaped} at tests/guests/probe/src/misbehave.rs:"
        )) && message.ends_with(')'),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------
// Host calls: state, readiness, config
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn state_persists_across_calls_and_runtimes_sharing_a_store() {
    let services = HostServices {
        key_value: Arc::new(MemoryKeyValueStore::default()),
        ..HostServices::default()
    };
    let first = Runtime::new(RuntimeConfig::default(), services.clone()).unwrap();
    let counter = probe_in(&first, "counter", "state", &[]);
    for expected in 1..=3 {
        assert_eq!(
            defer_reason(&call(&counter).await),
            format!("count={expected}")
        );
    }
    let second = Runtime::new(RuntimeConfig::default(), services.clone()).unwrap();
    let counter_again = probe_in(&second, "counter", "state", &[]);
    assert_eq!(defer_reason(&call(&counter_again).await), "count=4");
    // State is per plugin: another name starts from zero.
    let other = probe_in(&second, "other-counter", "state", &[]);
    assert_eq!(defer_reason(&call(&other).await), "count=1");
}

#[tokio::test]
async fn state_writes_per_call_are_limited() {
    let runtime = Runtime::new(RuntimeConfig::default(), HostServices::default()).unwrap();
    let flood = probe_in(&runtime, "flood", "state-flood", &[]);
    let reason = defer_reason(&call(&flood).await);
    let expected = format!("state-flood: {STATE_WRITES_PER_CALL} writes, then: invalid request:");
    assert!(reason.starts_with(&expected), "{reason}");
    assert!(reason.contains("state writes in one call"), "{reason}");
}

/// A state store whose `set` blocks (as a slow disk's fsync would) until the test releases
/// it, giving up after 10 s; it records whether it was released or gave up.
struct BlockingStore {
    entered: tokio::sync::Notify,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
    released: Mutex<Option<bool>>,
}

impl forewarn_runtime::KeyValueStore for BlockingStore {
    fn get(&self, _plugin: &str, _key: &str) -> Option<Vec<u8>> {
        None
    }

    fn set(
        &self,
        _plugin: &str,
        _key: &str,
        _value: &[u8],
        _budget: forewarn_runtime::DiskBudget,
    ) -> Result<u64, forewarn_runtime::KeyValueStoreError> {
        self.entered.notify_one();
        let release = self.release.lock().unwrap();
        let released = release.recv_timeout(Duration::from_secs(10)).is_ok();
        *self.released.lock().unwrap() = Some(released);
        Ok(0)
    }

    fn delete(
        &self,
        _plugin: &str,
        _key: &str,
        _budget: forewarn_runtime::DiskBudget,
    ) -> Result<u64, forewarn_runtime::KeyValueStoreError> {
        Ok(0)
    }
}

fn blocking_store() -> (Arc<BlockingStore>, std::sync::mpsc::Sender<()>) {
    let (release, receiver) = std::sync::mpsc::channel();
    let store = BlockingStore {
        entered: tokio::sync::Notify::new(),
        release: Mutex::new(receiver),
        released: Mutex::new(None),
    };
    (Arc::new(store), release)
}

// A single-threaded runtime: a state write done on the async worker would block the test.
#[tokio::test(flavor = "current_thread")]
async fn a_slow_state_write_does_not_block_the_async_workers() {
    let (store, release) = blocking_store();
    let services = HostServices {
        key_value: store.clone(),
        ..HostServices::default()
    };
    let runtime = Runtime::new(RuntimeConfig::default(), services).unwrap();
    let plugin = probe_in(&runtime, "writer", "state", &[]);
    let call = tokio::spawn(async move { call(&plugin).await });
    store.entered.notified().await;
    // Runs only if the write left this (only) worker thread free.
    release.send(()).unwrap();
    let outcome = call.await.unwrap();
    assert_eq!(defer_reason(&outcome), "count=1");
    assert_eq!(*store.released.lock().unwrap(), Some(true));
}

#[tokio::test(flavor = "current_thread")]
async fn the_budget_covers_a_state_write_that_hangs() {
    let (store, _release) = blocking_store();
    let services = HostServices {
        key_value: store.clone(),
        ..HostServices::default()
    };
    let runtime = Runtime::new(RuntimeConfig::default(), services).unwrap();
    let plugin = probe_in(&runtime, "writer", "state", &[]);
    let budget = Duration::from_millis(500);
    let outcome = call_with(&plugin, 1, budget).await;
    // The write ends as `timed-out` at the deadline; the probe reports it as a defer.
    assert!(
        outcome.elapsed < budget + CUT_OFF_SLACK,
        "the call took {:?}",
        outcome.elapsed
    );
    let answer = format!("{:?}", outcome.answer);
    assert!(
        answer.contains("timed out") || answer.contains("BudgetExceeded"),
        "{answer}"
    );
}

#[tokio::test]
async fn readiness_needs_its_grant() {
    let readiness = Arc::new(Readiness::default());
    let services = HostServices {
        readiness: readiness.clone(),
        ..HostServices::default()
    };
    let runtime = Runtime::new(RuntimeConfig::default(), services).unwrap();

    let denied = probe_in(&runtime, "lb", "ready", &[]);
    let reason = defer_reason(&call(&denied).await);
    assert!(reason.starts_with("ready: not granted:"), "{reason}");
    assert!(reason.contains("readiness = true"), "{reason}");
    assert!(readiness.is_ready());

    let granted_settings = PluginSettings {
        grants: Capabilities {
            readiness: true,
            ..Capabilities::default()
        },
        ..settings(&[("mode", "ready")])
    };
    let granted = load_ok(&runtime, "lb", probe_bytes(), granted_settings);
    assert_eq!(defer_reason(&call(&granted).await), "ready: ok");
    assert!(!readiness.is_ready());
    assert_eq!(readiness.holders(), vec!["lb".to_owned()]);
}

#[tokio::test]
async fn config_returns_the_manifest_value() {
    let greeting = probe_in(
        shared_runtime(),
        "probe-config",
        "config",
        &[("greeting", "grüß dich 👋")],
    );
    assert_eq!(defer_reason(&call(&greeting).await), "grüß dich 👋");
    assert_eq!(defer_reason(&call(&probe("config")).await), "none");
}

// ---------------------------------------------------------------------------------------
// Rejection of what is not a plugin
// ---------------------------------------------------------------------------------------

/// The load error and the inspect error for `bytes`; both must fail, with the same message.
fn rejection(bytes: &[u8]) -> String {
    let runtime = shared_runtime();
    let Some(load_error) = runtime.load("bad", bytes, PluginSettings::default()).err() else {
        panic!("loaded a plugin that should have been rejected");
    };
    let inspect_error = runtime
        .inspect("bad", bytes, &PluginSettings::default())
        .expect_err("inspect accepted a plugin that should have been rejected");
    assert_eq!(load_error, inspect_error);
    load_error.to_string()
}

#[test]
fn random_bytes_are_rejected() {
    let message = rejection(b"#!/bin/sh\necho this is not a plugin\n");
    assert!(message.starts_with("not a WebAssembly file"), "{message}");
    assert!(message.contains("magic bytes"), "{message}");
}

#[test]
fn an_empty_file_is_rejected() {
    let message = rejection(b"");
    assert!(message.contains("empty"), "{message}");
}

#[test]
fn a_core_module_is_rejected() {
    let message = rejection(b"\0asm\x01\0\0\0");
    assert!(message.contains("core WebAssembly module"), "{message}");
    assert!(message.contains("wasm32-wasip2"), "{message}");
}

#[test]
fn a_truncated_component_is_rejected() {
    let bytes = probe_bytes();
    let message = rejection(&bytes[..bytes.len() / 2]);
    assert!(
        message.starts_with("the component is not valid or could not be compiled"),
        "{message}"
    );
}

#[test]
fn a_component_of_another_world_is_rejected() {
    let runtime = shared_runtime();
    let bytes = read(OTHER_WORLD);
    let message = rejection(&bytes);
    assert!(
        message.contains("does not implement forewarn's plugin world"),
        "{message}"
    );
    assert!(
        message.contains("does not export `forewarn:plugin/handler@0.1.0`"),
        "{message}"
    );
    assert!(message.contains("it exports `run`"), "{message}");
    assert!(matches!(
        runtime
            .load("other", &bytes, PluginSettings::default())
            .err(),
        Some(LoadError::WrongWorld { .. })
    ));
}

#[test]
fn inspect_describes_a_valid_plugin() {
    let report = shared_runtime()
        .inspect("probe", probe_bytes(), &PluginSettings::default())
        .unwrap();
    assert!(
        report
            .exports
            .iter()
            .any(|name| name == "forewarn:plugin/handler@0.3.0"),
        "{report:?}"
    );
    assert!(
        report
            .imports
            .iter()
            .any(|name| name == "forewarn:plugin/host@0.3.0"),
        "{report:?}"
    );
    assert_eq!(report.size_bytes, probe_bytes().len());
    assert_eq!(report.content_hash.len(), 64);
}

// ---------------------------------------------------------------------------------------
// Compile cache
// ---------------------------------------------------------------------------------------

fn cache_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
        .collect();
    entries.sort();
    entries
}

#[tokio::test]
async fn the_compile_cache_is_used_and_survives_a_damaged_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("cache");
    let new_runtime = || {
        let config = RuntimeConfig {
            cache_dir: Some(cache_dir.clone()),
            ..RuntimeConfig::default()
        };
        Runtime::new(config, HostServices::default()).unwrap()
    };
    let noop_bytes = read(NOOP);

    let runtime = new_runtime();
    let first = load_ok(&runtime, "noop", &noop_bytes, PluginSettings::default());
    assert!(!first.loaded_from_cache());
    let entries = cache_entries(&cache_dir);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(
        entries[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(first.content_hash()),
        "{entries:?}"
    );

    // Same runtime, and a new one (a restart): both load from the cache.
    let second = load_ok(&runtime, "noop", &noop_bytes, PluginSettings::default());
    assert!(second.loaded_from_cache());
    assert_approved(&call(&second).await);
    let restarted = load_ok(
        &new_runtime(),
        "noop",
        &noop_bytes,
        PluginSettings::default(),
    );
    assert!(restarted.loaded_from_cache());
    assert_approved(&call(&restarted).await);

    // A damaged entry is discarded; the plugin compiles fresh, works, and is cached again.
    // (Entries are memory-mapped: damage one in place only once nothing maps it, or the
    // process dies of SIGBUS. The runtime itself replaces entries by rename, never in place.)
    drop((first, second, restarted, runtime));
    std::fs::write(&entries[0], b"garbage, not a compiled component").unwrap();
    let runtime = new_runtime();
    let recompiled = load_ok(&runtime, "noop", &noop_bytes, PluginSettings::default());
    assert!(!recompiled.loaded_from_cache());
    assert_approved(&call(&recompiled).await);
    let again = load_ok(&runtime, "noop", &noop_bytes, PluginSettings::default());
    assert!(again.loaded_from_cache());
    assert_eq!(cache_entries(&cache_dir), entries);
}

/// The cache entry of the component whose content hash is `hash`.
fn entry_of(dir: &Path, hash: &str) -> PathBuf {
    cache_entries(dir)
        .into_iter()
        .find(|path| {
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(hash)
        })
        .unwrap_or_else(|| panic!("no cache entry for {hash} in {}", dir.display()))
}

#[tokio::test]
async fn a_cache_entry_swapped_for_other_code_is_recompiled_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        cache_dir: Some(dir.path().join("cache")),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config.clone(), HostServices::default()).unwrap();
    let noop = load_ok(&runtime, "noop", &read(NOOP), PluginSettings::default());
    let probe = load_ok(
        &runtime,
        "probe",
        probe_bytes(),
        settings(&[("mode", "defer")]),
    );
    let cache_dir = dir.path().join("cache");
    let noop_entry = entry_of(&cache_dir, noop.content_hash());
    let probe_entry = entry_of(&cache_dir, probe.content_hash());
    drop((noop, probe, runtime));
    // Whoever can write the cache puts other native code (valid for this engine) under
    // the probe's name: the noop's, which approves where the probe defers.
    std::fs::copy(&noop_entry, &probe_entry).unwrap();
    let runtime = Runtime::new(config, HostServices::default()).unwrap();
    let probe = load_ok(
        &runtime,
        "probe",
        probe_bytes(),
        settings(&[("mode", "defer")]),
    );
    assert!(
        !probe.loaded_from_cache(),
        "the swapped entry was loaded from the cache"
    );
    assert_eq!(defer_reason(&call(&probe).await), "not yet");
}

#[test]
fn stale_temporary_cache_files_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        cache_dir: Some(dir.path().join("cache")),
        ..RuntimeConfig::default()
    };
    drop(Runtime::new(config.clone(), HostServices::default()).unwrap());
    let stale = dir.path().join("cache/0123-4567.cwasm.tmp");
    std::fs::write(&stale, b"half written").unwrap();
    drop(Runtime::new(config, HostServices::default()).unwrap());
    assert!(!stale.exists(), "{} is still there", stale.display());
}

// not on Windows: sets a Unix group-write bit; Wine models only the Everyone entry of a DACL (docs/windows.md)
#[cfg(unix)]
#[test]
fn a_group_writable_cache_dir_is_refused_naming_the_path_and_the_fix() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("cache");
    std::fs::create_dir(&cache_dir).unwrap();
    std::fs::set_permissions(&cache_dir, std::fs::Permissions::from_mode(0o775)).unwrap();
    let config = RuntimeConfig {
        cache_dir: Some(cache_dir.clone()),
        ..RuntimeConfig::default()
    };
    let Err(error) = Runtime::new(config, HostServices::default()) else {
        panic!("a group-writable cache directory was accepted");
    };
    let message = error.to_string();
    assert!(
        message.contains(&cache_dir.display().to_string()),
        "{message}"
    );
    assert!(message.contains("chmod 700"), "{message}");
}

#[tokio::test]
async fn cache_entries_of_plugins_no_longer_present_are_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        cache_dir: Some(dir.path().join("cache")),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config, HostServices::default()).unwrap();
    let noop = load_ok(&runtime, "noop", &read(NOOP), PluginSettings::default());
    let probe = load_ok(&runtime, "probe", probe_bytes(), PluginSettings::default());
    let keep = std::collections::BTreeSet::from([probe.content_hash().to_owned()]);
    assert_eq!(runtime.evict_cached_except(&keep), 1);
    let cache_dir = dir.path().join("cache");
    assert_eq!(
        cache_entries(&cache_dir),
        vec![entry_of(&cache_dir, probe.content_hash())]
    );
    drop(noop);
}

#[tokio::test]
async fn cache_entries_compiled_under_another_engine_configuration_are_evicted() {
    // An upgrade that changes the engine's configuration leaves entries it cannot load,
    // for plugins still present: they go too, so old compiled forms do not pile up.
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = dir.path().join("cache");
    let config = RuntimeConfig {
        cache_dir: Some(cache_dir.clone()),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config, HostServices::default()).unwrap();
    let probe = load_ok(&runtime, "probe", probe_bytes(), PluginSettings::default());
    let current = entry_of(&cache_dir, probe.content_hash());
    let earlier = cache_dir.join(format!("{}-0123456789abcdef.cwasm", probe.content_hash()));
    std::fs::copy(&current, &earlier).unwrap();
    let keep = std::collections::BTreeSet::from([probe.content_hash().to_owned()]);
    assert_eq!(runtime.evict_cached_except(&keep), 1);
    assert_eq!(cache_entries(&cache_dir), vec![current]);
}

#[tokio::test]
async fn a_cache_entry_damaged_in_place_does_not_harm_a_plugin_loaded_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config, HostServices::default()).unwrap();
    let noop_bytes = read(NOOP);
    load_ok(&runtime, "noop", &noop_bytes, PluginSettings::default());
    let cached = load_ok(&runtime, "noop", &noop_bytes, PluginSettings::default());
    assert!(cached.loaded_from_cache());
    // Truncate and rewrite the entry in place, as `cp` over it or a restore would.
    let entries = cache_entries(dir.path());
    assert_eq!(entries.len(), 1, "{entries:?}");
    std::fs::write(&entries[0], b"x").unwrap();
    for attempt in 1..=3 {
        assert_approved(&call_with(&cached, attempt, GENEROUS).await);
    }
}

#[test]
fn components_with_different_bytes_get_different_cache_entries() {
    let dir = tempfile::tempdir().unwrap();
    let config = RuntimeConfig {
        cache_dir: Some(dir.path().to_path_buf()),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::new(config, HostServices::default()).unwrap();
    let noop = load_ok(&runtime, "noop", &read(NOOP), PluginSettings::default());
    let probe = load_ok(&runtime, "probe", probe_bytes(), PluginSettings::default());
    assert_ne!(noop.content_hash(), probe.content_hash());
    assert_eq!(cache_entries(dir.path()).len(), 2);
}

// ---------------------------------------------------------------------------------------
// Network rules for `http-send` (docs/operations.md, "Network rules for plugins")
// ---------------------------------------------------------------------------------------

/// Resolves names from a fixed table, so a name can point at IMDS without /etc/hosts.
struct TableResolver(BTreeMap<String, std::net::IpAddr>);

impl forewarn_runtime::network::Resolver for TableResolver {
    fn lookup(&self, host: &str, port: u16) -> forewarn_runtime::network::ResolveFuture {
        let answer = self
            .0
            .get(host)
            .map(|ip| vec![std::net::SocketAddr::new(*ip, port)])
            .ok_or_else(|| std::io::Error::other(format!("no such host {host}")));
        Box::pin(async move { answer })
    }
}

/// A runtime whose `http-send` resolves `evil.test` to IMDS and `backend.test` to loopback.
fn runtime_with_test_dns() -> Runtime {
    let table = [
        ("evil.test", "169.254.169.254"),
        ("backend.test", "127.0.0.1"),
    ]
    .iter()
    .map(|(name, ip)| ((*name).to_owned(), ip.parse().unwrap()))
    .collect();
    let http =
        forewarn_runtime::HttpClient::default().with_resolver(Arc::new(TableResolver(table)));
    let services = HostServices {
        http,
        ..HostServices::default()
    };
    Runtime::new(RuntimeConfig::default(), services).unwrap()
}

/// The probe in "http" mode, granted exactly `grant`.
fn http_probe(runtime: &Runtime, grant: &str, extra: &[(&str, &str)]) -> Plugin {
    let mut pairs = vec![("mode", "http")];
    pairs.extend_from_slice(extra);
    let settings = PluginSettings {
        grants: Capabilities {
            http: vec![grant.to_owned()],
            ..Capabilities::default()
        },
        ..settings(&pairs)
    };
    load_ok(runtime, "probe-http", probe_bytes(), settings)
}

#[tokio::test]
async fn a_plugin_cannot_post_start_requests_to_imds_through_an_allowed_name() {
    let runtime = runtime_with_test_dns();
    let url = "http://evil.test/metadata/scheduledevents?api-version=2020-07-01";
    let plugin = http_probe(
        &runtime,
        "evil.test:80",
        &[
            ("url", url),
            ("method", "POST"),
            ("headers", "Metadata: true"),
        ],
    );
    let reason = defer_reason(&call(&plugin).await);
    assert!(reason.starts_with("http: not granted:"), "{reason}");
    assert!(reason.contains("169.254.169.254:80"), "{reason}");
    assert!(reason.contains("plugins may never reach it"), "{reason}");
}

#[tokio::test]
async fn a_plugin_set_host_header_does_not_reach_the_server() {
    use std::io::{BufRead, BufReader};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(socket.try_clone().unwrap());
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line.trim().is_empty() {
                break;
            }
            head.push(line.trim().to_ascii_lowercase());
        }
        let mut socket = socket;
        socket
            .write_all(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
            .unwrap();
        head
    });
    let runtime = runtime_with_test_dns();
    let url = format!("http://backend.test:{port}/drain");
    let plugin = http_probe(
        &runtime,
        &format!("backend.test:{port}"),
        &[
            ("url", &url),
            ("headers", "Host: 169.254.169.254|Metadata: true"),
        ],
    );
    assert_eq!(defer_reason(&call(&plugin).await), "http: status 204");
    let head = server.join().unwrap();
    let hosts: Vec<&String> = head
        .iter()
        .filter(|line| line.starts_with("host:"))
        .collect();
    assert_eq!(hosts, [&format!("host: backend.test:{port}")], "{head:?}");
    assert!(
        !head.iter().any(|line| line.starts_with("metadata:")),
        "{head:?}"
    );
}

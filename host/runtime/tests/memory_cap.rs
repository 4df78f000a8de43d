//! The memory cap holds for a whole plugin call, not per linear memory: a hostile component
//! with many memories, each grown to just under the cap, fails and the host's RSS stays bounded.
//!
//! Its own test binary, so the process's peak RSS is this test's alone. The component is
//! generated (a Rust guest cannot have several memories): forewarn-test-support's
//! `generated::ManyMemories`.

use std::time::Duration;

use forewarn_runtime::wit::latest::Phase;
use forewarn_runtime::{CallFailure, HostServices, Plugin, PluginSettings, Runtime};
use forewarn_test_support::fixtures::{sample_context, sample_event};
use forewarn_test_support::generated::{ManyMemories, WASM_PAGE};

const MIB: u64 = 1024 * 1024;
/// The cap the hostile plugin runs under.
const CAP: u64 = 16 * MIB;
/// How many extra memories the hostile component has, each grown to just under `CAP`.
const EXTRA_MEMORIES: u32 = 8;
/// Pages each extra memory grows by: one page short of the cap.
const PAGES_PER_MEMORY: u64 = CAP / WASM_PAGE - 1;

/// `EXTRA_MEMORIES` besides memory 0, each grown by `PAGES_PER_MEMORY` and written to on
/// every 4 KiB page by `on-event` (a refused growth traps).
fn many_memories_component() -> Vec<u8> {
    ManyMemories {
        extra_memories: EXTRA_MEMORIES,
        initial_pages: 0,
        grow_pages: u32::try_from(PAGES_PER_MEMORY).expect("few pages"),
        touch_on_start: false,
    }
    .component()
}

/// A field of /proc/self/status in KiB, as bytes.
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("Linux /proc");
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("unreadable line {line:?}"));
    kib * 1024
}

/// The hostile component, loaded under [`CAP`] into a runtime of its own.
fn load_many_memories() -> Plugin {
    let runtime = Runtime::new(Default::default(), HostServices::default()).unwrap();
    let settings = PluginSettings {
        memory_limit_bytes: CAP,
        ..PluginSettings::default()
    };
    runtime
        .load("many-memories", &many_memories_component(), settings)
        .unwrap_or_else(|error| panic!("loading the hostile component failed: {error}"))
}

#[tokio::test]
async fn many_memories_share_one_cap_and_rss_stays_bounded() {
    let plugin = load_many_memories();
    // Start the peak RSS afresh (writing 5 to clear_refs resets VmHWM), after compiling.
    std::fs::write("/proc/self/clear_refs", "5").expect("can reset the peak RSS");
    let baseline = status_bytes("VmRSS:");
    let context = sample_context();
    let outcome = plugin
        .call(
            &sample_event(),
            Phase::Prepare,
            &context,
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(
        outcome.answer,
        Err(CallFailure::MemoryExceeded { limit_bytes: CAP }),
        "{} memories of {} MiB each, under a cap of {} MiB",
        EXTRA_MEMORIES,
        PAGES_PER_MEMORY * WASM_PAGE / MIB,
        CAP / MIB
    );
    let peak = status_bytes("VmHWM:");
    let grown = peak.saturating_sub(baseline);
    // The figure docs/operations.md quotes (`--nocapture` shows it).
    eprintln!(
        "{EXTRA_MEMORIES} memories of {} MiB under a {} MiB cap: peak RSS grew by {} KiB",
        PAGES_PER_MEMORY * WASM_PAGE / MIB,
        CAP / MIB,
        grown / 1024
    );
    assert!(
        grown <= 2 * CAP,
        "the call raised the peak RSS by {} MiB; the cap is {} MiB",
        grown / MIB,
        CAP / MIB
    );
}

#[tokio::test]
async fn a_component_with_many_memories_holds_no_pool_slots_between_calls() {
    // An instance made ahead holds its memories' pool slots until its call: a component
    // with more than a few memories is made at each call instead, as before.
    let plugin = load_many_memories();
    plugin.prepare_next().await;
    assert!(
        !plugin.has_ready_instance().await,
        "an instance with {} memories was kept ready between calls",
        EXTRA_MEMORIES + 1
    );
}

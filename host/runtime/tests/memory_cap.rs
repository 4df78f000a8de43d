//! The memory cap holds for a whole plugin call, not per linear memory: a hostile component
//! with many memories, each grown to just under the cap, fails and the host's RSS stays bounded.
//!
//! Its own test binary, so the process's peak RSS is this test's alone. The component is
//! generated here (a Rust guest cannot have several memories): a core module built with
//! wasm-encoder, wrapped into a component of forewarn's world by wit-component.

mod common;

use std::time::Duration;

use forewarn_runtime::wit::latest::Phase;
use forewarn_runtime::{CallFailure, HostServices, Plugin, PluginSettings, Runtime};
use forewarn_test_support::fixtures::{sample_context, sample_event};
use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection,
    GlobalSection, GlobalType, MemArg, MemorySection, MemoryType, Module, TypeSection, ValType,
};

const MIB: u64 = 1024 * 1024;
const WASM_PAGE: u64 = 64 * 1024;
/// The cap the hostile plugin runs under.
const CAP: u64 = 16 * MIB;
/// How many extra memories the hostile component has, each grown to just under `CAP`.
const EXTRA_MEMORIES: u32 = 8;
/// Pages each extra memory grows by: one page short of the cap.
const PAGES_PER_MEMORY: u64 = CAP / WASM_PAGE - 1;
/// Where the (zeroed) answer lies in memory 0: tag 0 of `decision` is `approve`.
const ANSWER_ADDRESS: i32 = 16;
/// Where `cabi_realloc` starts handing out memory 0.
const HEAP_START: i32 = 1024;
/// The export name of `on-event` in the core module, as wit-component expects it.
const ON_EVENT: &str = "forewarn:plugin/handler@0.2.0#on-event";
/// The export name of `on-start`, which does nothing here.
const ON_START: &str = "forewarn:plugin/handler@0.2.0#on-start";

/// A core module with memory 0 (exported, for the canonical ABI) and `EXTRA_MEMORIES` more.
/// `on-event` grows each extra memory by `PAGES_PER_MEMORY`, writes to every 4 KiB page of
/// it (so the pages are really resident), traps if a growth is refused, and approves.
fn many_memories_core_module() -> Vec<u8> {
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32; 4], [ValType::I32]); // 0: cabi_realloc
    types.ty().function([ValType::I32], [ValType::I32]); // 1: on-event
    // 2: on-start(vm-name ptr, len, priority, eviction-policy tag, value, first-run, deadline)
    let i32 = ValType::I32;
    types
        .ty()
        .function([i32, i32, i32, i32, i32, i32, ValType::I64], []);
    let mut functions = FunctionSection::new();
    functions.function(0);
    functions.function(1);
    functions.function(2);
    let mut memories = MemorySection::new();
    for index in 0..=EXTRA_MEMORIES {
        memories.memory(MemoryType {
            minimum: if index == 0 { 2 } else { 0 },
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
    }
    let mut globals = GlobalSection::new();
    let heap = GlobalType {
        val_type: ValType::I32,
        mutable: true,
        shared: false,
    };
    globals.global(heap, &ConstExpr::i32_const(HEAP_START));
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("cabi_realloc", ExportKind::Func, 0);
    exports.export(ON_EVENT, ExportKind::Func, 1);
    exports.export(ON_START, ExportKind::Func, 2);
    let mut code = CodeSection::new();
    code.function(&bump_realloc());
    code.function(&grow_every_memory());
    let mut on_start = Function::new([]);
    on_start.instructions().end();
    code.function(&on_start);
    let mut module = Module::new();
    module
        .section(&types)
        .section(&functions)
        .section(&memories)
        .section(&globals)
        .section(&exports)
        .section(&code);
    module.finish()
}

/// `cabi_realloc(old, old_size, align, new_size)`: a bump allocator over memory 0.
fn bump_realloc() -> Function {
    let mut function = Function::new([(1, ValType::I32)]);
    function
        .instructions()
        // aligned = (heap + align - 1) & -align
        .global_get(0)
        .local_get(2)
        .i32_add()
        .i32_const(1)
        .i32_sub()
        .i32_const(0)
        .local_get(2)
        .i32_sub()
        .i32_and()
        .local_tee(4)
        .local_get(3)
        .i32_add()
        .global_set(0)
        .local_get(4)
        .end();
    function
}

/// `on-event(args) -> answer`: grows and touches every extra memory, then approves.
fn grow_every_memory() -> Function {
    let mut function = Function::new([(1, ValType::I32)]);
    let bytes = i32::try_from(PAGES_PER_MEMORY * WASM_PAGE).expect("fits a 32-bit memory");
    let pages = i32::try_from(PAGES_PER_MEMORY).expect("few pages");
    let mut sink = function.instructions();
    for memory in 1..=EXTRA_MEMORIES {
        let store = MemArg {
            offset: 0,
            align: 0,
            memory_index: memory,
        };
        sink.i32_const(pages)
            .memory_grow(memory)
            .i32_const(-1)
            .i32_eq()
            .if_(BlockType::Empty)
            .unreachable()
            .end()
            .i32_const(0)
            .local_set(1)
            .loop_(BlockType::Empty)
            .local_get(1)
            .i32_const(1)
            .i32_store8(store)
            .local_get(1)
            .i32_const(4096)
            .i32_add()
            .local_tee(1)
            .i32_const(bytes)
            .i32_lt_u()
            .br_if(0)
            .end();
    }
    sink.i32_const(ANSWER_ADDRESS).end();
    function
}

/// The core module wrapped into a component of forewarn's `event-handler` world.
fn many_memories_component() -> Vec<u8> {
    let wit = include_str!("../../../wit/forewarn.wit");
    common::wrap_core_module(wit, "event-handler", many_memories_core_module())
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

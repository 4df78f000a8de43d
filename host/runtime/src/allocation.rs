//! How the engine allocates each call's fresh instance: from a pool of pre-reserved slots
//! (the default: no mmap/munmap per call) or on demand (the fallback, and the baseline).

use wasmtime::{Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Where a call's instance (its memories, tables, fiber stack) comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InstanceAllocation {
    /// Reused slots, reserved for each plugin version when it loads and unmapped when it is
    /// dropped. A memory's initial image is copied into its slot when the instance is made
    /// (ahead of the call). After each call, up to 32 MiB of a memory (less when the
    /// plugin's memory cap shared among its memories is less) stay mapped and are reset in
    /// place (the pages the call dirtied, found with `PAGEMAP_SCAN` where the kernel has it
    /// and this process cannot swap; otherwise the first bytes, with `memset`) and the rest
    /// is given back with `madvise`.
    #[default]
    Pooling,
    /// Fresh mappings per instance, released after the call.
    OnDemand,
}

/// Stores one plugin version's pool serves at once. In the daemon a plugin has one call in
/// flight, the instance made ahead for its next call and perhaps a used one still being
/// dropped; calls made back to back without yielding (tests, benchmarks) leave more used
/// instances waiting to be dropped. Each plugin version has a pool of its own
/// (plugin_engine.rs), unmapped when the version is dropped.
pub(crate) const POOL_STORES: u32 = 32;
/// Component instances and fiber stacks: one per store. Core instances are only counted
/// (each store's limiter allows `MAX_INSTANCES`), so the pool never refuses one the
/// limiter allows.
const POOL_COMPONENT_INSTANCES: u32 = POOL_STORES;
const POOL_CORE_INSTANCES: u32 = POOL_STORES * crate::limits::MAX_INSTANCES as u32;
/// Linear memories and tables: each slot reserves address space (4 GiB per memory), so
/// the pool holds four stores' worth of what a call may create (`MAX_MEMORIES`,
/// `MAX_TABLES`): 21 stores of a plugin with three memories, four of one with sixteen.
const POOL_MEMORIES: u32 = 4 * crate::limits::MAX_MEMORIES as u32;
const POOL_TABLES: u32 = 4 * crate::limits::MAX_TABLES as u32;
/// Per slot: any 32-bit memory (the manifest's `memory` cap is enforced by the limiter).
const POOL_MAX_MEMORY_BYTES: usize = 1 << 32;
/// Largest function table of one module: CPython's is about 10 000 entries.
const POOL_TABLE_ELEMENTS: usize = 100_000;
/// Per core module: multi-memory and several tables are rare but legal (a component with
/// nine memories must load, and meet the one shared memory cap at run time).
const POOL_MEMORIES_PER_MODULE: u32 = 64;
const POOL_TABLES_PER_MODULE: u32 = 64;
/// Every slot of a plugin's own pool may stay warm: it keeps the plugin's pages for its
/// next call, within [`memory_keep_resident`].
const POOL_WARM_SLOTS: u32 = POOL_MEMORIES;
/// Most bytes of one memory left mapped between calls and reset in place (only the pages a
/// call dirtied, where the kernel has PAGEMAP_SCAN) instead of being released and faulted
/// in again by the next call. 32 MiB holds the whole image of a Python (12 MiB) or
/// JavaScript (9 MiB) component and the heap its call touches, so their calls fault in no
/// page; a Rust or C plugin dirties a few hundred KiB of it.
pub(crate) const POOL_KEEP_RESIDENT_MEMORY: usize = 32 << 20;
const POOL_KEEP_RESIDENT_TABLE: usize = 64 << 10;
const POOL_KEEP_RESIDENT_STACK: usize = 128 << 10;
/// The host page size the kept bytes are rounded down to.
const PAGE: usize = 4096;

/// Bytes each of a plugin's memories keeps resident between calls: at most
/// [`POOL_KEEP_RESIDENT_MEMORY`], and its memory cap shared among the `memories` its
/// component defines, so that what the plugin keeps between calls stays within its cap.
pub(crate) fn memory_keep_resident(memory_limit_bytes: u64, memories: usize) -> usize {
    let cap = usize::try_from(memory_limit_bytes).unwrap_or(usize::MAX);
    let share = cap / memories.max(1);
    (share.min(POOL_KEEP_RESIDENT_MEMORY) / PAGE) * PAGE
}

impl InstanceAllocation {
    /// The strategy as `forewarn compile-plugin --allocation` spells it.
    pub fn as_arg(self) -> &'static str {
        match self {
            InstanceAllocation::Pooling => "pooling",
            InstanceAllocation::OnDemand => "on-demand",
        }
    }

    /// The strategy `forewarn compile-plugin --allocation ARG` names.
    pub fn from_arg(arg: &str) -> Option<InstanceAllocation> {
        match arg {
            "pooling" => Some(InstanceAllocation::Pooling),
            "on-demand" => Some(InstanceAllocation::OnDemand),
            _ => None,
        }
    }

    /// Applies the strategy to an engine configuration; each memory of the pool keeps at
    /// most `keep_resident` bytes between calls.
    pub(crate) fn apply(self, config: &mut Config, keep_resident: usize) {
        if self == InstanceAllocation::OnDemand {
            config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
            return;
        }
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(POOL_COMPONENT_INSTANCES)
            .total_core_instances(POOL_CORE_INSTANCES)
            .total_memories(POOL_MEMORIES)
            .total_tables(POOL_TABLES)
            .total_stacks(POOL_COMPONENT_INSTANCES)
            .max_memory_size(POOL_MAX_MEMORY_BYTES)
            .table_elements(POOL_TABLE_ELEMENTS)
            .max_memories_per_module(POOL_MEMORIES_PER_MODULE)
            .max_tables_per_module(POOL_TABLES_PER_MODULE)
            .max_unused_warm_slots(POOL_WARM_SLOTS)
            .linear_memory_keep_resident(keep_resident)
            .table_keep_resident(POOL_KEEP_RESIDENT_TABLE)
            .async_stack_keep_resident(POOL_KEEP_RESIDENT_STACK)
            .pagemap_scan(if crate::swap::pages_cannot_be_swapped_out() {
                Enabled::Auto
            } else {
                Enabled::No
            });
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // A copy-on-write image leaves every page the call touches to be faulted in during
        // the call (139 faults, about 0.4 ms, for a Python plugin). Copied instead, the
        // image is written while the instance is made ahead, into pages the slot keeps
        // mapped, and the call faults in none (BENCHMARKS.md, "Fresh instance + call").
        config.memory_init_cow(false);
    }
}

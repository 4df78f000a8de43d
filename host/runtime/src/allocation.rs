//! How the engine allocates each call's fresh instance: from a pool of pre-reserved slots
//! (the default: no mmap/munmap per call) or on demand (the fallback, and the baseline).

use wasmtime::{Config, Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Where a call's instance (its memories, tables, fiber stack) comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InstanceAllocation {
    /// Reused slots reserved when the engine starts. A memory's initial image is copied
    /// into its slot when the instance is made (ahead of the call). After each call, up to
    /// 32 MiB of a memory stay mapped and are reset in place (the pages the call dirtied,
    /// found with `PAGEMAP_SCAN` where the kernel has it and this process cannot swap;
    /// otherwise the first 32 MiB, with `memset`) and the rest is given back with `madvise`.
    #[default]
    Pooling,
    /// Fresh mappings per instance, released after the call.
    OnDemand,
}

/// Instances the pool holds at once: every plugin's call in flight, each plugin holding at
/// most one. A Python or JavaScript component is about 10–20 core instances.
pub(crate) const POOL_COMPONENT_INSTANCES: u32 = 1000;
const POOL_CORE_INSTANCES: u32 = 10_000;
/// Linear memories and tables defined by the instances above (imported ones are shared).
const POOL_MEMORIES: u32 = 1000;
const POOL_TABLES: u32 = 2000;
/// Per slot: any 32-bit memory (the manifest's `memory` cap is enforced by the limiter).
const POOL_MAX_MEMORY_BYTES: usize = 1 << 32;
/// Largest function table of one module: CPython's is about 10 000 entries.
const POOL_TABLE_ELEMENTS: usize = 100_000;
/// Per core module: multi-memory and several tables are rare but legal (a component with
/// nine memories must load, and meet the one shared memory cap at run time).
const POOL_MEMORIES_PER_MODULE: u32 = 64;
const POOL_TABLES_PER_MODULE: u32 = 64;
/// Slots that keep a module's image mapped after its call, ready for its next call.
const POOL_WARM_SLOTS: u32 = 100;
/// Bytes of each memory, table and fiber stack left mapped between calls and reset in
/// place (only the pages a call dirtied, where the kernel has PAGEMAP_SCAN) instead of
/// being released and faulted in again by the next call. 32 MiB holds the whole image of
/// a Python (12 MiB) or JavaScript (9 MiB) component and the heap its call touches, so
/// their calls fault in no page; a Rust or C plugin dirties a few hundred KiB of it.
const POOL_KEEP_RESIDENT_MEMORY: usize = 32 << 20;
const POOL_KEEP_RESIDENT_TABLE: usize = 64 << 10;
const POOL_KEEP_RESIDENT_STACK: usize = 128 << 10;

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

    /// Applies the strategy to an engine configuration.
    pub(crate) fn apply(self, config: &mut Config) {
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
            .linear_memory_keep_resident(POOL_KEEP_RESIDENT_MEMORY)
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

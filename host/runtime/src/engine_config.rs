//! The wasmtime engine's configuration, shared by the daemon's runtime and by the child that
//! compiles plugins for it (`forewarn compile-plugin`): both must agree, or wasmtime refuses
//! the compiled form.

use wasmtime::{Config, InstanceAllocationStrategy};

use crate::allocation::{InstanceAllocation, POOL_KEEP_RESIDENT_MEMORY};

/// The engine's configuration, each memory keeping at most `keep_resident` bytes between
/// calls; `forewarn compile-plugin` compiles with the same one (what is kept resident does
/// not change the compiled code).
pub(crate) fn engine_config(allocation: InstanceAllocation, keep_resident: usize) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    allocation.apply(&mut config, keep_resident);
    config
}

/// The configuration `forewarn compile-plugin` compiles with: the runtime's, except that
/// instances are allocated on demand. Compiling makes no instance, and the pool would
/// reserve terabytes of address space at once, which the child's address-space limit
/// refuses. What wasmtime checks before it loads a compiled form (tunables, features, code
/// generation flags) does not depend on the allocation strategy, so the runtime's pooling
/// engine loads what this one compiles.
pub(crate) fn compiler_config(allocation: InstanceAllocation) -> Config {
    let mut config = engine_config(allocation, POOL_KEEP_RESIDENT_MEMORY);
    config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
    config
}

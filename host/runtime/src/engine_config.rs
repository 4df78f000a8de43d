//! The wasmtime engine's configuration, shared by the daemon's runtime and by the child that
//! compiles plugins for it (`forewarn compile-plugin`): both must agree, or wasmtime refuses
//! the compiled form.

use wasmtime::{Config, InstanceAllocationStrategy};

use crate::allocation::InstanceAllocation;

/// The engine's configuration; `forewarn compile-plugin` compiles with the same one.
pub(crate) fn engine_config(allocation: InstanceAllocation) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    allocation.apply(&mut config);
    config
}

/// The configuration `forewarn compile-plugin` compiles with: the runtime's, except that
/// instances are allocated on demand. Compiling makes no instance, and the pool would
/// reserve terabytes of address space at once, which the child's address-space limit
/// refuses. What wasmtime checks before it loads a compiled form (tunables, features, code
/// generation flags) does not depend on the allocation strategy, so the runtime's pooling
/// engine loads what this one compiles.
pub(crate) fn compiler_config(allocation: InstanceAllocation) -> Config {
    let mut config = engine_config(allocation);
    config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
    config
}

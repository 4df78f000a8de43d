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
/// generation flags, whether memories start as copy-on-write images) stays the pooling
/// engine's, so the runtime's pooling engine loads what this one compiles.
pub(crate) fn compiler_config(allocation: InstanceAllocation) -> Config {
    let mut config = engine_config(allocation, POOL_KEEP_RESIDENT_MEMORY);
    config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
    config
}

/// The engine a plugin falls back to where its pool's address space is refused (a
/// `ulimit -v`, systemd's `LimitAS=`): the compiler's configuration, instances on demand.
/// Not `engine_config(OnDemand, ..)`: that one starts memories as copy-on-write images, so
/// it would refuse every form the compiler child made for the pooling engine, and no plugin
/// would load.
pub(crate) fn pool_refused_config(allocation: InstanceAllocation) -> Config {
    compiler_config(allocation)
}

#[cfg(test)]
mod tests {
    use wasmtime::Engine;
    use wasmtime::component::Component;

    use super::*;

    #[test]
    fn the_engine_a_refused_pool_falls_back_to_loads_what_the_compiler_child_compiled() {
        let compiler = Engine::new(&compiler_config(InstanceAllocation::Pooling))
            .expect("the compiler's engine");
        // The no-op test guest: a real plugin component, with a memory and data in it.
        let component = std::fs::read(forewarn_test_support::guests::NOOP).expect("the guest");
        let compiled = compiler
            .precompile_component(&component)
            .expect("the component compiles");
        let fallback = Engine::new(&pool_refused_config(InstanceAllocation::Pooling))
            .expect("the fallback engine");
        // SAFETY: the bytes were just made by `precompile_component` in this process.
        if let Err(error) = unsafe { Component::deserialize(&fallback, &compiled) } {
            panic!("the fallback engine refused the compiled form: {error:#}");
        }
    }
}

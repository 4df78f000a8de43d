//! The wasmtime engine's configuration, shared by the daemon's runtime and by the child that
//! compiles plugins for it (`forewarn compile-plugin`): both must agree, or wasmtime refuses
//! the compiled form.

use wasmtime::Config;

use crate::allocation::InstanceAllocation;

/// The engine's configuration; `forewarn compile-plugin` compiles with the same one.
pub(crate) fn engine_config(allocation: InstanceAllocation) -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    allocation.apply(&mut config);
    config
}

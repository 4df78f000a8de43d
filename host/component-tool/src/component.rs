//! Component creation: `wasm-tools component new` as a library call.
//! The WASI preview-1 reactor adapter (from wasmtime 48) is offered to the encoder.
use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};
use wit_component::ComponentEncoder;

/// Reads the core module at `module`, encodes it as a component and writes it to `output`.
pub fn write_component(module: &Path, output: &Path) -> Result<()> {
    let core = fs::read(module)
        .with_context(|| format!("cannot read the core module {}", module.display()))?;
    let component = encode(&core).with_context(|| {
        format!(
            "{} is not a plugin module: was it linked with the generated \
             *_component_type.o and built with --target=wasm32-wasi -mexec-model=reactor?",
            module.display()
        )
    })?;
    fs::write(output, component).with_context(|| format!("cannot write {}", output.display()))
}

/// Encodes a core module (with its embedded component type) as a validated component.
pub fn encode(core: &[u8]) -> Result<Vec<u8>> {
    ComponentEncoder::default()
        .validate(true)
        .module(core)?
        .adapter(
            WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .encode()
}

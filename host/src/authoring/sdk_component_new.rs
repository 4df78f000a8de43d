//! `forewarn sdk component-new CORE.wasm -o PLUGIN.wasm`: wraps the core module clang built
//! into a component — the last step of a C plugin's build (the C SDK's forewarn-sdk.mk runs it),
//! which clang and wasi-libc cannot do themselves. What `wasm-tools component new` does, with
//! the WASI preview-1 reactor adapter of this forewarn's wasmtime.

use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `forewarn sdk component-new`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The core module (clang's output, linked with the SDK's event_handler_component_type.o).
    pub module: PathBuf,
    /// Where to write the component.
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Writes the component, or fails naming what is wrong with the module.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    forewarn_component_tool::component::write_component(&args.module, &args.output)?;
    Ok(ExitCode::SUCCESS)
}

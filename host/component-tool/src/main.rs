//! `forewarn-component-tool`: the two build steps a C plugin needs, without installing
//! `wit-bindgen-cli` or `wasm-tools`: generate C bindings, and turn a core module into a component.
use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};
use forewarn_component_tool::{bindings, component};

/// Builds forewarn plugins written in C (see sdk/c/README.md).
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Writes the C bindings of a WIT world (NAME.h, NAME.c, NAME_component_type.o) into a folder.
    CBindings {
        /// The WIT file or folder (forewarn's contract is wit/forewarn.wit).
        #[arg(long)]
        wit: PathBuf,
        /// The world to generate bindings for.
        #[arg(long, default_value = "event-handler")]
        world: String,
        /// Where to write the files (created if missing).
        #[arg(long)]
        out_dir: PathBuf,
    },
    /// Wraps a core wasm module built by clang into a component. The WASI preview-1 adapter
    /// is attached when the module imports WASI (libc I/O).
    New {
        /// The core module (clang's output, linked with NAME_component_type.o).
        module: PathBuf,
        /// Where to write the component.
        #[arg(short, long)]
        output: PathBuf,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::CBindings {
            wit,
            world,
            out_dir,
        } => bindings::write_c_bindings(&wit, &world, &out_dir),
        Command::New { module, output } => component::write_component(&module, &output),
    }
}

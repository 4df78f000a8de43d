//! The runtime's errors: why the runtime could not start, and why a component could not be
//! loaded — each message names the problem and what to do about it.

use std::path::PathBuf;

/// The runtime itself could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("could not set up the WebAssembly engine: {0}")]
    Engine(String),
    #[error("could not use the compile cache directory {}: {source}", path.display())]
    CacheDir {
        path: PathBuf,
        source: crate::trust::TrustError,
    },
    #[error("could not start the epoch ticker thread: {0}")]
    Ticker(std::io::Error),
}

impl RuntimeError {
    pub(crate) fn engine(error: wasmtime::Error) -> RuntimeError {
        RuntimeError::Engine(format!("{error:#}"))
    }
}

/// A component could not be loaded as a forewarn plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("not a WebAssembly file: {details}")]
    NotWasm { details: String },
    #[error(
        "this is a core WebAssembly module, not a component. Build the plugin for the \
         `wasm32-wasip2` target (`cargo build --target wasm32-wasip2 --release`), or wrap a \
         core module with `wasm-tools component new`"
    )]
    CoreModule,
    #[error("the component is not valid or could not be compiled: {message}")]
    Compile { message: String },
    #[error(
        "the component does not implement forewarn's plugin world `forewarn:plugin/event-handler@0.1.0`: \
         {details}. Build it against wit/forewarn.wit (the Rust SDK forewarn-sdk does this for you)"
    )]
    WrongWorld { details: String },
    #[error(
        "the component imports {import}, which forewarn does not provide. Plugins may import \
         only `forewarn:plugin/host@0.1.0` and WASI 0.2 interfaces (wasi:cli, wasi:clocks, \
         wasi:random, wasi:io, wasi:filesystem, wasi:sockets — all sandboxed). Details: {details}"
    )]
    UnknownImport { import: String, details: String },
    #[error(
        "the plugin was built against forewarn:plugin@{found}, which this forewarn does not \
         support; it supports {supported}. Rebuild the plugin with a forewarn-sdk for one of \
         those, or upgrade forewarn"
    )]
    UnsupportedVersion { found: String, supported: String },
}

//! The runtime's errors: why the runtime could not start, and why a component could not be
//! loaded — each message names the problem and what to do about it.

use std::path::PathBuf;

/// The runtime itself could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime refused the engine configuration or the linker; the text is its error.
    #[error("could not set up the WebAssembly engine: {0}")]
    Engine(String),
    #[error("could not use the compile cache directory {}: {source}", path.display())]
    /// The compile cache directory is not the daemon's own, or cannot be created.
    CacheDir {
        /// The configured cache directory.
        path: PathBuf,
        /// Why it is not trusted (boxed: the platform's words make it large).
        source: Box<forewarn_platform::trust::TrustError>,
    },
    /// The thread that lets wasmtime interrupt plugins could not start.
    #[error("could not start the epoch ticker thread: {0}")]
    Ticker(std::io::Error),
}

impl RuntimeError {
    /// A wasmtime error while setting up the engine or linker.
    pub(crate) fn engine(error: wasmtime::Error) -> RuntimeError {
        RuntimeError::Engine(format!("{error:#}"))
    }
}

/// A component could not be loaded as a forewarn plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not WebAssembly at all.
    #[error("not a WebAssembly file: {details}")]
    NotWasm {
        /// What the file looks like instead.
        details: String,
    },
    /// A core module, not a component.
    #[error(
        "this is a core WebAssembly module, not a component. Build the plugin for the \
         `wasm32-wasip2` target (`cargo build --target wasm32-wasip2 --release`), or wrap a \
         core module with `wasm-tools component new`"
    )]
    CoreModule,
    /// wasmtime could not validate or compile the component.
    #[error("the component is not valid or could not be compiled: {message}")]
    Compile {
        /// wasmtime's error.
        message: String,
    },
    /// The component does not export the plugin world's handler.
    #[error(
        "the component does not implement forewarn's plugin world `forewarn:plugin/event-handler` \
         (0.1.0, 0.2.0 or 0.3.0): {details}. Build it against wit/forewarn.wit (the Rust SDK \
         forewarn-sdk does this for you)"
    )]
    WrongWorld {
        /// What the component exports instead, or how its export differs.
        details: String,
    },
    /// The component imports something the host does not offer.
    #[error(
        "the component imports {import}, which forewarn does not provide: {hint} Plugins may \
         import only `forewarn:plugin/host` of their contract version (0.1.0, 0.2.0 or 0.3.0) and WASI \
         0.2 interfaces (wasi:cli, wasi:clocks, wasi:random, wasi:io, wasi:filesystem, \
         wasi:sockets — all sandboxed). Details: {details}"
    )]
    UnknownImport {
        /// The import, quoted, or "an interface" when the linker's error names none.
        import: String,
        /// What to change in the build, for this import.
        hint: String,
        /// The linker's error.
        details: String,
    },
    /// The component's linear memory at start is more than the plugin's memory cap: every
    /// instantiation would fail.
    #[error(
        "the component needs {} of linear memory as soon as it starts, more than its memory \
         cap of {}: raise `memory` in {plugin}.toml (e.g. `memory = \"{suggested_mib}MiB\"`), \
         or build the plugin with less initial memory",
        mib(*needed_bytes),
        mib(*cap_bytes)
    )]
    MemoryAtStart {
        /// The plugin's name (its manifest is `NAME.toml`).
        plugin: String,
        /// The sum of the initial sizes of the memories its modules define.
        needed_bytes: u64,
        /// The plugin's memory cap.
        cap_bytes: u64,
        /// A cap that fits, with room to grow: twice what it needs, in MiB.
        suggested_mib: u64,
    },
    /// The child that compiles plugins ran on the component and failed; the component was
    /// not compiled in the daemon instead (that is what the child protects the daemon from).
    #[error(
        "plugin `{plugin}` could not be compiled, and is not compiled in the daemon instead: \
         its compiler child (`forewarn compile-plugin`) {failure}"
    )]
    CompilerFailed {
        /// The plugin's name.
        plugin: String,
        /// What happened to the child.
        failure: CompileFailure,
    },
    /// The plugin's own engine and instance pool could not be set up (the process is out
    /// of memory or address space).
    #[error(
        "could not set up the plugin's WebAssembly engine: {message}. The daemon is short of \
         memory or address space: check `ulimit -v` and the unit's `MemoryMax=`, or load \
         fewer plugins"
    )]
    EngineSetup {
        /// wasmtime's error.
        message: String,
    },
    /// The plugin was built against a contract version the host has no bindings for.
    #[error(
        "the plugin was built against forewarn:plugin@{found}, which this forewarn does not \
         support; it supports {supported}. Rebuild the plugin with a forewarn-sdk for one of \
         those, or upgrade forewarn"
    )]
    UnsupportedVersion {
        /// The version in the plugin's handler export name.
        found: String,
        /// The versions the host supports, as a list.
        supported: String,
    },
}

/// Why the child that compiles plugins (`forewarn compile-plugin`) gave no compiled form
/// for a component that it could start on. Each message says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileFailure {
    /// It ran past its time-out and was killed, with its process group.
    #[error(
        "ran longer than {} s and was killed: a component this slow to compile is refused. \
         Check where the .wasm comes from, or ask its author for a smaller component",
        after.as_secs_f64()
    )]
    TimedOut {
        /// The time-out it ran past.
        after: std::time::Duration,
    },
    /// It used up its CPU time ([`crate::CompileLimits::cpu_time`]) and was stopped.
    #[error(
        "used more than {} s of CPU time and was stopped: a component this costly to compile \
         is refused. Check where the .wasm comes from, or ask its author for a smaller component",
        limit.as_secs_f64()
    )]
    CpuTime {
        /// The CPU time it used up.
        limit: std::time::Duration,
    },
    /// A signal ended it: SIGABRT when an allocation failed at its address-space limit,
    /// SIGKILL from the kernel's OOM killer, or a crash.
    #[error(
        "was killed by signal {signal} ({stderr:?}): most likely it ran out of memory, at its \
         address-space limit or by the kernel's OOM killer (`journalctl -k` says which); a \
         component this large to compile is refused. Check where the .wasm comes from, or \
         ask its author for a smaller component"
    )]
    Signal {
        /// The signal's number.
        signal: i32,
        /// What it wrote on stderr, cut at 4 KiB.
        stderr: String,
    },
    /// It exited with a status other than success or "invalid component".
    #[error(
        "exited with status {code} ({stderr:?}). If forewarn was upgraded while the daemon \
         runs, restart it (`systemctl restart forewarn`)"
    )]
    Exited {
        /// Its exit status.
        code: i32,
        /// What it wrote on stderr, cut at 4 KiB.
        stderr: String,
    },
    /// It wrote a compiled form that this daemon's engine refused.
    #[error(
        "wrote a compiled form this daemon refused ({message}): the forewarn binary was \
         probably replaced (an upgrade) while the daemon runs; restart it (`systemctl \
         restart forewarn`)"
    )]
    OutputRefused {
        /// wasmtime's reason.
        message: String,
    },
    /// Its output or its exit could not be waited for; it was killed.
    #[error("could not be waited for, and was killed: {message}")]
    Wait {
        /// What failed.
        message: String,
    },
}

/// Bytes as MiB with one decimal, for people ("96.0 MiB").
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

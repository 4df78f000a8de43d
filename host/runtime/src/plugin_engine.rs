//! Each plugin version's own engine and instance pool. The pool keeps a plugin's pages
//! mapped between calls (so the next call faults none in); wasmtime gives a shared pool's
//! slots back only when another instance reuses them, so a plugin removed from a shared pool
//! would leave its pages resident for good. With a pool of its own, a version's memory goes
//! when the version does: the pool is unmapped with its engine, once the last call, the
//! instance made ahead and the compiled component are dropped.

use std::ops::Range;

use wasmtime::Engine;
use wasmtime::component::Linker;

use crate::allocation::InstanceAllocation;
use crate::call_state::CallState;
use crate::engine_config::engine_config;
use crate::error::{LoadError, RuntimeError};
use crate::resident_memory;

/// An engine, its linker, and where its instance pool's linear memories live.
pub(crate) struct PluginEngine {
    engine: Engine,
    linker: Linker<CallState>,
    /// The address range reserved for the pool's linear memories (None on demand, or
    /// where it could not be found): what [`resident_memory`] measures.
    memory_pool: Option<Range<usize>>,
}

impl PluginEngine {
    /// An engine allocating as `allocation` says, each memory keeping at most
    /// `keep_resident` bytes between calls. Where the pool's address space is refused (a
    /// `ulimit -v`), the engine allocates each instance on demand instead, and says so.
    /// The error carries wasmtime's, on one line.
    pub(crate) fn new(
        allocation: InstanceAllocation,
        keep_resident: usize,
    ) -> Result<PluginEngine, LoadError> {
        let setup = |message: String| LoadError::EngineSetup { message };
        let (made, memory_pool) = resident_memory::make_engine_finding_its_pool(|| {
            Engine::new(&engine_config(allocation, keep_resident))
        });
        let (engine, memory_pool) = match made {
            Ok(engine) => (engine, memory_pool),
            Err(error) if allocation == InstanceAllocation::Pooling => {
                tracing::warn!(error = %format!("{error:#}"), "could not reserve the plugin's instance pool; allocating its instances on demand (slower calls)");
                let fallback = crate::engine_config::pool_refused_config(allocation);
                let engine = Engine::new(&fallback).map_err(|error| setup(format!("{error:#}")))?;
                (engine, None)
            }
            Err(error) => return Err(setup(format!("{error:#}"))),
        };
        let memory_pool = memory_pool.filter(|_| allocation == InstanceAllocation::Pooling);
        Self::with_engine(engine, memory_pool).map_err(|error| setup(error.to_string()))
    }

    /// An engine that makes no instance of its own: for checking and describing components
    /// (`forewarn plugin check`) and the compile cache's compatibility, never for calls.
    pub(crate) fn for_checks(allocation: InstanceAllocation) -> Result<PluginEngine, RuntimeError> {
        let config = crate::engine_config::compiler_config(allocation);
        let engine = Engine::new(&config).map_err(RuntimeError::engine)?;
        Self::with_engine(engine, None)
    }

    fn with_engine(
        engine: Engine,
        memory_pool: Option<Range<usize>>,
    ) -> Result<PluginEngine, RuntimeError> {
        let linker = build_linker(&engine).map_err(RuntimeError::engine)?;
        Ok(PluginEngine {
            engine,
            linker,
            memory_pool,
        })
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn linker(&self) -> &Linker<CallState> {
        &self.linker
    }

    /// Where the pool's linear memories live, when known.
    pub(crate) fn memory_pool(&self) -> Option<Range<usize>> {
        self.memory_pool.clone()
    }
}

fn build_linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    crate::wit::add_to_linker(&mut linker)?;
    Ok(linker)
}

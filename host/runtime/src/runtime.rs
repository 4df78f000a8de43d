//! The `Runtime`: the epoch ticker, the compile cache and the host services every plugin
//! shares; it turns component bytes into loaded, validated `Plugin`s, each on an engine and
//! instance pool of its own (plugin_engine.rs).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::allocation::{InstanceAllocation, memory_keep_resident};
use crate::cache::CompileCache;
use crate::call_env::CallEnv;
use crate::call_state::CallState;
use crate::compiler::{self, ChildCompile, CompileLimits, Compiler};
use crate::epoch::EpochTicker;
use crate::error::{LoadError, RuntimeError};
use crate::inspect::{self, ComponentReport};
use crate::plugin::Plugin;
use crate::plugin_engine::PluginEngine;
use crate::ready_instance::InstanceTiming;
use crate::services::HostServices;
use crate::wit::{self, HandlerPre};
use forewarn_manifest::PluginSettings;

/// How the runtime is set up.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Where compiled components are cached; None disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Where each call's fresh instance comes from (the pool unless a test or a benchmark
    /// asks for the on-demand baseline).
    pub instance_allocation: InstanceAllocation,
    /// Where components not in the cache are compiled.
    pub compiler: Compiler,
    /// The time-out and memory limit of the compiler child ([`Compiler::Subprocess`]).
    pub compile_limits: CompileLimits,
    /// When each call's fresh instance is made (ahead of the call unless a benchmark asks
    /// for the at-call baseline).
    pub instance_timing: InstanceTiming,
}

/// Shared by every plugin: cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    env: CallEnv,
    compiler: Compiler,
    compile_limits: CompileLimits,
    /// How each plugin's instances are allocated (its own pool unless a benchmark asks for
    /// the on-demand baseline).
    allocation: InstanceAllocation,
    /// An engine that makes no instance: for describing and checking components and the
    /// compile cache's compatibility. Each loaded plugin gets an engine of its own.
    checks: PluginEngine,
    cache: Option<CompileCache>,
}

/// A compiled component and how it was obtained.
pub(crate) struct Compiled {
    component: Component,
    /// Hex SHA-256 of the component bytes.
    content_hash: String,
    /// Whether it came from the on-disk cache instead of the compiler.
    from_cache: bool,
}

impl Runtime {
    /// Sets up the engine configuration (component model, async, epoch interruption) and the
    /// linker with WASI 0.2 and the forewarn host interface each plugin gets, and starts
    /// the epoch ticker.
    pub fn new(config: RuntimeConfig, services: HostServices) -> Result<Runtime, RuntimeError> {
        let allocation = config.instance_allocation;
        let checks = PluginEngine::for_checks(allocation)?;
        let cache = match &config.cache_dir {
            Some(dir) => {
                Some(
                    CompileCache::open(dir).map_err(|source| RuntimeError::CacheDir {
                        path: dir.clone(),
                        source: Box::new(source),
                    })?,
                )
            }
            None => None,
        };
        let ticker = EpochTicker::start().map_err(RuntimeError::Ticker)?;
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                env: CallEnv::new(ticker, services, config.instance_timing),
                compiler: config.compiler,
                compile_limits: config.compile_limits,
                allocation,
                checks,
                cache,
            }),
        })
    }

    /// Removes compile-cache entries of components whose content hash is not in `keep`
    /// (plugins no longer present), and entries this engine cannot load (compiled under
    /// another configuration, such as before an upgrade). Returns how many were removed; 0
    /// without a cache.
    pub fn evict_cached_except(&self, keep: &std::collections::BTreeSet<String>) -> usize {
        self.inner
            .cache
            .as_ref()
            .map_or(0, |cache| cache.retain(self.engine(), keep))
    }

    /// The engine for checks (no instances).
    fn engine(&self) -> &Engine {
        self.inner.checks.engine()
    }

    /// Compiles `bytes` (plugin `name`'s) for `engine`, or loads the compiled form from the
    /// cache. Blocking and possibly slow (seconds for large components): call it off the
    /// async runtime.
    pub(crate) fn compile(
        &self,
        name: &str,
        bytes: &[u8],
        engine: &Engine,
    ) -> Result<Compiled, LoadError> {
        inspect::check_header(bytes)?;
        let content_hash = hex::encode(Sha256::digest(bytes));
        if let Some(component) = self
            .inner
            .cache
            .as_ref()
            .and_then(|cache| cache.load(engine, &content_hash))
        {
            return Ok(Compiled {
                component,
                content_hash,
                from_cache: true,
            });
        }
        let started = Instant::now();
        let component = self.compile_uncached(name, bytes, engine)?;
        tracing::debug!(hash = %content_hash, elapsed_ms = started.elapsed().as_millis() as u64, "compiled component");
        if let Some(cache) = &self.inner.cache
            && let Err(error) = cache.store(engine, &content_hash, &component)
        {
            tracing::warn!(%error, "compiled component not cached; the next load compiles again");
        }
        Ok(Compiled {
            component,
            content_hash,
            from_cache: false,
        })
    }

    /// Compiles `bytes` where the configuration says: in a child process when one is set,
    /// in this process otherwise or when no child can be started at all. A child that ran
    /// and failed fails the load.
    fn compile_uncached(
        &self,
        name: &str,
        bytes: &[u8],
        engine: &Engine,
    ) -> Result<Component, LoadError> {
        if let Compiler::Subprocess(program) = &self.inner.compiler {
            let (allocation, limits) = (self.inner.allocation, self.inner.compile_limits);
            match compiler::compile_in_child(program, allocation, limits, engine, bytes) {
                ChildCompile::Compiled(component) => return Ok(component),
                ChildCompile::Invalid(error) => return Err(error),
                ChildCompile::Failed(failure) => {
                    return Err(LoadError::CompilerFailed {
                        plugin: name.to_owned(),
                        failure,
                    });
                }
                ChildCompile::Unavailable(reason) => {
                    tracing::warn!(%reason, "could not compile the plugin in a child process; compiling it in the daemon instead (its memory stays in use)");
                }
            }
        }
        Component::new(engine, bytes).map_err(|error| LoadError::Compile {
            message: format!("{error:#}"),
        })
    }

    /// Compiles and validates a plugin against the `event-handler` world and prepares it
    /// for fast instantiation, on an engine and instance pool of its own: each of its
    /// memories keeps at most its share of the plugin's memory cap resident between calls.
    /// Blocking: call it off the async runtime.
    pub fn load(
        &self,
        name: &str,
        bytes: &[u8],
        settings: PluginSettings,
    ) -> Result<Plugin, LoadError> {
        inspect::check_header(bytes)?;
        let keep_resident = memory_keep_resident(
            settings.memory_limit_bytes,
            inspect::defined_memories(bytes),
        );
        let engine = PluginEngine::new(self.inner.allocation, keep_resident)?;
        let compiled = self.compile(name, bytes, engine.engine())?;
        let pre = prepare(&engine, &compiled.component)?;
        inspect::check_initial_memory(name, bytes, settings.memory_limit_bytes)?;
        Ok(Plugin::new(
            self.inner.env.clone(),
            engine,
            name,
            compiled.content_hash,
            compiled.from_cache,
            pre,
            settings,
        ))
    }

    /// Describes a component and checks it against the world and the memory cap of
    /// `settings` (as [`Runtime::load`] would for a plugin named `name`), without loading it.
    pub fn inspect(
        &self,
        name: &str,
        bytes: &[u8],
        settings: &PluginSettings,
    ) -> Result<ComponentReport, LoadError> {
        let compiled = self.compile(name, bytes, self.engine())?;
        let mut report = inspect::describe(self.engine(), &compiled.component);
        report.content_hash = compiled.content_hash;
        report.size_bytes = bytes.len();
        prepare(&self.inner.checks, &compiled.component)?;
        report.initial_memory_bytes =
            inspect::check_initial_memory(name, bytes, settings.memory_limit_bytes)?;
        Ok(report)
    }
}

/// Checks `component` against the contract version it was built for and links it with
/// `engine`'s linker.
fn prepare(
    engine: &PluginEngine,
    component: &Component,
) -> Result<HandlerPre<CallState>, LoadError> {
    let version = inspect::handler_version(engine.engine(), component)?;
    wit::check_supported(version)?;
    let instance_pre = engine
        .linker()
        .instantiate_pre(component)
        .map_err(|error| inspect::explain_import_error(engine.engine(), component, &error))?;
    HandlerPre::new(version, instance_pre)
}

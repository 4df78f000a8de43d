//! The `Runtime`: one wasmtime engine and linker for the whole daemon, the epoch ticker and
//! the compile cache; it turns component bytes into loaded, validated `Plugin`s.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

use crate::cache::CompileCache;
use crate::call_env::CallEnv;
use crate::call_state::CallState;
use crate::epoch::EpochTicker;
use crate::error::{LoadError, RuntimeError};
use crate::inspect::{self, ComponentReport};
use crate::plugin::Plugin;
use crate::services::{HostServices, PluginSettings};
use crate::wit::{self, HandlerPre};

/// How the runtime is set up.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Where compiled components are cached; None disables the cache.
    pub cache_dir: Option<PathBuf>,
}

/// Shared by every plugin: cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    env: CallEnv,
    linker: Linker<CallState>,
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
    /// Builds the engine (component model, async, epoch interruption), the linker with
    /// WASI 0.2 and the forewarn host interface, and starts the epoch ticker.
    pub fn new(config: RuntimeConfig, services: HostServices) -> Result<Runtime, RuntimeError> {
        let engine = Engine::new(&engine_config()).map_err(RuntimeError::engine)?;
        let linker = build_linker(&engine).map_err(RuntimeError::engine)?;
        let cache = match &config.cache_dir {
            Some(dir) => {
                Some(
                    CompileCache::open(dir).map_err(|source| RuntimeError::CacheDir {
                        path: dir.clone(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let ticker = EpochTicker::start(engine.clone()).map_err(RuntimeError::Ticker)?;
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                env: CallEnv::new(engine, ticker, services),
                linker,
                cache,
            }),
        })
    }

    /// Removes compile-cache entries of components whose content hash is not in `keep`
    /// (plugins no longer present). Returns how many were removed; 0 without a cache.
    pub fn evict_cached_except(&self, keep: &std::collections::BTreeSet<String>) -> usize {
        self.inner
            .cache
            .as_ref()
            .map_or(0, |cache| cache.retain(keep))
    }

    fn engine(&self) -> &Engine {
        self.inner.env.engine()
    }

    /// Compiles `bytes`, or loads the compiled form from the cache. Blocking and possibly
    /// slow (seconds for large components): call it off the async runtime.
    pub(crate) fn compile(&self, bytes: &[u8]) -> Result<Compiled, LoadError> {
        inspect::check_header(bytes)?;
        let content_hash = hex::encode(Sha256::digest(bytes));
        let engine = self.engine();
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
        let component = Component::new(engine, bytes).map_err(|error| LoadError::Compile {
            message: format!("{error:#}"),
        })?;
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

    /// Compiles and validates a plugin against the `event-handler` world and prepares it
    /// for fast instantiation. Blocking: call it off the async runtime.
    pub fn load(
        &self,
        name: &str,
        bytes: &[u8],
        settings: PluginSettings,
    ) -> Result<Plugin, LoadError> {
        let compiled = self.compile(bytes)?;
        let pre = self.prepare(&compiled.component)?;
        inspect::check_initial_memory(name, bytes, settings.memory_limit_bytes)?;
        Ok(Plugin::new(
            self.inner.env.clone(),
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
        let compiled = self.compile(bytes)?;
        let mut report = inspect::describe(self.engine(), &compiled.component);
        report.content_hash = compiled.content_hash;
        report.size_bytes = bytes.len();
        self.prepare(&compiled.component)?;
        report.initial_memory_bytes =
            inspect::check_initial_memory(name, bytes, settings.memory_limit_bytes)?;
        Ok(report)
    }

    /// Checks `component` against the contract version it was built for and links it.
    fn prepare(&self, component: &Component) -> Result<HandlerPre<CallState>, LoadError> {
        let version = inspect::handler_version(self.engine(), component)?;
        wit::check_supported(version)?;
        let instance_pre = self
            .inner
            .linker
            .instantiate_pre(component)
            .map_err(|error| inspect::explain_import_error(self.engine(), component, &error))?;
        HandlerPre::new(version, instance_pre)
    }
}

fn engine_config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config
}

fn build_linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wit::add_to_linker(&mut linker)?;
    Ok(linker)
}

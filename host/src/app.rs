//! Wiring the daemon together: state directory, plugin runtime, plugins, IMDS client and
//! poller, then the event loop; shared by `forewarn run` and `forewarn demo`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use forewarn_imds::{ClientConfig, ImdsClient, Poller};
use forewarn_runtime::{HostServices, Readiness, Runtime, RuntimeConfig, StateStore};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::daemon::{Daemon, DaemonSettings};
use crate::plugin_state::PluginStateStore;
use crate::plugins::{self, LoadedPlugin, PluginSet};
use crate::timeline::Timeline;

/// The pieces of a running daemon that callers may want to look at.
pub struct Prepared {
    pub runtime: Runtime,
    pub readiness: Arc<Readiness>,
}

/// Builds the plugin runtime with its compile cache and durable plugin state under
/// `state_dir`.
pub fn build_runtime(state_dir: &Path) -> anyhow::Result<Prepared> {
    std::fs::create_dir_all(state_dir).with_context(|| {
        format!(
            "cannot create the state directory {} (set `state-dir` in the config or pass --state-dir)",
            state_dir.display()
        )
    })?;
    let store = PluginStateStore::open(&state_dir.join("plugin-state"))
        .context("cannot open the plugin state store")?;
    let readiness = Arc::new(Readiness::default());
    let services = HostServices {
        state: Arc::new(store),
        readiness: readiness.clone(),
    };
    let runtime = Runtime::new(
        RuntimeConfig {
            cache_dir: Some(state_dir.join("cache")),
        },
        services,
    )
    .context("cannot start the plugin runtime")?;
    Ok(Prepared { runtime, readiness })
}

impl StateStore for PluginStateStore {
    fn get(&self, plugin: &str, key: &str) -> Option<Vec<u8>> {
        PluginStateStore::get(self, plugin, key)
    }

    fn set(&self, plugin: &str, key: &str, value: &[u8]) -> Result<(), String> {
        PluginStateStore::set(self, plugin, key, value).map_err(|error| error.to_string())
    }

    fn delete(&self, plugin: &str, key: &str) -> Result<(), String> {
        PluginStateStore::delete(self, plugin, key).map_err(|error| error.to_string())
    }
}

/// Loads the plugin directory off the async runtime, logging each file that fails.
pub async fn load_plugins(runtime: &Runtime, dir: &Path) -> anyhow::Result<Vec<LoadedPlugin>> {
    let runtime = runtime.clone();
    let dir_owned: PathBuf = dir.to_path_buf();
    let (loaded, failed) =
        tokio::task::spawn_blocking(move || plugins::load_plugin_dir(&runtime, &dir_owned))
            .await
            .context("the plugin loading task failed")?
            .with_context(|| {
                format!(
                    "cannot read the plugin directory {} (create it, or set `plugin-dir` / --plugins)",
                    dir.display()
                )
            })?;
    for error in &failed {
        tracing::error!("{error}");
    }
    for plugin in &loaded {
        tracing::info!(
            plugin = plugin.name(),
            hash = &plugin.plugin.content_hash()[..12],
            cached = plugin.plugin.loaded_from_cache(),
            subscribe = ?plugin.manifest.subscribe,
            "plugin loaded"
        );
    }
    Ok(loaded)
}

/// Orders the plugins, logs ordering problems, and publishes the set.
pub fn publish_plugins(loaded: Vec<LoadedPlugin>) -> watch::Sender<Arc<PluginSet>> {
    let set = PluginSet::new(loaded);
    for warning in set.warnings() {
        tracing::warn!("{warning}");
    }
    if set.is_empty() {
        tracing::warn!("no plugins are loaded: events are tracked and approved per policy only");
    }
    watch::channel(Arc::new(set)).0
}

/// The IMDS client for `config`, never through a proxy.
pub fn imds_client(config: &Config) -> anyhow::Result<ImdsClient> {
    ImdsClient::new(ClientConfig {
        base_url: config.imds.url.trim_end_matches('/').to_owned(),
        api_version: config.imds.api_version.clone(),
        max_requests_per_second: config.imds.max_requests_per_second,
        ..ClientConfig::default()
    })
    .map_err(|error| anyhow::anyhow!("cannot build the IMDS client: {}", error.0))
}

/// This VM's name: from the config, or asked of IMDS until it answers (or shutdown).
pub async fn resolve_vm_name(
    config: &Config,
    client: &ImdsClient,
    shutdown: &CancellationToken,
) -> anyhow::Result<String> {
    if !config.vm_name.is_empty() {
        return Ok(config.vm_name.clone());
    }
    let mut reported = false;
    loop {
        match client.fetch_vm_name().await {
            Ok(name) => {
                tracing::info!(vm_name = %name, "VM name from IMDS instance metadata");
                return Ok(name);
            }
            Err(error) if !reported => {
                tracing::warn!(%error, "cannot read this VM's name from IMDS instance metadata yet; retrying (set `vm-name` in the config to skip this)");
                reported = true;
            }
            Err(_) => {}
        }
        tokio::select! {
            () = shutdown.cancelled() => bail!("stopped before this VM's name was known"),
            () = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
}

/// Runs the poller and the event loop until `shutdown`.
pub async fn run_daemon(
    config: &Config,
    plugins: watch::Receiver<Arc<PluginSet>>,
    timeline: Timeline,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let client = imds_client(config)?;
    let vm_name = resolve_vm_name(config, &client, &shutdown).await?;
    let settings = DaemonSettings {
        vm_name,
        policy: config.policy.clone(),
        state_dir: config.state_dir.clone(),
    };
    let daemon = Daemon::open(settings, client.clone(), plugins, timeline)
        .context("cannot open the journal")?;
    let poller_stop = shutdown.child_token();
    let (poller, documents, _status) =
        Poller::spawn(client, config.imds.poll_interval, poller_stop.clone());
    let result = daemon.run(documents, shutdown).await;
    poller_stop.cancel();
    let _ignored = poller.await;
    result.context("the daemon stopped")
}

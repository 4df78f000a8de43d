//! Wiring the daemon together: state directory, plugin runtime, plugins, IMDS client and
//! poller, then the event loop; shared by `forewarn run` and `forewarn demo`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use forewarn_imds::{ClientConfig, ComputeInfo, ImdsClient, Poller};
use forewarn_platform::trust::TrustError;
use forewarn_runtime::wit::latest::{VmInfo, VmPriority};
use forewarn_runtime::{
    ActionSpec, Compiler, DiskBudget, HostServices, HttpClient, IssuedToken, KeyValueStore,
    KeyValueStoreError, ManagedIdentity, Readiness, Runtime, RuntimeConfig, RuntimeError,
    TokenFetchError, TokenFetcher, TokenFuture,
};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::coordination::{self, CoordinatorHandle};
use crate::daemon::event_loop::{Daemon, DaemonSettings};
use crate::daemon::outcome_keeper::{KeeperSources, OutcomeKeeper};
use crate::daemon::timeline_broadcast::Timeline;
use crate::ops::admin::{self, AdminState, DaemonViews};
use crate::ops::coordination_metrics;
use crate::ops::event_history::{self, EventHistory};
use crate::ops::fleet_feed::{self, FleetSources};
use crate::ops::metrics::{self, Metrics};
use crate::ops::outcome_status::OutcomeShelf;
use crate::ops::scale_set_health::ScaleSetHealth;
use crate::pipeline::outcome::host_move::HostReading;
use crate::plugins::convert::to_wit_vm;
use crate::plugins::key_value_files::{KeyValueFiles, KeyValueFilesError};
use crate::plugins::set::{LoadedPlugin, PluginSet};
use crate::service_manager;
use crate::storage_health::StorageHealth;

/// The pieces of a running daemon that callers may want to look at.
pub struct Prepared {
    /// The plugin runtime plugins are loaded into and called through.
    pub runtime: Runtime,
    /// Which plugins hold the VM out of rotation; shared with the runtime (plugins set it)
    /// and read by `/readyz`. Pass it on to [`run_daemon`].
    pub readiness: Arc<Readiness>,
    /// How writes to the state directory fare (journal, plugin state). Pass it on to
    /// [`run_daemon`].
    pub storage: Arc<StorageHealth>,
}

/// Builds the plugin runtime with its compile cache and durable plugin state under
/// `config.state_dir`, and the operator's `[actions]` for plugins granted them.
pub fn build_runtime(config: &Config) -> anyhow::Result<Prepared> {
    build_runtime_with_cache(config, &config.state_dir.join("cache"))
}

/// [`build_runtime`] with the compile cache in `cache_dir`: `plugin test` shares one among
/// the daemons of its scenarios, so a plugin is compiled once per run, not once per scenario.
pub fn build_runtime_with_cache(config: &Config, cache_dir: &Path) -> anyhow::Result<Prepared> {
    let state_dir = config.state_dir.as_path();
    // Created 0700; refused when another user owns it or group or others may write it
    // (the compile cache in it holds native code the daemon runs).
    forewarn_platform::trust::ensure_private_dir(state_dir).with_context(|| {
        format!(
            "cannot use the state directory {} (set `state-dir` in the config or pass --state-dir)",
            state_dir.display()
        )
    })?;
    let storage = Arc::new(StorageHealth::default());
    let store = KeyValueFiles::open(&state_dir.join("plugin-state"))
        .context("cannot open the plugin state store")?
        .with_health(storage.clone());
    let readiness = Arc::new(Readiness::default());
    crate::daemon::readiness_holds::restore(&readiness, state_dir);
    let actions = config
        .actions
        .iter()
        .map(|(name, action)| {
            let spec = ActionSpec {
                argv: action.argv.clone(),
                timeout: action.timeout,
            };
            (name.clone(), spec)
        })
        .collect();
    let services = HostServices {
        key_value: Arc::new(store),
        readiness: readiness.clone(),
        actions: Arc::new(actions),
        http: HttpClient::refusing(config.imds.endpoint_addresses()),
        identity: Some(Arc::new(ManagedIdentity::new(Arc::new(ImdsTokens {
            client: imds_client(config)?,
            client_id: Some(config.identity.client_id.clone()).filter(|id| !id.is_empty()),
        })))),
    };
    let runtime = start_runtime(cache_dir, services)?;
    Ok(Prepared {
        runtime,
        readiness,
        storage,
    })
}

/// The runtime with its compile cache in `cache_dir` (`state_dir/cache` for the daemon);
/// without the cache (plugins are compiled at every start) when that directory cannot be
/// created (a full or read-only state directory: docs/operations.md, "When the disk is
/// full").
fn start_runtime(cache_dir: &Path, services: HostServices) -> anyhow::Result<Runtime> {
    let config = |cache_dir| RuntimeConfig {
        cache_dir,
        compiler: compiler_for_this_process(),
        ..RuntimeConfig::default()
    };
    match Runtime::new(config(Some(cache_dir.to_path_buf())), services.clone()) {
        Ok(runtime) => Ok(runtime),
        Err(RuntimeError::CacheDir { source, .. }) if matches!(*source, TrustError::Io { .. }) => {
            tracing::error!(
                cache_dir = %cache_dir.display(),
                error = %source,
                "cannot create the compile cache: plugins are compiled without it (fix the state directory's disk)"
            );
            Runtime::new(config(None), services).context("cannot start the plugin runtime")
        }
        Err(error) => Err(error).context("cannot start the plugin runtime"),
    }
}

/// The forewarn binary compiles plugins in a child (`forewarn compile-plugin`), so the
/// compiler's code and memory never stay resident in the daemon; anything else embedding
/// the daemon (a test binary) has no such subcommand and compiles in process.
fn compiler_for_this_process() -> Compiler {
    let Ok(exe) = std::env::current_exe() else {
        return Compiler::InProcess;
    };
    if exe.file_name().is_some_and(|name| name == BINARY_NAME) {
        Compiler::Subprocess(exe)
    } else {
        Compiler::InProcess
    }
}

/// The name of forewarn's executable.
const BINARY_NAME: &str = "forewarn";

/// Managed-identity tokens from IMDS's identity endpoint, for the runtime's token cache.
struct ImdsTokens {
    client: ImdsClient,
    /// A user-assigned identity's client id; None: the system-assigned identity.
    client_id: Option<String>,
}

impl TokenFetcher for ImdsTokens {
    fn fetch(&self, resource: &str) -> TokenFuture {
        let client = self.client.clone();
        let client_id = self.client_id.clone();
        let resource = resource.to_owned();
        Box::pin(async move {
            let token = client
                .fetch_identity_token(&resource, client_id.as_deref())
                .await
                .map_err(|error| TokenFetchError(Box::new(error)))?;
            tracing::info!(
                resource = %resource,
                expires_on = %humantime::format_rfc3339_seconds(token.expires_on),
                "managed identity token fetched"
            );
            Ok(IssuedToken {
                token: token.access_token,
                expires_on: token.expires_on,
            })
        })
    }
}

impl KeyValueStore for KeyValueFiles {
    fn get(&self, plugin: &str, key: &str) -> Option<Vec<u8>> {
        KeyValueFiles::get(self, plugin, key)
    }

    fn set(
        &self,
        plugin: &str,
        key: &str,
        value: &[u8],
        budget: DiskBudget,
    ) -> Result<u64, KeyValueStoreError> {
        KeyValueFiles::set(self, plugin, key, value, budget).map_err(store_error)
    }

    fn delete(
        &self,
        plugin: &str,
        key: &str,
        budget: DiskBudget,
    ) -> Result<u64, KeyValueStoreError> {
        KeyValueFiles::delete(self, plugin, key, budget).map_err(store_error)
    }
}

/// Over its quota, or a name that cannot be a file, is the plugin's to fix; the disk is not.
fn store_error(error: KeyValueFilesError) -> KeyValueStoreError {
    match error {
        KeyValueFilesError::OverQuota { .. }
        | KeyValueFilesError::OverWriteBudget { .. }
        | KeyValueFilesError::InvalidPluginName { .. } => {
            KeyValueStoreError::Refused(error.to_string())
        }
        KeyValueFilesError::Storage(_)
        | KeyValueFilesError::Quarantined { .. }
        | KeyValueFilesError::Unreadable { .. } => KeyValueStoreError::Failed(error.to_string()),
    }
}

/// Orders the plugins, logs ordering problems, and publishes the set.
pub fn publish_plugins(loaded: Vec<LoadedPlugin>) -> watch::Sender<Arc<PluginSet>> {
    let set = PluginSet::new(loaded);
    for warning in set.warnings() {
        tracing::warn!("{warning}");
    }
    if set.is_empty() {
        tracing::warn!(
            "no plugins are loaded: events are tracked, and approved only by policy rules (approve-user-initiated, approve-freeze-shorter-than, approve-unsubscribed)"
        );
    }
    watch::channel(Arc::new(set)).0
}

/// The IMDS client for `config`, never through a proxy.
pub(crate) fn imds_client(config: &Config) -> anyhow::Result<ImdsClient> {
    ImdsClient::new(ClientConfig {
        base_url: config.imds.url.trim_end_matches('/').to_owned(),
        api_version: config.imds.api_version.clone(),
        max_requests_per_second: config.imds.max_requests_per_second,
        ..ClientConfig::default()
    })
    .map_err(|error| anyhow::anyhow!("cannot build the IMDS client: {}", error.0))
}

/// This VM as the daemon resolved it at start.
#[derive(Debug)]
pub(crate) struct ResolvedVm {
    /// The name events list it by.
    pub name: String,
    /// What plugins are told of it.
    pub vm: VmInfo,
    /// The dedicated host IMDS names (the outcome records tell a Redeploy's move by it).
    pub host: HostReading,
}

impl ResolvedVm {
    fn from_compute(name: String, compute: &ComputeInfo) -> ResolvedVm {
        let host = match &compute.dedicated_host {
            Some(id) => HostReading::Dedicated { id: id.clone() },
            None => HostReading::NotNamed,
        };
        ResolvedVm {
            name,
            vm: describe_vm(compute),
            host,
        }
    }
}

/// This VM's name and what plugins are told of it: the name from the config, or asked of
/// IMDS until it answers (or shutdown). After `imds.vm-name-patience` of failures it says once,
/// in the log and in `startup`, what to set. With the name configured, the priority and
/// eviction policy are asked once; when IMDS does not answer, plugins see a regular VM.
pub(crate) async fn resolve_vm(
    config: &Config,
    client: &ImdsClient,
    startup: &watch::Sender<Option<String>>,
    shutdown: &CancellationToken,
) -> anyhow::Result<ResolvedVm> {
    if !config.vm_name.is_empty() {
        let resolved = match client.fetch_compute().await {
            Ok(compute) => {
                warn_if_renamed(&config.vm_name, &compute.name);
                ResolvedVm::from_compute(config.vm_name.clone(), &compute)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read this VM's priority from IMDS instance metadata; plugins are told it is unknown");
                ResolvedVm {
                    name: config.vm_name.clone(),
                    vm: VmInfo {
                        priority: VmPriority::Unknown,
                        eviction_policy: None,
                    },
                    host: HostReading::Unread,
                }
            }
        };
        return Ok(resolved);
    }
    let started = tokio::time::Instant::now();
    let mut warned = false;
    let mut told = false;
    loop {
        let error = match client.fetch_compute().await {
            Ok(compute) => {
                tracing::info!(vm_name = %compute.name, "VM name from IMDS instance metadata");
                startup.send_replace(None);
                return Ok(ResolvedVm::from_compute(compute.name.clone(), &compute));
            }
            Err(error) => error,
        };
        if !warned {
            tracing::warn!(%error, "cannot read this VM's name from IMDS instance metadata yet; retrying (set `vm-name` in the config to skip this)");
            warned = true;
        }
        if !told && started.elapsed() >= config.imds.vm_name_patience {
            let problem = vm_name_problem(config, &error.to_string(), started.elapsed());
            tracing::error!(%error, waited = %humantime::format_duration(whole_seconds(started.elapsed())), "{problem}");
            startup.send_replace(Some(problem));
            told = true;
        }
        tokio::select! {
            () = shutdown.cancelled() => bail!("stopped before this VM's name was known"),
            () = tokio::time::sleep(VM_NAME_RETRY) => {}
        }
    }
}

/// Says, as an error, when the configured `vm-name` is not the name IMDS gives this VM:
/// Azure lists the VM by that name in an event's `Resources`, so such events would pass as
/// other VMs' (a scale-set instance is `myvmss_2`, not its hostname).
fn warn_if_renamed(configured: &str, imds_name: &str) {
    if configured == imds_name {
        return;
    }
    tracing::error!(
        configured,
        imds_name,
        "{}",
        crate::log_messages::VM_NAME_MISMATCH
    );
}

/// Logs and converts this VM's priority and eviction policy.
fn describe_vm(compute: &ComputeInfo) -> VmInfo {
    let eviction_policy = compute
        .eviction_policy
        .as_ref()
        .map_or_else(String::new, ToString::to_string);
    tracing::info!(priority = %compute.priority, eviction_policy = %eviction_policy, "VM priority from IMDS instance metadata");
    to_wit_vm(compute)
}

/// Time between two lookups of the VM name.
const VM_NAME_RETRY: Duration = Duration::from_secs(2);

/// What the operator reads when the name lookup keeps failing.
pub(crate) fn vm_name_problem(config: &Config, error: &str, waited: Duration) -> String {
    format!(
        "waiting for this VM's name: IMDS instance metadata ({}/metadata/instance/compute/name) has not answered for {} ({error}), so no events are handled; set `vm-name = \"NAME\"` (the name IMDS lists in an event's Resources) in the config file and restart forewarn",
        config.imds.url.trim_end_matches('/'),
        humantime::format_duration(whole_seconds(waited)),
    )
}

fn whole_seconds(duration: Duration) -> Duration {
    Duration::from_secs(duration.as_secs())
}

/// `forewarn run` once its config is settled (the Windows service runs it too): the
/// runtime, the plugin directory (watched and reloaded), then [`run_daemon`] until
/// `shutdown`.
pub async fn serve(config: &Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let prepared = build_runtime(config)?;
    let plugins = crate::plugins::reload::PluginDirectory::start(
        prepared.runtime.clone(),
        &config.plugin_dir,
        crate::plugins::reload::ReloadOptions {
            file_limits: config.plugin_file_limits(),
            ..Default::default()
        },
    )
    .await?;
    tracing::info!(imds = %config.imds.url, plugin_dir = %config.plugin_dir.display(), state_dir = %config.state_dir.display(), "forewarn starting");
    run_daemon(
        config,
        plugins.subscribe(),
        crate::daemon::timeline_broadcast::new_timeline(),
        prepared.readiness.clone(),
        prepared.storage.clone(),
        shutdown,
    )
    .await?;
    tracing::info!("forewarn stopped");
    Ok(())
}

/// Runs the admin endpoint, the poller and the event loop until `shutdown`; tells the
/// service manager when IMDS first answered and when the daemon stops. `readiness` and
/// `storage` are `Prepared::readiness` and `Prepared::storage`.
pub async fn run_daemon(
    config: &Config,
    plugins: watch::Receiver<Arc<PluginSet>>,
    timeline: Timeline,
    readiness: Arc<Readiness>,
    storage: Arc<StorageHealth>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = admin::bind(config.admin.listen).await?;
    run_daemon_on(
        listener, config, plugins, timeline, readiness, storage, shutdown,
    )
    .await
}

/// [`run_daemon`] with the admin endpoint on `listener`, bound by the caller (the demo, to
/// know the port before the daemon runs).
pub async fn run_daemon_on(
    listener: TcpListener,
    config: &Config,
    plugins: watch::Receiver<Arc<PluginSet>>,
    timeline: Timeline,
    readiness: Arc<Readiness>,
    storage: Arc<StorageHealth>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    // The daemon's start, for a reboot's downtime (the previous run's last heartbeat to it).
    let outcomes = OutcomeKeeper::open(
        &config.state_dir,
        config.outcomes.limits(),
        std::time::SystemTime::now(),
    );
    let outcome_shelf = outcomes.shelf();
    let client = imds_client(config)?;
    let metrics = Arc::new(Metrics::new());
    let metrics_timeline = timeline.subscribe();
    let (views, views_rx) = watch::channel(None);
    let (startup, startup_rx) = watch::channel(None);
    let admin_stop = shutdown.child_token();
    let (scale_set_health, scale_set_health_rx) = watch::channel(None);
    let history = Arc::new(EventHistory::new());
    let history_recorder =
        event_history::spawn_recorder(history.clone(), timeline.subscribe(), admin_stop.clone());
    let admin_state = AdminState {
        host_names: config.admin.host_names.clone().into(),
        metrics: metrics.clone(),
        readiness: readiness.clone(),
        plugins: plugins.clone(),
        daemon: views_rx.clone(),
        startup: startup_rx,
        history,
        storage: storage.clone(),
        outcomes: outcome_shelf.clone(),
        scale_set: Arc::new(config.scale_set.clone()),
        scale_set_health: Arc::new(scale_set_health),
    };
    let admin = tokio::spawn(admin::serve(listener, admin_state, admin_stop.clone()));
    let outcome_keeper = outcomes.spawn(
        KeeperSources {
            timeline: timeline.subscribe(),
            clock: client.clock(),
            views: views_rx,
            storage: storage.clone(),
            metrics: metrics.outcomes.clone(),
        },
        admin_stop.clone(),
    );
    let observers = Observers {
        metrics,
        timeline: metrics_timeline,
        views,
        startup,
        readiness,
        storage,
        scale_set_health: scale_set_health_rx,
        outcomes: outcome_shelf,
    };
    let result = run_event_loop(config, client, plugins, timeline, observers, &shutdown).await;
    service_manager::notify_stopping();
    admin_stop.cancel();
    let _ignored = admin.await;
    let _ignored = history_recorder.await;
    let _ignored = outcome_keeper.await;
    result
}

/// Who watches the running loop: the metrics (fed from the timeline) and the admin endpoint.
struct Observers {
    metrics: Arc<Metrics>,
    /// Subscribed before the loop starts, so no entry is missed.
    timeline: tokio::sync::broadcast::Receiver<crate::pipeline::timeline::TimelineEntry>,
    views: watch::Sender<Option<DaemonViews>>,
    /// What the daemon is waiting for while it starts (`None`: nothing worth saying).
    startup: watch::Sender<Option<String>>,
    /// The readiness `/readyz` answers from; the loop journals its holds.
    readiness: Arc<Readiness>,
    /// How the journal's writes fare, for status and metrics.
    storage: Arc<StorageHealth>,
    /// The scale-set health as the admin endpoint last assessed it, for the fleet record.
    scale_set_health: watch::Receiver<Option<ScaleSetHealth>>,
    /// The outcome records, for the fleet record's last events.
    outcomes: Arc<OutcomeShelf>,
}

/// Resolves the VM name, opens the journal, starts the poller, and runs the loop.
async fn run_event_loop(
    config: &Config,
    client: ImdsClient,
    plugins: watch::Receiver<Arc<PluginSet>>,
    timeline: Timeline,
    observers: Observers,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let ResolvedVm {
        name: vm_name,
        vm,
        host,
    } = resolve_vm(config, &client, &observers.startup, shutdown).await?;
    let settings = DaemonSettings {
        vm_name: vm_name.clone(),
        vm,
        policy: config.policy.clone(),
        state_dir: config.state_dir.clone(),
    };
    let daemon = Daemon::open(
        settings,
        client.clone(),
        plugins.clone(),
        timeline,
        observers.storage,
    )
    .context("cannot open the journal")?
    .with_readiness(observers.readiness.clone());
    let coordinator_stop = CancellationToken::new();
    let (daemon, coordination, coordinator, coordinator_task) = match &config.coordination {
        Some(coordination) => {
            // Its own token, cancelled once the loop has returned: a POST that finished
            // while the loop was stopping still has its `Sent` recorded in etcd.
            let (coordinator, verdicts, task) = coordination::spawn(
                coordination,
                &vm_name,
                client.clock(),
                coordinator_stop.clone(),
            )
            .context("cannot start coordinated approval")?;
            let status = coordinator.subscribe();
            coordination_metrics::spawn_collector(
                observers.metrics.coordination.clone(),
                status.clone(),
                shutdown.child_token(),
            );
            let daemon = daemon.with_coordination(coordinator.clone(), verdicts);
            (daemon, Some(status), Some(coordinator), Some(task))
        }
        None => (daemon, None, None, None),
    };
    let poller_stop = shutdown.child_token();
    let polling_since = std::time::SystemTime::now();
    let (poller, documents, poll_status) =
        Poller::spawn(client, config.imds.poll_interval, poller_stop.clone());
    if let Some(coordinator) = &coordinator {
        let sources = FleetSources {
            vm_name: vm_name.clone(),
            state: daemon.snapshots(),
            poll: poll_status.clone(),
            plugins: plugins.clone(),
            readiness: observers.readiness.clone(),
            quarantined: daemon.quarantined_plugins(),
            scale_set_health: observers.scale_set_health.clone(),
            outcomes: observers.outcomes.clone(),
        };
        let records = fleet_feed::spawn(sources, poller_stop.clone());
        coordinator.publish_fleet_record(records, poller_stop.clone());
    }
    metrics::spawn_collectors(
        observers.metrics,
        observers.timeline,
        poll_status.clone(),
        plugins,
        poller_stop.clone(),
    );
    observers.views.send_replace(Some(DaemonViews {
        vm_name,
        host,
        state: daemon.snapshots(),
        poll: poll_status.clone(),
        polling_since,
        coordination,
        quarantined: daemon.quarantined_plugins(),
        fleet: coordinator.as_ref().map(CoordinatorHandle::fleet_reader),
    }));
    // READY=1 (running, on Windows) only once IMDS has answered: until then /status says
    // waiting-for-imds.
    service_manager::spawn_ready_after_first_document(
        poll_status,
        polling_since,
        poller_stop.clone(),
    );
    service_manager::spawn_watchdog(poller_stop.clone());
    let shutdown_watch =
        service_manager::spawn_shutdown_watch(&config.shutdown, poller_stop.clone());
    let daemon = daemon.with_shutdown_watch(shutdown_watch);
    let result = daemon.run(documents, shutdown.clone()).await;
    coordinator_stop.cancel();
    if let Some(task) = coordinator_task {
        task.stopped().await;
    }
    poller_stop.cancel();
    let _ignored = poller.await;
    result.context("the daemon stopped")
}

#[cfg(test)]
mod tests;

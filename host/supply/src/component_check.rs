//! The checks `forewarn plugin check` makes, shared by `plugin push` and `plugin install`:
//! the component compiles, implements a plugin world this forewarn serves, imports only what
//! the host provides, and starts within its manifest's memory cap.

use forewarn_runtime::{
    ComponentReport, HostServices, LoadError, Runtime, RuntimeConfig, RuntimeError,
};

use crate::error::SupplyError;
use forewarn_manifest::PluginManifest;

/// What the check found.
#[derive(Debug, Clone)]
pub struct CheckedComponent {
    /// Imports, exports, size, hash and memory at start.
    pub report: ComponentReport,
    /// The WIT world it implements, e.g. `forewarn:plugin/event-handler@0.2.0`.
    pub world: String,
}

/// Why a component is not a plugin the daemon would load.
#[derive(Debug, thiserror::Error)]
pub enum ComponentRefused {
    /// The runtime itself could not start (nothing is known about the component).
    #[error("cannot start the plugin runtime to check it: {0}")]
    NoRuntime(#[from] RuntimeError),
    /// The runtime refused the component.
    #[error("not a usable forewarn plugin: {0}")]
    NotAPlugin(#[from] LoadError),
}

/// Checks `wasm` as the daemon would load it under `manifest` (blocking: it compiles).
pub fn check_component(
    name: &str,
    wasm: &[u8],
    manifest: &PluginManifest,
) -> Result<CheckedComponent, ComponentRefused> {
    let runtime = Runtime::new(RuntimeConfig::default(), HostServices::default())?;
    let report = runtime.inspect(name, wasm, &manifest.runtime_settings())?;
    let version = report
        .exports
        .iter()
        .find_map(|export| export.strip_prefix("forewarn:plugin/handler@"))
        .unwrap_or("?")
        .to_owned();
    Ok(CheckedComponent {
        report,
        world: format!("forewarn:plugin/event-handler@{version}"),
    })
}

/// [`check_component`] off the async runtime, as a supply error naming the plugin.
pub async fn check_component_async(
    name: &str,
    wasm: Vec<u8>,
    manifest: PluginManifest,
) -> Result<CheckedComponent, SupplyError> {
    let owned_name = name.to_owned();
    let checked =
        tokio::task::spawn_blocking(move || check_component(&owned_name, &wasm, &manifest))
            .await
            .map_err(|error| SupplyError::Check(format!("the check of {name} failed: {error}")))?;
    checked.map_err(|problem| {
        SupplyError::Check(format!(
            "plugin {name}: {problem}; nothing was installed (`forewarn plugin check` shows the same)"
        ))
    })
}

//! The checks `forewarn plugin check` makes, shared by `plugin push` and `plugin install`:
//! the component compiles, implements a plugin world this forewarn serves, imports only what
//! the host provides, and starts within its manifest's memory cap.

use forewarn_runtime::{ComponentReport, HostServices, Runtime, RuntimeConfig};

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

/// Checks `wasm` as the daemon would load it under `manifest` (blocking: it compiles).
pub fn check_component(
    name: &str,
    wasm: &[u8],
    manifest: &PluginManifest,
) -> Result<CheckedComponent, String> {
    let runtime = Runtime::new(RuntimeConfig::default(), HostServices::default())
        .map_err(|error| format!("cannot start the plugin runtime to check it: {error}"))?;
    let report = runtime
        .inspect(name, wasm, &manifest.runtime_settings())
        .map_err(|error| format!("not a usable forewarn plugin: {error}"))?;
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

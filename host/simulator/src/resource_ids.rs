//! The simulated VMs' Azure Resource Manager ids: what the compute metadata says
//! (`resourceId`, `subscriptionId`, `resourceGroupName`), what managed identity tokens name
//! (`xms_mirid`), and what Resource Manager's calls (`arm.rs`) must address.

use crate::engine::Engine;

/// The subscription every simulated VM is in.
pub(crate) const SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";
/// The resource group every simulated VM is in.
pub(crate) const RESOURCE_GROUP: &str = "forewarn-simulator";

/// The VM's ARM resource id (in a scale set when the scenario names one).
pub(crate) fn vm_resource_id(engine: &Engine, vm: &str) -> String {
    let scenario = engine.scenario();
    let scale_set = &scenario.vm_scale_set;
    let prefix = format!(
        "/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/Microsoft.Compute"
    );
    if scale_set.is_empty() {
        format!("{prefix}/virtualMachines/{vm}")
    } else {
        format!("{prefix}/virtualMachineScaleSets/{scale_set}/virtualMachines/{vm}")
    }
}

//! Readiness: `set-ready` holds the VM out of its load balancer's rotation (the daemon's
//! `/readyz` answers 503) until the plugin says it is ready again. Granted by
//! `readiness = true` under `[capabilities]`.

pub(crate) mod holds;

pub use holds::Readiness;

use super::grants::Grants;
use crate::call_state::CallState;
use crate::wit::latest::HostError;

/// Ok when `plugin`'s grants let it call `set-ready`.
pub(crate) fn grant(plugin: &str, grants: &Grants) -> Result<(), HostError> {
    if grants.readiness {
        return Ok(());
    }
    Err(HostError::NotGranted(format!(
        "plugin `{plugin}` may not change readiness: add `readiness = true` under \
         [capabilities] in its manifest"
    )))
}

/// The host function `set-ready`.
pub(crate) fn set_ready(call: &mut CallState, ready: bool) -> Result<(), HostError> {
    call.not_while_preparing()?;
    grant(&call.plugin, &call.settings.grants)?;
    if call.services.readiness.set(&call.plugin, ready) {
        tracing::info!(plugin = %call.plugin, ready, "readiness changed by plugin");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::testing::{Expected, call, check_rows, grants};
    use crate::services::HostServices;

    #[test]
    fn readiness_is_granted_only_by_the_manifest_flag() {
        let granted = grants(true, &[], &[]);
        let everything_else = grants(false, &["127.0.0.1:80"], &["stop-app"]);
        let rows = [
            (&granted, "set-ready", Expected::Granted),
            (
                &everything_else,
                "set-ready",
                Expected::Refused(
                    "plugin `p` may not change readiness: add `readiness = true` under \
                     [capabilities] in its manifest",
                ),
            ),
        ];
        check_rows(&rows, |grants, _| grant("p", grants));
    }

    #[test]
    fn set_ready_holds_the_vm_until_the_plugin_releases_it_and_only_when_granted() {
        let services = HostServices::default();
        let readiness = services.readiness.clone();
        let mut refused = call(grants(false, &[], &[]), services.clone());
        let answer = set_ready(&mut refused, false);
        assert!(
            matches!(answer, Err(HostError::NotGranted(_))),
            "{answer:?}"
        );
        assert!(readiness.is_ready(), "a refused call holds nothing");

        let mut granted = call(grants(true, &[], &[]), services);
        set_ready(&mut granted, false).expect("granted");
        assert!(!readiness.is_ready());
        assert_eq!(readiness.holders(), ["p"]);
        set_ready(&mut granted, true).expect("granted");
        assert!(readiness.is_ready());
    }
}

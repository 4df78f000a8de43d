//! Readiness: `set-ready` holds the VM out of its load balancer's rotation (the daemon's
//! `/readyz` answers 503) until the plugin says it is ready again; `drain-progress` tells
//! whether the load balancers probing `/readyz` have noticed. Granted by `readiness = true`
//! under `[capabilities]`.

pub(crate) mod holds;
pub(crate) mod probe_ledger;

pub use holds::Readiness;
pub use probe_ledger::{MAX_UNHEALTHY_THRESHOLD, PROBER_MEMORY, Prober};

use forewarn_events::millis;
use std::time::Instant;

use crate::call_state::CallState;
use crate::wit::latest::{DrainStatus, HostError};
use forewarn_manifest::Capabilities;

/// Ok when `plugin`'s grants let it call `set-ready`.
pub(crate) fn grant(plugin: &str, grants: &Capabilities) -> Result<(), HostError> {
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

/// The host function `drain-progress`.
pub(crate) fn drain_progress(
    call: &mut CallState,
    unhealthy_threshold: u32,
) -> Result<DrainStatus, HostError> {
    call.not_while_preparing()?;
    grant(&call.plugin, &call.settings.grants)?;
    if !(1..=MAX_UNHEALTHY_THRESHOLD).contains(&unhealthy_threshold) {
        return Err(HostError::Invalid(format!(
            "unhealthy-threshold {unhealthy_threshold} is out of range: give the load \
             balancer's own threshold, 1 to {MAX_UNHEALTHY_THRESHOLD}"
        )));
    }
    Ok(progress_at(
        &call.services.readiness,
        unhealthy_threshold,
        Instant::now(),
    ))
}

/// What `drain-progress` answers at `now`.
fn progress_at(readiness: &Readiness, threshold: u32, now: Instant) -> DrainStatus {
    let millis = |since: Instant| millis(now.saturating_duration_since(since));
    let Some(view) = readiness.drain_view(threshold, now) else {
        return DrainStatus {
            probers: u32::try_from(readiness.recent_probers(now)).unwrap_or(u32::MAX),
            probers_drained: 0,
            drained_for_ms: None,
            not_ready_for_ms: None,
        };
    };
    if view.probers == 0 {
        readiness.count_drain_without_probes();
    }
    DrainStatus {
        probers: view.probers,
        probers_drained: view.drained,
        drained_for_ms: view.all_drained_at.map(millis),
        not_ready_for_ms: readiness.not_ready_since().map(millis),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::testing::{Expected, call, check_rows, grants};
    use crate::services::HostServices;
    use std::time::Duration;

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

    #[test]
    fn drain_progress_tells_what_the_probers_saw_and_refuses_a_threshold_out_of_range() {
        use std::net::{IpAddr, Ipv4Addr};

        let services = HostServices::default();
        let readiness = services.readiness.clone();
        let mut refused = call(grants(false, &[], &[]), services.clone());
        assert!(matches!(
            drain_progress(&mut refused, 2),
            Err(HostError::NotGranted(_))
        ));
        let mut granted = call(grants(true, &[], &[]), services);
        for threshold in [0, MAX_UNHEALTHY_THRESHOLD + 1] {
            let answer = drain_progress(&mut granted, threshold);
            let Err(HostError::Invalid(message)) = answer else {
                panic!("{answer:?}");
            };
            assert!(message.contains("1 to 16"), "{message}");
        }

        let start = Instant::now();
        let ready = progress_at(&readiness, 2, start);
        assert_eq!((ready.probers, ready.not_ready_for_ms), (0, None));
        readiness.set_at("lb", false, start);
        let unprobed = progress_at(&readiness, 2, start + Duration::from_millis(10));
        assert_eq!(unprobed.probers, 0);
        assert_eq!(unprobed.not_ready_for_ms, Some(10));
        assert_eq!(readiness.drains_without_probes(), 1);
        progress_at(&readiness, 2, start + Duration::from_millis(20));
        assert_eq!(readiness.drains_without_probes(), 1, "counted once a drain");

        let prober = Prober::at(IpAddr::V4(Ipv4Addr::LOCALHOST));
        readiness.answer_probe(prober, start + Duration::from_millis(100));
        readiness.answer_probe(prober, start + Duration::from_millis(200));
        let seen = progress_at(&readiness, 2, start + Duration::from_millis(500));
        assert_eq!(
            seen,
            DrainStatus {
                probers: 1,
                probers_drained: 1,
                drained_for_ms: Some(300),
                not_ready_for_ms: Some(500),
            }
        );
    }
}

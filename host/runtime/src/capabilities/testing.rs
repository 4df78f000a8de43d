//! What the units' tests share: a call's state without a guest, and the table check of grants.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::call_state::CallState;
use crate::services::HostServices;
use crate::wit::latest::HostError;
use forewarn_manifest::Capabilities;
use forewarn_manifest::PluginSettings;

/// The state of a call of plugin `p` holding `grants`, with `services`, 5 s to run:
/// what a guest's host call would find, with no guest.
pub(crate) fn call(grants: Capabilities, services: HostServices) -> CallState {
    let settings = PluginSettings {
        grants,
        ..PluginSettings::default()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    CallState::new(Arc::from("p"), Arc::new(settings), services, deadline)
}

/// How a request came out: granted, refused (with a text the message must hold), or
/// invalid (a request that cannot be judged, such as a URL without a host).
#[derive(Debug)]
pub(crate) enum Expected {
    Granted,
    Refused(&'static str),
    Invalid,
}

/// Checks one grant decision against what the row expects.
pub(crate) fn check<T>(result: Result<T, HostError>, expected: &Expected, row: &str) {
    match (result, expected) {
        (Ok(_), Expected::Granted) => {}
        (Err(HostError::Invalid(_)), Expected::Invalid) => {}
        (Err(HostError::NotGranted(message)), Expected::Refused(text)) => {
            assert!(message.contains(text), "{row}: {message}");
        }
        (result, expected) => {
            panic!("{row}: expected {expected:?}, got {:?}", result.err())
        }
    }
}

/// Checks every `(grants, request, expected)` row through `ask` (plugin `p`).
pub(crate) fn check_rows<T>(
    rows: &[(&Capabilities, &str, Expected)],
    ask: impl Fn(&Capabilities, &str) -> Result<T, HostError>,
) {
    for (grants, request, expected) in rows {
        check(ask(grants, request), expected, request);
    }
}

/// Capabilities of readiness, the `http` authorities and the `actions` named.
pub(crate) fn grants(readiness: bool, http: &[&str], actions: &[&str]) -> Capabilities {
    Capabilities {
        readiness,
        http: http.iter().map(|entry| (*entry).to_owned()).collect(),
        actions: actions.iter().map(|entry| (*entry).to_owned()).collect(),
        ..Capabilities::default()
    }
}

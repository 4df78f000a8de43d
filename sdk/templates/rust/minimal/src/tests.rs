//! Native tests of `{{name}}` (`cargo test`): forewarn_sdk::testing stands in for the daemon,
//! so the real `on_event` runs and its decision and host calls can be checked.

use forewarn_sdk::testing::{self, TestHost};
use forewarn_sdk::{Decision, EventType, Level, Phase};

use super::{DEFAULT_GREETING, ThisPlugin};

#[test]
fn prepare_logs_the_configured_greeting_and_approves() {
    let mut host = TestHost::new().config("greeting", "hi there");
    let event = testing::event(EventType::Reboot);

    let decision =
        host.on_event::<ThisPlugin>(&event, Phase::Prepare, &testing::context_for(&event));

    assert_eq!(decision, Decision::approve());
    let logs = host.logs();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0].0, Level::Info);
    assert!(logs[0].1.starts_with("hi there: reboot "), "{logs:?}");
}

#[test]
fn without_the_config_key_the_default_greeting_is_used() {
    let mut host = TestHost::new();
    let event = testing::event(EventType::Freeze);

    host.on_event::<ThisPlugin>(&event, Phase::Prepare, &testing::context_for(&event));

    assert!(host.logs()[0].1.starts_with(DEFAULT_GREETING));
}

#[test]
fn every_phase_is_answered_with_approve_and_changes_nothing() {
    let mut host = TestHost::new();
    let event = testing::event(EventType::Redeploy);
    let phases = [
        Phase::Prepare,
        Phase::Started,
        Phase::EndedAfterStart,
        Phase::EndedWithoutStart,
    ];

    for phase in phases {
        let decision = host.on_event::<ThisPlugin>(&event, phase, &testing::context());
        assert_eq!(decision, Decision::approve(), "{phase}");
    }

    assert!(host.effects().is_empty(), "{:?}", host.effects());
}

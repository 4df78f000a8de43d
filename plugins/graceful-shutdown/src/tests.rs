//! The plugin's real `on_event` against the SDK's test host: the stop action runs once on
//! Prepare, a failing one defers, and the start action runs when the event is over.

use forewarn_sdk::testing::{self, HostCall, TestHost};
use forewarn_sdk::{ActionOutput, Decision, EventType, HostError, Phase};

use super::{GracefulShutdown, STOPPED_KEY};

fn host_with_actions() -> TestHost {
    TestHost::new()
        .plugin_name("graceful-shutdown")
        .config("stop-action", "stop-app")
        .config("start-action", "start-app")
        .action_result("stop-app", testing::exited(0))
        .action_result("start-app", testing::exited(0))
}

fn call(host: &mut TestHost, event_type: EventType, phase: Phase) -> Decision {
    let event = testing::event(event_type);
    host.on_event::<GracefulShutdown>(&event, phase, &testing::context_for(&event))
}

#[test]
fn prepare_runs_the_stop_action_once_and_approves() {
    let mut host = host_with_actions();

    assert_eq!(
        call(&mut host, EventType::Reboot, Phase::Prepare),
        Decision::approve()
    );
    assert_eq!(
        call(&mut host, EventType::Reboot, Phase::Prepare),
        Decision::approve()
    );

    assert_eq!(
        host.actions_run(),
        ["stop-app"],
        "stopped once, not on the retry"
    );
    assert_eq!(host.state_text(STOPPED_KEY), Some(testing::EVENT_ID));
}

#[test]
fn a_failing_stop_action_defers_with_its_last_error_line() {
    let failed = ActionOutput {
        stderr: "stopping…\nunit app.service not loaded\n".into(),
        ..testing::exited(5)
    };
    let mut host = host_with_actions().action_result("stop-app", failed);

    let decision = call(&mut host, EventType::Redeploy, Phase::Prepare);

    let deferral = decision.deferral().expect("a deferral");
    assert_eq!(
        deferral.reason,
        "stop action `stop-app` exited 5: unit app.service not loaded"
    );
    assert!(host.state_now().get(STOPPED_KEY).is_none());
}

#[test]
fn a_stop_action_not_granted_defers_naming_the_manifest_line() {
    let mut host = TestHost::new()
        .plugin_name("graceful-shutdown")
        .config("stop-action", "stop-app");

    let decision = call(&mut host, EventType::Reboot, Phase::Prepare);

    let reason = decision.deferral().map(|deferral| deferral.reason.clone());
    assert!(
        reason.as_deref().is_some_and(|reason| reason
            .contains("add \"stop-app\" to [capabilities] actions in graceful-shutdown.toml")),
        "{reason:?}"
    );
}

#[test]
fn a_stop_action_killed_at_its_timeout_defers() {
    let mut host = host_with_actions().action_error("stop-app", HostError::TimedOut);

    let decision = call(&mut host, EventType::Terminate, Phase::Prepare);

    assert!(decision.is_defer());
    assert!(host.state_now().is_empty());
}

#[test]
fn the_start_action_runs_after_the_event_and_forgets_it() {
    let mut host = host_with_actions();
    call(&mut host, EventType::Reboot, Phase::Prepare);

    let decision = call(&mut host, EventType::Reboot, Phase::EndedAfterStart);

    assert_eq!(decision, Decision::approve());
    assert_eq!(host.actions_run(), ["stop-app", "start-app"]);
    assert_eq!(host.state_text(STOPPED_KEY), Some(""));
}

#[test]
fn a_freeze_is_left_alone() {
    let mut host = host_with_actions();

    assert_eq!(
        call(&mut host, EventType::Freeze, Phase::Prepare),
        Decision::approve()
    );

    assert!(host.actions_run().is_empty());
    assert_eq!(host.effects(), Vec::<&HostCall>::new());
}

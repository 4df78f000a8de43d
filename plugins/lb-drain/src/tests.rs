//! The plugin's real `on_event` against the SDK's test host: not ready and deferring during
//! the drain window, deregistering once after it, registering and ready again at the end.

use forewarn_sdk::testing::{self, HostCall, TestHost};
use forewarn_sdk::{Decision, DrainStatus, Event, EventType, Level, Phase};

use super::{DRAINING_KEY, LbDrain, now_ms};

const DEREGISTER_URL: &str = "http://10.0.0.4:8080/deregister";
const REGISTER_URL: &str = "http://10.0.0.4:8080/register";

fn lb_host() -> TestHost {
    TestHost::new()
        .plugin_name("lb-drain")
        .ready(true)
        .config("drain-seconds", "15")
        .config("deregister-url", DEREGISTER_URL)
        .config("register-url", REGISTER_URL)
        .http_reply("POST", DEREGISTER_URL, 200, "")
        .http_reply("POST", REGISTER_URL, 200, "")
}

fn call(host: &mut TestHost, event: &Event, phase: Phase) -> Decision {
    host.on_event::<LbDrain>(event, phase, &testing::context_for(event))
}

fn drain_start_key() -> String {
    format!("drain-start/{}", testing::EVENT_ID)
}

#[test]
fn prepare_marks_the_vm_not_ready_and_defers_during_the_drain_window() {
    let mut host = lb_host();
    let event = testing::event(EventType::Reboot);

    let decision = call(&mut host, &event, Phase::Prepare);

    let deferral = decision.deferral().expect("a deferral while draining");
    assert!(
        deferral.reason.starts_with("draining: "),
        "{}",
        deferral.reason
    );
    assert!(deferral.retry_after_ms > 0 && deferral.retry_after_ms <= 15_000);
    assert!(!host.is_ready());
    assert_eq!(host.state_text(DRAINING_KEY), Some(testing::EVENT_ID));
    assert!(host.state_now().contains_key(&drain_start_key()));
    assert!(host.http_requests().is_empty(), "no deregistration yet");
}

#[test]
fn after_the_window_it_deregisters_once_and_approves() {
    let an_hour_ago = now_ms() - 3_600_000;
    let mut host = lb_host().state(&drain_start_key(), an_hour_ago.to_string());
    let event = testing::event(EventType::Redeploy);

    assert_eq!(call(&mut host, &event, Phase::Prepare), Decision::approve());
    assert_eq!(call(&mut host, &event, Phase::Prepare), Decision::approve());

    let sent = host.http_requests();
    assert_eq!(sent.len(), 1, "deregistered once");
    assert_eq!(sent[0].url, DEREGISTER_URL);
    assert_eq!(sent[0].body, event.notice_json().into_bytes());
    assert!(!host.is_ready());
}

#[test]
fn a_failed_deregistration_defers_and_is_tried_again() {
    let an_hour_ago = now_ms() - 3_600_000;
    let mut host = TestHost::new()
        .ready(true)
        .config("deregister-url", DEREGISTER_URL)
        .state(&drain_start_key(), an_hour_ago.to_string())
        .http_reply("POST", DEREGISTER_URL, 503, "busy")
        .http_reply("POST", DEREGISTER_URL, 200, "");
    let event = testing::event(EventType::Reboot);

    let decision = call(&mut host, &event, Phase::Prepare);
    assert_eq!(
        decision.deferral().map(|deferral| deferral.reason.as_str()),
        Some("deregistration at http://10.0.0.4:8080/deregister answered 503")
    );
    assert_eq!(call(&mut host, &event, Phase::Prepare), Decision::approve());
    assert_eq!(host.http_requests().len(), 2);
}

#[test]
fn without_the_readiness_grant_it_defers_naming_the_manifest_line() {
    let mut host = TestHost::new().plugin_name("lb-drain");
    let event = testing::event(EventType::Reboot);

    let decision = call(&mut host, &event, Phase::Prepare);

    let reason = decision.deferral().map(|deferral| deferral.reason.clone());
    assert_eq!(
        reason.as_deref(),
        Some(
            "cannot mark the VM not ready: not granted: plugin `lb-drain` may not change \
             readiness: add `readiness = true` under [capabilities] in its manifest"
        )
    );
    assert!(host.state_now().is_empty());
}

#[test]
fn when_the_event_is_over_it_registers_again_and_marks_the_vm_ready() {
    let mut host = lb_host()
        .ready(false)
        .state(DRAINING_KEY, testing::EVENT_ID);
    let event = testing::event(EventType::Reboot);

    assert_eq!(
        call(&mut host, &event, Phase::EndedAfterStart),
        Decision::approve()
    );

    assert!(host.is_ready());
    let sent = host.http_requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].url, REGISTER_URL);
    assert_eq!(host.state_text(DRAINING_KEY), Some(""));
}

#[test]
fn an_event_for_another_vm_is_approved_without_draining() {
    let mut host = lb_host();
    let event = Event {
        resources: vec!["another-vm".into()],
        ..testing::event(EventType::Reboot)
    };

    assert_eq!(call(&mut host, &event, Phase::Prepare), Decision::approve());

    assert!(host.is_ready());
    assert!(host.effects().is_empty());
}

#[test]
fn an_event_whose_drain_could_not_be_recorded_still_releases_the_vm_when_it_is_over() {
    // The VM was marked not ready, but the drain's record was never written (a full disk).
    let mut host = lb_host().ready(false);
    let event = testing::event(EventType::Reboot);

    assert_eq!(
        call(&mut host, &event, Phase::EndedWithoutStart),
        Decision::approve()
    );

    assert!(
        host.is_ready(),
        "the VM stays out of rotation after the event"
    );
    assert!(
        host.http_requests().is_empty(),
        "registered again without having deregistered"
    );
}

fn progress(probers: u32, drained: u32, drained_for_ms: Option<u64>) -> DrainStatus {
    DrainStatus {
        probers,
        probers_drained: drained,
        drained_for_ms,
        not_ready_for_ms: Some(1_000),
    }
}

#[test]
fn it_approves_once_every_prober_took_the_vm_out_and_connections_drained() {
    let mut host = lb_host()
        .drain_progress(progress(2, 1, None))
        .drain_progress(progress(2, 2, Some(500)))
        .drain_progress(progress(2, 2, Some(2_000)));
    let event = testing::event(EventType::Reboot);

    let waiting = call(&mut host, &event, Phase::Prepare);
    let deferral = waiting.deferral().expect("one prober still sees the VM up");
    assert!(deferral.reason.contains("1 of 2"), "{}", deferral.reason);
    assert_eq!(deferral.retry_after_ms, 200);
    let draining = call(&mut host, &event, Phase::Prepare);
    let deferral = draining.deferral().expect("open connections get 2 s");
    assert!(
        deferral.reason.contains("open connections"),
        "{}",
        deferral.reason
    );
    assert_eq!(deferral.retry_after_ms, 1_500);
    assert_eq!(
        call(&mut host, &event, Phase::Prepare),
        Decision::approve(),
        "approved well inside the 15 s window"
    );
    assert!(
        host.calls().contains(&HostCall::DrainProgress {
            unhealthy_threshold: 3
        }),
        "asked with the default threshold: {:?}",
        host.calls()
    );
    assert_eq!(host.http_requests().len(), 1, "deregistered once");
}

#[test]
fn without_a_prober_it_says_so_and_waits_out_the_window() {
    let mut host = lb_host();
    let event = testing::event(EventType::Reboot);

    let decision = call(&mut host, &event, Phase::Prepare);

    let deferral = decision.deferral().expect("draining");
    assert!(
        deferral
            .reason
            .contains("no load balancer probe seen on /readyz"),
        "{}",
        deferral.reason
    );
    let warned = host.logs().iter().any(|(level, line)| {
        *level == Level::Warn && line.contains("is the health probe pointed at forewarn?")
    });
    assert!(warned, "{:?}", host.logs());
}

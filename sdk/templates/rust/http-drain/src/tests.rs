//! Native tests of `{{name}}` (`cargo test`): forewarn_sdk::testing stands in for the daemon
//! (the readiness grant, the drain service's answers), so the real `on_event` runs and its
//! decision and host calls can be checked.

use forewarn_sdk::testing::{self, HostCall, TestHost};
use forewarn_sdk::{Context, Decision, EventType, HostError, Phase};

use super::{DEFAULT_DRAIN_URL, ThisPlugin};

const DRAIN_URL: &str = "http://127.0.0.1:9000/drain";

/// A host that grants readiness (the VM starts ready) and has `drain-url` configured.
fn host() -> TestHost {
    TestHost::new().ready(true).config("drain-url", DRAIN_URL)
}

fn reason(decision: &Decision) -> &str {
    decision
        .deferral()
        .map_or("", |deferral| deferral.reason.as_str())
}

#[test]
fn prepare_takes_the_vm_out_of_rotation_posts_to_the_drain_url_and_approves() {
    let mut host = host().http_reply("POST", DRAIN_URL, 200, "");
    let event = testing::event(EventType::Reboot);

    let decision =
        host.on_event::<ThisPlugin>(&event, Phase::Prepare, &testing::context_for(&event));

    assert_eq!(decision, Decision::approve());
    assert!(!host.is_ready(), "the VM is out of rotation");
    let sent = host.http_requests();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        (sent[0].method.as_str(), sent[0].url.as_str()),
        ("POST", DRAIN_URL)
    );
    assert_eq!(sent[0].body, event.notice_json().as_bytes());
    // Out of rotation first, then the service is told.
    let effects = host.effects();
    assert_eq!(
        effects[0],
        &HostCall::SetReady { ready: false },
        "{effects:?}"
    );
    assert!(matches!(effects[1], HostCall::Http(_)), "{effects:?}");
}

#[test]
fn an_error_answer_defers_and_keeps_the_vm_out_of_rotation() {
    let mut host = host().http_reply("POST", DRAIN_URL, 503, "busy");
    let event = testing::event(EventType::Redeploy);

    let decision =
        host.on_event::<ThisPlugin>(&event, Phase::Prepare, &testing::context_for(&event));

    assert_eq!(
        reason(&decision),
        format!("the drain at {DRAIN_URL} answered 503")
    );
    assert!(!host.is_ready());
}

#[test]
fn an_unreachable_service_defers_with_the_reason_and_the_next_attempt_approves() {
    let mut host = host()
        .http_error(
            "POST",
            DRAIN_URL,
            HostError::Failed("connection refused".into()),
        )
        .http_reply("POST", DRAIN_URL, 204, "");
    let event = testing::event(EventType::Reboot);
    let ctx = testing::context_for(&event);

    let first = host.on_event::<ThisPlugin>(&event, Phase::Prepare, &ctx);
    assert_eq!(
        reason(&first),
        format!("the drain at {DRAIN_URL}: failed: connection refused")
    );
    let again = Context { attempt: 2, ..ctx };
    let second = host.on_event::<ThisPlugin>(&event, Phase::Prepare, &again);
    assert_eq!(second, Decision::approve());
    assert_eq!(host.http_requests().len(), 2);
}

#[test]
fn without_the_readiness_grant_it_defers_before_telling_the_service() {
    let mut host = TestHost::new().http_reply("POST", DEFAULT_DRAIN_URL, 200, "");
    let event = testing::event(EventType::Reboot);

    let decision =
        host.on_event::<ThisPlugin>(&event, Phase::Prepare, &testing::context_for(&event));

    assert!(
        reason(&decision).contains("add `readiness = true` under [capabilities]"),
        "{decision:?}"
    );
    assert!(host.http_requests().is_empty());
}

#[test]
fn the_end_of_the_event_puts_the_vm_back_in_rotation() {
    for end in [Phase::EndedAfterStart, Phase::EndedWithoutStart] {
        let mut host = host().http_reply("POST", DRAIN_URL, 200, "");
        let event = testing::event(EventType::Reboot);
        let ctx = testing::context_for(&event);
        host.on_event::<ThisPlugin>(&event, Phase::Prepare, &ctx);
        host.on_event::<ThisPlugin>(&event, Phase::Started, &ctx);
        assert!(!host.is_ready(), "still out of rotation while it runs");

        let decision = host.on_event::<ThisPlugin>(&event, end, &ctx);

        assert_eq!(decision, Decision::approve(), "{end}");
        assert!(host.is_ready(), "{end}: back in rotation");
    }
}

#[test]
fn events_for_other_vms_change_nothing() {
    let mut host = host();
    let event = forewarn_sdk::Event {
        resources: vec!["another-vm".into()],
        ..testing::event(EventType::Reboot)
    };
    let ctx = testing::context_for(&event);
    assert!(!ctx.affects_this_vm);

    for phase in [Phase::Prepare, Phase::EndedAfterStart] {
        assert_eq!(
            host.on_event::<ThisPlugin>(&event, phase, &ctx),
            Decision::approve()
        );
    }

    assert!(host.effects().is_empty(), "{:?}", host.effects());
    assert!(host.is_ready());
}

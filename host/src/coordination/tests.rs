use std::time::Duration;

use forewarn_etcd::KeyValue;
use forewarn_imds::{EventField, EventId, ScheduledEvent};

use super::records::{EventRecords, ready_marker, stated_not_before};

#[test]
fn event_records_are_read_by_key() {
    let prefix = "/forewarn/events/E1/";
    let kv = |key: &str, value: &str| KeyValue {
        key: format!("{prefix}{key}"),
        value: value.into(),
        lease: 1,
    };
    let read = EventRecords::read(
        &[
            kv("leader", "vm-b"),
            kv("ready/vm-a", "1000"),
            kv("ready/vm-b", "999"),
            kv("was-ready/vm-c", "vm-c"),
            kv("approval", "vm-b"),
        ],
        prefix,
    );
    assert_eq!(read.leader.as_deref(), Some("vm-b"));
    assert_eq!(read.approval, Some(("vm-b".to_owned(), 1)));
    assert_eq!(read.ready.len(), 2);
    assert_eq!(
        read.ready_for("1000").into_iter().collect::<Vec<_>>(),
        ["vm-a"]
    );
    assert!(read.was_ready.contains("vm-c"));
}

/// E1, a Platform Reboot naming vm-a and vm-b.
fn reboot_of_vm_a_and_b(not_before: Option<std::time::SystemTime>) -> ScheduledEvent {
    ScheduledEvent {
        resources: vec!["vm-a".into(), "vm-b".into()],
        not_before,
        ..ScheduledEvent::new(
            "E1",
            forewarn_imds::EventType::Reboot,
            forewarn_imds::EventStatus::Scheduled,
        )
    }
}

/// An unreadable NotBefore is read as the instant each VM first saw the event, which
/// differs from VM to VM: the ready keys must not carry it, or no VM would count the
/// others ready.
#[test]
fn the_ready_marker_leaves_out_a_not_before_forewarn_could_not_read() {
    let at = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let event = reboot_of_vm_a_and_b(Some(at));
    assert_eq!(ready_marker(&event), "1800000000000");
    let mut unreadable = event.clone();
    unreadable.unreadable.push(forewarn_imds::UnreadableField {
        field: EventField::NotBefore,
        raw: "garbage".into(),
    });
    assert_eq!(ready_marker(&unreadable), "0");
    assert_eq!(stated_not_before(&unreadable), None);
}

#[test]
fn only_the_leader_or_a_change_needs_the_whole_event_read() {
    // (leader seen, leader now, approval claimed) → read everything?
    let rows = [
        (None, None, false, true),                  // nobody leads yet: campaign
        (None, Some("vm-b"), false, true),          // first sight of a leader
        (Some("vm-b"), Some("vm-b"), false, false), // the same leader, nothing claimed: wait
        (Some("vm-b"), Some("vm-b"), true, true),   // claimed: settle the approval
        (Some("vm-b"), Some("vm-c"), false, true),  // another leader now
        (Some("vm-b"), None, false, true),          // the leader is gone: campaign
        (Some("vm-a"), Some("vm-a"), false, true),  // this VM leads: it counts the standings
    ];
    for (seen, now, claimed, expected) in rows {
        assert_eq!(
            super::records::reads_everything("vm-a", seen, now, claimed),
            expected,
            "seen {seen:?}, now {now:?}, claimed {claimed}"
        );
    }
}

#[test]
fn a_connected_coordinator_falls_back_only_after_its_rounds_failed_for_a_while() {
    use super::coordination_status::{Connection, FALL_BACK_AFTER, connection_after};
    use std::time::{Duration, Instant};
    let t0 = Instant::now();
    let rows = [
        // (previous, observed, failing since, now, expected)
        (
            Connection::Connected,
            Connection::Connected,
            None,
            t0,
            Connection::Connected,
        ),
        // An election: the first failures of a connected coordinator are waited out.
        (
            Connection::Connected,
            Connection::Unreachable,
            Some(t0),
            t0,
            Connection::Connected,
        ),
        (
            Connection::Connected,
            Connection::NoQuorum,
            Some(t0),
            t0 + Duration::from_secs(2),
            Connection::Connected,
        ),
        // Failing for longer: fall back.
        (
            Connection::Connected,
            Connection::Unreachable,
            Some(t0),
            t0 + FALL_BACK_AFTER,
            Connection::Unreachable,
        ),
        (
            Connection::Connected,
            Connection::NoQuorum,
            Some(t0),
            t0 + FALL_BACK_AFTER,
            Connection::NoQuorum,
        ),
        // Never connected, or already fallen back: as observed at once.
        (
            Connection::Connecting,
            Connection::Unreachable,
            Some(t0),
            t0,
            Connection::Unreachable,
        ),
        (
            Connection::Unreachable,
            Connection::NoQuorum,
            Some(t0),
            t0,
            Connection::NoQuorum,
        ),
        (
            Connection::Unreachable,
            Connection::Connected,
            None,
            t0,
            Connection::Connected,
        ),
    ];
    for (previous, observed, since, now, expected) in rows {
        assert_eq!(
            connection_after(previous, observed, since, now),
            expected,
            "{previous:?} then {observed:?} at {:?}",
            now.saturating_duration_since(t0)
        );
    }
}

/// The actor tells the daemon each joined event's effective verdict once, when it changes:
/// at the Join (so an event joined while etcd is down hears Unreachable at once), when the
/// link falls back, when this VM claims (a claim approves even while etcd cannot be
/// reached); nothing for an event it left; a fresh verdict after a Join again.
#[test]
fn the_actor_sends_each_effective_verdict_once_when_it_changes() {
    use std::sync::Arc;
    use std::time::Instant;

    use tokio::sync::{mpsc, watch};

    use super::actor::Coordinator;
    use super::etcd_access::EtcdAccess;
    use crate::pipeline::approval::{BarrierRequest, BarrierVerdict};

    let config =
        crate::config::Config::parse("[coordination]\nendpoints = [\"http://127.0.0.1:9\"]\n")
            .ok()
            .and_then(|config| config.coordination)
            .expect("a [coordination] section");
    let client = forewarn_etcd::EtcdClient::connect(&config.etcd_settings()).expect("a client");
    let access = Arc::new(EtcdAccess {
        config,
        vm: "vm-a".into(),
        client,
    });
    let (_requests_tx, requests) = mpsc::unbounded_channel();
    let (verdicts_tx, mut verdicts) = mpsc::unbounded_channel();
    let (status, _) = watch::channel(super::CoordinationStatus::default());
    let clock = forewarn_imds::ImdsClock::new();
    let mut actor = Coordinator::new(access, clock, requests, verdicts_tx, status);
    let mut sent = || {
        let mut all = Vec::new();
        while let Ok((id, verdict)) = verdicts.try_recv() {
            all.push((id, verdict));
        }
        all
    };
    let event = Arc::new(reboot_of_vm_a_and_b(None));
    let e1 = |verdict| vec![(EventId::from("E1"), verdict)];

    actor.apply(BarrierRequest::Join(event.clone()));
    assert_eq!(
        sent(),
        e1(BarrierVerdict::Wait),
        "the Join is answered at once"
    );
    actor.apply(BarrierRequest::Join(event.clone()));
    assert_eq!(sent(), [], "an unchanged verdict is not sent again");

    let down = forewarn_etcd::EtcdError::Unreachable {
        endpoint: "http://127.0.0.1:9".into(),
        message: "connection refused".into(),
        certificate: false,
    };
    actor.record_outcome(Err(down), Instant::now());
    assert_eq!(sent(), e1(BarrierVerdict::Unreachable));

    let why = "this VM claimed".to_owned();
    if let Some(tracked) = actor.events.get_mut("E1") {
        tracked.claimed = true;
        tracked.verdict = BarrierVerdict::Approve { why: why.clone() };
    }
    actor.publish();
    assert_eq!(
        sent(),
        e1(BarrierVerdict::Approve { why }),
        "a claim approves"
    );

    actor.apply(BarrierRequest::Leave("E1".into()));
    assert_eq!(sent(), [], "nothing for an event left");
    assert!(actor.leaving.contains_key("E1") && actor.events.is_empty());
    actor.apply(BarrierRequest::Join(event));
    assert!(actor.leaving.is_empty(), "joined again: its keys are kept");
    assert_eq!(sent(), e1(BarrierVerdict::Unreachable), "a fresh verdict");
    actor.apply(BarrierRequest::Withdraw("E1".into()));
    assert_eq!(actor.withdrawn, [(EventId::from("E1"), false)]);
    assert_eq!(sent(), []);
}

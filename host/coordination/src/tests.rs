use std::time::Duration;

use forewarn_etcd::KeyValue;
use forewarn_imds::{EventField, EventId, ScheduledEvent};

use super::records::{EventRecords, ready_marker, stated_not_before};

/// Only the event's shared keys and each VM's own subtree are read; the layout of earlier
/// versions (`events/ID/ready/VM`, `members/VM`) and other events' keys are not.
#[test]
fn event_records_are_read_from_the_shared_keys_and_each_vms_subtree() {
    use forewarn_pipeline::barrier::{LeaseId, Revision, Stamp};
    let kv = |key: &str, value: &str, lease: i64, mod_revision: i64| KeyValue {
        key: format!("/forewarn/{key}"),
        value: value.into(),
        lease,
        mod_revision,
    };
    let shared = [
        kv("events/E1/leader", "vm-b", 7, 10),
        kv("events/E1/approval", "vm-b", 7, 11),
        // The old layout's ready key: nobody's word any more.
        kv("events/E1/ready/vm-c", "1000", 0, 12),
    ];
    let vms = [
        kv("vms/vm-a/member", "vm-a", 5, 1),
        kv("vms/vm-a/events/E1/ready", "1000", 5, 2),
        kv("vms/vm-a/events/E2/ready", "1000", 5, 3),
        kv("vms/vm-b/member", "vm-b", 7, 4),
        kv("vms/vm-b/events/E1/was-ready", "vm-b", 99, 5),
        kv("vms/vm-b/events/E1/leads", "vm-b", 7, 10),
        kv("vms/vm-b/events/E1/claim", "vm-b", 7, 11),
    ];
    let read = EventRecords::read(
        &shared,
        "/forewarn/events/E1/",
        &vms,
        "/forewarn/vms/",
        &EventId::from("E1"),
    );
    let stamp = |lease, revision| Stamp {
        lease: LeaseId(lease),
        revision: Revision(revision),
    };
    let leader = read.leader.as_ref().expect("a leader key");
    assert_eq!(
        (leader.names.as_str(), leader.stamp),
        ("vm-b", stamp(7, 10))
    );
    assert_eq!(read.approval.as_ref().map(|a| a.stamp), Some(stamp(7, 11)));
    assert_eq!(read.subtrees.len(), 2, "{:?}", read.subtrees);
    let vm_a = &read.subtrees["vm-a"];
    assert_eq!(vm_a.ready, Some(("1000".to_owned(), stamp(5, 2))));
    assert_eq!(vm_a.ready_for("1000"), Some(Revision(2)));
    let vm_b = &read.subtrees["vm-b"];
    assert!(vm_b.was_ready && vm_b.ready.is_none());
    assert_eq!(vm_b.leads, Some(stamp(7, 10)));
    assert_eq!(vm_b.claim, Some(stamp(7, 11)));
    assert!(!read.subtrees.contains_key("vm-c"));
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
    use forewarn_pipeline::barrier::Revision;
    let b = Some(("vm-b", Revision(10)));
    // (leader seen, leader now, approval claimed) → read everything?
    let rows = [
        (None, None, false, true), // nobody leads yet: campaign
        (None, b, false, true),    // first sight of a leader
        (b, b, false, false),      // the same write, nothing claimed: wait
        (b, b, true, true),        // claimed: settle the approval
        (b, Some(("vm-c", Revision(11))), false, true), // another leader now
        (b, Some(("vm-b", Revision(12))), false, true), // vm-b's name written again: judge it
        (b, None, false, true),    // the leader is gone: campaign
        (
            Some(("vm-a", Revision(9))),
            Some(("vm-a", Revision(9))),
            false,
            true,
        ), // this VM leads
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
    use forewarn_pipeline::approval::{BarrierRequest, BarrierVerdict};

    let config =
        toml::from_str::<crate::CoordinationConfig>("endpoints = [\"http://127.0.0.1:9\"]\n")
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
    if let Some(tracked) = actor.barrier.tracked_mut("E1") {
        tracked.claim(why.clone());
    }
    actor.publish();
    assert_eq!(
        sent(),
        e1(BarrierVerdict::Approve { why }),
        "a claim approves"
    );

    actor.apply(BarrierRequest::Leave("E1".into()));
    assert_eq!(sent(), [], "nothing for an event left");
    assert!(actor.barrier.is_leaving("E1") && actor.barrier.joined().is_empty());
    actor.apply(BarrierRequest::Join(event));
    assert!(
        !actor.barrier.is_leaving("E1"),
        "joined again: its keys are kept"
    );
    assert_eq!(sent(), e1(BarrierVerdict::Unreachable), "a fresh verdict");
    actor.apply(BarrierRequest::Withdraw("E1".into()));
    assert_eq!(
        actor.barrier.withdrawn(),
        [(EventId::from("E1"), super::tracked_event::Held::default())]
    );
    assert_eq!(sent(), []);
}

/// `/status` shows an event's barrier state as its line (the status page prints it) and as
/// its typed stage, and a reader of the JSON gets the typed state back, not the line.
#[test]
fn a_barrier_state_is_written_as_its_line_and_read_back_typed() {
    use super::{BarrierState, EventBarrier};

    let barrier = EventBarrier {
        event_id: EventId::from("E1"),
        leader: Some("vm-b".into()),
        state: BarrierState::OtherLeads {
            leader: "vm-b".into(),
        },
        ..EventBarrier::default()
    };
    let json = serde_json::to_value(&barrier).expect("serializes");
    assert_eq!(json["state"], "vm-b leads; waiting for it to approve");
    assert_eq!(json["stage"]["kind"], "other-leads");
    assert_eq!(json["stage"]["leader"], "vm-b");
    let read: EventBarrier = serde_json::from_value(json).expect("reads back");
    assert_eq!(read, barrier);
    let waiting = BarrierState::ThisVmLeads {
        waiting: vec!["vm-c".into(), "vm-d".into()],
    };
    assert_eq!(waiting.to_string(), "this VM leads; waiting for vm-c, vm-d");
}

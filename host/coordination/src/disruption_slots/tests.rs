use forewarn_etcd::{EtcdClient, KeyValue};

use super::*;
use crate::coordination_config::CoordinationConfig;

fn access(vm: &str) -> EtcdAccess {
    let config: CoordinationConfig = toml::from_str(
        "endpoints = [\"http://127.0.0.1:9\"]\nprefix = \"/fw\"\ndisruption-budget = \"50%\"\n",
    )
    .expect("a [coordination] section with a budget");
    let client = EtcdClient::connect(&config.etcd_settings()).expect("a plain client");
    EtcdAccess {
        config,
        vm: vm.to_owned(),
        client,
    }
}

fn kv(key: &str, value: &str, lease: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: value.to_owned(),
        lease,
        mod_revision: 1,
    }
}

fn slot(group: &str, member_lease: i64) -> String {
    serde_json::to_string(&SlotRecord {
        group: group.into(),
        member_lease,
        forced: false,
        taken_unix_ms: 5,
    })
    .unwrap()
}

fn queued(group: &str, not_before: u64, ready: u64) -> String {
    serde_json::to_string(&QueueRecord {
        group: group.into(),
        not_before_unix_ms: Some(not_before),
        ready_unix_ms: ready,
    })
    .unwrap()
}

#[test]
fn the_view_counts_the_groups_live_vms_and_slot_holders_and_skips_other_groups() {
    let keys = [
        kv("/fw/vms/vm-a/member", "vm-a", 11),
        kv("/fw/vms/vm-a/group", "web", 11),
        kv("/fw/vms/vm-b/member", "vm-b", 12),
        kv("/fw/vms/vm-b/group", "web", 12),
        kv("/fw/vms/vm-b/queue/E2", &queued("web", 900, 3), 12),
        // Another group's VM and queue entry.
        kv("/fw/vms/vm-x/member", "vm-x", 13),
        kv("/fw/vms/vm-x/group", "db", 13),
        kv("/fw/vms/vm-x/queue/E9", &queued("db", 100, 1), 13),
        // vm-c is down (no member key) but holds a slot under its old lease.
        kv("/fw/vms/vm-c/slots/E3", &slot("web", 14), 99),
        // vm-a holds one under its live lease.
        kv("/fw/vms/vm-a/slots/E1", &slot("web", 11), 98),
        // Not a record: skipped.
        kv("/fw/vms/vm-d/slots/E4", "forged", 97),
        kv("/fw/vms/vm-a/events/E1/ready", "0", 11),
    ];
    let view = budget_view(&access("vm-a"), "web", &keys);
    let known: Vec<&str> = view.known_vms.iter().map(String::as_str).collect();
    assert_eq!(known, ["vm-a", "vm-b", "vm-c"]);
    let holders: Vec<(&str, bool)> = view
        .slots
        .iter()
        .map(|slot| (slot.vm.as_str(), slot.holder_alive))
        .collect();
    assert_eq!(holders, [("vm-c", false), ("vm-a", true)]);
    assert_eq!(view.queue.len(), 1);
    assert_eq!(view.queue[0].vm, "vm-b");
    assert_eq!(view.queue[0].event_id, "E2");
    assert_eq!(view.in_use(DeadVm::Hold), 2);
    assert_eq!(view.in_use(DeadVm::CountsAsReady), 1);
}

#[test]
fn a_daemon_restarted_under_a_new_lease_no_longer_counts_its_old_slot_as_alive() {
    let keys = [
        kv("/fw/vms/vm-a/member", "vm-a", 21),
        kv("/fw/vms/vm-a/group", "fleet", 21),
        kv("/fw/vms/vm-a/slots/E1", &slot("fleet", 11), 98),
    ];
    let view = budget_view(&access("vm-a"), "fleet", &keys);
    assert!(!view.slots[0].holder_alive);
}

fn event(id: &str) -> ScheduledEvent {
    ScheduledEvent::new(
        id,
        forewarn_imds::EventType::Reboot,
        forewarn_imds::EventStatus::Scheduled,
    )
}

#[test]
fn a_waiting_event_waits_a_held_one_approves_and_a_forced_one_needs_no_verdict() {
    let mut keeper = SlotKeeper::for_config(&access("vm-a")).expect("a budget is set");
    keeper.queue(&event("E1"), ImdsTime::from_unix_ms(1));
    keeper.occupy(&event("E2"));
    assert_eq!(
        keeper.verdicts(false),
        vec![(EventId::from("E1"), BarrierVerdict::Wait)]
    );
    keeper.hold(&EventId::from("E1"), false, 7);
    assert!(matches!(
        keeper.verdicts(false).as_slice(),
        [(id, BarrierVerdict::Approve { .. })] if id == "E1"
    ));
    // Left Scheduled while holding: the slot stays until the plugins have recovered.
    keeper.leave(&EventId::from("E1"));
    assert!(keeper.claims.contains_key("E1"));
    keeper.recovered(&EventId::from("E1"));
    assert!(!keeper.claims.contains_key("E1"));
    assert!(keeper.releases.contains("E1"));
}

#[test]
fn while_etcd_is_unreachable_a_waiting_event_waits_unless_the_operator_chose_otherwise() {
    let mut keeper = SlotKeeper::for_config(&access("vm-a")).expect("a budget is set");
    keeper.queue(&event("E1"), ImdsTime::from_unix_ms(1));
    assert_eq!(
        keeper.verdicts(true),
        vec![(EventId::from("E1"), BarrierVerdict::Wait)]
    );
    assert!(!keeper.status(true).approving_alone);
    keeper.unreachable = BudgetUnreachable::ApproveAlone;
    assert!(matches!(
        keeper.verdicts(true).as_slice(),
        [(_, BarrierVerdict::Approve { why })] if why.contains("approve-alone")
    ));
    assert!(keeper.status(true).approving_alone);
    // Reachable again: it waits for a slot.
    assert_eq!(
        keeper.verdicts(false),
        vec![(EventId::from("E1"), BarrierVerdict::Wait)]
    );
}

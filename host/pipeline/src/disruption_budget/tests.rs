use std::time::Duration;

use super::*;

fn claim(vm: &str, not_before_s: Option<u64>, ready_s: u64) -> QueuedClaim {
    QueuedClaim {
        vm: vm.into(),
        event_id: format!("{vm}-event"),
        not_before: not_before_s.map(|s| ImdsTime::from_unix_ms(s * 1000)),
        ready_at: ImdsTime::from_unix_ms(ready_s * 1000),
    }
}

fn slot(vm: &str, holder_alive: bool) -> HeldSlot {
    HeldSlot {
        vm: vm.into(),
        event_id: format!("{vm}-event"),
        holder_alive,
        forced: false,
    }
}

fn view(known: usize, slots: Vec<HeldSlot>, queue: Vec<QueuedClaim>) -> BudgetView {
    BudgetView {
        known_vms: (0..known).map(|i| format!("vm-{i:03}")).collect(),
        slots,
        queue,
    }
}

#[test]
fn a_budget_reads_as_a_count_or_a_percentage_and_refuses_zero_and_over_the_whole() {
    assert_eq!(DisruptionBudget::parse("3"), Ok(DisruptionBudget::Count(3)));
    assert_eq!(
        DisruptionBudget::parse(" 10% "),
        Ok(DisruptionBudget::Percent(10))
    );
    assert_eq!(DisruptionBudget::parse("0"), Err(BudgetError::Zero));
    assert_eq!(DisruptionBudget::parse("0%"), Err(BudgetError::Zero));
    assert_eq!(
        DisruptionBudget::parse("150%"),
        Err(BudgetError::OverHundred(150))
    );
    assert!(matches!(
        DisruptionBudget::parse("ten"),
        Err(BudgetError::Unreadable(_))
    ));
    #[derive(serde::Deserialize)]
    struct Section {
        budget: DisruptionBudget,
    }
    let count: Section = toml::from_str("budget = 2").expect("an integer");
    assert_eq!(count.budget, DisruptionBudget::Count(2));
    let percent: Section = toml::from_str("budget = \"25%\"").expect("a percentage");
    assert_eq!(percent.budget, DisruptionBudget::Percent(25));
    let refused = toml::from_str::<Section>("budget = \"0%\"")
        .err()
        .expect("0% refused");
    assert!(
        refused.to_string().contains("lets no VM approve early"),
        "{refused}"
    );
}

#[test]
fn a_percentage_rounds_down_and_never_below_one_vm() {
    let ten = DisruptionBudget::Percent(10);
    assert_eq!(ten.slots(100), 10);
    assert_eq!(ten.slots(59), 5);
    assert_eq!(ten.slots(9), 1);
    assert_eq!(ten.slots(0), 1);
    assert_eq!(DisruptionBudget::Count(2).slots(1000), 2);
}

#[test]
fn the_first_in_the_queue_take_the_free_slots_and_the_rest_wait() {
    // 20 VMs, 10 % = 2 slots, one held: one is free, for the earliest NotBefore.
    let queue = vec![
        claim("vm-b", Some(200), 1),
        claim("vm-a", Some(100), 5),
        claim("vm-c", Some(100), 9),
    ];
    let seen = view(20, vec![slot("vm-x", true)], queue);
    let budget = DisruptionBudget::Percent(10);
    assert_eq!(
        turn(
            &seen,
            budget,
            DeadVm::Hold,
            "vm-a",
            &EventId::from("vm-a-event")
        ),
        Turn::Take
    );
    // Same NotBefore: the first ready comes first.
    assert_eq!(
        turn(
            &seen,
            budget,
            DeadVm::Hold,
            "vm-c",
            &EventId::from("vm-c-event")
        ),
        Turn::Wait {
            ahead: 1,
            in_use: 1,
            slots: 2
        }
    );
    assert_eq!(
        turn(
            &seen,
            budget,
            DeadVm::Hold,
            "vm-b",
            &EventId::from("vm-b-event")
        ),
        Turn::Wait {
            ahead: 2,
            in_use: 1,
            slots: 2
        }
    );
}

#[test]
fn an_event_without_not_before_queues_last_and_one_not_queued_yet_after_it() {
    let queue = vec![claim("vm-a", None, 1), claim("vm-b", Some(500), 9)];
    let seen = view(10, Vec::new(), queue);
    let one = DisruptionBudget::Count(1);
    assert_eq!(
        turn(
            &seen,
            one,
            DeadVm::Hold,
            "vm-b",
            &EventId::from("vm-b-event")
        ),
        Turn::Take
    );
    assert!(matches!(
        turn(
            &seen,
            one,
            DeadVm::Hold,
            "vm-a",
            &EventId::from("vm-a-event")
        ),
        Turn::Wait { ahead: 1, .. }
    ));
    assert!(matches!(
        turn(
            &seen,
            one,
            DeadVm::Hold,
            "vm-z",
            &EventId::from("vm-z-event")
        ),
        Turn::Wait { ahead: 2, .. }
    ));
}

#[test]
fn a_dead_holder_keeps_its_slot_under_hold_and_frees_it_when_it_counts_as_ready() {
    let seen = view(
        10,
        vec![slot("vm-dead", false)],
        vec![claim("vm-a", Some(100), 1)],
    );
    let one = DisruptionBudget::Count(1);
    assert_eq!(seen.in_use(DeadVm::Hold), 1);
    assert!(matches!(
        turn(
            &seen,
            one,
            DeadVm::Hold,
            "vm-a",
            &EventId::from("vm-a-event")
        ),
        Turn::Wait { in_use: 1, .. }
    ));
    assert_eq!(seen.in_use(DeadVm::CountsAsReady), 0);
    assert_eq!(
        turn(
            &seen,
            one,
            DeadVm::CountsAsReady,
            "vm-a",
            &EventId::from("vm-a-event")
        ),
        Turn::Take
    );
}

#[test]
fn spot_evictions_and_short_notices_are_never_held() {
    let now = ImdsTime::from_unix_ms(1_000_000_000);
    let short = Duration::from_secs(30);
    let far = crate::test_harness::event("E1", EventType::Reboot, now, Duration::from_secs(600));
    assert!(!never_held(&far, now, short));
    let soon = crate::test_harness::event("E2", EventType::Reboot, now, Duration::from_secs(20));
    assert!(never_held(&soon, now, short));
    let unknown = ScheduledEvent {
        not_before: None,
        ..far.clone()
    };
    assert!(never_held(&unknown, now, short));
    let spot = crate::test_harness::event("E3", EventType::Preempt, now, Duration::from_secs(600));
    assert!(never_held(&spot, now, short));
}

use std::time::UNIX_EPOCH;

use super::*;
use crate::builtin::builtin_scenario;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn mins(m: u64) -> Duration {
    Duration::from_secs(m * 60)
}

fn scenario(text: &str) -> Scenario {
    Scenario::from_toml(text, "test.toml").unwrap()
}

fn builtin(name: &str) -> Scenario {
    builtin_scenario(name).unwrap()
}

fn only_id(sim: &Simulation, scenario: &Scenario) -> EventId {
    assert_eq!(scenario.events.len(), 1);
    let id = EventId::from(scenario.events[0].id());
    assert!(sim.phase_of(id.as_str()).is_some());
    id
}

fn transitions(sim: &Simulation) -> Vec<Transition> {
    sim.history()
        .iter()
        .map(|change| change.transition)
        .collect()
}

fn clock() -> ScenarioClock {
    ScenarioClock::starting_at(UNIX_EPOCH + secs(1_000_000), 1.0)
}

#[test]
fn approval_starts_the_event_and_runs_for_removes_it() {
    let scenario = builtin("user-reboot");
    let mut sim = Simulation::new(&scenario);
    let id = only_id(&sim, &scenario);
    sim.advance(secs(1));
    assert_eq!(sim.document(&clock()).events.len(), 0);
    assert_eq!(sim.incarnation(), 1);

    sim.advance(secs(6));
    let document = sim.document(&clock());
    assert_eq!(document.incarnation, Some(2));
    assert_eq!(document.events[0].status, EventStatus::Scheduled);
    let expected_not_before = clock().wall_at(secs(5) + mins(15));
    assert_eq!(document.events[0].not_before, Some(expected_not_before));

    let effects = sim.approve(secs(10), std::slice::from_ref(&id)).unwrap();
    assert_eq!(effects, vec![ApprovalEffect::StartedNow]);
    let document = sim.document(&clock());
    assert_eq!(document.incarnation, Some(3));
    assert_eq!(document.events[0].status, EventStatus::Started);
    assert_eq!(document.events[0].not_before, None);
    assert_eq!(document.events[0].id, id);

    let again = sim.approve(secs(11), std::slice::from_ref(&id)).unwrap();
    assert_eq!(again, vec![ApprovalEffect::AlreadyStarted]);
    assert_eq!(sim.incarnation(), 3);

    let runs_for = scenario.events[0].runs_for_or_default();
    sim.advance(secs(10) + runs_for);
    assert!(sim.document(&clock()).events.is_empty());
    assert_eq!(sim.incarnation(), 4);
    assert_eq!(
        transitions(&sim),
        vec![
            Transition::Appeared,
            Transition::Started,
            Transition::Removed
        ]
    );
}

#[test]
fn not_before_passing_starts_the_event_without_approval() {
    let scenario = builtin("live-migration");
    let mut sim = Simulation::new(&scenario);
    let id = only_id(&sim, &scenario);
    let not_before = scenario.events[0].appear_at + scenario.events[0].notice_or_default();
    sim.advance(not_before - secs(1));
    assert!(matches!(
        sim.phase_of(id.as_str()),
        Some(Phase::Scheduled { .. })
    ));
    sim.advance(not_before);
    assert_eq!(
        sim.phase_of(id.as_str()),
        Some(Phase::Started { since: not_before })
    );
}

#[test]
fn lazy_catch_up_records_exact_instants() {
    let scenario = builtin("spot-preemption");
    let mut sim = Simulation::new(&scenario);
    sim.advance(mins(60));
    let spec = &scenario.events[0];
    let at: Vec<Duration> = sim.history().iter().map(|change| change.at).collect();
    let started = spec.appear_at + spec.notice_or_default();
    assert_eq!(
        at,
        vec![
            spec.appear_at,
            started,
            started + spec.runs_for_or_default()
        ]
    );
    assert_eq!(sim.incarnation(), 4);
}

#[test]
fn canceled_event_disappears_without_starting() {
    let scenario = builtin("canceled-maintenance");
    let mut sim = Simulation::new(&scenario);
    let cancel_at = scenario.events[0].cancel_at.unwrap();
    sim.advance(cancel_at);
    assert!(sim.document(&clock()).events.is_empty());
    assert_eq!(
        transitions(&sim),
        vec![Transition::Appeared, Transition::Canceled]
    );
    assert_eq!(sim.finishes_at().map(|at| at >= cancel_at), Some(true));
}

#[test]
fn approval_before_cancel_means_it_starts_instead() {
    let scenario = builtin("canceled-maintenance");
    let mut sim = Simulation::new(&scenario);
    let id = only_id(&sim, &scenario);
    sim.approve(secs(10), std::slice::from_ref(&id)).unwrap();
    sim.advance(scenario.events[0].cancel_at.unwrap());
    assert!(matches!(
        sim.phase_of(id.as_str()),
        Some(Phase::Started { .. })
    ));
}

#[test]
fn hardware_failure_appears_already_started() {
    let scenario = builtin("hardware-failure");
    let mut sim = Simulation::new(&scenario);
    sim.advance(scenario.events[0].appear_at);
    let document = sim.document(&clock());
    assert_eq!(document.events[0].status, EventStatus::Started);
    assert_eq!(document.events[0].event_type, EventType::Reboot);
    assert_eq!(document.events[0].not_before, None);
    assert_eq!(transitions(&sim), vec![Transition::Appeared]);
}

#[test]
fn reschedule_moves_not_before_later_and_keeps_the_id() {
    let scenario = builtin("rescheduled");
    let mut sim = Simulation::new(&scenario);
    let id = only_id(&sim, &scenario);
    let spec = &scenario.events[0];
    sim.advance(spec.appear_at);
    let before = sim.document(&clock()).events[0].not_before.unwrap();
    let change = &spec.reschedule[0];
    sim.advance(change.at);
    let document = sim.document(&clock());
    let after = document.events[0].not_before.unwrap();
    assert!(after > before, "NotBefore must move later");
    assert_eq!(after, clock().wall_at(change.at + change.notice.unwrap()));
    assert_eq!(document.events[0].id, id);
    assert_eq!(document.incarnation, Some(3));
    assert_eq!(
        transitions(&sim),
        vec![Transition::Appeared, Transition::Rescheduled]
    );
}

#[test]
fn reschedule_can_change_resources() {
    let mut sim = Simulation::new(&scenario(
        r#"
name = "r"
vms = ["vm-a", "vm-b"]
[[events]]
type = "Freeze"
appear_at = "1s"
[[events.reschedule]]
at = "2s"
resources = ["vm-b"]
"#,
    ));
    sim.advance(secs(1));
    assert_eq!(sim.document(&clock()).events[0].resources.len(), 2);
    sim.advance(secs(2));
    assert_eq!(sim.document(&clock()).events[0].resources, vec!["vm-b"]);
}

#[test]
fn multi_vm_event_names_every_vm_and_one_approval_starts_it() {
    let scenario = builtin("multi-vm");
    let mut sim = Simulation::new(&scenario);
    let id = only_id(&sim, &scenario);
    sim.advance(scenario.events[0].appear_at);
    let document = sim.document(&clock());
    assert_eq!(document.events[0].resources, vec!["vm-a", "vm-b", "vm-c"]);
    sim.approve(
        scenario.events[0].appear_at + secs(1),
        &[id.as_str().to_lowercase().into()],
    )
    .unwrap();
    assert_eq!(
        sim.document(&clock()).events[0].status,
        EventStatus::Started
    );
}

#[test]
fn unknown_approval_changes_nothing() {
    let scenario = builtin("two-events");
    let mut sim = Simulation::new(&scenario);
    sim.advance(mins(1));
    let incarnation = sim.incarnation();
    let ids = vec![EventId::from(scenario.events[0].id()), "nope".into()];
    assert_eq!(
        sim.approve(mins(1), &ids),
        Err(UnknownEvent("nope".to_string()))
    );
    assert_eq!(sim.incarnation(), incarnation);
    assert!(matches!(
        sim.phase_of(scenario.events[0].id()),
        Some(Phase::Scheduled { .. })
    ));
}

#[test]
fn two_events_share_one_document() {
    let scenario = builtin("two-events");
    let mut sim = Simulation::new(&scenario);
    let last_appearance = scenario.events.iter().map(|e| e.appear_at).max().unwrap();
    sim.advance(last_appearance);
    assert_eq!(sim.document(&clock()).events.len(), 2);
}

#[test]
fn incarnation_reset_drops_to_one_and_events_continue() {
    let mut sim = Simulation::new(&scenario(
        r#"
name = "reset"
[[events]]
type = "Reboot"
appear_at = "1s"
notice = "10s"
runs_for = "10s"
[[faults]]
kind = "incarnation-reset"
at = "5s"
"#,
    ));
    sim.advance(secs(4));
    assert_eq!(sim.incarnation(), 2);
    sim.advance(secs(5));
    assert_eq!(sim.incarnation(), 1);
    assert_eq!(sim.document(&clock()).events.len(), 1);
    sim.advance(secs(11));
    assert_eq!(sim.incarnation(), 2);
    assert_eq!(
        sim.document(&clock()).events[0].status,
        EventStatus::Started
    );
}

#[test]
fn finished_waits_for_every_event_and_end_after() {
    let mut sim = Simulation::new(&scenario(
        r#"
name = "f"
end_after = "5s"
[[events]]
type = "Freeze"
appear_at = "1s"
notice = "1s"
runs_for = "1s"
[[events]]
type = "Freeze"
appear_at = "10s"
notice = "1s"
runs_for = "1s"
"#,
    ));
    sim.advance(secs(4));
    assert!(!sim.is_finished(), "the second event has not appeared yet");
    sim.advance(secs(12));
    assert_eq!(sim.finishes_at(), Some(secs(17)));
    assert!(!sim.is_finished());
    sim.advance(secs(17));
    assert!(sim.is_finished());
}

#[test]
fn unknown_event_types_pass_through() {
    let mut sim = Simulation::new(&scenario(
        "name = \"u\"\n[[events]]\ntype = \"Hibernate\"\nappear_at = \"0s\"\n",
    ));
    sim.advance(secs(0));
    let document = sim.document(&clock());
    assert_eq!(document.events[0].event_type, EventType::Unknown);
    assert_eq!(document.events[0].event_type_raw, "Hibernate");
}

#[test]
fn full_lifecycle_shows_start_and_end_without_start() {
    let scenario = builtin("full-lifecycle");
    let mut sim = Simulation::new(&scenario);
    sim.advance(mins(24 * 60));
    assert!(sim.is_finished());
    let kinds = transitions(&sim);
    assert!(kinds.contains(&Transition::Removed), "{kinds:?}");
    assert!(kinds.contains(&Transition::Canceled), "{kinds:?}");
}

#[test]
fn a_cancel_while_an_approval_waits_ends_the_event_without_start() {
    let mut sim = Simulation::new(&scenario(
        r#"
name = "w"
[[events]]
id = "W"
type = "Reboot"
appear_at = "1s"
start_after_approval = "20s"
cancel_at = "10s"
"#,
    ));
    let effects = sim.approve(secs(2), &["W".into()]).unwrap();
    assert_eq!(effects, vec![ApprovalEffect::StartsLater]);
    let again = sim.approve(secs(3), &["w".into()]).unwrap();
    assert_eq!(again, vec![ApprovalEffect::AlreadyApproved]);
    sim.advance(secs(30));
    assert_eq!(
        transitions(&sim),
        vec![Transition::Appeared, Transition::Canceled]
    );
}

#[test]
fn not_before_still_starts_an_event_whose_approval_waits_longer() {
    let mut sim = Simulation::new(&scenario(
        r#"
name = "n"
[[events]]
id = "N"
type = "Reboot"
appear_at = "1s"
notice = "5s"
start_after_approval = "1m"
"#,
    ));
    sim.approve(secs(2), &["N".into()]).unwrap();
    sim.advance(secs(6));
    assert_eq!(sim.phase_of("N"), Some(Phase::Started { since: secs(6) }));
}

#[test]
fn started_events_cannot_wait_for_approval_or_start_late() {
    for field in ["start_after_approval = \"5s\"", "starts_late_by = \"5s\""] {
        let text = format!(
            "name = \"s\"\n[[events]]\ntype = \"Reboot\"\nappear_at = \"1s\"\nstatus = \"Started\"\n{field}\n"
        );
        let error = Scenario::from_toml(&text, "s.toml")
            .unwrap_err()
            .to_string();
        assert!(error.contains("events[0]"), "{error}");
    }
}

/// Three instances of one scale-in, each told by its own Terminate (`delete_group`).
fn scale_in_of_three() -> Scenario {
    let mut text = String::from(
        "name = \"scale-in\"\nvms = [\"vm-a\", \"vm-b\", \"vm-c\"]\nvm_scale_set = \"vmss-sim\"\n",
    );
    for vm in ["vm-a", "vm-b", "vm-c"] {
        text.push_str(&format!(
            "\n[[events]]\nid = \"delete-{vm}\"\ntype = \"Terminate\"\nsource = \"User\"\nresources = [\"{vm}\"]\nappear_at = \"5s\"\nnotice = \"10m\"\ndelete_group = \"scale-in-1\"\nruns_for = \"1m\"\n"
        ));
    }
    scenario(&text)
}

#[test]
fn an_approved_instance_of_a_delete_waits_for_the_others_and_all_go_together() {
    let mut sim = Simulation::new(&scale_in_of_three());
    sim.advance(secs(6));
    let effects = sim
        .approve(secs(10), &[EventId::from("delete-vm-a")])
        .unwrap();
    assert_eq!(effects, [ApprovalEffect::StartsLater]);
    sim.approve(secs(20), &[EventId::from("delete-vm-b")])
        .unwrap();
    sim.advance(secs(100));
    assert!(matches!(
        sim.phase_of("delete-vm-a"),
        Some(Phase::Scheduled {
            approved_at: Some(_),
            ..
        })
    ));
    let effects = sim
        .approve(secs(120), &[EventId::from("delete-vm-c")])
        .unwrap();
    assert_eq!(effects, [ApprovalEffect::StartedNow]);
    let started: Vec<(String, Duration)> = sim
        .history()
        .iter()
        .filter(|change| change.transition == Transition::Started)
        .map(|change| (change.event_id.clone(), change.at))
        .collect();
    assert_eq!(
        started,
        [
            ("delete-vm-a".to_owned(), secs(120)),
            ("delete-vm-b".to_owned(), secs(120)),
            ("delete-vm-c".to_owned(), secs(120)),
        ]
    );
}

#[test]
fn a_delete_not_wholly_approved_goes_at_not_before() {
    let mut sim = Simulation::new(&scale_in_of_three());
    sim.advance(secs(6));
    sim.approve(secs(10), &[EventId::from("delete-vm-a")])
        .unwrap();
    sim.advance(secs(5) + mins(10) - Duration::from_millis(1));
    assert!(!transitions(&sim).contains(&Transition::Started));
    sim.advance(secs(5) + mins(10));
    let started = transitions(&sim)
        .iter()
        .filter(|transition| **transition == Transition::Started)
        .count();
    assert_eq!(started, 3);
}

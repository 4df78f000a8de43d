use std::time::{Duration, UNIX_EPOCH};

use forewarn_imds::ImdsTime;

use super::*;

#[test]
fn a_quarantined_plugin_is_listed_and_the_events_it_holds_say_so() {
    use crate::pipeline::state::{EventProgress, Lifecycle};
    use forewarn_manifest::PluginManifest;

    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let event = forewarn_imds::ScheduledEvent {
        resources: vec!["vm-a".into()],
        not_before: Some(now + Duration::from_secs(600)),
        ..forewarn_imds::ScheduledEvent::new(
            "E1",
            forewarn_imds::EventType::Reboot,
            forewarn_imds::EventStatus::Scheduled,
        )
    };
    let mut state = DaemonState::default();
    let progress = EventProgress::new(
        event,
        Handling::Prepare {
            affects_this_vm: true,
        },
        Lifecycle::Scheduled,
    );
    state
        .events
        .insert("E1".into(), std::sync::Arc::new(progress));
    let roster = Roster::new(vec![
        ("guard".into(), PluginManifest::default().terms()),
        (
            "notify".into(),
            PluginManifest::parse("on-failure = \"approve\"")
                .unwrap()
                .terms(),
        ),
    ]);
    let plugins = PluginSet::of_roster(roster);
    let quarantined = |plugin: &str, on_failure| QuarantinedPlugin {
        plugin: plugin.into(),
        on_failure,
        since_unix_ms: ImdsTime::from_unix_ms(1_800_000_000_000),
        failures: 5,
        window_ms: 60_000,
        last_failure: AnswerOutcome::Trap,
        reason: "wasm trap: unreachable".into(),
    };
    let snapshot = build_snapshot(
        StatusInputs {
            running: true,
            polling_since: Some(now),
            vm_name: "vm-a",
            state: &state,
            poll: &PollStatus::default(),
            plugins: &plugins,
            ready: true,
            held_by: vec![],
            readyz_probers: 0,
            coordination: None,
            waiting_for: None,
            quarantined: vec![
                quarantined("guard", FailurePolicy::Hold),
                quarantined("notify", FailurePolicy::Approve),
            ],
            storage: StorageView::default(),
            scale_set_health: Default::default(),
        },
        now,
    );
    // The advisory plugin does not hold the event; the other one does.
    assert_eq!(snapshot.events[0].held_by_quarantined, ["guard"]);
    assert!(
        snapshot.events[0]
            .approval
            .starts_with("pending: held by quarantined plugin guard"),
        "{}",
        snapshot.events[0].approval
    );
    let json = serde_json::to_value(&snapshot).unwrap();
    assert_eq!(json["quarantined_plugins"][0]["plugin"], "guard");
    assert_eq!(json["quarantined_plugins"][0]["on_failure"], "hold");
    assert_eq!(json["events"][0]["held_by_quarantined"][0], "guard");
}

#[test]
fn time_left_reads_at_a_glance() {
    assert_eq!(format_time_left(0), "0s");
    assert_eq!(format_time_left(59), "59s");
    assert_eq!(format_time_left(245), "4m05s");
    assert_eq!(format_time_left(3720), "1h02m");
    assert_eq!(format_time_left(-12), "-12s");
}

/// The snapshot of a running vm-a with nothing loaded, polling since `polling_since`.
fn running_snapshot(
    poll: &PollStatus,
    polling_since: SystemTime,
    now: SystemTime,
) -> StatusSnapshot {
    build_snapshot(
        StatusInputs {
            running: true,
            polling_since: Some(polling_since),
            vm_name: "vm-a",
            state: &DaemonState::default(),
            poll,
            plugins: &PluginSet::default(),
            ready: true,
            held_by: vec![],
            readyz_probers: 0,
            coordination: None,
            waiting_for: None,
            quarantined: vec![],
            storage: StorageView::default(),
            scale_set_health: Default::default(),
        },
        now,
    )
}

#[test]
fn snapshot_of_an_empty_daemon() {
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let poll = PollStatus {
        polls: 3,
        last_success: Some(now),
        ..PollStatus::default()
    };
    let snapshot = running_snapshot(&poll, now - Duration::from_secs(5), now);
    assert_eq!(snapshot.phase, DaemonPhase::Running);
    assert_eq!(snapshot.imds.polls, 3);
    assert_eq!(snapshot.generated_at, "2027-01-15T08:00:00Z");
    let json = serde_json::to_string(&snapshot).unwrap();
    let back: StatusSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, snapshot);
}

#[test]
fn until_imds_answers_the_phase_says_so_and_how_long() {
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let poll = PollStatus {
        polls: 4,
        last_error: Some("IMDS answered 503".into()),
        consecutive_failures: 4,
        ..PollStatus::default()
    };
    let snapshot = running_snapshot(&poll, now - Duration::from_secs(75), now);
    assert_eq!(snapshot.phase, DaemonPhase::WaitingForImds);
    assert_eq!(snapshot.imds_wait_seconds, Some(75));
    let waiting_for = snapshot.waiting_for.clone().unwrap();
    assert!(waiting_for.contains("1m15s"), "{waiting_for}");
    assert!(waiting_for.contains("503"), "{waiting_for}");
    assert!(waiting_for.contains(FIRST_CALL_PATIENCE), "{waiting_for}");
}

#[test]
fn a_drained_vm_no_load_balancer_probes_gets_a_warning_and_a_probed_one_none() {
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let (state, poll, plugins) = (
        DaemonState::default(),
        PollStatus::default(),
        PluginSet::default(),
    );
    let inputs = |ready: bool, readyz_probers: usize| StatusInputs {
        running: true,
        polling_since: Some(now),
        vm_name: "vm-a",
        state: &state,
        poll: &poll,
        plugins: &plugins,
        ready,
        held_by: if ready {
            vec![]
        } else {
            vec!["lb-drain".into()]
        },
        readyz_probers,
        coordination: None,
        waiting_for: None,
        quarantined: vec![],
        storage: StorageView::default(),
        scale_set_health: Default::default(),
    };
    let unprobed = build_snapshot(inputs(false, 0), now).readiness;
    assert_eq!(unprobed.warning.as_deref(), Some(NO_PROBES_SEEN));
    assert!(NO_PROBES_SEEN.contains("is the health probe pointed at forewarn?"));
    let probed = build_snapshot(inputs(false, 2), now).readiness;
    assert_eq!((probed.probers, probed.warning), (2, None));
    let ready = build_snapshot(inputs(true, 0), now).readiness;
    assert_eq!(ready.warning, None, "no drain, nothing to warn of");
}

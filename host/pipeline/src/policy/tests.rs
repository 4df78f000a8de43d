use super::*;

const VM: &str = "vm-a";

fn event(event_type: EventType, resources: &[&str]) -> ScheduledEvent {
    ScheduledEvent {
        resources: resources.iter().map(|r| r.to_string()).collect(),
        ..ScheduledEvent::new("E1", event_type, EventStatus::Scheduled)
    }
}

fn freeze(duration: Option<i64>) -> ScheduledEvent {
    ScheduledEvent {
        duration_seconds: duration,
        ..event(EventType::Freeze, &[VM])
    }
}

fn user(event_type: EventType) -> ScheduledEvent {
    ScheduledEvent {
        source: EventSource::User,
        ..event(event_type, &[VM])
    }
}

fn unknown_type() -> ScheduledEvent {
    ScheduledEvent {
        event_type_raw: "Hibernate".into(),
        ..event(EventType::Unknown, &[VM])
    }
}

fn config(edit: impl FnOnce(&mut PolicyConfig)) -> PolicyConfig {
    let mut config = PolicyConfig::default();
    edit(&mut config);
    config
}

fn prepare(affects_this_vm: bool) -> Plan {
    Plan::Prepare { affects_this_vm }
}

fn at_once(rule: &'static str) -> Plan {
    Plan::ApproveAtOnce { rule }
}

#[test]
fn plan_rules() {
    let short = |c: &mut PolicyConfig| c.approve_freeze_shorter_than = Some(9);
    let user_ok = |c: &mut PolicyConfig| c.approve_user_initiated = true;
    let cases: Vec<(&str, ScheduledEvent, PolicyConfig, Plan)> = vec![
        (
            "reboot of this VM prepares",
            event(EventType::Reboot, &[VM]),
            config(|_| {}),
            prepare(true),
        ),
        (
            "name compared case-insensitively",
            event(EventType::Reboot, &["VM-A"]),
            config(|_| {}),
            prepare(true),
        ),
        (
            "empty resources means this VM",
            event(EventType::Reboot, &[]),
            config(|_| {}),
            prepare(true),
        ),
        (
            "unknown type still prepares",
            unknown_type(),
            config(short),
            prepare(true),
        ),
        (
            "user event prepares by default",
            user(EventType::Reboot),
            config(|_| {}),
            prepare(true),
        ),
        (
            "user event approved when configured",
            user(EventType::Redeploy),
            config(user_ok),
            at_once("user-initiated"),
        ),
        (
            "a user-initiated Preempt is still prepared",
            user(EventType::Preempt),
            config(user_ok),
            prepare(true),
        ),
        (
            "a user-initiated Terminate is still prepared",
            user(EventType::Terminate),
            config(user_ok),
            prepare(true),
        ),
        (
            "the types are configurable",
            user(EventType::Terminate),
            config(|c| {
                c.approve_user_initiated = true;
                c.user_initiated_types = vec![EventType::Terminate];
            }),
            at_once("user-initiated"),
        ),
        (
            "the pre-2019 underscore prefix names this VM",
            event(EventType::Reboot, &["_vm-a"]),
            config(|_| {}),
            prepare(true),
        ),
        (
            "platform event not user-initiated",
            event(EventType::Reboot, &[VM]),
            config(user_ok),
            prepare(true),
        ),
        (
            "short freeze approved when configured",
            freeze(Some(5)),
            config(short),
            at_once("short-freeze"),
        ),
        (
            "zero-second freeze is short",
            freeze(Some(0)),
            config(short),
            at_once("short-freeze"),
        ),
        (
            "freeze at the limit is not short",
            freeze(Some(9)),
            config(short),
            prepare(true),
        ),
        (
            "longer freeze prepares",
            freeze(Some(30)),
            config(short),
            prepare(true),
        ),
        (
            "freeze without duration is not short",
            freeze(None),
            config(short),
            prepare(true),
        ),
        (
            "freeze with -1 duration is not short",
            freeze(Some(-1)),
            config(short),
            prepare(true),
        ),
        (
            "short freeze prepares without the rule",
            freeze(Some(5)),
            config(|_| {}),
            prepare(true),
        ),
        (
            "short reboot is not a freeze",
            ScheduledEvent {
                duration_seconds: Some(1),
                ..event(EventType::Reboot, &[VM])
            },
            config(short),
            prepare(true),
        ),
        (
            "group event naming this VM prepares",
            event(EventType::Freeze, &["vm-b", VM]),
            config(|_| {}),
            prepare(true),
        ),
        (
            "other VMs only, notify on",
            event(EventType::Reboot, &["vm-b"]),
            config(|c| c.notify_other_vms = true),
            prepare(false),
        ),
        (
            "other VMs only, notify on, rules skipped",
            ScheduledEvent {
                source: EventSource::User,
                ..event(EventType::Reboot, &["vm-b"])
            },
            config(|c| {
                c.notify_other_vms = true;
                c.approve_user_initiated = true;
            }),
            prepare(false),
        ),
    ];
    for (name, event, config, expected) in cases {
        assert_eq!(plan(&event, VM, &config), expected, "{name}");
    }
}

#[test]
fn event_naming_only_other_vms_is_ignored_by_default() {
    let plan = plan(
        &event(EventType::Reboot, &["vm-b", "vm-c"]),
        VM,
        &PolicyConfig::default(),
    );
    let Plan::Ignore { reason } = plan else {
        panic!("expected Ignore, got {plan:?}");
    };
    assert!(reason.contains("vm-b, vm-c"), "{reason}");
    assert!(reason.contains("policy.notify-other-vms"), "{reason}");
}

fn is_withheld(gate: &ApprovalGate, needle: &str) -> bool {
    matches!(gate, ApprovalGate::Withhold { reason, .. } if reason.contains(needle))
}

#[test]
fn approval_gate_rules() {
    let solo = event(EventType::Reboot, &[VM]);
    let first = event(EventType::Freeze, &[VM, "vm-b", "vm-c"]);
    let second = event(EventType::Freeze, &["vm-b", VM]);
    let first_listed = |c: &mut PolicyConfig| c.group_approval = GroupApproval::FirstListed;
    let always = |c: &mut PolicyConfig| c.group_approval = GroupApproval::Always;
    type Check = fn(&ApprovalGate) -> bool;
    let approve: Check = |g| *g == ApprovalGate::Approve;
    let dry: Check = |g| matches!(g, ApprovalGate::DryRun { would } if would.contains("E1"));
    let group_never: Check = |g| {
        is_withheld(
            g,
            "also names vm-b, vm-c and one approval releases it for all of them; set `policy.group-approval = \"first-listed\"`",
        )
    };
    let observe: Check = |g| is_withheld(g, "observe-only");
    let not_first: Check = |g| is_withheld(g, "vm-b is listed first");
    let started: Check = |g| is_withheld(g, "already started");
    let not_named: Check = |g| is_withheld(g, "not this VM");
    let cases: Vec<(&str, ScheduledEvent, PolicyConfig, Check)> = vec![
        ("solo event approved", solo.clone(), config(|_| {}), approve),
        (
            "solo under dry-run",
            solo.clone(),
            config(|c| c.dry_run = true),
            dry,
        ),
        (
            "solo under observe-only",
            solo.clone(),
            config(|c| c.observe_only = true),
            observe,
        ),
        (
            "observe-only wins over dry-run",
            solo.clone(),
            config(|c| {
                c.observe_only = true;
                c.dry_run = true;
            }),
            observe,
        ),
        (
            "group, never (default)",
            first.clone(),
            config(|_| {}),
            group_never,
        ),
        (
            "group, first-listed, this VM first",
            first.clone(),
            config(first_listed),
            approve,
        ),
        (
            "group, first-listed, name case differs",
            event(EventType::Freeze, &["VM-A", "vm-b"]),
            config(first_listed),
            approve,
        ),
        (
            "group, first-listed, this VM second",
            second.clone(),
            config(first_listed),
            not_first,
        ),
        ("group, always", second.clone(), config(always), approve),
        (
            "group, always, dry-run",
            second.clone(),
            config(|c| {
                c.group_approval = GroupApproval::Always;
                c.dry_run = true;
            }),
            dry,
        ),
        (
            "group, always, observe-only",
            second.clone(),
            config(|c| {
                c.group_approval = GroupApproval::Always;
                c.observe_only = true;
            }),
            observe,
        ),
        (
            "already started",
            ScheduledEvent {
                status: EventStatus::Started,
                ..solo.clone()
            },
            config(|_| {}),
            started,
        ),
        (
            "names only other VMs",
            event(EventType::Reboot, &["vm-b"]),
            config(|c| {
                c.notify_other_vms = true;
                c.group_approval = GroupApproval::Always;
            }),
            not_named,
        ),
        (
            "empty resources approved",
            event(EventType::Reboot, &[]),
            config(|_| {}),
            approve,
        ),
    ];
    for (name, event, config, check) in cases {
        let gate = approval_gate(&event, VM, &config);
        assert!(check(&gate), "{name}: got {gate:?}");
    }
}

#[test]
fn unreadable_resources_are_prepared_and_never_approved() {
    let odd = ScheduledEvent {
        unreadable: vec![forewarn_events::UnreadableField {
            field: EventField::Resources,
            raw: r#"[{"name":"vm-a"}]"#.into(),
        }],
        ..event(EventType::Reboot, &[])
    };
    assert_eq!(
        plan(&odd, VM, &PolicyConfig::default()),
        Plan::Prepare {
            affects_this_vm: true
        }
    );
    let always = config(|c| c.group_approval = GroupApproval::Always);
    match approval_gate(&odd, VM, &always) {
        ApprovalGate::Withhold { rule, reason } => {
            assert_eq!(rule, WithholdRule::UnreadableResources);
            assert!(reason.contains(r#"[{"name":"vm-a"}]"#), "{reason}");
        }
        other => panic!("approved: {other:?}"),
    }
}

#[test]
fn approve_at_once_is_still_gated() {
    let config = config(|c| {
        c.approve_freeze_shorter_than = Some(9);
        c.observe_only = true;
    });
    let event = freeze(Some(5));
    assert_eq!(plan(&event, VM, &config), at_once("short-freeze"));
    assert!(is_withheld(
        &approval_gate(&event, VM, &config),
        "observe-only"
    ));
}

#[test]
fn long_group_lists_are_summarised() {
    let names: Vec<String> = (0..9).map(|i| format!("vm-{i}")).collect();
    assert_eq!(
        list_names(&names),
        "vm-0, vm-1, vm-2, vm-3, vm-4 and 4 more"
    );
    assert_eq!(list_names(&names[..1]), "vm-0");
}

#[test]
fn config_parses_kebab_case_with_defaults_and_rejects_unknown_keys() {
    let config: PolicyConfig = serde_json::from_str(
        r#"{"approve-freeze-shorter-than": 9, "group-approval": "first-listed"}"#,
    )
    .expect("parses");
    assert_eq!(config.approve_freeze_shorter_than, Some(9));
    assert_eq!(config.group_approval, GroupApproval::FirstListed);
    assert_eq!(config.safety_margin(), Duration::from_millis(2000));
    assert!(!config.notify_other_vms);
    let typo = serde_json::from_str::<PolicyConfig>(r#"{"observe_only": true}"#);
    assert!(typo.is_err());
    let bad_group = serde_json::from_str::<PolicyConfig>(r#"{"group-approval": "sometimes"}"#);
    assert!(bad_group.is_err());
}

//! The scheduler's rules, one table each, on a fixed clock: who is called, in which order,
//! with which budget, how answers set the next step, and when the next round is due.

use std::sync::Arc;
use std::time::Duration;

use forewarn_events::{EventId, EventType, ImdsTime, PluginName};

use super::*;
use crate::policy::LeadTime;
use crate::roster::FailurePolicy;
use crate::roster::Roster;
use crate::state::{AnswerOutcome, CallPhase, Handling};
use crate::test_harness::{self, defer, event, roster, t0};

const SECOND: Duration = Duration::from_secs(1);
const MARGIN: Duration = Duration::from_secs(2);

const CHAIN: &[(&str, &str)] = &[
    ("a", "subscribe = [\"*\"]\nbudget = \"10s\"\n"),
    (
        "b",
        "subscribe = [\"*\"]\nafter = [\"a\"]\nbudget = \"10s\"\n",
    ),
    (
        "c",
        "subscribe = [\"Reboot\"]\nafter = [\"b\"]\nbudget = \"10s\"\n",
    ),
];

/// The bundled chain as the short-notice tests configure it: a 15 s drain, a 12 s
/// checkpoint, then the stop action.
const BUNDLED: &[(&str, &str)] = &[
    ("lb-drain", "budget = \"5s\"\nprepare-time = \"15s\"\n"),
    (
        "checkpoint",
        "after = [\"lb-drain\"]\nbudget = \"10s\"\nprepare-time = \"12s\"\n",
    ),
    (
        "graceful-shutdown",
        "after = [\"lb-drain\", \"checkpoint\"]\nbudget = \"10s\"\n",
    ),
];

/// Preparation at once (a lead time longer than any notice), as most tables want.
const AT_ONCE: LeadTime = LeadTime::Fixed(Duration::from_secs(24 * 3600));

fn schedule<'a>(roster: &'a Roster, in_flight: &'a InFlight) -> Schedule<'a> {
    Schedule {
        roster,
        in_flight,
        margin: MARGIN,
        lead: AT_ONCE,
    }
}

/// `scheduler::prepare` on an event held alone (the tables below mutate it in place).
fn prepare(progress: &mut EventProgress, schedule: Schedule<'_>, now: ImdsTime) -> Preparation {
    let mut shared = Arc::new(progress.clone());
    let preparation = super::prepare(&mut shared, schedule, now);
    *progress = Arc::unwrap_or_clone(shared);
    preparation
}

/// `scheduler::recover` on an event held alone.
fn recover(progress: &mut EventProgress, schedule: Schedule<'_>, now: ImdsTime) -> Recovery {
    let mut shared = Arc::new(progress.clone());
    let recovery = super::recover(&mut shared, schedule, now);
    *progress = Arc::unwrap_or_clone(shared);
    recovery
}

#[test]
fn a_round_that_plans_nothing_leaves_the_event_shared() {
    let roster = roster(CHAIN);
    // Every plugin busy: nothing can be asked, so nothing may be copied or journaled.
    let in_flight: InFlight = ["a", "b", "c"]
        .iter()
        .map(|name| (EventId::from("E1"), PluginName::from(*name)))
        .collect();
    let mut started = progress(EventType::Reboot, 300 * SECOND);
    started.preparing_since_unix_ms = Some(ImdsTime::UNIX_EPOCH);
    let mut shared = Arc::new(started);
    let journaled = shared.clone();
    let preparation = super::prepare(&mut shared, schedule(&roster, &in_flight), t0());
    assert_eq!(called(&preparation), Vec::<&str>::new());
    assert!(Arc::ptr_eq(&shared, &journaled), "the event was copied");
    // A round that plans a call copies it, and the journaled one is left as it was.
    let free = InFlight::new();
    let preparation = super::prepare(&mut shared, schedule(&roster, &free), t0());
    assert_eq!(called(&preparation), ["a"]);
    assert!(!Arc::ptr_eq(&shared, &journaled));
    assert_eq!(journaled.plugin(&PluginName::from("a")).prepare_attempts, 0);
    assert_eq!(shared.plugin(&PluginName::from("a")).prepare_attempts, 1);
}

fn progress(event_type: EventType, notice: Duration) -> EventProgress {
    EventProgress::new(
        event("E1", event_type, t0(), notice),
        Handling::Prepare {
            affects_this_vm: true,
        },
        Lifecycle::Scheduled,
    )
}

fn called(preparation: &Preparation) -> Vec<&str> {
    match preparation {
        Preparation::Calls { calls, .. } => calls.iter().map(|c| c.plugin.as_str()).collect(),
        other => panic!("expected calls, got {other:?}"),
    }
}

fn shortened(preparation: &Preparation) -> Vec<(&str, Vec<&str>)> {
    match preparation {
        Preparation::Calls { shortened, .. } => shortened
            .iter()
            .map(|turn| {
                let cut = turn.cut_short.iter().map(PluginName::as_str).collect();
                (turn.plugin.as_str(), cut)
            })
            .collect(),
        other => panic!("expected calls, got {other:?}"),
    }
}

#[test]
fn retry_is_pulled_in_before_the_deadline() {
    // (wait, NotBefore after now) → retry after now
    let rows = [
        (60 * SECOND, Some(10 * SECOND), 7 * SECOND),
        (SECOND, Some(10 * SECOND), SECOND),
        // Past the last useful moment: soon, but not at once (the event may start any time).
        (5 * SECOND, Some(Duration::ZERO), 5 * SECOND),
        (60 * SECOND, Some(Duration::ZERO), LATE_RETRY_MAX),
        (Duration::ZERO, Some(Duration::ZERO), LATE_RETRY),
        (Duration::ZERO, Some(60 * SECOND), MIN_RETRY),
        (90 * SECOND, None, 90 * SECOND),
    ];
    for (wait, notice, expected) in rows {
        let at = retry_instant(t0(), wait, notice.map(|n| t0() + n), MARGIN);
        assert_eq!(
            at,
            t0() + expected,
            "wait {wait:?}, NotBefore in {notice:?}"
        );
    }
}

#[test]
fn preparation_follows_after_and_skips_what_is_not_due() {
    let roster = roster(CHAIN);
    // (prepared plugins, in flight, retry pending for, event type) → asked now
    type Row<'a> = (
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        EventType,
        &'a [&'a str],
    );
    let rows: &[Row<'_>] = &[
        (&[], &[], &[], EventType::Reboot, &["a"]),
        (&["a"], &[], &[], EventType::Reboot, &["b"]),
        (&["a", "b"], &[], &[], EventType::Reboot, &["c"]),
        (&["a"], &["b"], &[], EventType::Reboot, &[]),
        (&["a"], &[], &["b"], EventType::Reboot, &[]),
        // c subscribes to Reboot only: a Freeze is done once a and b approved.
        (&["a"], &[], &[], EventType::Freeze, &["b"]),
    ];
    for (prepared, in_flight, retrying, event_type, expected) in rows {
        let mut progress = progress(*event_type, 300 * SECOND);
        for name in *prepared {
            progress.plugin_mut(&PluginName::from(*name)).prepared = true;
        }
        for name in *retrying {
            progress
                .plugin_mut(&PluginName::from(*name))
                .retry_at_unix_ms = Some(t0() + SECOND);
        }
        let in_flight: InFlight = in_flight
            .iter()
            .map(|name| (EventId::from("E1"), PluginName::from(*name)))
            .collect();
        let schedule = schedule(&roster, &in_flight);
        let preparation = prepare(&mut progress, schedule, t0());
        assert_eq!(
            called(&preparation),
            *expected,
            "prepared {prepared:?}, in flight {in_flight:?}, retrying {retrying:?}, {event_type:?}"
        );
    }
}

#[test]
fn preparation_ends_when_all_approved_or_at_the_deadline() {
    let roster = roster(CHAIN);
    let in_flight = InFlight::new();
    let schedule = schedule(&roster, &in_flight);
    let mut done = progress(EventType::Freeze, 300 * SECOND);
    done.plugin_mut(&PluginName::from("a")).prepared = true;
    done.plugin_mut(&PluginName::from("b")).prepared = true;
    assert_eq!(
        prepare(&mut done, schedule, t0()),
        Preparation::AllPrepared { subscribers: 2 }
    );
}

#[test]
fn preparation_goes_on_past_the_deadline_with_every_turn_come() {
    let roster = roster(CHAIN);
    let in_flight = InFlight::new();
    let schedule = schedule(&roster, &in_flight);
    // NotBefore is inside the margin: the deadline has passed, the event is still Scheduled.
    let mut late = progress(EventType::Reboot, MARGIN);
    late.plugin_mut(&PluginName::from("a")).prepared = true;
    let preparation = prepare(&mut late, schedule, t0());
    assert_eq!(called(&preparation), ["b", "c"]);
    assert_eq!(shortened(&preparation), [("c", vec!["b"])]);
    // Even after NotBefore: asked again while Scheduled, with the short-notice budget.
    let mut after = progress(EventType::Reboot, MARGIN);
    let preparation = prepare(&mut after, schedule, t0() + 30 * SECOND);
    assert_eq!(called(&preparation), ["a", "b", "c"]);
    let Preparation::Calls { calls, .. } = preparation else {
        unreachable!("checked above");
    };
    assert!(calls.iter().all(|call| call.budget == SHORT_NOTICE_BUDGET));
}

#[test]
fn a_chain_is_planned_backwards_from_the_deadline() {
    let roster = roster(BUNDLED);
    let in_flight = InFlight::new();
    let schedule = schedule(&roster, &in_flight);
    // A 30 s Preempt: the deadline is at 28 s; graceful-shutdown must start by 18 s,
    // checkpoint (12 s) by 6 s; lb-drain's 15 s drain gets what is left before that.
    // (seconds after the notice, prepared, deferring) → (asked now, started early)
    type Row<'a> = (
        u64,
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
        &'a [&'a str],
    );
    let rows: &[Row<'_>] = &[
        (0, &[], &[], &["lb-drain"], &[]),
        (5, &[], &["lb-drain"], &[], &[]),
        (6, &[], &["lb-drain"], &["checkpoint"], &["checkpoint"]),
        (10, &["lb-drain"], &[], &["checkpoint"], &[]),
        (
            16,
            &["lb-drain", "checkpoint"],
            &[],
            &["graceful-shutdown"],
            &[],
        ),
        (
            18,
            &["lb-drain"],
            &["checkpoint"],
            &["graceful-shutdown"],
            &["graceful-shutdown"],
        ),
    ];
    for (at, prepared, deferring, asked, early) in rows {
        let mut progress = progress(EventType::Preempt, 30 * SECOND);
        for name in *prepared {
            progress.plugin_mut(&PluginName::from(*name)).prepared = true;
        }
        for name in *deferring {
            let own = progress.plugin_mut(&PluginName::from(*name));
            own.prepare_attempts = 1;
            own.retry_at_unix_ms = Some(t0() + 60 * SECOND);
        }
        let preparation = prepare(&mut progress, schedule, t0() + Duration::from_secs(*at));
        let row = format!("at {at} s, prepared {prepared:?}, deferring {deferring:?}");
        assert_eq!(called(&preparation), *asked, "{row}");
        let started_early: Vec<&str> = shortened(&preparation)
            .into_iter()
            .map(|(plugin, _)| plugin)
            .collect();
        assert_eq!(started_early, *early, "{row}");
    }
}

#[test]
fn a_three_second_notice_asks_the_whole_chain_at_once() {
    let roster = roster(BUNDLED);
    let in_flight = InFlight::new();
    let schedule = schedule(&roster, &in_flight);
    let mut progress = progress(EventType::Preempt, 3 * SECOND);
    let preparation = prepare(&mut progress, schedule, t0());
    assert_eq!(
        called(&preparation),
        ["lb-drain", "checkpoint", "graceful-shutdown"]
    );
    assert_eq!(
        shortened(&preparation),
        [
            ("checkpoint", vec!["lb-drain"]),
            ("graceful-shutdown", vec!["lb-drain", "checkpoint"]),
        ]
    );
    let Preparation::Calls { calls, .. } = preparation else {
        unreachable!("checked above");
    };
    // Each call may run its own budget: nobody is cut to the 1 s left before the deadline.
    let budgets: Vec<u64> = calls.iter().map(|c| c.budget.as_secs()).collect();
    assert_eq!(budgets, [5, 10, 10]);
}

#[test]
fn chain_needs_follow_the_longest_path() {
    let roster = roster(BUNDLED);
    let subscribers = roster.subscribers(EventType::Preempt);
    let needs = chain_needs(&subscribers, &roster);
    let seconds = |name: &str| needs.get(name).map(Duration::as_secs);
    assert_eq!(seconds("graceful-shutdown"), Some(10));
    assert_eq!(seconds("checkpoint"), Some(22));
    assert_eq!(seconds("lb-drain"), Some(37));
}

#[test]
fn preparation_waits_for_the_lead_time() {
    let roster = roster(CHAIN);
    let in_flight = InFlight::new();
    // (lead, notice) → preparation starts after now
    let rows = [
        (LeadTime::Fixed(60 * SECOND), 300, Some(240)),
        (LeadTime::Fixed(600 * SECOND), 300, None),
        // auto: the chain a → b → c needs 30 s, plus the 2 s margin, plus a minute: 92 s,
        // raised to the 15 min floor. A day ahead (degraded hardware) waits.
        (LeadTime::Auto, 300, None),
        (LeadTime::Auto, 900, None),
        (LeadTime::Auto, 86_400, Some(86_400 - 900)),
    ];
    for (lead, notice, waits) in rows {
        let schedule = Schedule {
            lead,
            ..schedule(&roster, &in_flight)
        };
        let mut progress = progress(EventType::Reboot, Duration::from_secs(notice));
        let preparation = prepare(&mut progress, schedule, t0());
        let row = format!("lead {lead:?}, notice {notice} s");
        match waits {
            Some(after) => {
                assert_eq!(
                    preparation,
                    Preparation::NotYet {
                        starts_at: t0() + Duration::from_secs(after)
                    },
                    "{row}"
                );
                assert_eq!(
                    next_due(&progress, schedule, t0()),
                    Some(t0() + Duration::from_secs(after)),
                    "{row}"
                );
                assert_eq!(progress.preparing_since_unix_ms, None, "{row}");
            }
            None => {
                assert_eq!(called(&preparation), ["a"], "{row}");
                assert_eq!(progress.preparing_since_unix_ms, Some(t0()));
            }
        }
    }
    // A journal from before lead times: a plugin was already asked, so it goes on at once.
    let schedule = Schedule {
        lead: LeadTime::Fixed(60 * SECOND),
        ..schedule(&roster, &in_flight)
    };
    let mut resumed = progress(EventType::Reboot, 300 * SECOND);
    resumed.plugin_mut(&PluginName::from("a")).prepare_attempts = 1;
    assert_eq!(called(&prepare(&mut resumed, schedule, t0())), ["a"]);
    // No subscriber: nothing to wait for; the approval stage decides at once.
    let mut unsubscribed = progress(EventType::Freeze, 3600 * SECOND);
    let only_c = test_harness::roster(&[("c", "subscribe = [\"Reboot\"]\n")]);
    let lead_60 = Schedule {
        roster: &only_c,
        ..schedule
    };
    assert_eq!(
        prepare(&mut unsubscribed, lead_60, t0()),
        Preparation::AllPrepared { subscribers: 0 }
    );
    // Once preparation began, a reschedule far ahead does not make it wait again.
    let mut progress = progress(EventType::Reboot, 3600 * SECOND);
    progress.preparing_since_unix_ms = Some(t0());
    assert_eq!(called(&prepare(&mut progress, schedule, t0())), ["a"]);
}

#[test]
fn budgets_are_the_manifests_cut_to_the_deadline_but_never_below_the_short_notice_floor() {
    let roster = roster(&[("a", "budget = \"30s\"\n"), ("b", "budget = \"5s\"\n")]);
    let in_flight = InFlight::new();
    let schedule = schedule(&roster, &in_flight);
    // (notice) → budgets of a (30 s) and b (5 s)
    for (notice, budgets) in [(300, [30, 5]), (22, [20, 5]), (7, [10, 5]), (1, [10, 5])] {
        let mut progress = progress(EventType::Reboot, Duration::from_secs(notice));
        let Preparation::Calls { calls, .. } = prepare(&mut progress, schedule, t0()) else {
            panic!("notice {notice}s: expected calls");
        };
        let got: Vec<u64> = calls.iter().map(|c| c.budget.as_secs()).collect();
        assert_eq!(got, budgets, "notice {notice}s");
        assert_eq!(calls[0].attempt, 1);
        assert_eq!(
            progress.plugin(&PluginName::from("a")).prepare_attempts,
            1,
            "the attempt is recorded"
        );
    }
}

#[test]
fn recovery_runs_in_reverse_order_one_step_at_a_time() {
    let roster = roster(CHAIN);
    let in_flight = InFlight::new();
    let schedule = schedule(&roster, &in_flight);
    // (already told the event ended) → recovered now
    let rows: &[(&[&str], Option<&[&str]>)] = &[
        (&[], Some(&["c"])),
        (&["c"], Some(&["b"])),
        (&["c", "b"], Some(&["a"])),
        (&["c", "b", "a"], None),
    ];
    for (told, expected) in rows {
        let mut progress = progress(EventType::Reboot, 300 * SECOND);
        progress.lifecycle = Lifecycle::Ended { after_start: true };
        for name in *told {
            progress.plugin_mut(&PluginName::from(*name)).told_ended = true;
        }
        let recovery = recover(&mut progress, schedule, t0());
        let names = match &recovery {
            Recovery::Calls(calls) => {
                assert!(calls.iter().all(|c| c.phase == CallPhase::EndedAfterStart));
                Some(calls.iter().map(|c| c.plugin.as_str()).collect::<Vec<_>>())
            }
            Recovery::Done => None,
        };
        assert_eq!(names.as_deref(), *expected, "told {told:?}");
    }
}

#[test]
fn answers_set_what_happens_next() {
    // (phase, outcome, attempts so far) → (prepared, told_ended, retry after now)
    let rows = [
        (
            CallPhase::Prepare,
            AnswerOutcome::Approve,
            1,
            (true, false, None),
        ),
        (
            CallPhase::Prepare,
            AnswerOutcome::Defer,
            1,
            (false, false, Some(3 * SECOND)),
        ),
        (
            CallPhase::Prepare,
            AnswerOutcome::Trap,
            1,
            (false, false, Some(FAILURE_RETRY)),
        ),
        (
            CallPhase::EndedAfterStart,
            AnswerOutcome::Defer,
            1,
            (false, true, None),
        ),
        (
            CallPhase::EndedAfterStart,
            AnswerOutcome::BudgetExceeded,
            1,
            (false, false, Some(FAILURE_RETRY)),
        ),
        (
            CallPhase::EndedAfterStart,
            AnswerOutcome::Trap,
            RECOVERY_ATTEMPTS,
            (false, true, None),
        ),
    ];
    for (phase, outcome, attempts, (prepared, told_ended, retry)) in rows {
        let mut progress = progress(EventType::Reboot, 300 * SECOND);
        progress
            .plugin_mut(&PluginName::from("a"))
            .recovery_attempts = attempts;
        progress.plugin_mut(&PluginName::from("a")).prepare_attempts = attempts;
        let reply = CallReply {
            outcome,
            ..defer(3 * SECOND)
        };
        let hold = FailurePolicy::Hold;
        let answer = record_reply(
            &mut progress,
            &PluginName::from("a"),
            phase,
            &reply,
            t0(),
            MARGIN,
            hold,
        );
        assert_eq!((answer.phase, answer.outcome), (phase, outcome));
        let own = progress.plugin(&PluginName::from("a"));
        let row = format!("{phase} {outcome} after {attempts}");
        assert_eq!(own.prepared, prepared, "{row}");
        assert_eq!(own.told_ended, told_ended, "{row}");
        assert_eq!(own.retry_at_unix_ms, retry.map(|r| t0() + r), "{row}");
        assert_eq!(own.last_answer, Some(answer), "{row}");
    }
}

#[test]
fn only_live_retries_turns_and_the_deadline_are_due() {
    let roster = roster(CHAIN);
    let in_flight = InFlight::new();
    let schedule = schedule(&roster, &in_flight);
    let retry = Some(t0() + SECOND);
    let deadline = t0() + 300 * SECOND - MARGIN;
    // b's turn: the deadline minus the 20 s b and c need; c's: minus its own 10 s.
    let turn_of_b = deadline - 20 * SECOND;
    let turn_of_c = deadline - 10 * SECOND;
    // (lifecycle, approval pending, retry set, a prepared) → next due
    let rows = [
        (
            Lifecycle::Scheduled,
            true,
            retry,
            false,
            Some(t0() + SECOND),
        ),
        (Lifecycle::Scheduled, true, None, false, Some(turn_of_b)),
        (Lifecycle::Scheduled, true, None, true, Some(turn_of_c)),
        (Lifecycle::Scheduled, false, retry, false, None),
        (Lifecycle::Started, false, retry, false, None),
        (
            Lifecycle::Ended { after_start: true },
            false,
            retry,
            false,
            Some(t0() + SECOND),
        ),
    ];
    for (lifecycle, pending, retry_at, a_prepared, expected) in rows {
        let mut progress = progress(EventType::Reboot, 300 * SECOND);
        progress.preparing_since_unix_ms = Some(t0());
        progress.lifecycle = lifecycle;
        if !pending {
            progress.approval = Approval::Abandoned {
                reason: "test".into(),
            };
        }
        progress.plugin_mut(&PluginName::from("a")).retry_at_unix_ms = retry_at;
        progress.plugin_mut(&PluginName::from("a")).prepared = a_prepared;
        assert_eq!(
            next_due(&progress, schedule, t0()),
            expected,
            "{lifecycle:?} pending {pending} retry {retry_at:?} a prepared {a_prepared}"
        );
    }
    // With every turn come, the deadline is next (to say once that it passed).
    let mut asked = progress(EventType::Reboot, 300 * SECOND);
    asked.preparing_since_unix_ms = Some(t0());
    for name in ["a", "b", "c"] {
        asked.plugin_mut(&PluginName::from(name)).prepare_attempts = 1;
    }
    assert_eq!(next_due(&asked, schedule, t0()), Some(deadline));
    // Nothing at or before now is due: the loop would spin.
    let mut late = progress(EventType::Reboot, MARGIN);
    late.preparing_since_unix_ms = Some(t0());
    assert_eq!(next_due(&late, schedule, t0()), None);
}

//! The scheduler's rules, one table each, on a fixed clock: who is called, in which order,
//! with which budget, how answers set the next step, and when the next round is due.

use forewarn_imds::EventType;

use super::*;
use crate::pipeline::test_harness::{defer, event, roster, t0};

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

fn schedule<'a>(roster: &'a Roster, in_flight: &'a InFlight) -> Schedule<'a> {
    Schedule {
        roster,
        in_flight,
        margin: MARGIN,
    }
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
        Preparation::Calls(calls) => calls.iter().map(|c| c.plugin.as_str()).collect(),
        other => panic!("expected calls, got {other:?}"),
    }
}

#[test]
fn retry_is_pulled_in_before_the_deadline() {
    // (wait, NotBefore after now) → retry after now
    let rows = [
        (60 * SECOND, Some(10 * SECOND), 7 * SECOND),
        (SECOND, Some(10 * SECOND), SECOND),
        (5 * SECOND, Some(Duration::ZERO), MIN_RETRY),
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
            progress.plugin_mut(name).prepared = true;
        }
        for name in *retrying {
            progress.plugin_mut(name).retry_at_unix_ms = Some(unix_ms(t0() + SECOND));
        }
        let in_flight: InFlight = in_flight
            .iter()
            .map(|name| ("E1".to_owned(), (*name).to_owned()))
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
    done.plugin_mut("a").prepared = true;
    done.plugin_mut("b").prepared = true;
    assert_eq!(
        prepare(&mut done, schedule, t0()),
        Preparation::AllPrepared { subscribers: 2 }
    );
    let mut late = progress(EventType::Reboot, MARGIN);
    late.plugin_mut("a").prepared = true;
    assert_eq!(
        prepare(&mut late, schedule, t0()),
        Preparation::DeadlinePassed {
            still_preparing: vec!["b".into(), "c".into()]
        }
    );
}

#[test]
fn budgets_are_the_manifests_cut_to_the_deadline() {
    let roster = roster(CHAIN);
    let in_flight = InFlight::new();
    let schedule = schedule(&roster, &in_flight);
    // (notice) → budget of the first call
    for (notice, budget) in [(300, 10), (12, 10), (7, 5), (3, 1)] {
        let mut progress = progress(EventType::Reboot, Duration::from_secs(notice));
        let Preparation::Calls(calls) = prepare(&mut progress, schedule, t0()) else {
            panic!("notice {notice}s: expected a call");
        };
        assert_eq!(
            calls[0].budget,
            Duration::from_secs(budget),
            "notice {notice}s"
        );
        assert_eq!(calls[0].attempt, 1);
        assert_eq!(
            progress.plugin("a").prepare_attempts,
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
            progress.plugin_mut(name).told_ended = true;
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
        progress.plugin_mut("a").recovery_attempts = attempts;
        progress.plugin_mut("a").prepare_attempts = attempts;
        let reply = CallReply {
            outcome,
            ..defer(3 * SECOND)
        };
        let answer = record_reply(&mut progress, "a", phase, &reply, t0(), MARGIN);
        assert_eq!((answer.phase, answer.outcome), (phase, outcome));
        let own = progress.plugin("a");
        let row = format!("{phase} {outcome} after {attempts}");
        assert_eq!(own.prepared, prepared, "{row}");
        assert_eq!(own.told_ended, told_ended, "{row}");
        assert_eq!(
            own.retry_at_unix_ms,
            retry.map(|r| unix_ms(t0() + r)),
            "{row}"
        );
        assert_eq!(own.last_answer, Some(answer), "{row}");
    }
}

#[test]
fn only_live_retries_and_the_deadline_are_due() {
    let retry = Some(unix_ms(t0() + SECOND));
    let deadline = t0() + 300 * SECOND - MARGIN;
    // (lifecycle, approval pending, retry set) → next due
    let rows = [
        (Lifecycle::Scheduled, true, retry, Some(t0() + SECOND)),
        (Lifecycle::Scheduled, true, None, Some(deadline)),
        (Lifecycle::Scheduled, false, retry, None),
        (Lifecycle::Started, false, retry, None),
        (
            Lifecycle::Ended { after_start: true },
            false,
            retry,
            Some(t0() + SECOND),
        ),
    ];
    for (lifecycle, pending, retry_at, expected) in rows {
        let mut progress = progress(EventType::Reboot, 300 * SECOND);
        progress.lifecycle = lifecycle;
        if !pending {
            progress.approval = Approval::Abandoned {
                reason: "test".into(),
            };
        }
        progress.plugin_mut("a").retry_at_unix_ms = retry_at;
        assert_eq!(
            next_due(&progress, MARGIN),
            expected,
            "{lifecycle:?} pending {pending} retry {retry_at:?}"
        );
    }
}

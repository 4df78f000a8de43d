//! The pipeline on a fake clock when the journal groups commits or cannot be written: a
//! deferral loop is journaled in groups, and while commits fail plugins are still called
//! but no approval is decided or sent until the journal is durable again.

use std::time::Duration;

use forewarn_events::EventType;

use super::*;
use crate::test_harness::{Harness, approve, defer, event, t0};

const SECOND: Duration = Duration::from_secs(1);

/// One plugin, for every event type.
const ONE: &[(&str, &str)] = &[("p", "subscribe = [\"*\"]\nbudget = \"5s\"\n")];

/// How many persists of each kind were executed: (at once, grouped).
fn persists(harness: &Harness) -> (usize, usize) {
    let mut counts = (0, 0);
    for executed in &harness.log {
        match executed.action {
            Action::Persist(_) => counts.0 += 1,
            Action::PersistGrouped(_) => counts.1 += 1,
            _ => {}
        }
    }
    counts
}

/// The NotApproved reasons emitted so far.
fn holds(harness: &Harness) -> Vec<String> {
    harness
        .log
        .iter()
        .filter_map(|executed| match &executed.action {
            Action::Emit(TimelineEntry::NotApproved { reason, .. }) => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_plugin_deferring_with_retry_zero_is_journaled_in_groups() {
    let mut harness = Harness::new(ONE, at_once());
    harness.script("p", |call| {
        if call.attempt < 50 {
            defer(Duration::ZERO)
        } else {
            approve()
        }
    });
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    harness.run_for(30 * SECOND);
    let attempts = harness.calls().len();
    assert_eq!(attempts, 50, "the plugin was not asked every MIN_RETRY");
    let (at_once, grouped) = persists(&harness);
    // At once: the event and its first call, then the approval that was due; every answer
    // and re-ask in between is grouped.
    assert!(
        at_once <= 3,
        "{at_once} persists at once, {grouped} grouped"
    );
    assert!(
        grouped >= 2 * (attempts - 1) - 1,
        "{grouped} grouped of {attempts} calls"
    );
    assert_eq!(harness.approvals().len(), 1);
}

#[test]
fn while_the_journal_cannot_be_written_plugins_are_called_but_nothing_is_approved() {
    let mut harness = Harness::new(ONE, at_once());
    harness.journal_writable = false;
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    harness.run_for(10 * SECOND);
    assert_eq!(harness.calls().len(), 1, "the plugin was not called");
    assert!(harness.approvals().is_empty(), "approved without a record");
    assert_eq!(
        harness.pipeline.state().events["E1"].approval,
        Approval::Pending
    );
    assert_eq!(
        holds(&harness),
        vec![log_messages::APPROVAL_HELD_FOR_JOURNAL.to_owned()],
        "said once"
    );

    harness.journal_writable_again();
    let approvals = harness.approvals();
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0].0, t0() + 10 * SECOND);
    // The approval's record came first, and reached the disk.
    let persisted = harness.persisted.clone().expect("persisted");
    assert!(matches!(
        persisted.events["E1"].approval,
        Approval::Due { .. } | Approval::Sent { .. }
    ));
}

#[test]
fn an_approval_queued_behind_a_commit_that_fails_is_taken_back_and_sent_later() {
    let mut harness = Harness::new(ONE, at_once());
    harness.hold_answers();
    harness.document(&[event("E1", EventType::Reboot, t0(), 300 * SECOND)]);
    // The commit that records the approval as due fails: the POST queued behind it is not
    // sent.
    harness.journal_writable = false;
    harness.answer_held();
    assert!(harness.approvals().is_empty(), "sent without its record");
    harness.run_for(5 * SECOND);
    assert!(
        harness.approvals().is_empty(),
        "sent while the journal failed"
    );

    harness.journal_writable_again();
    let approvals = harness.approvals();
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0].0, t0() + 5 * SECOND);
}

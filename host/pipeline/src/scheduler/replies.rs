//! What an answer means: the plugin's progress recorded, and when it is asked again.

use std::time::Duration;

use forewarn_events::{ImdsTime, PluginName};

use super::plan::*;
use crate::roster::FailurePolicy;
use crate::state::{Answer, AnswerOutcome, CallPhase, EventProgress, PluginProgress};

/// Records `reply` from `plugin` for `phase` in `progress` at `now`, and when to ask again;
/// returns the answer as journaled. A failed prepare call of a plugin whose `on-failure` is
/// `approve` counts as its approval.
pub fn record_reply(
    progress: &mut EventProgress,
    plugin: &PluginName,
    phase: CallPhase,
    reply: &CallReply,
    now: ImdsTime,
    margin: Duration,
    on_failure: FailurePolicy,
) -> Answer {
    let answer = Answer {
        phase,
        outcome: reply.outcome,
        reason: reply.reason.clone(),
        at_unix_ms: now,
        elapsed_ms: crate::log_fields::millis(reply.elapsed),
    };
    let not_before = progress.event.not_before_time();
    let own = progress.plugin_mut(plugin);
    own.last_answer = Some(answer.clone());
    match phase {
        CallPhase::Prepare => record_prepare(own, reply, now, not_before, margin, on_failure),
        CallPhase::Started => own.told_started = true,
        CallPhase::EndedAfterStart | CallPhase::EndedWithoutStart => {
            record_recovery(plugin, own, reply, now)
        }
    }
    answer
}

fn record_prepare(
    own: &mut PluginProgress,
    reply: &CallReply,
    now: ImdsTime,
    not_before: Option<ImdsTime>,
    margin: Duration,
    on_failure: FailurePolicy,
) {
    if consents(reply.outcome, on_failure) {
        own.prepared = true;
        own.retry_at_unix_ms = None;
        return;
    }
    let wait = match reply.outcome {
        AnswerOutcome::Defer => reply.retry_after.max(MIN_RETRY),
        _ => FAILURE_RETRY,
    };
    own.retry_at_unix_ms = Some(retry_instant(now, wait, not_before, margin));
}

/// Whether a prepare call that came to `outcome` is the plugin's approval: an approve, or a
/// failure under `on-failure = "approve"`. A defer is an answer, never a failure: it holds.
fn consents(outcome: AnswerOutcome, on_failure: FailurePolicy) -> bool {
    match outcome {
        AnswerOutcome::Approve => true,
        AnswerOutcome::Defer => false,
        _ => on_failure == FailurePolicy::Approve,
    }
}

fn record_recovery(
    plugin: &PluginName,
    own: &mut PluginProgress,
    reply: &CallReply,
    now: ImdsTime,
) {
    let failed = reply.outcome.is_failure();
    if !failed || own.recovery_attempts >= RECOVERY_ATTEMPTS {
        if failed {
            tracing::error!(
                plugin = plugin.as_str(),
                attempts = own.recovery_attempts,
                "giving up on a plugin's recovery after repeated failures"
            );
        }
        own.told_ended = true;
        own.retry_at_unix_ms = None;
        return;
    }
    own.retry_at_unix_ms = Some(now + FAILURE_RETRY);
}

/// When to ask again: after `wait`, but early enough that a last call fits before the
/// deadline (NotBefore minus the margin), and never sooner than [`MIN_RETRY`]. Once that
/// last moment has passed the event may start at any time: ask again after the wait,
/// within [`LATE_RETRY`]..=[`LATE_RETRY_MAX`].
pub fn retry_instant(
    now: ImdsTime,
    wait: Duration,
    not_before: Option<ImdsTime>,
    margin: Duration,
) -> ImdsTime {
    let wanted = now + wait;
    let Some(not_before) = not_before else {
        return wanted;
    };
    let last_useful = not_before.saturating_sub(margin + Duration::from_secs(1));
    if last_useful <= now + MIN_RETRY {
        return now + wait.clamp(LATE_RETRY, LATE_RETRY_MAX);
    }
    wanted.min(last_useful).max(now + MIN_RETRY)
}

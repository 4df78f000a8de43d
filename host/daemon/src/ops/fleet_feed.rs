//! Feeds this VM's fleet record ([`FleetRecord`]) to the coordinator, which publishes it in
//! etcd (`coordination::fleet_record`): every second, the record is built from the daemon's
//! state, its last IMDS poll, the plugins and readiness — the same sources `/status` reads
//! — and handed over on a watch. Building it is pure ([`fleet_record_of`]); writing it, and
//! how often, is the coordinator's.

use forewarn_imds::EventId;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use forewarn_imds::{EventField, ImdsTime, PollStatus};
use forewarn_runtime::Readiness;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::coordination::fleet_record::{
    FLEET_RECORD_OUTCOMES_MAX, FLEET_RECORD_SCHEMA, FleetEvent, FleetHealthReason, FleetHold,
    FleetHolder, FleetImds, FleetImpact, FleetOutcome, FleetRecord, FleetScaleSetHealth,
    FleetStage,
};
use crate::log_fields::rfc3339;
use crate::ops::outcome_status::OutcomeShelf;
use crate::ops::scale_set_health::ScaleSetHealth;
use crate::pipeline::approval;
use crate::pipeline::outcome::record::OutcomeRecord;
use crate::pipeline::quarantine::QuarantinedPlugin;
use crate::pipeline::roster::Roster;
use crate::pipeline::state::{
    AnswerOutcome, ApprovalKind, CallPhase, DaemonState, EventProgress, Handling, Lifecycle,
};
use crate::plugins::set::PluginSet;
use forewarn_imds::unix_ms;

/// How often the record is built again (the coordinator decides when it is written).
const FEED_EVERY: Duration = Duration::from_secs(1);

/// What the record is built from: the running daemon's live views.
pub(crate) struct FleetSources {
    pub vm_name: String,
    pub state: watch::Receiver<Arc<DaemonState>>,
    pub poll: watch::Receiver<PollStatus>,
    pub plugins: watch::Receiver<Arc<PluginSet>>,
    pub readiness: Arc<Readiness>,
    pub quarantined: watch::Receiver<Vec<QuarantinedPlugin>>,
    /// The scale-set health as the admin endpoint last assessed it (none before its first).
    pub scale_set_health: watch::Receiver<Option<ScaleSetHealth>>,
    /// The outcome records: the VM's last events that are over.
    pub outcomes: Arc<OutcomeShelf>,
}

/// Builds the record every [`FEED_EVERY`] until `shutdown`; the receiver follows it.
pub(crate) fn spawn(
    sources: FleetSources,
    shutdown: CancellationToken,
) -> watch::Receiver<Option<FleetRecord>> {
    let (sender, receiver) = watch::channel(None);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(FEED_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let record = sources.record(SystemTime::now());
            sender.send_replace(Some(record));
        }
    });
    receiver
}

impl FleetSources {
    fn record(&self, now: SystemTime) -> FleetRecord {
        let state = self.state.borrow().clone();
        let poll = self.poll.borrow().clone();
        let plugins = self.plugins.borrow().clone();
        let quarantined = self.quarantined.borrow().clone();
        let health = self.scale_set_health.borrow().clone();
        let mut roster = Roster::clone(plugins.roster());
        roster.set_quarantined(quarantined.into_iter().map(|q| q.plugin).collect());
        let last_outcomes = last_outcomes(self.outcomes.book().records());
        FleetRecord {
            last_outcomes,
            ..fleet_record_of(
                &self.vm_name,
                &state,
                &poll,
                &roster,
                &self.readiness.holders(),
                health.as_ref(),
                now,
            )
        }
    }
}

/// The last [`FLEET_RECORD_OUTCOMES_MAX`] events that are over, the newest first, from the
/// outcome records (the oldest first).
fn last_outcomes<'a>(records: impl Iterator<Item = &'a OutcomeRecord>) -> Vec<FleetOutcome> {
    let over: Vec<&OutcomeRecord> = records.filter(|record| record.stage.is_over()).collect();
    over.iter()
        .rev()
        .take(FLEET_RECORD_OUTCOMES_MAX)
        .map(|record| fleet_outcome(record))
        .collect()
}

/// An outcome record as the fleet record carries it.
fn fleet_outcome(record: &OutcomeRecord) -> FleetOutcome {
    FleetOutcome {
        id: record.event_id.to_string(),
        event_type: record.event_type_raw.clone(),
        ended_unix_ms: record.happened.ended_unix_ms.map(ImdsTime::unix_ms),
        preparation: record.verdict.preparation(),
        impact: FleetImpact::of(&record.happened.impact),
        verdict: record.verdict.text.clone(),
    }
}

/// This VM's record as of `now`: its events with where it stands on each and what holds
/// it, its readiness holds, its last IMDS poll and its scale-set health (not yet cut to
/// size: the writer does).
pub(crate) fn fleet_record_of(
    vm_name: &str,
    state: &DaemonState,
    poll: &PollStatus,
    roster: &Roster,
    readiness_holds: &[String],
    health: Option<&ScaleSetHealth>,
    now: SystemTime,
) -> FleetRecord {
    FleetRecord {
        schema: FLEET_RECORD_SCHEMA,
        vm: vm_name.to_ascii_lowercase(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        imds: FleetImds {
            last_poll_unix_ms: poll.last_attempt.map(unix_ms),
            answered: poll.last_attempt.is_some() && poll.last_error.is_none(),
        },
        ready: readiness_holds.is_empty(),
        readiness_holds: readiness_holds.to_vec(),
        readiness_holds_truncated: 0,
        events: state
            .events
            .iter()
            .map(|(id, progress)| fleet_event(id, progress, roster))
            .collect(),
        events_truncated: 0,
        scale_set_health: health.map(fleet_health),
        last_outcomes: Vec::new(),
        published_at_unix_ms: unix_ms(now),
    }
}

/// The scale-set health as the record carries it: the state and each reason's code and
/// words.
fn fleet_health(health: &ScaleSetHealth) -> FleetScaleSetHealth {
    FleetScaleSetHealth {
        state: health.state.rich_state().to_owned(),
        reasons: health
            .state
            .reasons()
            .iter()
            .map(|reason| FleetHealthReason {
                code: reason.code().to_owned(),
                text: reason.describe(),
            })
            .collect(),
    }
}

fn fleet_event(id: &EventId, progress: &EventProgress, roster: &Roster) -> FleetEvent {
    let event = &progress.event;
    let not_before_raw = event.unreadable(EventField::NotBefore).map(str::to_owned);
    let stage = stage_of(progress);
    FleetEvent {
        id: id.to_string(),
        event_type: event.event_type_raw.clone(),
        status: event.status.to_string(),
        not_before: match not_before_raw {
            Some(_) => None,
            None => event.not_before.map(rfc3339),
        },
        not_before_raw,
        stage,
        holders: match stage {
            FleetStage::Preparing => holders_of(progress, roster),
            _ => Vec::new(),
        },
        holders_truncated: 0,
    }
}

/// Where this VM stands on the event.
fn stage_of(progress: &EventProgress) -> FleetStage {
    match progress.lifecycle {
        Lifecycle::Started => return FleetStage::Started,
        Lifecycle::Ended { after_start: true } => return FleetStage::Recovering,
        Lifecycle::Ended { after_start: false } => return FleetStage::Ended,
        Lifecycle::Scheduled => {}
    }
    match (&progress.handling, progress.approval.kind()) {
        (Handling::Ignored { .. }, _) => FleetStage::Ignored,
        (_, ApprovalKind::Sent) => FleetStage::Approved,
        (_, ApprovalKind::Due) => FleetStage::Approving,
        (_, ApprovalKind::Coordinating | ApprovalKind::NotAtImds) => FleetStage::Ready,
        (_, ApprovalKind::Withheld | ApprovalKind::DryRun | ApprovalKind::Abandoned) => {
            FleetStage::Withheld
        }
        (Handling::ApproveAtOnce { .. }, ApprovalKind::Pending) => FleetStage::Approving,
        (Handling::Prepare { .. }, ApprovalKind::Pending) => {
            match progress.preparing_since_unix_ms {
                Some(_) => FleetStage::Preparing,
                None => FleetStage::Scheduled,
            }
        }
    }
}

/// The plugins that have not approved the event's preparation: deferring, failed, not
/// answered yet, or quarantined under `on-failure = "hold"`.
fn holders_of(progress: &EventProgress, roster: &Roster) -> Vec<FleetHolder> {
    let quarantined = approval::held_by_quarantine(progress, roster);
    let mut holders: Vec<FleetHolder> = roster
        .subscribers(progress.event.event_type)
        .into_iter()
        .filter(|member| !roster.is_quarantined(&member.name))
        .filter_map(|member| {
            let done = progress.plugins.get(&member.name);
            if done.is_some_and(|done| done.prepared) {
                return None;
            }
            let answer = done
                .and_then(|done| done.last_answer.as_ref())
                .filter(|answer| answer.phase == CallPhase::Prepare);
            let hold = match answer.map(|answer| answer.outcome) {
                Some(AnswerOutcome::Defer) => FleetHold::Deferring,
                Some(AnswerOutcome::Approve) | None => FleetHold::Pending,
                Some(_) => FleetHold::Failed,
            };
            Some(FleetHolder {
                plugin: member.name.clone(),
                hold,
            })
        })
        .collect();
    holders.extend(quarantined.into_iter().map(|plugin| FleetHolder {
        plugin,
        hold: FleetHold::Quarantined,
    }));
    holders
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::roster::PluginTerms;
    use crate::pipeline::state::{Answer, Approval, PluginProgress};
    use crate::pipeline::test_harness;

    fn progress(approval: Approval, preparing: bool) -> EventProgress {
        let at = ImdsTime::from_unix_ms(1_800_000_000_000);
        let event = test_harness::event("E1", forewarn_imds::EventType::Reboot, at, Duration::ZERO);
        let mut progress = EventProgress::new(
            event,
            Handling::Prepare {
                affects_this_vm: true,
            },
            Lifecycle::Scheduled,
        );
        progress.approval = approval;
        progress.preparing_since_unix_ms =
            preparing.then_some(ImdsTime::from_unix_ms(1_800_000_000_000));
        progress
    }

    #[test]
    fn a_preparing_event_names_the_plugin_deferring_and_the_one_not_answered() {
        let mut preparing = progress(Approval::Pending, true);
        let answered = |outcome, prepared| PluginProgress {
            prepared,
            last_answer: Some(Answer {
                phase: CallPhase::Prepare,
                outcome,
                reason: String::new(),
                at_unix_ms: ImdsTime::UNIX_EPOCH,
                elapsed_ms: 1,
            }),
            ..PluginProgress::default()
        };
        preparing
            .plugins
            .insert("drain".into(), answered(AnswerOutcome::Defer, false));
        preparing
            .plugins
            .insert("ok".into(), answered(AnswerOutcome::Approve, true));
        let roster = Roster::new(
            ["drain", "ok", "slow"]
                .into_iter()
                .map(|name| (name.into(), PluginTerms::default()))
                .collect(),
        );
        let event = fleet_event(&EventId::from("E1"), &preparing, &roster);
        assert_eq!(event.stage, FleetStage::Preparing);
        assert_eq!(
            event.holders,
            [
                FleetHolder {
                    plugin: "drain".into(),
                    hold: FleetHold::Deferring
                },
                FleetHolder {
                    plugin: "slow".into(),
                    hold: FleetHold::Pending
                },
            ]
        );
        assert_eq!(event.not_before.as_deref(), Some("2027-01-15T08:00:00Z"));
    }

    #[test]
    fn each_approval_state_is_a_stage() {
        let stage = |approval, preparing| stage_of(&progress(approval, preparing));
        assert_eq!(stage(Approval::Pending, false), FleetStage::Scheduled);
        assert_eq!(stage(Approval::Pending, true), FleetStage::Preparing);
        assert_eq!(
            stage(
                Approval::Sent {
                    at_unix_ms: ImdsTime::from_unix_ms(1)
                },
                true
            ),
            FleetStage::Approved
        );
        let mut started = progress(
            Approval::Sent {
                at_unix_ms: ImdsTime::from_unix_ms(1),
            },
            true,
        );
        started.lifecycle = Lifecycle::Started;
        assert_eq!(stage_of(&started), FleetStage::Started);
    }
}

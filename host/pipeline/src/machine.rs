//! The pipeline as one sans-I/O state machine, in the style of quinn-proto's `Connection`:
//! inputs and `now` go in through [`Pipeline::handle`], actions come out of
//! [`Pipeline::poll_action`], and [`Pipeline::poll_timeout`] says when to wake it.
//!
//! Nothing here reads the clock, touches the disk or the network, or spawns a task: the
//! event loop (`forewarn_host::daemon::event_loop`) executes the actions. Every round ends with the
//! rule that makes restarts safe: [`Action::Persist`] comes before the [`Action::Call`]s,
//! [`Action::Coordinate`]s and [`Action::Approve`] it covers. A round that only asks again
//! plugins that deferred emits [`Action::PersistGrouped`] instead: the loop may group it
//! with later commits (docs/architecture.md, "Journal first"). While the journal cannot be written
//! ([`Input::JournalDurable`]), no approval is decided or sent; plugins are still called.

use forewarn_events::ImdsTime;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use forewarn_events::{Document, EventId, EventStatus, ScheduledEvent};

use crate::agenda::{Agenda, Standing, Urgency};
use crate::approval::{ApprovalInput, ApprovalStage, Events};
use crate::log_fields;
use crate::log_messages;
use crate::policy::{self, Plan};
use crate::quarantine::{QuarantineRules, QuarantinedPlugin};
use crate::roster::Roster;
use crate::scheduler::{self, InFlight, PlannedCall, Preparation, Recovery, Schedule};
use crate::state::{
    AnswerOutcome, Approval, CallPhase, DaemonState, EventProgress, Handling, Lifecycle,
};
use crate::timeline::TimelineEntry;
use crate::tracker::Transition;
pub use boundary::{Action, CallAnswer, Input, PipelineSettings};
use preparation_notes::PreparationNotes;
use quarantine_marking::MarkedRoster;
use shutdown_handling::{ShutdownHandling, ShutdownStep};

/// The pipeline: tracker → policy → scheduler → approval, over the journaled state.
pub struct Pipeline {
    settings: PipelineSettings,
    state: DaemonState,
    /// The plugin set's roster, with the plugins in crash-loop quarantine marked.
    plugins: MarkedRoster,
    /// The approval stage: the rules, the POST queue, the barrier.
    approval: ApprovalStage,
    in_flight: InFlight,
    /// Events whose wait for the lead time or whose late preparation was announced.
    notes: PreparationNotes,
    /// Which events the next round visits.
    agenda: Agenda,
    /// Events visited so far (a round's cost; the tests read it).
    pub visits: u64,
    /// The instant of the last round, for [`Pipeline::poll_timeout`].
    last_round: ImdsTime,
    /// State changed and is not journaled yet; the round's end persists it.
    unsaved: bool,
    /// Only deferral bookkeeping changed since the last persist: it may be grouped.
    unsaved_bookkeeping: bool,
    stopping: bool,
    /// The operating system's shutdown, when one is under way, and the Shutdown events
    /// journaled before this start, which the first round ends.
    host_shutdown: ShutdownHandling,
    actions: VecDeque<Action>,
}

impl Pipeline {
    /// A pipeline resuming from `state` (empty on a first start), approving alone (see
    /// [`Pipeline::coordinate_with_barrier`]).
    pub fn new(settings: PipelineSettings, state: DaemonState) -> Pipeline {
        let plugins = MarkedRoster::new(QuarantineRules::of(&settings.policy));
        let approval = ApprovalStage::new(&settings.vm_name, &settings.policy);
        let host_shutdown = ShutdownHandling::resuming(&state.events, &settings.vm_name);
        Pipeline {
            settings,
            state,
            plugins,
            approval,
            in_flight: InFlight::new(),
            notes: PreparationNotes::default(),
            agenda: Agenda::default(),
            visits: 0,
            last_round: ImdsTime::UNIX_EPOCH,
            unsaved: false,
            unsaved_bookkeeping: false,
            stopping: false,
            host_shutdown,
            actions: VecDeque::new(),
        }
    }

    /// Events naming this VM and others wait on the etcd barrier (`[coordination]`).
    pub fn coordinate_with_barrier(&mut self) {
        self.approval.coordinate_with_barrier();
        self.agenda.touch_everything();
    }

    /// Early approvals of events naming only this VM wait for a slot of the fleet's
    /// disruption budget (`coordination.disruption-budget`).
    pub fn keep_to_disruption_budget(&mut self) {
        self.approval.keep_to_disruption_budget();
        self.agenda.touch_everything();
    }

    /// The state as it stands (journaled at the end of every round).
    pub fn state(&self) -> &DaemonState {
        &self.state
    }

    /// The plugins in crash-loop quarantine, by name.
    pub fn quarantined(&self) -> Vec<QuarantinedPlugin> {
        self.plugins.quarantined()
    }

    /// Applies `input` at `now`, then runs a round (see [`Pipeline::handle_timeout`]).
    pub fn handle(&mut self, input: Input, now: ImdsTime) {
        match input {
            Input::Document(document) => self.observe(&document, now),
            Input::Answer(answer) => self.record_answer(*answer, now),
            Input::Plugins(roster) => {
                let lifted = self.plugins.replace(roster, &mut self.agenda);
                self.actions.extend(lifted.into_iter().map(Action::Emit));
                self.agenda.touch_everything();
            }
            Input::ApprovalSent(event_ids) => {
                self.unsaved = true;
                self.approval_input(ApprovalInput::Sent(event_ids), now);
            }
            Input::ApprovalFailed {
                event_ids,
                rejected,
                error,
            } => {
                let failed = ApprovalInput::Failed {
                    event_ids,
                    rejected,
                    error,
                };
                self.approval_input(failed, now);
            }
            Input::BarrierVerdict { event_id, verdict } => {
                self.approval_input(ApprovalInput::Verdict { event_id, verdict }, now);
            }
            Input::ReadinessHoldsChanged => self.unsaved = true,
            Input::JournalDurable(durable) => self.journal_durability(durable),
            Input::ShutdownStarted => self.stopping = true,
            Input::HostShutdown { budget } => {
                let steps = self.host_shutdown.began(budget, now, &self.state.events);
                self.carry_out(steps, now);
            }
            Input::HostShutdownCancelled => {
                let steps = self.host_shutdown.cancelled(&self.state.events);
                self.carry_out(steps, now);
            }
        }
        self.handle_timeout(now);
    }

    /// Runs a round at `now`: moves the events that are due forward (see [`Agenda`]: those
    /// an input touched, a barrier verdict among them, whose next instant came, or waiting
    /// for a plugin that is free again), then queues the journal write and, after it, the
    /// calls, the requests to the barrier and the approval the round decided.
    ///
    /// Events being prepared or told of a start go first, recoveries after: a plugin hears
    /// of a new event before it hears an old one end (hold before release); among them the
    /// sooner NotBefore first. A call is marked in flight as soon as it is planned, so a
    /// plugin gets one call at a time.
    pub fn handle_timeout(&mut self, now: ImdsTime) {
        self.last_round = now;
        let resumed = self.host_shutdown.resume(&self.state.events);
        self.carry_out(resumed, now);
        let replaced = self
            .host_shutdown
            .replace_a_cancelled_ridden_event(now, &self.state.events);
        self.carry_out(replaced, now);
        let mut calls = Vec::new();
        if !self.stopping {
            self.visit_due(now, &mut calls);
        }
        let approval = self.approval.poll_post(&self.state, self.stopping, now);
        // A first call, an approval or any decision needs its record first; asking again a
        // plugin that deferred does not (its first attempt is on disk): that may wait.
        let reasks_only = calls
            .iter()
            .all(|call| call.attempt > 1 && call.phase != CallPhase::Started);
        let mut requests = Vec::new();
        while let Some(request) = self.approval.poll_request() {
            requests.push(request);
        }
        if self.unsaved || !reasks_only || approval.is_some() || !requests.is_empty() {
            let state = Arc::new(self.state.clone());
            self.actions.push_back(Action::Persist(state));
        } else if self.unsaved_bookkeeping || !calls.is_empty() {
            let state = Arc::new(self.state.clone());
            self.actions.push_back(Action::PersistGrouped(state));
        }
        self.unsaved = false;
        self.unsaved_bookkeeping = false;
        for call in calls {
            self.queue_call(call);
        }
        for request in requests {
            self.actions.push_back(Action::Coordinate(request));
        }
        if let Some(batch) = approval {
            self.actions.push_back(Action::Approve(batch));
        }
        let roster = self.plugins.roster();
        let released = self.host_shutdown.settle(now, &self.state.events, roster);
        self.carry_out(released, now);
    }

    /// Carries out, in order, what the shutdown's handling asked for.
    fn carry_out(&mut self, steps: Vec<ShutdownStep>, now: ImdsTime) {
        for step in steps {
            match step {
                ShutdownStep::Transition(transition) => {
                    self.apply_transition(&transition, now);
                    self.unsaved = true;
                }
                ShutdownStep::Emit(entry) => self.emit(entry),
                ShutdownStep::Release(release) => {
                    self.actions.push_back(Action::ReleaseShutdown(release));
                }
            }
        }
    }

    /// The journal's commits stopped or started reaching the disk: the approval stage holds
    /// or lets go its approvals (and takes back one queued behind a failed commit).
    fn journal_durability(&mut self, durable: bool) {
        let actions = &mut self.actions;
        self.approval.journal_durability(durable, || {
            let queued = actions.len();
            actions.retain(|action| !matches!(action, Action::Approve(_)));
            actions.len() < queued
        });
        // The approvals held for the journal (or taken back) are decided again.
        self.agenda.touch_everything();
    }

    /// Visits the events the agenda says are due, most urgent first, offering each plugin
    /// freed since the last round to the events waiting for it until one takes it.
    fn visit_due(&mut self, now: ImdsTime, calls: &mut Vec<PlannedCall>) {
        let due = match self.agenda.take_due(now) {
            Some(due) => due,
            None => self.state.events.keys().cloned().collect(),
        };
        let mut queue: BTreeSet<Urgency> = BTreeSet::new();
        for id in due {
            match self.state.events.get(&id) {
                Some(progress) => {
                    queue.insert(Urgency::of(progress));
                }
                None => {
                    self.approval.reconcile(&id, None);
                    self.agenda.settle(&id, None);
                }
            }
        }
        loop {
            let in_flight = &self.in_flight;
            let waiter = self
                .agenda
                .next_waiter(|plugin| in_flight.iter().any(|(_, busy)| busy == plugin));
            let waiter_first = match (queue.first(), &waiter) {
                (Some(first), Some(waiter)) => waiter < first,
                (None, waiter) => waiter.is_some(),
                (Some(_), None) => false,
            };
            let next = if waiter_first {
                waiter
            } else {
                queue.pop_first()
            };
            let Some(next) = next else {
                break;
            };
            queue.remove(&next);
            self.visit(&next.id, now, calls);
        }
    }

    /// Moves one event forward, marks the calls it planned in flight, and tells the agenda
    /// when it is next due and what it waits for.
    fn visit(&mut self, id: &EventId, now: ImdsTime, calls: &mut Vec<PlannedCall>) {
        let planned_before = calls.len();
        self.advance_event(id, now, calls);
        for call in &calls[planned_before..] {
            self.in_flight
                .insert((call.event_id.clone(), call.plugin.clone()));
        }
        let schedule = Schedule {
            roster: self.plugins.roster(),
            in_flight: &self.in_flight,
            margin: self.settings.policy.safety_margin(),
            lead: self.settings.policy.prepare_lead_time,
        };
        let progress = self.state.events.get(id);
        let standing = progress.map(|progress| Standing {
            urgency: Urgency::of(progress),
            next_due: scheduler::next_due(progress, schedule, now),
            blocked_on: scheduler::blocked_on_busy(progress, schedule, now),
        });
        self.approval
            .reconcile(id, progress.map(|progress| &**progress));
        self.agenda.settle(id, standing);
    }

    /// The next action to execute, in order.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When a round is next due without any input: a retry, a deadline, an approval retry.
    /// None: nothing is scheduled.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<ImdsTime> {
        let approval_retries = self.approval.poll_timeout(&self.state.events);
        let budget_end = self
            .host_shutdown
            .deadline()
            .filter(|deadline| *deadline > self.last_round);
        self.agenda
            .next_timer_after(self.last_round)
            .into_iter()
            .chain(approval_retries)
            .chain(budget_end)
            .min()
    }

    /// Whether `id` is known and not every plugin has approved it yet.
    fn approval_pending(&self, id: &EventId) -> bool {
        self.state
            .events
            .get(id)
            .is_some_and(|progress| progress.approval == Approval::Pending)
    }

    fn observe(&mut self, document: &Document, now: ImdsTime) {
        // Copying a tracker shared with the journaled state copies its map, not its events
        // (each is shared until it changes).
        let transitions = Arc::make_mut(&mut self.state.tracker).observe(document, now);
        for transition in &transitions {
            self.apply_transition(transition, now);
        }
        if !transitions.is_empty() {
            self.unsaved = true;
        }
    }

    fn apply_transition(&mut self, transition: &Transition, now: ImdsTime) {
        let event = transition.event().clone();
        self.agenda.touch(&event.id);
        tracing::info!(
            event_id = %event.id,
            event_type = %event.event_type_raw,
            transition = %transition.kind(),
            not_before = %log_fields::time(event.not_before),
            resources = %log_fields::names(&event.resources),
            "{}",
            log_messages::EVENT_TRANSITION
        );
        self.emit(TimelineEntry::transition(&event, transition.kind(), now));
        if self.relist_during_recovery(transition) {
            return;
        }
        match transition {
            Transition::Scheduled(_) => self.start_handling(event, Lifecycle::Scheduled),
            Transition::Rescheduled { .. } => self.reschedule(event),
            Transition::Started { .. } => self.mark_started(event),
            Transition::EndedAfterStart(_) => self.mark_ended(event, true, now),
            Transition::EndedWithoutStart(_) => self.mark_ended(event, false, now),
        }
    }

    /// An id whose record is still recovering was listed again (a new listing, a
    /// reschedule or a start of it) or its new listing ended: the recovery is not
    /// overwritten; the new listing is kept and handled once the recovery is done.
    /// Returns whether the transition was taken so.
    fn relist_during_recovery(&mut self, transition: &Transition) -> bool {
        let event = transition.event();
        let Some(progress) = self.state.events.get_mut(&event.id).map(Arc::make_mut) else {
            return false;
        };
        if !progress.is_ended() {
            return false;
        }
        progress.relisted = match transition {
            Transition::EndedAfterStart(_) | Transition::EndedWithoutStart(_) => None,
            _ => Some(event.clone()),
        };
        tracing::info!(
            event_id = %event.id,
            relisted = progress.relisted.is_some(),
            "the event's id is listed again while its recovery runs; handled once it is done"
        );
        true
    }

    /// What the policy decides for `event` on this VM.
    fn handling_of(&self, event: &ScheduledEvent) -> Handling {
        match policy::plan(event, &self.settings.vm_name, &self.settings.policy) {
            Plan::Ignore { reason } => {
                tracing::info!(event_id = %event.id, "{reason}");
                Handling::Ignored { reason }
            }
            Plan::ApproveAtOnce { rule } => Handling::ApproveAtOnce { rule: rule.into() },
            Plan::Prepare { affects_this_vm } => Handling::Prepare { affects_this_vm },
        }
    }

    fn start_handling(&mut self, event: ScheduledEvent, lifecycle: Lifecycle) {
        let handling = self.handling_of(&event);
        self.emit(TimelineEntry::Handling {
            event_id: event.id.clone(),
            handling: handling.sentence(),
        });
        let id = event.id.clone();
        let mut progress = EventProgress::new(event, handling, lifecycle);
        if lifecycle == Lifecycle::Started {
            progress.approval = Approval::Abandoned {
                reason: "the event appeared already started".into(),
            };
        }
        self.state.events.insert(id, Arc::new(progress));
    }

    /// A reschedule can change Resources, so the policy is asked again. Under the same plan
    /// plugins prepare again — except after a sent approval, which stands unless a plugin
    /// asks to be asked again (`prepare-again-on-reschedule`). Under a new plan (this VM no
    /// longer named, approved at once, only other VMs named) plugins that were asked
    /// recover first (`ended-without-start`, in reverse order); the event is then handled
    /// afresh.
    fn reschedule(&mut self, event: ScheduledEvent) {
        let id = event.id.clone();
        let handling = self.handling_of(&event);
        let Some(progress) = self.state.events.get_mut(&id).map(Arc::make_mut) else {
            self.start_handling(event, Lifecycle::Scheduled);
            return;
        };
        if progress.handling != handling {
            // This VM is no longer ready for the event as it was planned.
            self.approval.withdraw(&id);
            if matches!(progress.handling, Handling::Prepare { .. })
                && progress.plugins_were_asked()
            {
                let reason = format!("rescheduled, now {}", handling.sentence());
                progress.recover_before_relisting(event, reason);
            } else {
                self.state.events.remove(&id);
                self.start_handling(event, Lifecycle::Scheduled);
            }
            return;
        }
        progress.event = event;
        let roster = self.plugins.roster();
        let sent = matches!(progress.approval, Approval::Sent { .. });
        let asked_again = progress.restart_preparation(|name| {
            !sent
                || roster
                    .get(name)
                    .is_some_and(|member| member.terms.prepare_again_on_reschedule)
        });
        if asked_again || !sent {
            // This VM prepares again: it is no longer ready for the event.
            self.approval.withdraw(&id);
        }
        // A new NotBefore: passing it late is worth saying again.
        self.notes.rescheduled(&id);
        self.emit(TimelineEntry::Handling {
            event_id: id,
            handling: handling.sentence(),
        });
    }

    fn mark_started(&mut self, event: ScheduledEvent) {
        let Some(progress) = self.state.events.get_mut(&event.id).map(Arc::make_mut) else {
            // Straight to Started (a hardware failure): plugins are told it started.
            self.start_handling(event, Lifecycle::Started);
            return;
        };
        progress.started(event);
    }

    fn mark_ended(&mut self, event: ScheduledEvent, after_start: bool, now: ImdsTime) {
        let Some(progress) = self.state.events.get_mut(&event.id).map(Arc::make_mut) else {
            tracing::debug!(event_id = %event.id, "an event the daemon never handled ended");
            return;
        };
        progress.ended(event, after_start, now);
    }

    fn emit(&mut self, entry: TimelineEntry) {
        self.actions.push_back(Action::Emit(entry));
    }

    /// Moves one event forward, collecting the calls it needs.
    fn advance_event(&mut self, id: &EventId, now: ImdsTime, calls: &mut Vec<PlannedCall>) {
        self.visits += 1;
        let Some(progress) = self.state.events.get(id) else {
            return;
        };
        let stage = (&progress.handling, progress.lifecycle, &progress.approval);
        match stage {
            (_, Lifecycle::Scheduled, Approval::Coordinating { .. }) => {
                // Waiting on the barrier: the stage says whether to approve now.
                self.approval_step(id, |approval, progress, _| approval.advance(progress, now));
            }
            (
                Handling::Ignored { .. } | Handling::ApproveAtOnce { .. },
                Lifecycle::Ended { .. },
                _,
            ) => self.finish(id, now, calls),
            (Handling::Ignored { .. }, _, _)
            | (Handling::ApproveAtOnce { .. }, Lifecycle::Started, _) => {}
            (Handling::ApproveAtOnce { .. }, Lifecycle::Scheduled, _) => {
                // Nothing to prepare: the stage decides.
                self.approval_step(id, |approval, progress, _| approval.decide(progress, now));
            }
            (Handling::Prepare { .. }, Lifecycle::Scheduled, _) => self.prepare(id, now, calls),
            (Handling::Prepare { .. }, Lifecycle::Started, _) => self.tell_started(id, calls),
            (Handling::Prepare { .. }, Lifecycle::Ended { .. }, _) => self.recover(id, now, calls),
        }
    }

    /// The scheduler's view and the events, borrowed apart so a stage can change one
    /// event while it reads the roster and the calls in flight.
    fn schedule_and_events(
        &mut self,
    ) -> (Schedule<'_>, &mut BTreeMap<EventId, Arc<EventProgress>>) {
        let schedule = Schedule {
            roster: self.plugins.roster(),
            in_flight: &self.in_flight,
            margin: self.settings.policy.safety_margin(),
            lead: self.settings.policy.prepare_lead_time,
        };
        (schedule, &mut self.state.events)
    }

    fn prepare(&mut self, id: &EventId, now: ImdsTime, calls: &mut Vec<PlannedCall>) {
        if !self.approval_pending(id) {
            return;
        }
        let (schedule, events) = self.schedule_and_events();
        let Some(progress) = events.get_mut(id) else {
            return;
        };
        let late = scheduler::deadline(&progress.event, schedule.margin)
            .is_some_and(|deadline| deadline <= now);
        let waited = progress.preparing_since_unix_ms.is_none();
        let preparation = scheduler::prepare(progress, schedule, now);
        let began = waited && progress.preparing_since_unix_ms.is_some();
        if began {
            // Journal the start even when no call is due yet (status shows it).
            self.unsaved = true;
        }
        match preparation {
            Preparation::NotYet { starts_at } => {
                let note = self.notes.wait(id, starts_at);
                self.actions.extend(note.map(Action::Emit));
            }
            Preparation::Calls {
                calls: due,
                shortened,
            } => {
                calls.extend(due);
                for turn in shortened {
                    self.emit(preparation_notes::shortened(id, turn));
                }
                let margin_ms = self.settings.policy.safety_margin_ms;
                let progress = self.state.events.get(id).filter(|_| late);
                let note = progress.and_then(|progress| {
                    self.notes.late(progress, self.plugins.roster(), margin_ms)
                });
                self.actions.extend(note.map(Action::Emit));
                self.announce_quarantine_hold(id);
            }
            Preparation::AllPrepared { subscribers } => {
                // forewarn's own Shutdown event is not approved at IMDS.
                self.approval_step(id, |approval, progress, roster| {
                    match progress.event.is_from_operating_system() {
                        true => shutdown_handling::all_prepared(progress, now),
                        false => approval.on_all_prepared(progress, subscribers, roster, now),
                    }
                });
            }
        }
    }

    fn tell_started(&mut self, id: &EventId, calls: &mut Vec<PlannedCall>) {
        let (schedule, events) = self.schedule_and_events();
        if let Some(progress) = events.get_mut(id) {
            calls.extend(scheduler::tell_started(progress, schedule));
        }
    }

    fn recover(&mut self, id: &EventId, now: ImdsTime, calls: &mut Vec<PlannedCall>) {
        let (schedule, events) = self.schedule_and_events();
        let Some(progress) = events.get_mut(id) else {
            return;
        };
        match scheduler::recover(progress, schedule, now) {
            Recovery::Calls(due) => calls.extend(due),
            Recovery::Done => self.finish(id, now, calls),
        }
    }

    /// The event is handled to the end: forgotten, or, when its id was listed again during
    /// the recovery, handled afresh as listed now.
    fn finish(&mut self, id: &EventId, now: ImdsTime, calls: &mut Vec<PlannedCall>) {
        let Some(event) = self.forget(id) else {
            return;
        };
        let lifecycle = match event.status {
            EventStatus::Started => Lifecycle::Started,
            EventStatus::Scheduled => Lifecycle::Scheduled,
        };
        self.start_handling(event, lifecycle);
        self.advance_event(id, now, calls);
    }

    /// Says once per event that quarantined plugins hold it (see
    /// [`crate::approval::quarantine_hold`]).
    fn announce_quarantine_hold(&mut self, id: &EventId) {
        if self.plugins.roster().quarantined().is_empty() {
            return;
        }
        self.with_approval(|approval, events, roster| {
            if let Some(progress) = events.get(id) {
                approval.note_quarantine_hold(progress, roster);
            }
        });
    }

    /// Lends the approval stage `id`'s record to change (and the roster); a change is
    /// journaled at the round's end.
    fn approval_step(
        &mut self,
        id: &EventId,
        step: impl FnOnce(&mut ApprovalStage, &mut EventProgress, &Roster) -> bool,
    ) {
        let changed = self.with_approval(|approval, events, roster| {
            let progress = events.get_mut(id).map(Arc::make_mut);
            progress.is_some_and(|progress| step(approval, progress, roster))
        });
        if changed {
            self.unsaved = true;
        }
    }

    /// Feeds the approval stage `input`; the events it touched are visited next round.
    fn approval_input(&mut self, input: ApprovalInput, now: ImdsTime) {
        let touched = self.with_approval(|approval, events, _| approval.handle(input, now, events));
        for id in touched {
            self.agenda.touch(&id);
        }
    }

    /// Calls the approval stage with the events and the roster, then emits what it reported,
    /// in order: the one place its notes are drained.
    fn with_approval<R>(
        &mut self,
        call: impl FnOnce(&mut ApprovalStage, &mut Events, &Roster) -> R,
    ) -> R {
        let result = call(
            &mut self.approval,
            &mut self.state.events,
            self.plugins.roster(),
        );
        while let Some(entry) = self.approval.poll_emit() {
            self.actions.push_back(Action::Emit(entry));
        }
        result
    }

    /// Forgets the event; returns its new listing, if its id was listed again meanwhile.
    fn forget(&mut self, id: &EventId) -> Option<ScheduledEvent> {
        let listed = self.state.events.get(id).map(|progress| &progress.event);
        self.approval.forget(id, listed);
        self.notes.forget(id);
        let progress = self.state.events.remove(id)?;
        self.unsaved = true;
        tracing::info!(event_id = %id, "event handled to the end");
        self.emit(TimelineEntry::Finished {
            event_id: EventId::from(id),
        });
        Arc::unwrap_or_clone(progress).relisted
    }

    fn queue_call(&mut self, call: PlannedCall) {
        self.in_flight
            .insert((call.event_id.clone(), call.plugin.clone()));
        self.emit(TimelineEntry::PluginCalled {
            event_id: call.event_id.clone(),
            plugin: call.plugin.clone(),
            phase: call.phase,
            attempt: call.attempt,
            budget_ms: crate::log_fields::millis(call.budget),
        });
        tracing::debug!(event_id = %call.event_id, plugin = %call.plugin, phase = %call.phase, attempt = call.attempt, budget = %log_fields::duration(call.budget), "calling plugin");
        self.actions.push_back(Action::Call(call));
    }

    fn record_answer(&mut self, answer: CallAnswer, now: ImdsTime) {
        let CallAnswer { call, reply } = answer;
        self.in_flight
            .remove(&(call.event_id.clone(), call.plugin.clone()));
        if reply.outcome.is_failure() {
            let quarantined =
                self.plugins
                    .count_failure(&call.plugin, &reply, now, &mut self.agenda);
            self.actions.extend(quarantined.map(Action::Emit));
        }
        let on_failure = self
            .plugins
            .roster()
            .get(&call.plugin)
            .map(|member| member.terms.on_failure)
            .unwrap_or_default();
        self.agenda.touch(&call.event_id);
        self.agenda.plugin_freed(&call.plugin);
        for line in &reply.logs {
            self.emit(TimelineEntry::PluginLog {
                event_id: call.event_id.clone(),
                plugin: call.plugin.clone(),
                level: line.level,
                message: line.message.clone(),
            });
        }
        let margin = self.settings.policy.safety_margin();
        let Some(progress) = self.state.events.get_mut(&call.event_id).map(Arc::make_mut) else {
            return;
        };
        let decided = |progress: &EventProgress| {
            let own = progress.plugins.get(&call.plugin);
            own.map(|own| (own.prepared, own.told_started, own.told_ended))
        };
        let before = decided(progress);
        let recorded = scheduler::record_reply(
            progress,
            &call.plugin,
            call.phase,
            &reply,
            now,
            margin,
            on_failure,
        );
        recorded.log(&call.event_id, &call.plugin, on_failure);
        // An answer that settled something (prepared, told) is a decision; a deferral or a
        // failure that will be asked again is bookkeeping, which may be grouped.
        if decided(progress) != before || recorded.outcome == AnswerOutcome::Approve {
            self.unsaved = true;
        } else {
            self.unsaved_bookkeeping = true;
        }
        self.emit(TimelineEntry::PluginAnswered {
            event_id: call.event_id,
            plugin: call.plugin,
            phase: recorded.phase,
            outcome: recorded.outcome,
            reason: recorded.reason,
            elapsed_ms: recorded.elapsed_ms,
        });
    }
}

mod boundary;
mod preparation_notes;
mod quarantine_marking;
mod shutdown_handling;

#[cfg(test)]
mod tests;

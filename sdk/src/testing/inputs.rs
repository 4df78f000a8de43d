//! Test inputs with sensible defaults: `event(EventType::Reboot)`, `context()`,
//! `start_context()` and `exited(code)`; change any field with struct update syntax.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{
    ActionOutput, Context, Event, EventSource, EventStatus, EventType, StartContext, VmInfo,
};

/// The VM the inputs are about: the only name in an event's `resources`, the context's
/// `vm_name`.
pub const VM_NAME: &str = "test-vm";

/// The `id` of the events [`event`] builds.
pub const EVENT_ID: &str = "test-event-1";

/// How far away [`event`] puts `NotBefore` (a Preempt gets 30 seconds, as Azure gives).
pub const NOTICE: Duration = Duration::from_secs(15 * 60);

/// The time a call has in the contexts these functions build (as a manifest's default
/// `budget`).
pub const BUDGET: Duration = Duration::from_secs(10);

/// A scheduled, platform-initiated event of `event_type` for [`VM_NAME`], with id
/// [`EVENT_ID`], `NotBefore` [`NOTICE`] from now (30 s for a Preempt) and no duration.
///
/// ```
/// use forewarn_sdk::{testing, EventSource, EventType};
///
/// let event = testing::event(EventType::Reboot);
/// assert_eq!(event.event_type_raw, "Reboot");
/// let user_redeploy = forewarn_sdk::Event {
///     source: EventSource::User,
///     ..testing::event(EventType::Redeploy)
/// };
/// assert!(user_redeploy.is_user_initiated());
/// ```
pub fn event(event_type: EventType) -> Event {
    Event {
        id: EVENT_ID.to_owned(),
        event_type,
        event_type_raw: imds_name(event_type),
        resource_type: "VirtualMachine".to_owned(),
        resources: vec![VM_NAME.to_owned()],
        status: EventStatus::Scheduled,
        not_before_unix_ms: Some(now_ms() + millis(notice_of(event_type))),
        description: format!("{} scheduled by the test", imds_name(event_type)),
        source: EventSource::Platform,
        duration_seconds: None,
    }
}

/// The context of a first call about an event affecting [`VM_NAME`] (a regular VM), with
/// [`BUDGET`] to answer and `NotBefore` [`NOTICE`] away. [`context_for`] fits it to an event.
pub fn context() -> Context {
    Context {
        vm_name: VM_NAME.to_owned(),
        affects_this_vm: true,
        deadline_unix_ms: deadline_in(BUDGET),
        attempt: 1,
        until_not_before_ms: Some(millis(NOTICE)),
        vm: VmInfo::default(),
    }
}

/// [`context`], with `affects_this_vm` and `until_not_before_ms` as the daemon would compute
/// them for `event`.
pub fn context_for(event: &Event) -> Context {
    let now = now_ms();
    Context {
        affects_this_vm: event.affects(VM_NAME),
        until_not_before_ms: event
            .not_before_unix_ms
            .map(|not_before| not_before.saturating_sub(now)),
        ..context()
    }
}

/// What `on_start` gets on a regular VM whose daemon found its journal (not a first run).
pub fn start_context() -> StartContext {
    StartContext {
        vm_name: VM_NAME.to_owned(),
        vm: VmInfo::default(),
        first_run: false,
        deadline_unix_ms: deadline_in(BUDGET),
    }
}

/// The instant `budget` from now, as a context's `deadline_unix_ms`: give a call less (or
/// more) time than [`BUDGET`] with `Context { deadline_unix_ms: deadline_in(…), ..context() }`.
pub fn deadline_in(budget: Duration) -> u64 {
    now_ms() + millis(budget)
}

/// An action that exited with `code` and printed nothing.
pub fn exited(code: i32) -> ActionOutput {
    ActionOutput {
        exit_code: Some(code),
        stdout: String::new(),
        stderr: String::new(),
    }
}

/// The `EventType` text IMDS sends for `event_type`: its WIT name capitalised ("Reboot").
fn imds_name(event_type: EventType) -> String {
    let name = event_type.as_str();
    let mut chars = name.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

fn notice_of(event_type: EventType) -> Duration {
    match event_type {
        EventType::Preempt => Duration::from_secs(30),
        _ => NOTICE,
    }
}

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    millis(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_concerns_the_test_vm_and_lies_ahead() {
        let event = event(EventType::Redeploy);
        assert!(event.affects(VM_NAME));
        let ahead = event.time_until_not_before(SystemTime::now());
        assert!(ahead.is_some_and(|left| left > NOTICE - Duration::from_secs(5)));
        assert_eq!(event.event_type_raw, "Redeploy");
    }

    #[test]
    fn a_preempt_gives_thirty_seconds() {
        let ahead = event(EventType::Preempt).time_until_not_before(SystemTime::now());
        assert!(ahead.is_some_and(|left| left <= Duration::from_secs(30)));
    }

    #[test]
    fn context_for_follows_the_event() {
        let other_vm = Event {
            resources: vec!["another-vm".to_owned()],
            not_before_unix_ms: None,
            ..event(EventType::Freeze)
        };
        let ctx = context_for(&other_vm);
        assert!(!ctx.affects_this_vm);
        assert_eq!(ctx.until_not_before_ms, None);
        assert!(context().time_left() > Duration::ZERO);
    }
}

//! Convenience methods on what a plugin receives: the event, its phase and the call context,
//! plus the WIT kebab-case names of every enum (`EventType::Preempt.as_str() == "preempt"`).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Context, Event, EventSource, EventStatus, EventType, Phase};

impl Event {
    /// When the event may start at the latest (`NotBefore`); `None` once it has started.
    pub fn not_before(&self) -> Option<SystemTime> {
        self.not_before_unix_ms.map(unix_ms_to_time)
    }

    /// Time left until `NotBefore`, measured from `now`; zero once it has passed, `None`
    /// when there is no `NotBefore`.
    pub fn time_until_not_before(&self, now: SystemTime) -> Option<Duration> {
        self.not_before()
            .map(|at| at.duration_since(now).unwrap_or(Duration::ZERO))
    }

    /// Whether a person or automation acting on this VM asked for the maintenance (a
    /// restart or redeploy from the portal, the CLI, the API), rather than Azure.
    pub fn is_user_initiated(&self) -> bool {
        self.source == EventSource::User
    }

    /// Whether the VM stops running: everything but `Freeze`. An unknown event type counts
    /// as taking the VM down, because preparing for the worst is the safe guess.
    pub fn takes_vm_down(&self) -> bool {
        self.event_type != EventType::Freeze
    }

    /// Whether the contents of memory are lost (everything but `Freeze`; see `takes_vm_down`).
    pub fn loses_memory(&self) -> bool {
        self.takes_vm_down()
    }

    /// Whether the VM's ephemeral (temporary) disk is lost: `Redeploy`, `Preempt`,
    /// `Terminate`, and unknown types.
    pub fn loses_ephemeral_disk(&self) -> bool {
        !matches!(self.event_type, EventType::Freeze | EventType::Reboot)
    }

    /// The expected length of the impact, when IMDS said.
    pub fn duration(&self) -> Option<Duration> {
        let seconds = u64::try_from(self.duration_seconds?).ok()?;
        Some(Duration::from_secs(seconds))
    }

    /// Whether the maintenance is under way.
    pub fn is_started(&self) -> bool {
        self.status == EventStatus::Started
    }

    /// Whether `resources` names the VM `vm_name`.
    pub fn affects(&self, vm_name: &str) -> bool {
        self.resources.iter().any(|name| name == vm_name)
    }

    /// The event as the small JSON object the bundled plugins POST to a workload's endpoints:
    /// `{"event_id":"…","event_type":"reboot"}` (the type's WIT name, see
    /// [`EventType::as_str`]). Compact, keys in that order, the id escaped as a JSON string.
    pub fn notice_json(&self) -> String {
        format!(
            "{{\"event_id\":\"{}\",\"event_type\":\"{}\"}}",
            json_escape(&self.id),
            self.event_type
        )
    }
}

impl Context {
    /// The instant the answer is due; a call still running then is cut off.
    pub fn deadline(&self) -> SystemTime {
        unix_ms_to_time(self.deadline_unix_ms)
    }

    /// Time left before the deadline, from now; zero once it has passed.
    pub fn time_left(&self) -> Duration {
        self.time_left_at(SystemTime::now())
    }

    /// Time left before the deadline, from `now`; zero once it has passed.
    pub fn time_left_at(&self, now: SystemTime) -> Duration {
        self.deadline()
            .duration_since(now)
            .unwrap_or(Duration::ZERO)
    }

    /// Time from the start of this call to the event's `NotBefore` (zero once it has passed);
    /// None once the event has started. On a Spot eviction this is the whole notice left.
    pub fn until_not_before(&self) -> Option<Duration> {
        self.until_not_before_ms.map(Duration::from_millis)
    }

    /// Whether this is the first call for this event and phase (not a retry after a defer).
    pub fn is_first_attempt(&self) -> bool {
        self.attempt <= 1
    }
}

impl Phase {
    /// The WIT name: "prepare", "started", "ended-after-start", "ended-without-start".
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Prepare => "prepare",
            Phase::Started => "started",
            Phase::EndedAfterStart => "ended-after-start",
            Phase::EndedWithoutStart => "ended-without-start",
        }
    }

    /// Whether the event is over, after starting or without starting.
    pub fn is_ended(self) -> bool {
        matches!(self, Phase::EndedAfterStart | Phase::EndedWithoutStart)
    }
}

impl EventType {
    /// The WIT name: "freeze", "reboot", "redeploy", "preempt", "terminate", "shutdown",
    /// "unknown".
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Freeze => "freeze",
            EventType::Reboot => "reboot",
            EventType::Redeploy => "redeploy",
            EventType::Preempt => "preempt",
            EventType::Terminate => "terminate",
            EventType::Shutdown => "shutdown",
            EventType::Unknown => "unknown",
        }
    }
}

impl EventStatus {
    /// The WIT name: "scheduled" or "started".
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Scheduled => "scheduled",
            EventStatus::Started => "started",
        }
    }
}

impl EventSource {
    /// The WIT name: "platform", "user", "operating-system" or "unknown".
    pub fn as_str(self) -> &'static str {
        match self {
            EventSource::Platform => "platform",
            EventSource::User => "user",
            EventSource::OperatingSystem => "operating-system",
            EventSource::Unknown => "unknown",
        }
    }
}

macro_rules! display_as_str {
    ($($name:ty),*) => {$(
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    )*};
}

display_as_str!(Phase, EventType, EventStatus, EventSource);

/// `text` with what JSON must escape in a string (`"`, `\`, control characters) escaped.
fn json_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => escaped.push_str("\\\""),
            '\\' => escaped.push_str("\\\\"),
            c if u32::from(c) < 0x20 => escaped.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => escaped.push(c),
        }
    }
    escaped
}

fn unix_ms_to_time(unix_ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(unix_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: EventType) -> Event {
        Event {
            id: "E1".into(),
            event_type,
            event_type_raw: event_type.as_str().into(),
            resource_type: "VirtualMachine".into(),
            resources: vec!["vm-a".into(), "vm-b".into()],
            status: EventStatus::Scheduled,
            not_before_unix_ms: Some(1_700_000_000_000),
            description: String::new(),
            source: EventSource::Platform,
            duration_seconds: Some(-1),
        }
    }

    fn context(deadline_unix_ms: u64, attempt: u32) -> Context {
        Context {
            vm_name: "vm-a".into(),
            affects_this_vm: true,
            deadline_unix_ms,
            attempt,
            until_not_before_ms: Some(25_000),
            vm: Default::default(),
        }
    }

    #[test]
    fn not_before_is_the_unix_millis() {
        let at = event(EventType::Reboot).not_before().expect("a NotBefore");
        assert_eq!(
            at.duration_since(UNIX_EPOCH).ok(),
            Some(Duration::from_millis(1_700_000_000_000))
        );
    }

    #[test]
    fn time_until_not_before_saturates_at_zero() {
        let mut started = event(EventType::Reboot);
        let before = UNIX_EPOCH + Duration::from_millis(1_699_999_999_000);
        assert_eq!(
            started.time_until_not_before(before),
            Some(Duration::from_secs(1))
        );
        let after = UNIX_EPOCH + Duration::from_millis(1_700_000_001_000);
        assert_eq!(started.time_until_not_before(after), Some(Duration::ZERO));
        started.not_before_unix_ms = None;
        assert_eq!(started.not_before(), None);
        assert_eq!(started.time_until_not_before(after), None);
    }

    #[test]
    fn only_freeze_keeps_the_vm_up() {
        let down = [
            EventType::Reboot,
            EventType::Redeploy,
            EventType::Preempt,
            EventType::Terminate,
            EventType::Shutdown,
            EventType::Unknown,
        ];
        for event_type in down {
            assert!(event(event_type).takes_vm_down(), "{event_type}");
        }
        assert!(!event(EventType::Freeze).takes_vm_down());
    }

    #[test]
    fn ephemeral_disk_survives_freeze_and_reboot_only() {
        assert!(!event(EventType::Freeze).loses_ephemeral_disk());
        assert!(!event(EventType::Reboot).loses_ephemeral_disk());
        assert!(event(EventType::Redeploy).loses_ephemeral_disk());
        assert!(event(EventType::Preempt).loses_ephemeral_disk());
    }

    #[test]
    fn user_initiated_follows_the_source() {
        let mut by_user = event(EventType::Reboot);
        assert!(!by_user.is_user_initiated());
        by_user.source = EventSource::User;
        assert!(by_user.is_user_initiated());
    }

    #[test]
    fn duration_ignores_the_unknown_marker() {
        let mut timed = event(EventType::Freeze);
        assert_eq!(timed.duration(), None);
        timed.duration_seconds = Some(9);
        assert_eq!(timed.duration(), Some(Duration::from_secs(9)));
        timed.duration_seconds = None;
        assert_eq!(timed.duration(), None);
    }

    #[test]
    fn affects_matches_resource_names_exactly() {
        let reboot = event(EventType::Reboot);
        assert!(reboot.affects("vm-b"));
        assert!(!reboot.affects("vm"));
    }

    #[test]
    fn notice_json_is_compact_and_escapes_the_id() {
        let mut reboot = event(EventType::Reboot);
        assert_eq!(
            reboot.notice_json(),
            r#"{"event_id":"E1","event_type":"reboot"}"#
        );
        reboot.id = "a\"b\\c\nd".into();
        assert_eq!(
            reboot.notice_json(),
            r#"{"event_id":"a\"b\\c\u000ad","event_type":"reboot"}"#
        );
    }

    #[test]
    fn context_time_left_saturates() {
        let ctx = context(10_000, 1);
        assert_eq!(
            ctx.time_left_at(UNIX_EPOCH + Duration::from_secs(4)),
            Duration::from_secs(6)
        );
        assert_eq!(
            ctx.time_left_at(UNIX_EPOCH + Duration::from_secs(11)),
            Duration::ZERO
        );
        assert!(ctx.is_first_attempt());
        assert!(!context(10_000, 2).is_first_attempt());
    }

    #[test]
    fn enums_display_their_wit_names() {
        assert_eq!(Phase::EndedAfterStart.to_string(), "ended-after-start");
        assert_eq!(EventType::Preempt.to_string(), "preempt");
        assert_eq!(EventStatus::Started.to_string(), "started");
        assert_eq!(EventSource::Platform.to_string(), "platform");
        assert!(Phase::EndedWithoutStart.is_ended());
        assert!(!Phase::Started.is_ended());
    }
}

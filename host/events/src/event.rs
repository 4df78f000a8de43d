//! The Scheduled Events document as forewarn understands it, independent of the JSON:
//! typed fields, with the raw text kept wherever a newer API could send something new.

use std::fmt;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::ImdsTime;
use crate::ids::EventId;

/// One GET of `/metadata/scheduledevents`: the incarnation and the events it lists.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Document {
    /// `DocumentIncarnation`: grows when the events change, but resets after the service
    /// was idle for a day, so it is only a hint. None when absent or unreadable.
    pub incarnation: Option<u64>,
    /// `Events`, in the order IMDS listed them; empty when nothing is scheduled.
    pub events: Vec<ScheduledEvent>,
    /// Entries of `Events` forewarn could not use at all (no `EventId`, so nothing to track
    /// them by): set aside so that they do not hide the others. An event with an `EventId`
    /// and an unreadable field is kept, with the field in
    /// [`ScheduledEvent::unreadable`]. Never serialized.
    #[serde(skip)]
    pub rejected: Vec<crate::parse_error::ParseError>,
}

/// One event of a document, with every field of api-version 2020-07-01.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledEvent {
    /// `EventId`, stable for the event's whole life.
    pub id: EventId,
    /// `EventType`, parsed; `Unknown` for a type forewarn does not know.
    pub event_type: EventType,
    /// `EventType` exactly as sent, so a type newer than forewarn still reaches plugins.
    pub event_type_raw: String,
    /// `ResourceType`, usually "VirtualMachine"; empty when absent.
    pub resource_type: String,
    /// `Resources`: the VM names this event affects.
    pub resources: Vec<String>,
    /// Where the event stands (its `EventStatus`): announced and waiting, or under way. An
    /// event that is over is not listed at all.
    pub status: EventStatus,
    /// `NotBefore`; None when blank (always so once Started) or absent.
    pub not_before: Option<SystemTime>,
    /// `Description`; empty when absent (before api-version 2019-08-01).
    pub description: String,
    /// `EventSource`; `Unknown` when absent (before api-version 2019-08-01).
    pub source: EventSource,
    /// `DurationInSeconds`; None when absent or -1 (unknown).
    pub duration_seconds: Option<i64>,
    /// The fields IMDS sent that forewarn cannot read or does not know, with the text sent:
    /// each is read the safe way (see [`EventField`]). Empty for an ordinary event; absent
    /// from journals written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableField>,
}

/// A field of an event that forewarn could not read (or whose value it does not know), with
/// the text IMDS sent, cut to about 200 characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UnreadableField {
    /// Which field.
    pub field: EventField,
    /// What IMDS sent: a string's text, anything else as JSON.
    pub raw: String,
}

/// The fields of an event that decide when (or whether) it is prepared, and how each is
/// read when forewarn cannot read it: always the way that prepares the VM sooner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventField {
    /// Unreadable `NotBefore` (epoch seconds, "-1", an impossible date, …): the event may
    /// start at any moment, so it is prepared at once, like a blank `NotBefore`.
    NotBefore,
    /// Unreadable `DurationInSeconds`: unknown, so no rule that trusts a short impact (a
    /// short Freeze approved at once) applies.
    DurationInSeconds,
    /// An `EventType` forewarn does not know: prepared as the most disruptive type, by every
    /// plugin that prepares for any type.
    EventType,
    /// An `EventStatus` forewarn does not know: read as `Scheduled`, so it is prepared.
    EventStatus,
    /// Unusable `Resources`: read as naming this VM (it is prepared), and never approved,
    /// as which VMs the approval would release is unknown.
    Resources,
}

impl EventField {
    /// The field's name as IMDS spells it ("NotBefore", …): the `field` label of
    /// `forewarn_events_unreadable_total`.
    pub fn as_wire(self) -> &'static str {
        match self {
            EventField::NotBefore => "NotBefore",
            EventField::DurationInSeconds => "DurationInSeconds",
            EventField::EventType => "EventType",
            EventField::EventStatus => "EventStatus",
            EventField::Resources => "Resources",
        }
    }

    /// How forewarn reads the field when it cannot, in words (for `/status`).
    pub fn read_as(self) -> &'static str {
        match self {
            EventField::NotBefore => "may start at any moment: prepared at once",
            EventField::DurationInSeconds => "impact unknown: no short-impact rule applies",
            EventField::EventType => "prepared as the most disruptive type, by every plugin",
            EventField::EventStatus => "read as Scheduled: prepared",
            EventField::Resources => "read as naming this VM: prepared, never approved",
        }
    }
}

impl fmt::Display for EventField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_wire())
    }
}

/// What the maintenance does to the VM (the event's `EventType`), from least to most
/// disruptive; a type newer than forewarn is `Unknown`, with its text kept in
/// [`ScheduledEvent::event_type_raw`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventType {
    /// The VM pauses for a few seconds; memory, files and connections are kept.
    Freeze,
    /// The VM reboots; non-persistent memory is lost.
    Reboot,
    /// The VM moves to another node; ephemeral disks are lost.
    Redeploy,
    /// A Spot VM is being evicted (about 30 s notice).
    Preempt,
    /// The VM is being deleted (scale-in, user-configurable notice).
    Terminate,
    /// Not from IMDS: the VM's own operating system is shutting down or rebooting with no
    /// Scheduled Event in preparation (`sudo reboot`, a stop from the portal whose event never
    /// came, the guest's update reboot). forewarn makes this event itself, with
    /// [`EventSource::OperatingSystem`] (see [`ScheduledEvent::host_shutdown`]); a document
    /// from IMDS never parses to it.
    Shutdown,
    /// A type forewarn does not know yet; `ScheduledEvent::event_type_raw` has the text.
    Unknown,
}

/// `EventStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventStatus {
    /// Waiting for `NotBefore` or an approval.
    Scheduled,
    /// The maintenance has begun.
    Started,
}

/// Who asked for the maintenance (the event's `EventSource`, sent by api-version
/// 2019-08-01 and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventSource {
    /// Initiated by Azure.
    Platform,
    /// Initiated by the VM's owner (restart, redeploy…).
    User,
    /// Not from IMDS: the VM's operating system itself (a [`EventType::Shutdown`] forewarn
    /// made when the system began to shut down). Never parsed from a document.
    OperatingSystem,
    /// Absent (older api-versions) or a value forewarn does not know.
    Unknown,
}

impl EventType {
    /// Every known type, in the order the docs list them.
    pub const KNOWN: [EventType; 5] = [
        EventType::Freeze,
        EventType::Reboot,
        EventType::Redeploy,
        EventType::Preempt,
        EventType::Terminate,
    ];

    /// Parses the wire text, case-insensitively; anything else is `Unknown`. IMDS's types
    /// only: "Shutdown" (forewarn's own type) is `Unknown` here, so a document cannot pass
    /// for the operating system.
    pub fn from_wire(text: &str) -> EventType {
        Self::KNOWN
            .into_iter()
            .find(|known| known.as_wire().eq_ignore_ascii_case(text.trim()))
            .unwrap_or(EventType::Unknown)
    }

    /// Parses a type as a manifest's `subscribe` list names it: IMDS's types and forewarn's
    /// own "Shutdown", case-insensitively; anything else is `Unknown`.
    pub fn from_subscription_name(text: &str) -> EventType {
        if EventType::Shutdown
            .as_wire()
            .eq_ignore_ascii_case(text.trim())
        {
            return EventType::Shutdown;
        }
        EventType::from_wire(text)
    }

    /// Whether the event takes the VM down (its memory and connections are lost): every type
    /// but Freeze. An unknown type is taken as the most disruptive.
    pub fn takes_the_vm_down(self) -> bool {
        !matches!(self, EventType::Freeze)
    }

    /// The text IMDS uses ("Freeze", …); "Unknown" for `Unknown`.
    pub fn as_wire(self) -> &'static str {
        match self {
            EventType::Freeze => "Freeze",
            EventType::Reboot => "Reboot",
            EventType::Redeploy => "Redeploy",
            EventType::Preempt => "Preempt",
            EventType::Terminate => "Terminate",
            EventType::Shutdown => "Shutdown",
            EventType::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_wire())
    }
}

impl EventStatus {
    /// The text IMDS uses.
    pub fn as_wire(self) -> &'static str {
        match self {
            EventStatus::Scheduled => "Scheduled",
            EventStatus::Started => "Started",
        }
    }
}

impl fmt::Display for EventStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_wire())
    }
}

impl EventSource {
    /// Parses the wire text, case-insensitively; anything else is `Unknown`.
    pub fn from_wire(text: &str) -> EventSource {
        match text.trim() {
            t if t.eq_ignore_ascii_case("Platform") => EventSource::Platform,
            t if t.eq_ignore_ascii_case("User") => EventSource::User,
            _ => EventSource::Unknown,
        }
    }

    /// The text IMDS uses; "" for `Unknown`, "OperatingSystem" (never on the wire) for the
    /// operating system's own shutdown.
    pub fn as_wire(self) -> &'static str {
        match self {
            EventSource::Platform => "Platform",
            EventSource::User => "User",
            EventSource::OperatingSystem => "OperatingSystem",
            EventSource::Unknown => "",
        }
    }
}

impl ScheduledEvent {
    /// A Platform event of `event_type` on a VirtualMachine with nothing else known: no
    /// `Resources`, `NotBefore`, description or duration, every field read. Tests,
    /// simulators and testing hosts set the rest by struct update:
    ///
    /// ```
    /// use forewarn_events::{EventStatus, EventType, ScheduledEvent};
    ///
    /// let reboot = ScheduledEvent {
    ///     resources: vec!["vm-a".into()],
    ///     ..ScheduledEvent::new("E1", EventType::Reboot, EventStatus::Scheduled)
    /// };
    /// assert_eq!(reboot.event_type_raw, "Reboot");
    /// assert!(reboot.names_vm("vm-a"));
    /// ```
    pub fn new(id: impl Into<EventId>, event_type: EventType, status: EventStatus) -> Self {
        ScheduledEvent {
            id: id.into(),
            event_type,
            event_type_raw: event_type.as_wire().to_owned(),
            resource_type: "VirtualMachine".to_owned(),
            resources: Vec::new(),
            status,
            not_before: None,
            description: String::new(),
            source: EventSource::Platform,
            duration_seconds: None,
            unreadable: Vec::new(),
        }
    }

    /// The event forewarn makes when the operating system shuts down with no Scheduled Event
    /// in preparation: type [`EventType::Shutdown`], source [`EventSource::OperatingSystem`],
    /// naming `vm_name` only, Scheduled, with `not_before` the end of the shutdown budget
    /// (the preparation is planned back from it, as for a Scheduled Event).
    pub fn host_shutdown(id: impl Into<EventId>, vm_name: &str, not_before: SystemTime) -> Self {
        ScheduledEvent {
            resources: vec![vm_name.to_owned()],
            not_before: Some(not_before),
            description: "The operating system is shutting down or rebooting, with no Scheduled \
                          Event in preparation (not from IMDS: nothing is approved)."
                .to_owned(),
            source: EventSource::OperatingSystem,
            ..ScheduledEvent::new(id, EventType::Shutdown, EventStatus::Scheduled)
        }
    }

    /// Whether forewarn made this event itself from the operating system's shutdown (see
    /// [`ScheduledEvent::host_shutdown`]): not from IMDS, so never approved there.
    pub fn is_from_operating_system(&self) -> bool {
        self.source == EventSource::OperatingSystem
    }

    /// `NotBefore` as a point on IMDS's clock (whole milliseconds), the form the pipeline
    /// plans in. `not_before` itself stays a `SystemTime`: journals store it in that form.
    pub fn not_before_time(&self) -> Option<ImdsTime> {
        self.not_before.map(ImdsTime::from)
    }

    /// The text IMDS sent for `field`, when forewarn could not read it.
    pub fn unreadable(&self, field: EventField) -> Option<&str> {
        self.unreadable
            .iter()
            .find(|unreadable| unreadable.field == field)
            .map(|unreadable| unreadable.raw.as_str())
    }

    /// Whether `Resources` names `vm_name` (see [`is_vm_name`]).
    pub fn names_vm(&self, vm_name: &str) -> bool {
        self.resources
            .iter()
            .any(|resource| is_vm_name(resource, vm_name))
    }
}

/// Whether the `Resources` entry `resource` names the VM `vm_name`: compared
/// case-insensitively, as Azure resource names are, and with the `_` that api-versions
/// before 2019 put before IaaS VM names (`_vm-a` for `vm-a`; Azure names never start with
/// `_`, so this cannot confuse two VMs).
pub fn is_vm_name(resource: &str, vm_name: &str) -> bool {
    let bare = |name: &str| name.trim().trim_start_matches('_').to_owned();
    let resource = bare(resource);
    !resource.is_empty() && resource.eq_ignore_ascii_case(&bare(vm_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_type_parses_known_and_keeps_unknown() {
        assert_eq!(EventType::from_wire("Preempt"), EventType::Preempt);
        assert_eq!(EventType::from_wire("freeze"), EventType::Freeze);
        assert_eq!(EventType::from_wire("Hibernate"), EventType::Unknown);
    }

    #[test]
    fn shutdown_is_forewarn_s_own_type_never_read_from_imds() {
        assert_eq!(EventType::from_wire("Shutdown"), EventType::Unknown);
        assert_eq!(
            EventSource::from_wire("OperatingSystem"),
            EventSource::Unknown
        );
        assert_eq!(
            EventType::from_subscription_name("shutdown"),
            EventType::Shutdown
        );
        assert_eq!(
            EventType::from_subscription_name("Reboot"),
            EventType::Reboot
        );
        let event = ScheduledEvent::host_shutdown("S1", "vm-a", SystemTime::UNIX_EPOCH);
        assert!(event.is_from_operating_system());
        assert!(event.names_vm("vm-a"));
        assert_eq!(event.event_type_raw, "Shutdown");
        assert!(EventType::Shutdown.takes_the_vm_down());
        assert!(!EventType::Freeze.takes_the_vm_down());
    }

    #[test]
    fn old_api_versions_underscore_prefix_names_the_same_vm() {
        assert!(is_vm_name("_vm-a", "vm-a"));
        assert!(is_vm_name("_VM-A", "vm-a"));
        assert!(is_vm_name("vm-a", "_vm-a"));
        assert!(is_vm_name("myvmss_2", "MyVmss_2"));
        assert!(!is_vm_name("_vm-a", "vm-b"));
        assert!(!is_vm_name("vm-a_", "vm-a"));
        assert!(!is_vm_name("_", ""));
    }

    #[test]
    fn names_vm_ignores_case() {
        let event = ScheduledEvent {
            id: "e".into(),
            event_type: EventType::Reboot,
            event_type_raw: "Reboot".into(),
            resource_type: "VirtualMachine".into(),
            resources: vec!["WestNO_0".into()],
            status: EventStatus::Scheduled,
            not_before: None,
            description: String::new(),
            source: EventSource::Platform,
            duration_seconds: None,
            unreadable: Vec::new(),
        };
        assert!(event.names_vm("westno_0"));
        assert!(!event.names_vm("WestNO_1"));
    }
}

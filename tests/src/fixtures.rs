//! A sample event and call context for measuring plugin calls: what the benchmark binaries
//! pass to every call, so their figures are measured on the same input.

use forewarn_runtime::CallContext;
use forewarn_runtime::wit::latest::{EventSource, EventStatus, EventType, ScheduledEvent};

/// A platform Reboot of vm-a, as a plugin receives it.
pub fn sample_event() -> ScheduledEvent {
    ScheduledEvent {
        id: "602d9444-d2cd-49c7-8624-8643e7171297".into(),
        event_type: EventType::Reboot,
        event_type_raw: "Reboot".into(),
        resource_type: "VirtualMachine".into(),
        resources: vec!["vm-a".into()],
        status: EventStatus::Scheduled,
        not_before_unix_ms: Some(1_700_000_000_000),
        description: "Virtual machine is going to be restarted.".into(),
        source: EventSource::Platform,
        duration_seconds: Some(-1),
    }
}

/// A first call on vm-a, for an event that names it.
pub fn sample_context() -> CallContext {
    CallContext {
        vm_name: "vm-a".into(),
        affects_this_vm: true,
        attempt: 1,
        vm: Default::default(),
    }
}

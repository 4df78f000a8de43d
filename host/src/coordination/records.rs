//! The barrier's records in etcd, read and written by their keys: one event's keys
//! ([`EventKeys`]), what a read of them says ([`EventRecords`]), what a ready key holds
//! ([`ready_marker`]), and when a round may stop after the leader and approval keys
//! ([`reads_everything`]).

use forewarn_etcd::KeyValue;
use forewarn_imds::{EventField, ImdsTime, ScheduledEvent};
use std::collections::{BTreeMap, BTreeSet};

use crate::pipeline::barrier::VmStanding;

/// The keys of one event.
pub(super) struct EventKeys {
    pub(super) event_prefix: String,
    pub(super) ready: String,
    pub(super) was_ready: String,
    pub(super) leader: String,
    pub(super) approval: String,
}

/// What etcd holds about one event.
#[derive(Debug, Default)]
pub(super) struct EventRecords {
    pub(super) leader: Option<String>,
    /// Who claimed the approval, and the lease the claim is attached to.
    pub(super) approval: Option<(String, i64)>,
    /// VM → the NotBefore it is ready for ([`ready_marker`]).
    pub(super) ready: BTreeMap<String, String>,
    pub(super) was_ready: BTreeSet<String>,
}

impl EventRecords {
    pub(super) fn read(records: &[KeyValue], event_prefix: &str) -> EventRecords {
        let mut read = EventRecords::default();
        for record in records {
            let Some(name) = record.key.strip_prefix(event_prefix) else {
                continue;
            };
            match name.split_once('/') {
                Some(("ready", vm)) => {
                    read.ready.insert(vm.to_owned(), record.value.clone());
                }
                Some(("was-ready", vm)) => {
                    read.was_ready.insert(vm.to_owned());
                }
                _ if name == "leader" => read.leader = Some(record.value.clone()),
                _ if name == "approval" => {
                    read.approval = Some((record.value.clone(), record.lease));
                }
                _ => {}
            }
        }
        read
    }

    /// The VMs ready for the event as scheduled at `marker` (a VM still ready for an
    /// earlier NotBefore has not seen the reschedule yet).
    pub(super) fn ready_for(&self, marker: &str) -> BTreeSet<String> {
        self.ready
            .iter()
            .filter(|(_, ready_for)| ready_for.as_str() == marker)
            .map(|(vm, _)| vm.clone())
            .collect()
    }
}

/// Whether a round over an event must read all of it (every ready and member key) or may
/// stop after the `leader` and `approval` keys. Only the leader needs the others' standings;
/// a VM another VM leads needs to know only that the leader it saw is still there and that
/// nothing is claimed yet. Reading everything on every round made etcd's traffic grow as N²
/// (every waiting VM reading every VM's keys every 200 ms: BENCHMARKS.md, "Fleets").
pub(super) fn reads_everything(
    me: &str,
    leader_seen: Option<&str>,
    leader_now: Option<&str>,
    approval_claimed: bool,
) -> bool {
    match (leader_seen, leader_now) {
        (Some(seen), Some(now)) if seen == now && seen != me => approval_claimed,
        _ => true,
    }
}

/// What a ready key holds: the NotBefore (ms since the epoch, 0 if none) the VM prepared for.
pub(super) fn ready_marker(event: &ScheduledEvent) -> String {
    stated_not_before(event)
        .map_or(0, ImdsTime::unix_ms)
        .to_string()
}

/// NotBefore as IMDS stated it; none when forewarn could not read it (the instant it is
/// read as instead is when this VM first saw the event, which differs from VM to VM, so
/// neither the ready keys nor the deadline may rest on it).
pub(super) fn stated_not_before(event: &ScheduledEvent) -> Option<ImdsTime> {
    match event.unreadable(EventField::NotBefore) {
        Some(_) => None,
        None => event.not_before_time(),
    }
}

pub(super) fn resources_list(standings: &[(String, VmStanding)]) -> String {
    standings
        .iter()
        .map(|(vm, standing)| match standing {
            VmStanding::DeadCountedReady => format!("{vm} (gone, counted ready)"),
            _ => vm.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

//! The barrier's records in etcd, read and written by their keys: one event's keys
//! ([`EventKeys`]), what a read of them says ([`EventRecords`]: the shared `leader` and
//! `approval` keys, and each VM's own subtree), what a ready key holds ([`ready_marker`]),
//! and when a round may stop after the leader and approval keys ([`reads_everything`]).

use forewarn_etcd::KeyValue;
use forewarn_imds::{EventField, EventId, ImdsTime, ScheduledEvent};
use std::collections::BTreeMap;

use forewarn_pipeline::barrier::{
    LeaseId, Revision, SharedKey, SharedRecord, Stamp, VmStanding, VmSubtree,
};

/// The keys of one event: the shared ones, and this VM's in its own subtree.
pub(super) struct EventKeys {
    /// `PREFIX/events/ID/`: the keys every VM may write.
    pub(super) shared_prefix: String,
    /// `PREFIX/events/ID/leader`.
    pub(super) leader: String,
    /// `PREFIX/events/ID/approval`.
    pub(super) approval: String,
    /// `PREFIX/vms/VM/events/ID/ready` of this VM.
    pub(super) ready: String,
    /// `PREFIX/vms/VM/events/ID/was-ready` of this VM.
    pub(super) was_ready: String,
    /// `PREFIX/vms/VM/events/ID/leads` of this VM: written with the leader key.
    pub(super) leads: String,
    /// `PREFIX/vms/VM/events/ID/claim` of this VM: written with the approval key.
    pub(super) claim: String,
}

impl EventKeys {
    /// The shared key `key`.
    pub(super) fn shared(&self, key: SharedKey) -> &str {
        match key {
            SharedKey::Leader => &self.leader,
            SharedKey::Approval => &self.approval,
        }
    }
}

/// What etcd holds about one event.
#[derive(Debug, Default)]
pub(super) struct EventRecords {
    /// `events/ID/leader`: the VM it names and how it is held.
    pub(super) leader: Option<SharedRecord>,
    /// `events/ID/approval`: the VM it names and how it is held.
    pub(super) approval: Option<SharedRecord>,
    /// Each VM's own keys about the event (and its member key), by VM.
    pub(super) subtrees: BTreeMap<String, VmSubtree>,
}

fn stamp(record: &KeyValue) -> Stamp {
    Stamp {
        lease: LeaseId(record.lease),
        revision: Revision(record.mod_revision),
    }
}

impl EventRecords {
    /// Reads the keys under `PREFIX/events/ID/` (`shared`, read from `shared_prefix`) and under
    /// `PREFIX/vms/` (`vms`, read from `vms_prefix`) that concern `event_id`. Anything else —
    /// the keys of other events, the layout of earlier versions (`events/ID/ready/VM`,
    /// `members/VM`) — is not read: nothing but a VM's own subtree speaks for it.
    pub(super) fn read(
        shared: &[KeyValue],
        shared_prefix: &str,
        vms: &[KeyValue],
        vms_prefix: &str,
        event_id: &EventId,
    ) -> EventRecords {
        let mut read = EventRecords::default();
        for record in shared {
            let shared = || SharedRecord {
                names: record.value.clone(),
                stamp: stamp(record),
            };
            match record.key.strip_prefix(shared_prefix) {
                Some("leader") => read.leader = Some(shared()),
                Some("approval") => read.approval = Some(shared()),
                _ => {}
            }
        }
        let event_part = format!("events/{event_id}/");
        for record in vms {
            let Some((vm, name)) = record
                .key
                .strip_prefix(vms_prefix)
                .and_then(|rest| rest.split_once('/'))
            else {
                continue;
            };
            if name == "member" {
                read.subtree(vm).member = Some(stamp(record));
                continue;
            }
            let Some(name) = name.strip_prefix(&event_part) else {
                continue;
            };
            let subtree = read.subtree(vm);
            match name {
                "ready" => subtree.ready = Some((record.value.clone(), stamp(record))),
                "was-ready" => subtree.was_ready = true,
                "leads" => subtree.leads = Some(stamp(record)),
                "claim" => subtree.claim = Some(stamp(record)),
                _ => {}
            }
        }
        read
    }

    fn subtree(&mut self, vm: &str) -> &mut VmSubtree {
        self.subtrees.entry(vm.to_owned()).or_default()
    }

    /// The shared key `key` as read.
    pub(super) fn shared(&self, key: SharedKey) -> Option<&SharedRecord> {
        match key {
            SharedKey::Leader => self.leader.as_ref(),
            SharedKey::Approval => self.approval.as_ref(),
        }
    }
}

/// A shared key as a round reads it alone (the VM named, and the revision of its write).
pub(super) type Seen<'a> = Option<(&'a str, Revision)>;

/// Whether a round over an event must read all of it (every VM's subtree) or may stop after
/// the `leader` and `approval` keys. Only the leader needs the others' standings; a VM
/// another VM leads needs to know only that the leader key it found genuine is still the same
/// write (same VM, same revision) and that nothing but an ignored approval key is there.
/// Reading everything on every round made etcd's traffic grow as N² (every waiting VM reading
/// every VM's keys every 200 ms: BENCHMARKS.md, "Fleets").
pub(super) fn reads_everything(
    me: &str,
    leader_seen: Seen<'_>,
    leader_now: Seen<'_>,
    approval_claimed: bool,
) -> bool {
    match (leader_seen, leader_now) {
        (Some(seen), Some(now)) if seen == now && seen.0 != me => approval_claimed,
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

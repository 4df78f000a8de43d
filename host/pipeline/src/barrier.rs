//! The approval barrier's rule, as pure functions: given who is ready, alive and was ready
//! for an event, which VMs named in its Resources still hold it, and whether its deadline came;
//! and what the keys read from etcd are worth — a VM's standing only from its own subtree
//! under its own live lease ([`VmSubtree`]), a shared `leader` or `approval` key only when the
//! VM it names wrote it ([`judge_shared`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use forewarn_events::ImdsTime;
use serde::{Deserialize, Serialize};

/// What a VM that recorded "ready" and then lost its lease (crashed, stopped, cut off from
/// etcd) counts as.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DeadVm {
    /// It holds the event: nobody approves early, the event starts at NotBefore (default).
    #[default]
    Hold,
    /// It stays ready: it had prepared before it died, so it does not hold the others.
    CountsAsReady,
}

/// Where one VM named in Resources stands, as the leader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VmStanding {
    /// Its ready key is live.
    Ready,
    /// It was ready, lost its lease, and `dead-vm = "counts-as-ready"`.
    DeadCountedReady,
    /// It was ready and lost its lease; `dead-vm = "hold"` keeps the event waiting.
    DeadHolding,
    /// Not ready (still preparing, not running forewarn, or not coordinating).
    NotReady,
}

impl VmStanding {
    /// Whether this VM lets the event go.
    pub fn releases(self) -> bool {
        matches!(self, VmStanding::Ready | VmStanding::DeadCountedReady)
    }
}

/// What the leader read from etcd about one event, VM names in lower case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BarrierView {
    /// VMs whose `ready/VM` key is live (their lease holds).
    pub ready: BTreeSet<String>,
    /// VMs that recorded `was-ready/VM` for this event (kept after their lease ends).
    pub was_ready: BTreeSet<String>,
    /// VMs whose daemon holds a live lease (`members/VM`).
    pub alive: BTreeSet<String>,
}

/// Each VM of `resources` (lower case) with its standing under `dead_vm`.
pub fn standings(
    resources: &[String],
    view: &BarrierView,
    dead_vm: DeadVm,
) -> Vec<(String, VmStanding)> {
    resources
        .iter()
        .map(|vm| (vm.clone(), standing(vm, view, dead_vm)))
        .collect()
}

fn standing(vm: &str, view: &BarrierView, dead_vm: DeadVm) -> VmStanding {
    if view.ready.contains(vm) {
        return VmStanding::Ready;
    }
    let dead_after_ready = view.was_ready.contains(vm) && !view.alive.contains(vm);
    match (dead_after_ready, dead_vm) {
        (true, DeadVm::CountsAsReady) => VmStanding::DeadCountedReady,
        (true, DeadVm::Hold) => VmStanding::DeadHolding,
        (false, _) => VmStanding::NotReady,
    }
}

/// Whether the deadline came: `deadline` before NotBefore. No deadline configured, or no
/// NotBefore known, means it never comes (the platform starts the event by itself).
pub fn deadline_came(
    not_before: Option<ImdsTime>,
    deadline: Option<Duration>,
    now: ImdsTime,
) -> bool {
    let (Some(not_before), Some(deadline)) = (not_before, deadline) else {
        return false;
    };
    let at = not_before.saturating_sub(deadline);
    now >= at
}

/// An etcd lease id, as etcd reports it on a key; 0 is no lease.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LeaseId(pub i64);

impl LeaseId {
    /// Whether the key is attached to a lease at all (a key without one never expires).
    pub fn is_some(self) -> bool {
        self.0 != 0
    }
}

/// The etcd revision of a key's last write (`mod_revision`); 0 is "no such key". Every key
/// one transaction writes has the same one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Revision(pub i64);

/// How etcd holds one key: the lease it is attached to and the revision of its last write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamp {
    /// The key's lease.
    pub lease: LeaseId,
    /// The revision of its last write.
    pub revision: Revision,
}

/// The keys of one VM's own subtree (`PREFIX/vms/VM/…`) that concern one event, as read.
/// With a role per VM, only that VM's etcd user can write them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmSubtree {
    /// `vms/VM/member`: the daemon's lease.
    pub member: Option<Stamp>,
    /// `vms/VM/events/ID/ready`: the NotBefore marker it holds, and how it is held.
    pub ready: Option<(String, Stamp)>,
    /// `vms/VM/events/ID/was-ready` exists.
    pub was_ready: bool,
    /// `vms/VM/events/ID/leads`: written in the transaction that made the VM the leader.
    pub leads: Option<Stamp>,
    /// `vms/VM/events/ID/claim`: written in the transaction that claimed the approval.
    pub claim: Option<Stamp>,
}

impl VmSubtree {
    /// The VM's live lease: the one its member key is attached to (a member key without a
    /// lease says nothing: it would never expire).
    pub fn live_lease(&self) -> Option<LeaseId> {
        self.member
            .map(|member| member.lease)
            .filter(|lease| lease.is_some())
    }

    /// The revision of the ready key when it says the VM is ready for `marker` (the event's
    /// NotBefore) under the VM's own live lease; none otherwise (no ready key, one without a
    /// lease or under another lease, or one for another NotBefore).
    pub fn ready_for(&self, marker: &str) -> Option<Revision> {
        let lease = self.live_lease()?;
        let (ready_for, stamp) = self.ready.as_ref()?;
        (stamp.lease == lease && ready_for == marker).then_some(stamp.revision)
    }
}

/// What the leader counts from each VM's own subtree: ready (for `marker`, under its own
/// live lease), was ready, alive (a member key under a lease). Nothing else is read.
pub fn view_of(subtrees: &BTreeMap<String, VmSubtree>, marker: &str) -> BarrierView {
    let mut view = BarrierView::default();
    for (vm, subtree) in subtrees {
        if subtree.ready_for(marker).is_some() {
            view.ready.insert(vm.clone());
        }
        if subtree.was_ready {
            view.was_ready.insert(vm.clone());
        }
        if subtree.live_lease().is_some() {
            view.alive.insert(vm.clone());
        }
    }
    view
}

/// The two keys of an event that every VM may write (`PREFIX/events/ID/…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SharedKey {
    /// `leader`: the election.
    Leader,
    /// `approval`: the claim of the approval.
    Approval,
}

impl SharedKey {
    /// The key's name under the event, and the marker's under the VM's subtree.
    pub fn name(self) -> &'static str {
        match self {
            SharedKey::Leader => "leader",
            SharedKey::Approval => "approval",
        }
    }

    /// The marker the VM writes in its own subtree in the same transaction.
    pub fn marker_name(self) -> &'static str {
        match self {
            SharedKey::Leader => "leads",
            SharedKey::Approval => "claim",
        }
    }

    fn marker(self, subtree: &VmSubtree) -> Option<Stamp> {
        match self {
            SharedKey::Leader => subtree.leads,
            SharedKey::Approval => subtree.claim,
        }
    }
}

/// A shared key as read: the VM its value names, and how etcd holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedRecord {
    /// The VM the value names (lower case).
    pub names: String,
    /// Its lease and revision.
    pub stamp: Stamp,
}

/// Why a shared key is not obeyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Forgery {
    /// It names this VM, but this VM did not write it (not the revision it wrote).
    NotWrittenByThisVm,
    /// It has no lease (it would never expire).
    NoLease,
    /// It names a leader whose daemon does not hold that lease (or holds none).
    NotTheirLease,
    /// The VM it names has no marker of the same revision and lease in its own subtree: it
    /// did not write it.
    NotWrittenByThem,
}

impl Forgery {
    /// The reason, for the log and `/status`.
    pub fn describe(self) -> &'static str {
        match self {
            Forgery::NotWrittenByThisVm => "it names this VM, which did not write it",
            Forgery::NoLease => "it has no lease",
            Forgery::NotTheirLease => "it is not under the lease of the VM it names",
            Forgery::NotWrittenByThem => {
                "the VM it names has no record of writing it in its own subtree"
            }
        }
    }
}

/// What a shared key is worth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shared {
    /// There is no such key.
    Absent,
    /// This VM wrote it: its revision is the one this VM's own transaction returned.
    Mine,
    /// The VM it names wrote it (its own marker, same revision and lease); that VM.
    Theirs(String),
    /// Not obeyed: the VM it names, its revision (a campaign or claim replaces exactly that
    /// write), and why.
    Ignored {
        /// The VM the forged value names.
        names: String,
        /// The revision of the forged write.
        revision: Revision,
        /// Why it is not obeyed.
        why: Forgery,
    },
}

impl Shared {
    /// The revision a transaction that replaces this key compares against: the ignored
    /// write's, or 0 (absent). None for a key that is obeyed.
    pub fn replaceable(&self) -> Option<Revision> {
        match self {
            Shared::Absent => Some(Revision(0)),
            Shared::Ignored { revision, .. } => Some(*revision),
            Shared::Mine | Shared::Theirs(_) => None,
        }
    }
}

/// What `record` of `key` is worth to VM `me`, which remembers the revision of its own last
/// write of it (`mine`): a key naming this VM only when it is that write — never for the lease
/// it carries; a key naming another VM only under a lease, with that VM's own marker in its
/// subtree at the same revision and lease, and, for the leader, under that VM's live lease.
pub fn judge_shared(
    key: SharedKey,
    me: &str,
    record: Option<&SharedRecord>,
    mine: Option<Revision>,
    subtrees: &BTreeMap<String, VmSubtree>,
) -> Shared {
    let Some(record) = record else {
        return Shared::Absent;
    };
    let ignored = |why| Shared::Ignored {
        names: record.names.clone(),
        revision: record.stamp.revision,
        why,
    };
    if record.names == me {
        return match mine == Some(record.stamp.revision) {
            true => Shared::Mine,
            false => ignored(Forgery::NotWrittenByThisVm),
        };
    }
    if !record.stamp.lease.is_some() {
        return ignored(Forgery::NoLease);
    }
    let subtree = subtrees.get(&record.names);
    let live = subtree.and_then(VmSubtree::live_lease);
    if key == SharedKey::Leader && live != Some(record.stamp.lease) {
        return ignored(Forgery::NotTheirLease);
    }
    match subtree.and_then(|subtree| key.marker(subtree)) {
        Some(marker) if marker == record.stamp => Shared::Theirs(record.names.clone()),
        _ => ignored(Forgery::NotWrittenByThem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn standings_follow_the_dead_vm_policy() {
        let view = BarrierView {
            ready: set(&["vm-a"]),
            was_ready: set(&["vm-a", "vm-b", "vm-c"]),
            alive: set(&["vm-a", "vm-c", "vm-d"]),
        };
        let resources = names(&["vm-a", "vm-b", "vm-c", "vm-d", "vm-e"]);
        let hold = standings(&resources, &view, DeadVm::Hold);
        let kinds: Vec<VmStanding> = hold.iter().map(|(_, s)| *s).collect();
        assert_eq!(
            kinds,
            vec![
                VmStanding::Ready,
                VmStanding::DeadHolding,
                // Alive but its ready key is gone (a reschedule): still preparing.
                VmStanding::NotReady,
                VmStanding::NotReady,
                VmStanding::NotReady,
            ]
        );
        let counted = standings(&resources, &view, DeadVm::CountsAsReady);
        assert_eq!(counted[1].1, VmStanding::DeadCountedReady);
        assert!(counted[1].1.releases());
        assert!(!counted[4].1.releases());
    }

    #[test]
    fn deadline_needs_both_a_setting_and_a_not_before() {
        let now = ImdsTime::UNIX_EPOCH + Duration::from_secs(1000);
        let not_before = Some(now + Duration::from_secs(60));
        assert!(!deadline_came(not_before, None, now));
        assert!(!deadline_came(None, Some(Duration::from_secs(60)), now));
        assert!(!deadline_came(
            not_before,
            Some(Duration::from_secs(59)),
            now
        ));
        assert!(deadline_came(
            not_before,
            Some(Duration::from_secs(60)),
            now
        ));
        assert!(deadline_came(
            not_before,
            Some(Duration::from_secs(3600)),
            now
        ));
    }

    fn stamp(lease: i64, revision: i64) -> Stamp {
        Stamp {
            lease: LeaseId(lease),
            revision: Revision(revision),
        }
    }

    fn subtree(lease: i64, ready: Option<(&str, i64)>) -> VmSubtree {
        VmSubtree {
            member: Some(stamp(lease, 1)),
            ready: ready.map(|(marker, lease)| (marker.to_owned(), stamp(lease, 2))),
            ..VmSubtree::default()
        }
    }

    #[test]
    fn a_vm_is_ready_only_under_its_own_live_lease() {
        let subtrees: BTreeMap<String, VmSubtree> = [
            ("vm-a", subtree(7, Some(("1000", 7)))),
            // Under a lease that is not its member key's: a forgery, or a stale record.
            ("vm-b", subtree(8, Some(("1000", 9)))),
            // Without a lease: it would never expire.
            ("vm-c", subtree(0, Some(("1000", 0)))),
            // For another NotBefore.
            ("vm-d", subtree(10, Some(("999", 10)))),
        ]
        .into_iter()
        .map(|(vm, subtree)| (vm.to_owned(), subtree))
        .collect();
        let view = view_of(&subtrees, "1000");
        assert_eq!(view.ready, set(&["vm-a"]));
        assert_eq!(view.alive, set(&["vm-a", "vm-b", "vm-d"]), "vm-c: no lease");
    }

    #[test]
    fn a_shared_key_is_obeyed_only_when_the_vm_it_names_wrote_it() {
        let record = |names: &str, lease: i64, revision: i64| SharedRecord {
            names: names.to_owned(),
            stamp: stamp(lease, revision),
        };
        let mut vm_b = subtree(7, None);
        vm_b.leads = Some(stamp(7, 40));
        vm_b.claim = Some(stamp(99, 50));
        let subtrees: BTreeMap<String, VmSubtree> = [("vm-b".to_owned(), vm_b)].into();
        let judge = |key, record: &SharedRecord, mine| {
            judge_shared(key, "vm-a", Some(record), mine, &subtrees)
        };
        use Forgery::*;
        use SharedKey::{Approval, Leader};
        let ignored = |names: &str, revision, why| Shared::Ignored {
            names: names.to_owned(),
            revision: Revision(revision),
            why,
        };
        assert_eq!(
            judge_shared(Leader, "vm-a", None, None, &subtrees),
            Shared::Absent
        );
        // Naming this VM: only the revision it wrote, whatever the lease.
        assert_eq!(
            judge(Approval, &record("vm-a", 7, 60), Some(Revision(60))),
            Shared::Mine
        );
        assert_eq!(
            judge(Approval, &record("vm-a", 7, 61), Some(Revision(60))),
            ignored("vm-a", 61, NotWrittenByThisVm)
        );
        assert_eq!(
            judge(Approval, &record("vm-a", 7, 61), None),
            ignored("vm-a", 61, NotWrittenByThisVm)
        );
        // Naming another VM: its marker, same revision and lease.
        assert_eq!(
            judge(Leader, &record("vm-b", 7, 40), None),
            Shared::Theirs("vm-b".into())
        );
        assert_eq!(
            judge(Leader, &record("vm-b", 0, 40), None),
            ignored("vm-b", 40, NoLease)
        );
        assert_eq!(
            judge(Leader, &record("vm-b", 8, 40), None),
            ignored("vm-b", 40, NotTheirLease)
        );
        assert_eq!(
            judge(Leader, &record("vm-b", 7, 41), None),
            ignored("vm-b", 41, NotWrittenByThem),
            "vm-b's own lease, but not its write"
        );
        // A sent approval is under the event's record lease: its marker's, not the member's.
        assert_eq!(
            judge(Approval, &record("vm-b", 99, 50), None),
            Shared::Theirs("vm-b".into())
        );
        assert_eq!(
            judge(Approval, &record("vm-b", 7, 51), None),
            ignored("vm-b", 51, NotWrittenByThem),
            "an approval under vm-b's own lease that vm-b did not write"
        );
        assert_eq!(
            judge(Leader, &record("vm-z", 7, 40), None),
            ignored("vm-z", 40, NotTheirLease),
            "a VM without a subtree"
        );
        assert_eq!(ignored("x", 3, NoLease).replaceable(), Some(Revision(3)));
        assert_eq!(Shared::Absent.replaceable(), Some(Revision(0)));
        assert_eq!(Shared::Mine.replaceable(), None);
    }
}

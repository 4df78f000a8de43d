//! The approval barrier's rule, as a pure function: given who is ready, alive and was ready
//! for an event, which VMs named in its Resources still hold it, and whether its deadline came.

use std::collections::BTreeSet;
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
}

//! A scenario's VM priority and eviction policy, as `/metadata/instance/compute` shows them
//! (`priority`, `evictionPolicy`): only Spot and Low-priority VMs are ever preempted.

use serde::{Deserialize, Serialize};

/// `priority` in the compute metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VmPriority {
    /// A regular (pay-as-you-go) VM.
    Regular,
    /// A Spot VM: Azure may evict it at any time, announcing it with a Preempt event.
    Spot,
    /// A Low-priority VM of a scale set (the older name of Spot).
    Low,
    /// Shown as `""`: Azure leaves the field empty on many regular VMs.
    #[serde(rename = "")]
    Unset,
}

impl VmPriority {
    /// The text IMDS shows.
    pub fn as_wire(self) -> &'static str {
        match self {
            VmPriority::Regular => "Regular",
            VmPriority::Spot => "Spot",
            VmPriority::Low => "Low",
            VmPriority::Unset => "",
        }
    }

    /// Whether Azure can evict (preempt) such a VM.
    pub fn is_evictable(self) -> bool {
        matches!(self, VmPriority::Spot | VmPriority::Low)
    }
}

/// `evictionPolicy` in the compute metadata: what an eviction does to the VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EvictionPolicy {
    /// The VM is stopped and deallocated; its disks stay.
    Deallocate,
    /// The VM and its disks are deleted.
    Delete,
}

impl EvictionPolicy {
    /// The text IMDS shows.
    pub fn as_wire(self) -> &'static str {
        match self {
            EvictionPolicy::Deallocate => "Deallocate",
            EvictionPolicy::Delete => "Delete",
        }
    }
}

/// The priority of a scenario that names none: Spot when it has a Preempt event (only
/// Spot VMs are preempted), else Regular.
pub(crate) fn default_priority<'a>(mut event_types: impl Iterator<Item = &'a str>) -> VmPriority {
    if event_types.any(|kind| kind.eq_ignore_ascii_case("preempt")) {
        VmPriority::Spot
    } else {
        VmPriority::Regular
    }
}

/// The eviction policy of a scenario that names none: Delete for an evictable VM (the
/// policy that loses the most, so plugins are tested against it), none otherwise.
pub(crate) fn default_eviction_policy(priority: VmPriority) -> Option<EvictionPolicy> {
    priority.is_evictable().then_some(EvictionPolicy::Delete)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preempt_makes_a_spot_vm_that_is_deleted() {
        let table = [
            (vec!["Reboot"], VmPriority::Regular, None),
            (
                vec!["Reboot", "preempt"],
                VmPriority::Spot,
                Some(EvictionPolicy::Delete),
            ),
            (vec![], VmPriority::Regular, None),
        ];
        for (types, priority, policy) in table {
            assert_eq!(
                default_priority(types.iter().copied()),
                priority,
                "{types:?}"
            );
            assert_eq!(default_eviction_policy(priority), policy, "{types:?}");
        }
    }

    #[test]
    fn wire_text_is_azures() {
        assert_eq!(VmPriority::Unset.as_wire(), "");
        assert_eq!(VmPriority::Low.as_wire(), "Low");
        assert_eq!(EvictionPolicy::Deallocate.as_wire(), "Deallocate");
    }
}

//! This VM as the instance metadata describes it (`ctx.vm`): whether it is a Spot VM and
//! whether an eviction deletes its disks, the two facts a Spot-aware plugin decides on.

use crate::{EvictionPolicy, VmInfo, VmPriority};

impl Default for VmInfo {
    /// A regular VM: what the daemon says when the instance metadata said nothing.
    fn default() -> Self {
        VmInfo {
            priority: VmPriority::Regular,
            eviction_policy: None,
        }
    }
}

impl VmInfo {
    /// Whether Azure may evict this VM (Spot or Low priority): a `Preempt` event with 30
    /// seconds of notice or less.
    pub fn is_evictable(&self) -> bool {
        matches!(self.priority, VmPriority::Spot | VmPriority::Low)
    }

    /// Whether an eviction deletes the VM with its disks: anything that must survive has to
    /// leave the VM (e.g. a checkpoint uploaded to Blob Storage) before `NotBefore`.
    pub fn eviction_deletes_disks(&self) -> bool {
        self.is_evictable() && self.eviction_policy == Some(EvictionPolicy::Delete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_evictable_vm_with_the_delete_policy_loses_its_disks() {
        let rows = [
            (VmPriority::Regular, None, false, false),
            (
                VmPriority::Regular,
                Some(EvictionPolicy::Delete),
                false,
                false,
            ),
            (
                VmPriority::Spot,
                Some(EvictionPolicy::Deallocate),
                true,
                false,
            ),
            (VmPriority::Spot, Some(EvictionPolicy::Delete), true, true),
            (VmPriority::Low, Some(EvictionPolicy::Delete), true, true),
            (VmPriority::Spot, None, true, false),
        ];
        for (priority, eviction_policy, evictable, loses) in rows {
            let vm = VmInfo {
                priority,
                eviction_policy,
            };
            assert_eq!(vm.is_evictable(), evictable, "{vm:?}");
            assert_eq!(vm.eviction_deletes_disks(), loses, "{vm:?}");
        }
    }
}

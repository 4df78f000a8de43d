//! The memory and table caps of one plugin call, enforced through wasmtime's
//! `ResourceLimiter` over ALL of the call's memories and tables together, remembering a hit.

use wasmtime::ResourceLimiter;

/// Most core instances one call may create. A Rust component has about five; a Python or
/// JavaScript component a few dozen at most.
pub(crate) const MAX_INSTANCES: usize = 64;
/// Most linear memories one call may create. Each reserves address space even when small,
/// so their number is bounded on its own, not only their bytes.
pub(crate) const MAX_MEMORIES: usize = 16;
/// Most tables one call may create.
pub(crate) const MAX_TABLES: usize = 64;
/// Most table elements all of a call's tables may hold together (function tables of large
/// guests included).
pub(crate) const MAX_TABLE_ELEMENTS: usize = 1_000_000;
/// What one table element costs against the memory cap: a pointer.
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();
/// Most entries of the WASI resource table of one call (streams, pollables, …).
pub(crate) const MAX_RESOURCES: usize = 4096;

/// Caps one call's store: its memories and tables count against one memory total.
pub(crate) struct InstanceLimits {
    memory_limit_bytes: usize,
    /// Bytes of every memory plus the element bytes of every table, as grown so far.
    total_bytes: usize,
    /// Elements of every table, as grown so far.
    table_elements: usize,
    /// Linear memories created so far (each holds a slot of the instance pool).
    memories_created: usize,
    memory_cap_hit: bool,
}

impl InstanceLimits {
    pub(crate) fn new(memory_limit_bytes: u64) -> Self {
        InstanceLimits {
            memory_limit_bytes: usize::try_from(memory_limit_bytes).unwrap_or(usize::MAX),
            total_bytes: 0,
            table_elements: 0,
            memories_created: 0,
            memory_cap_hit: false,
        }
    }

    /// Whether the call asked for more memory than its cap.
    pub(crate) fn memory_cap_hit(&self) -> bool {
        self.memory_cap_hit
    }

    /// How many linear memories the store's instances created.
    pub(crate) fn memories_created(&self) -> usize {
        self.memories_created
    }

    /// Bytes counted against the cap so far: all memories and tables of the call.
    #[cfg(test)]
    pub(crate) fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// Accepts growing the total by `added` bytes when it stays within the cap.
    fn grow_total(&mut self, added: usize) -> bool {
        let total = self.total_bytes.saturating_add(added);
        if total > self.memory_limit_bytes {
            self.memory_cap_hit = true;
            return false;
        }
        self.total_bytes = total;
        true
    }
}

impl ResourceLimiter for InstanceLimits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if current == 0 {
            self.memories_created = self.memories_created.saturating_add(1);
        }
        Ok(self.grow_total(desired.saturating_sub(current)))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let added = desired.saturating_sub(current);
        let elements = self.table_elements.saturating_add(added);
        if elements > MAX_TABLE_ELEMENTS {
            return Ok(false);
        }
        if !self.grow_total(added.saturating_mul(TABLE_ELEMENT_BYTES)) {
            return Ok(false);
        }
        self.table_elements = elements;
        Ok(true)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn memories_share_one_cap() {
        let mut limits = InstanceLimits::new(64 * MIB as u64);
        assert!(limits.memory_growing(0, 40 * MIB, None).unwrap());
        assert!(!limits.memory_growing(0, 40 * MIB, None).unwrap());
        assert!(limits.memory_cap_hit());
        assert!(limits.memory_growing(0, 24 * MIB, None).unwrap());
        assert_eq!(limits.total_bytes(), 64 * MIB);
    }

    #[test]
    fn growth_counts_only_the_added_bytes() {
        let mut limits = InstanceLimits::new(64 * MIB as u64);
        assert!(limits.memory_growing(0, 30 * MIB, None).unwrap());
        assert!(limits.memory_growing(30 * MIB, 60 * MIB, None).unwrap());
        assert!(!limits.memory_growing(60 * MIB, 65 * MIB, None).unwrap());
        assert_eq!(limits.total_bytes(), 60 * MIB);
    }

    #[test]
    fn tables_count_against_the_memory_cap_and_their_own_total() {
        let mut limits = InstanceLimits::new(64 * MIB as u64);
        assert!(limits.memory_growing(0, 63 * MIB, None).unwrap());
        assert!(!limits.table_growing(0, 200_000, None).unwrap());
        assert!(limits.memory_cap_hit());
        let mut limits = InstanceLimits::new(u64::MAX);
        assert!(limits.table_growing(0, MAX_TABLE_ELEMENTS, None).unwrap());
        assert!(!limits.table_growing(0, 1, None).unwrap());
    }

    #[test]
    fn counts_are_small() {
        let limits = InstanceLimits::new(64 * MIB as u64);
        assert_eq!(limits.memories(), MAX_MEMORIES);
        assert_eq!(limits.tables(), MAX_TABLES);
        assert_eq!(limits.instances(), MAX_INSTANCES);
    }
}

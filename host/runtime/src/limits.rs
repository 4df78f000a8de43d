//! The memory and table caps of one plugin instance, enforced through wasmtime's
//! `ResourceLimiter`, remembering whether the cap was hit so the failure can say so.

use wasmtime::ResourceLimiter;

/// Most table elements an instance may have (function tables of large guests included).
const MAX_TABLE_ELEMENTS: usize = 1_000_000;

/// Caps one store's linear memories and tables.
pub struct InstanceLimits {
    memory_limit_bytes: usize,
    memory_cap_hit: bool,
}

impl InstanceLimits {
    pub fn new(memory_limit_bytes: u64) -> Self {
        InstanceLimits {
            memory_limit_bytes: usize::try_from(memory_limit_bytes).unwrap_or(usize::MAX),
            memory_cap_hit: false,
        }
    }

    /// Whether the instance asked for more memory than its cap.
    pub fn memory_cap_hit(&self) -> bool {
        self.memory_cap_hit
    }
}

impl ResourceLimiter for InstanceLimits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit_bytes {
            self.memory_cap_hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

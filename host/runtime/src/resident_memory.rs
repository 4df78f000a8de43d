//! How much memory a plugin version holds resident: the pages of its instance pool's linear
//! memories that are in RAM, as the kernel counts them (`Rss` in `/proc/self/smaps`), for
//! the instance in a call, the one made ahead and the pages kept between calls alike.
//!
//! The pool's address range is the one large reservation that appears while its engine is
//! made (engines with a pool are made one at a time, in `make_engine_finding_its_pool`).

use std::ops::Range;
use std::sync::Mutex;

use wasmtime::{Engine, EngineWeak};

use crate::mutex::lock;

/// A reservation at least this large is an instance pool's linear memories (each slot
/// reserves 4 GiB of address space); the process maps nothing else this large.
const POOL_MIN_BYTES: usize = 1 << 30;

/// The pools found so far, each with its engine: a pool whose engine is gone may be
/// unmapped, and its place taken by the next pool.
static POOLS: Mutex<Vec<(Range<usize>, EngineWeak)>> = Mutex::new(Vec::new());

/// Makes an engine with `make` and finds its memory pool: the largest mapping of at least
/// [`POOL_MIN_BYTES`] that appeared meanwhile, or else the one no live engine's pool is
/// (an engine dropped meanwhile may have left its place to this one). Engines are made
/// one at a time here.
pub(crate) fn make_engine_finding_its_pool(
    make: impl FnOnce() -> wasmtime::Result<Engine>,
) -> (wasmtime::Result<Engine>, Option<Range<usize>>) {
    let mut pools = lock(&POOLS);
    let before = large_mappings();
    let made = make();
    let Ok(engine) = &made else {
        return (made, None);
    };
    pools.retain(|(_, engine)| engine.upgrade().is_some());
    let after = large_mappings();
    let unclaimed = |range: &&Range<usize>| !pools.iter().any(|(pool, _)| pool == *range);
    let appeared = after
        .iter()
        .filter(|range| !before.contains(range))
        .max_by_key(|range| range.end - range.start);
    let found = appeared
        .or_else(|| {
            let mut left = after.iter().filter(unclaimed);
            let only = left.next();
            only.filter(|_| left.next().is_none())
        })
        .cloned();
    if let Some(pool) = &found {
        pools.push((pool.clone(), engine.weak()));
    }
    (made, found)
}

/// The address ranges of mappings of at least [`POOL_MIN_BYTES`] (none where
/// `/proc/self/maps` cannot be read).
fn large_mappings() -> Vec<Range<usize>> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    maps.lines()
        .filter_map(mapping_range)
        .filter(|range| range.end - range.start >= POOL_MIN_BYTES)
        .collect()
}

/// The address range at the start of a `/proc/self/maps` or `/proc/self/smaps` mapping
/// line (`7f0000000000-7f0000400000 rw-p …`); None for any other line.
fn mapping_range(line: &str) -> Option<Range<usize>> {
    let addresses = line.split_whitespace().next()?;
    let (start, end) = addresses.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    (start < end).then_some(start..end)
}

/// The resident bytes of every mapping of the process, read once from `/proc/self/smaps`,
/// to be shared out among plugins.
#[derive(Debug, Default)]
pub struct ResidentMemory {
    /// Each mapping's address range and its resident bytes.
    mappings: Vec<(Range<usize>, u64)>,
}

impl ResidentMemory {
    /// Reads `/proc/self/smaps` (None where it cannot be read).
    pub fn read() -> Option<ResidentMemory> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        Some(Self::parse(&smaps))
    }

    fn parse(smaps: &str) -> ResidentMemory {
        let mut mappings = Vec::new();
        let mut current: Option<Range<usize>> = None;
        for line in smaps.lines() {
            if let Some(range) = mapping_range(line) {
                current = Some(range);
                continue;
            }
            let Some(kib) = line.strip_prefix("Rss:") else {
                continue;
            };
            let kib: u64 = kib
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap_or(0);
            if let Some(range) = current.take() {
                mappings.push((range, kib * 1024));
            }
        }
        ResidentMemory { mappings }
    }

    /// The resident bytes of the mappings within `pool` (a plugin's instance pool: see
    /// `Plugin::resident_bytes`).
    pub(crate) fn within(&self, pool: &Range<usize>) -> u64 {
        self.mappings
            .iter()
            .filter(|(range, _)| pool.start <= range.start && range.end <= pool.end)
            .map(|(_, bytes)| bytes)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
559d222d3000-559d22ab2000 r--p 00000000 fe:00 5412083   /usr/bin/forewarn
Size:               8060 kB
Rss:                3124 kB
7bd84a000000-7bd84a400000 rw-p 00000000 00:00 0
Size:               4096 kB
Rss:                4096 kB
7bd84a400000-7bd94c000000 ---p 00000000 00:00 0
Size:            4223232 kB
Rss:                   8 kB
7bd94c000000-7bd94c400000 rw-p 00000000 00:00 0
Size:               4096 kB
Rss:                1024 kB
";

    #[test]
    fn resident_bytes_are_summed_over_the_mappings_inside_the_pool() {
        let resident = ResidentMemory::parse(SMAPS);
        let pool = 0x7bd8_4a00_0000..0x7bd9_4c40_0000;
        assert_eq!(resident.within(&pool), (4096 + 8 + 1024) * 1024);
        let elsewhere = 0x1000..0x2000;
        assert_eq!(resident.within(&elsewhere), 0);
    }

    #[test]
    fn only_mapping_lines_have_a_range() {
        assert_eq!(
            mapping_range("7bd84a000000-7bd84a400000 rw-p 00000000 00:00 0"),
            Some(0x7bd8_4a00_0000..0x7bd8_4a40_0000)
        );
        assert_eq!(mapping_range("Rss:                3124 kB"), None);
        assert_eq!(mapping_range("VmFlags: rd wr mr mw me ac sd"), None);
    }

    #[cfg_attr(
        windows,
        ignore = "reads /proc/self/smaps, which Windows has not: run by the Linux suite"
    )]
    #[test]
    fn the_pool_of_a_new_engine_is_found() {
        let config = crate::engine_config::engine_config(
            crate::InstanceAllocation::Pooling,
            crate::allocation::POOL_KEEP_RESIDENT_MEMORY,
        );
        let (first, first_pool) = make_engine_finding_its_pool(|| Engine::new(&config));
        let first_pool = first_pool.expect("a reservation appeared");
        assert!(
            first_pool.end - first_pool.start >= POOL_MIN_BYTES,
            "{first_pool:x?}"
        );
        // A second engine made after the first was dropped may take its place: still found.
        drop(first);
        let (second, second_pool) = make_engine_finding_its_pool(|| Engine::new(&config));
        assert!(second.is_ok());
        let second_pool = second_pool.expect("a reservation appeared");
        assert!(second_pool.end - second_pool.start >= POOL_MIN_BYTES);
    }
}

//! Whether the kernel may swap out this process's pages: the pool resets a used memory with
//! `PAGEMAP_SCAN` only where it cannot, since that scan does not see a page in swap.
//! `PAGEMAP_SCAN` is Linux's: elsewhere (Windows) the answer is "may swap", and the pool
//! resets with `memset`.

use std::path::Path;

/// Whether a used instance's memory may be reset by scanning for the pages it dirtied.
/// wasmtime 48's scan reports only pages present in memory, so a dirtied page in swap
/// would be neither reset nor released, and the slot's next instance (possibly another
/// plugin's) would read it. The scan is trusted only when no swap is active or this
/// process's cgroup may not swap (`MemorySwapMax=0`, as the shipped unit sets);
/// otherwise the pool resets the kept pages with `memset`, whatever their state.
pub(crate) fn pages_cannot_be_swapped_out() -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    let swaps = std::fs::read_to_string("/proc/swaps").ok();
    let swap_max = cgroup_swap_max(Path::new("/proc/self/cgroup"), Path::new("/sys/fs/cgroup"));
    swap_is_impossible(swaps.as_deref(), swap_max.as_deref())
}

/// The decision, from the text of `/proc/swaps` (None: unreadable) and of this process's
/// cgroup v2 `memory.swap.max` (None: no such file).
fn swap_is_impossible(proc_swaps: Option<&str>, cgroup_swap_max: Option<&str>) -> bool {
    if cgroup_swap_max.is_some_and(|max| max.trim() == "0") {
        return true;
    }
    let Some(proc_swaps) = proc_swaps else {
        return false;
    };
    // The first line is the header; each further line is an active swap area.
    proc_swaps
        .lines()
        .skip(1)
        .all(|line| line.trim().is_empty())
}

/// The `memory.swap.max` of this process's cgroup v2 (the `0::PATH` line of
/// `/proc/self/cgroup`), if there is one.
fn cgroup_swap_max(proc_cgroup: &Path, cgroup_root: &Path) -> Option<String> {
    let membership = std::fs::read_to_string(proc_cgroup).ok()?;
    let path = membership
        .lines()
        .find_map(|line| line.strip_prefix("0::"))?
        .trim_start_matches('/');
    std::fs::read_to_string(cgroup_root.join(path).join("memory.swap.max")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";

    #[test]
    fn no_active_swap_means_the_scan_is_trusted() {
        assert!(swap_is_impossible(Some(HEADER), None));
        assert!(swap_is_impossible(Some(HEADER), Some("max\n")));
    }

    #[test]
    fn an_active_swap_area_means_memset_unless_the_cgroup_may_not_swap() {
        let swaps = format!("{HEADER}/mnt/resource/swapfile  file  2097148  0  -2\n");
        assert!(!swap_is_impossible(Some(&swaps), None));
        assert!(!swap_is_impossible(Some(&swaps), Some("max\n")));
        assert!(!swap_is_impossible(Some(&swaps), Some("1073741824\n")));
        assert!(swap_is_impossible(Some(&swaps), Some("0\n")));
    }

    #[test]
    fn an_unreadable_proc_swaps_is_taken_as_swap() {
        assert!(!swap_is_impossible(None, None));
        assert!(swap_is_impossible(None, Some("0")));
    }

    #[test]
    fn the_cgroup_limit_is_read_from_the_processs_v2_cgroup() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cgroup = dir.path().join("cgroup");
        std::fs::write(
            &cgroup,
            "4:memory:/v1/ignored\n0::/system.slice/forewarn.service\n",
        )
        .expect("write");
        let root = dir.path().join("root");
        let service = root.join("system.slice/forewarn.service");
        std::fs::create_dir_all(&service).expect("mkdir");
        std::fs::write(service.join("memory.swap.max"), "0\n").expect("write");
        assert_eq!(cgroup_swap_max(&cgroup, &root).as_deref(), Some("0\n"));
        assert_eq!(cgroup_swap_max(&dir.path().join("missing"), &root), None);
    }
}

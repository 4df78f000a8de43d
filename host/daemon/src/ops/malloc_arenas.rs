//! glibc's malloc arenas for a daemon that is idle almost all the time: at most
//! [`ARENA_MAX`], unless the operator chose a number (`MALLOC_ARENA_MAX`, `GLIBC_TUNABLES`).

/// Arenas glibc may create. Its default is eight per core, one per thread that allocates
/// while another holds an arena; each keeps a few hundred KiB resident after its thread
/// goes idle, which for forewarn (a few tokio workers, short bursts of plugin calls) is
/// memory held for contention that does not happen. Measured in BENCHMARKS.md
/// ("Footprint: what each step bought").
pub const ARENA_MAX: i32 = 2;

/// The environment variable with which an operator sets the number themselves (glibc reads
/// it at start; forewarn then leaves the setting alone).
pub const ARENA_MAX_VARIABLE: &str = "MALLOC_ARENA_MAX";

/// The same setting inside `GLIBC_TUNABLES` (`glibc.malloc.arena_max=N`).
const ARENA_MAX_TUNABLE: &str = "glibc.malloc.arena_max=";

/// Caps the arenas; call it in `main` before any thread starts. Returns whether the cap
/// was applied (false when the operator set the number, or on a C library without arenas).
pub fn limit() -> bool {
    if operator_chose(|name| std::env::var(name).ok()) {
        return false;
    }
    apply()
}

/// Whether the environment (read through `variable`) already sets the number of arenas.
fn operator_chose(variable: impl Fn(&str) -> Option<String>) -> bool {
    if variable(ARENA_MAX_VARIABLE).is_some() {
        return true;
    }
    variable("GLIBC_TUNABLES").is_some_and(|tunables| {
        tunables
            .split(':')
            .any(|tunable| tunable.starts_with(ARENA_MAX_TUNABLE))
    })
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn apply() -> bool {
    // SAFETY: mallopt only changes a malloc tunable; `limit`'s contract is that no other
    // thread exists yet, and M_ARENA_MAX with a positive value is valid for every glibc
    // since 2.10.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn apply() -> bool {
    false
}

// not on Windows: glibc's malloc arenas (mallopt M_ARENA_MAX) exist on Linux only
#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use std::process::Command;
    use std::sync::{Arc, Barrier};

    use super::{ARENA_MAX, apply, operator_chose};

    /// Set in the child process the test runs itself in: "capped" or "uncapped".
    const CHILD_MODE: &str = "FOREWARN_ARENA_TEST_MODE";
    const TEST_NAME: &str =
        "ops::malloc_arenas::tests::threads_allocating_at_once_share_the_capped_arenas";
    const THREADS: usize = 8;

    /// How many arenas glibc reports: the `<heap nr="…">` elements of `malloc_info`.
    fn arenas() -> usize {
        let mut buffer: *mut libc::c_char = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        // SAFETY: open_memstream writes the buffer's address and size through the two
        // valid pointers; malloc_info writes XML to the stream; fclose flushes it, after
        // which the buffer is ours to read and free.
        let xml = unsafe {
            let stream = libc::open_memstream(&mut buffer, &mut size);
            assert!(!stream.is_null(), "open_memstream failed");
            let written = libc::malloc_info(0, stream);
            let closed = libc::fclose(stream);
            let text = std::slice::from_raw_parts(buffer.cast::<u8>(), size).to_vec();
            libc::free(buffer.cast());
            assert_eq!((written, closed), (0, 0), "malloc_info or fclose failed");
            String::from_utf8(text).expect("malloc_info writes ASCII XML")
        };
        xml.matches("<heap nr=").count()
    }

    /// Eight threads allocate at the same moment; returns the arenas before and after.
    fn allocate_at_once() -> (usize, usize) {
        let before = arenas();
        let ready = Arc::new(Barrier::new(THREADS));
        let done = Arc::new(Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let (ready, done) = (ready.clone(), done.clone());
                std::thread::spawn(move || {
                    ready.wait();
                    let held: Vec<Vec<u8>> = (0..1000).map(|size| vec![1; 64 + size]).collect();
                    done.wait();
                    held.len()
                })
            })
            .collect();
        for thread in threads {
            assert_eq!(thread.join().expect("an allocating thread panicked"), 1000);
        }
        (before, arenas())
    }

    /// Runs this test again in a fresh process (no other test's threads, no arena made
    /// yet) in `mode`, and returns what the child printed: "BEFORE AFTER".
    fn in_child(mode: &str) -> (usize, usize) {
        let output = Command::new(std::env::current_exe().expect("the test binary's path"))
            .args(["--exact", TEST_NAME, "--test-threads=1", "--nocapture"])
            .env(CHILD_MODE, mode)
            .env_remove(super::ARENA_MAX_VARIABLE)
            .env_remove("GLIBC_TUNABLES")
            .output()
            .expect("could not run the test binary again");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "the {mode} child failed:\n{stdout}"
        );
        let line = stdout
            .lines()
            .find_map(|line| line.split_once("ARENAS ").map(|(_, figures)| figures))
            .unwrap_or_else(|| panic!("the {mode} child printed no ARENAS line:\n{stdout}"));
        let figures: Vec<usize> = line
            .split_whitespace()
            .map_while(|figure| figure.parse().ok())
            .collect();
        assert_eq!(figures.len(), 2, "ARENAS BEFORE AFTER, not {line:?}");
        (figures[0], figures[1])
    }

    #[test]
    fn threads_allocating_at_once_share_the_capped_arenas() {
        if let Ok(mode) = std::env::var(CHILD_MODE) {
            if mode == "capped" {
                assert!(apply(), "mallopt(M_ARENA_MAX) was refused");
            }
            let (before, after) = allocate_at_once();
            // not a skip: the child's part (CHILD_MODE) prints its figures for the parent's assertions
            println!("ARENAS {before} {after}");
            return;
        }
        let cap = ARENA_MAX as usize;
        let (_, uncapped) = in_child("uncapped");
        assert!(
            uncapped > cap,
            "without the cap, {THREADS} threads made only {uncapped} arenas: this test could not tell"
        );
        let (before, capped) = in_child("capped");
        assert!(
            capped <= cap,
            "{capped} arenas after {THREADS} threads allocated at once (before: {before}, cap {cap})"
        );
    }

    #[test]
    fn the_operators_choice_is_left_alone() {
        for (variable, value, chose) in [
            ("MALLOC_ARENA_MAX", "4", true),
            ("GLIBC_TUNABLES", "glibc.malloc.arena_max=4", true),
            (
                "GLIBC_TUNABLES",
                "glibc.malloc.check=0:glibc.malloc.arena_max=4",
                true,
            ),
            ("GLIBC_TUNABLES", "glibc.malloc.check=0", false),
            ("LANG", "C.UTF-8", false),
        ] {
            let environment = |name: &str| (name == variable).then(|| value.to_owned());
            assert_eq!(operator_chose(environment), chose, "{variable}={value}");
        }
    }
}

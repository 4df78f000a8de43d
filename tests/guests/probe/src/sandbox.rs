//! Modes that probe the sandbox: files, directories, sockets, environment and arguments.
//! Each reports what it could reach; in a correct host every probe is denied or empty.

use std::net::TcpStream;
use std::sync::atomic::{AtomicU32, Ordering};

use forewarn_sdk::{Decision, host};

use crate::defer_with;

/// Tries to read /etc/passwd.
pub(crate) fn read_file() -> Decision {
    match std::fs::read_to_string("/etc/passwd") {
        Ok(text) => defer_with(format!("read-file: ok: {} bytes", text.len())),
        Err(error) => defer_with(format!("read-file: denied: {error}")),
    }
}

/// Tries to list the root directory.
pub(crate) fn list_root() -> Decision {
    match std::fs::read_dir("/") {
        Ok(entries) => defer_with(format!("list-root: ok: {} entries", entries.count())),
        Err(error) => defer_with(format!("list-root: denied: {error}")),
    }
}

/// Tries to connect to 127.0.0.1:<config("port")>.
pub(crate) fn tcp() -> Decision {
    let port = host::config_or("port", "80");
    match TcpStream::connect(format!("127.0.0.1:{port}")) {
        Ok(_stream) => defer_with("tcp: connected".to_owned()),
        Err(error) => defer_with(format!("tcp: denied: {error}")),
    }
}

/// Counts the environment variables and checks for PATH.
pub(crate) fn env() -> Decision {
    let count = std::env::vars_os().count();
    let path = if std::env::var_os("PATH").is_some() {
        "set"
    } else {
        "unset"
    };
    defer_with(format!("env: {count} vars, PATH={path}"))
}

/// Counts the command-line arguments.
pub(crate) fn args() -> Decision {
    defer_with(format!("args: {}", std::env::args_os().count()))
}

/// The initial value of [`instance_calls`]'s word in the memory's data image.
const IMAGE_WORD: u32 = 0x5eed_f00d;

/// Counts, in the instance's own memory, the calls this instance has served, and overwrites
/// a word of the memory's initial image: "instance-calls: 1, image word 5eedf00d" in every
/// call while each call gets an instance no call used before, its image intact.
pub(crate) fn instance_calls() -> Decision {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    static WORD: AtomicU32 = AtomicU32::new(IMAGE_WORD);
    let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
    let word = WORD.swap(calls, Ordering::Relaxed);
    defer_with(format!("instance-calls: {calls}, image word {word:x}"))
}

/// Memory the "leftover-pages" mode grows by: past the 32 MiB of a memory the pool keeps
/// mapped between calls, within the default 64 MiB cap.
const LEFTOVER_GROW_BYTES: usize = 40 << 20;
/// Every 7th host page is marked: more separate runs of dirtied pages than the pool's reset
/// scan takes at once, so some are reset in place and the rest given back.
const LEFTOVER_STRIDE: usize = 7 * 4096;

/// Grows the memory, reads what the new pages hold at scattered offsets (zero, by the
/// WebAssembly spec), then writes marks there: "leftover-pages: 0 of N" in every call while
/// no call finds the marks an earlier call in the same pool slot left behind.
pub(crate) fn leftover_pages() -> Decision {
    const WASM_PAGE: usize = 65536;
    #[cfg(target_arch = "wasm32")]
    let grown = core::arch::wasm32::memory_grow(0, LEFTOVER_GROW_BYTES / WASM_PAGE);
    // The probe is only ever run as a component; the workspace also type-checks it natively.
    #[cfg(not(target_arch = "wasm32"))]
    let grown = usize::MAX;
    if grown == usize::MAX {
        return defer_with("leftover-pages: memory.grow failed".to_owned());
    }
    let base = grown * WASM_PAGE;
    let mut marked = 0;
    let mut leftover = 0;
    for offset in (0..LEFTOVER_GROW_BYTES).step_by(LEFTOVER_STRIDE) {
        let byte = (base + offset + 123) as *mut u8;
        // SAFETY: the bytes lie in the pages memory.grow just added to this instance, which
        // nothing else in this module allocates from.
        unsafe {
            if byte.read_volatile() != 0 {
                leftover += 1;
            }
            byte.write_volatile(0xa5);
        }
        marked += 1;
    }
    defer_with(format!("leftover-pages: {leftover} of {marked}"))
}

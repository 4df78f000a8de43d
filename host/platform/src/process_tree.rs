//! A child process and everything it starts, killed as a whole: an operator action (with
//! the app it may start), the compiler child. On Unix the child leads its own process group;
//! on Windows it runs in its own Job Object, which every process it starts joins too.
//!
//! The order is the same on both: [`prepare`] the command, spawn it, then
//! [`ProcessTree::adopt`] the child at once. On Windows the child is created suspended and
//! only resumed once it is in its job, so not even its first grandchild can escape.

use std::io;
use std::process::Command;

#[cfg(unix)]
#[path = "process_tree/unix.rs"]
mod imp;
#[cfg(windows)]
#[path = "process_tree/windows.rs"]
mod imp;

/// Limits a confined child takes on (none by default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// The most memory the child may use: its address space (`RLIMIT_AS`) on Unix, its
    /// committed memory (the Job Object's process memory limit) on Windows. Past it an
    /// allocation fails.
    pub memory_bytes: Option<u64>,
    /// The most CPU time the child may use, over all its threads: `RLIMIT_CPU` on Unix
    /// (SIGXCPU at the limit, SIGKILL a second later), the Job Object's per-process user
    /// time on Windows (the process is ended with `ERROR_NOT_ENOUGH_QUOTA`). Unlike a
    /// wall-clock time-out it does not run out faster on a busy machine.
    pub cpu_seconds: Option<u64>,
    /// Makes the child the kernel OOM killer's first choice (Linux; nothing elsewhere).
    pub oom_killer_first: bool,
}

/// Sets up `command` so that its child can be adopted as a tree (and, on Unix, takes on
/// `limits` before it runs). Call [`ProcessTree::adopt`] right after spawning it.
pub fn prepare(command: &mut Command, limits: Limits) {
    imp::prepare(command, limits);
}

/// A spawned child: its process id and, on Windows, its process handle.
pub trait Spawned {
    /// The child's process id; None once it has been reaped.
    fn pid(&self) -> Option<u32>;
    /// The child's process handle; None once it has been reaped.
    #[cfg(windows)]
    fn raw_handle(&self) -> Option<std::os::windows::io::RawHandle>;
}

impl Spawned for std::process::Child {
    fn pid(&self) -> Option<u32> {
        Some(self.id())
    }
    #[cfg(windows)]
    fn raw_handle(&self) -> Option<std::os::windows::io::RawHandle> {
        Some(std::os::windows::io::AsRawHandle::as_raw_handle(self))
    }
}

impl Spawned for tokio::process::Child {
    fn pid(&self) -> Option<u32> {
        self.id()
    }
    #[cfg(windows)]
    fn raw_handle(&self) -> Option<std::os::windows::io::RawHandle> {
        tokio::process::Child::raw_handle(self)
    }
}

/// The tree of a child spawned from a [`prepare`]d command. Killed when dropped too
/// (unless disarmed), so a caller that gives up on the child leaves no process behind.
pub struct ProcessTree {
    tree: imp::Tree,
}

impl ProcessTree {
    /// Takes charge of `child`'s tree, with `limits` (on Windows they are set on the job
    /// here). On Err the child has been killed (on Windows it never ran).
    pub fn adopt(child: &impl Spawned, limits: Limits) -> io::Result<ProcessTree> {
        Ok(ProcessTree {
            tree: imp::Tree::adopt(child, limits)?,
        })
    }

    /// Kills every process of the tree (nothing when already disarmed).
    pub fn kill(&self) {
        self.tree.kill();
    }

    /// The child ended as it should: leave what it started alone from now on (an action
    /// may have started an app). On Unix, call it before reaping the child (a reaped
    /// leader's group id may be reused).
    pub fn disarm(&mut self) {
        self.tree.disarm();
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        self.tree.kill();
    }
}

/// Asks a child to stop on its own, as a service manager would: SIGTERM on Unix. Windows
/// has no such request for a process without a window or console of its own, so there this
/// returns false and the caller ends the child itself (after the grace it would have given).
pub fn request_stop(child: &impl Spawned) -> bool {
    imp::request_stop(child)
}

/// Waits, blocking, until a child has exited, without reaping it (so that its tree can
/// still be killed safely until the owner of the `Child` waits for it).
pub struct ExitWaiter {
    waiter: imp::Waiter,
}

impl ExitWaiter {
    /// A waiter for `child`, to move to another thread.
    pub fn of(child: &std::process::Child) -> io::Result<ExitWaiter> {
        Ok(ExitWaiter {
            waiter: imp::Waiter::of(child)?,
        })
    }

    /// Blocks until the child has exited.
    pub fn wait(self) -> io::Result<()> {
        self.waiter.wait()
    }
}

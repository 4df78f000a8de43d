//! Process trees on Unix: the child leads its own process group (`process_group(0)`);
//! limits are set between `fork` and `exec`.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::{Limits, Spawned};

/// The type of a resource `getrlimit`/`setrlimit` take: glibc's own, an int elsewhere.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type Resource = libc::c_int;

/// The kernel's OOM score adjustment of a child that should die first: the highest.
const OOM_SCORE_ADJ: &[u8] = b"1000";

pub(super) fn prepare(command: &mut Command, limits: Limits) {
    command.process_group(0);
    if limits == Limits::default() {
        return;
    }
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: getrlimit, setrlimit, open, write and close are
    // system calls, and nothing here allocates or takes a lock.
    unsafe {
        command.pre_exec(move || {
            if let Some(bytes) = limits.memory_bytes {
                lower_limit(libc::RLIMIT_AS, bytes, bytes);
            }
            if let Some(seconds) = limits.cpu_seconds {
                // SIGXCPU at the soft limit; the kernel's SIGKILL a second later if the
                // child handles it.
                lower_limit(libc::RLIMIT_CPU, seconds, seconds.saturating_add(1));
            }
            if limits.oom_killer_first {
                raise_oom_score();
            }
            Ok(())
        });
    }
}

pub(super) fn request_stop(child: &impl Spawned) -> bool {
    let Some(pid) = child.pid().and_then(|pid| libc::pid_t::try_from(pid).ok()) else {
        return false;
    };
    // SAFETY: kill(2) on a pid this process spawned and has not reaped (`pid()` is None
    // once it has been), so the pid cannot have been reused.
    unsafe { libc::kill(pid, libc::SIGTERM) == 0 }
}

/// The process group a child leads.
pub(super) struct Tree {
    id: Option<libc::pid_t>,
}

impl Tree {
    /// The group led by the child (spawned with `process_group(0)`); none when its pid is
    /// unknown (already reaped) or not a valid pid. Its limits were set at `prepare`.
    pub(super) fn adopt(child: &impl Spawned, _limits: Limits) -> io::Result<Tree> {
        let id = child
            .pid()
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
            .filter(|pid| *pid > 0);
        Ok(Tree { id })
    }

    /// SIGKILL to every process of the group. The group id cannot be reused while any
    /// member lives, or while its leader is not reaped, so this never reaches an unrelated
    /// process as long as the group is disarmed before its leader is reaped.
    pub(super) fn kill(&self) {
        let Some(id) = self.id else {
            return;
        };
        // SAFETY: killpg has no memory-safety preconditions; a group without members
        // yields ESRCH, which is the wanted outcome.
        let _result = unsafe { libc::killpg(id, libc::SIGKILL) };
    }

    pub(super) fn disarm(&mut self) {
        self.id = None;
    }
}

/// Lowers the calling process's `resource` limit to `soft` and `hard`, or to the hard limit
/// it already has if that is lower (raising a hard limit needs privileges). Between `fork`
/// and `exec`: system calls only.
fn lower_limit(resource: Resource, soft: u64, hard: u64) {
    let mut current = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: getrlimit and setrlimit read and write only the `rlimit` they are given.
    unsafe {
        if libc::getrlimit(resource, &mut current) != 0 {
            return;
        }
        let hard = hard.min(current.rlim_max);
        let limit = libc::rlimit {
            rlim_cur: soft.min(hard),
            rlim_max: hard,
        };
        let _lowered = libc::setrlimit(resource, &limit);
    }
}

/// Makes the calling process the OOM killer's first choice; best effort (a kernel without
/// `/proc` leaves it as it was). Called between `fork` and `exec`: system calls only.
fn raise_oom_score() {
    let path = c"/proc/self/oom_score_adj";
    // SAFETY: `path` is a NUL-terminated string; the descriptor is closed before returning.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            let _written = libc::write(fd, OOM_SCORE_ADJ.as_ptr().cast(), OOM_SCORE_ADJ.len());
            libc::close(fd);
        }
    }
}

/// Waits for a child by pid with `WNOWAIT`.
pub(super) struct Waiter {
    pid: u32,
}

impl Waiter {
    pub(super) fn of(child: &std::process::Child) -> io::Result<Waiter> {
        Ok(Waiter { pid: child.id() })
    }

    /// Waits until the child has exited, leaving it unreaped (`WNOWAIT`), so that its
    /// process group can still be killed safely until the caller reaps it.
    pub(super) fn wait(self) -> io::Result<()> {
        let id = libc::id_t::from(self.pid);
        loop {
            // SAFETY: `info` is a valid siginfo_t for waitid to fill in.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waitid writes only into `info`.
            let result =
                unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
            if result == 0 {
                return Ok(());
            }
            let error = io::Error::last_os_error();
            if error.kind() != io::ErrorKind::Interrupted {
                return Err(error);
            }
        }
    }
}

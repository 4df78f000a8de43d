//! A child's process group, killed as a whole: an action's (with what it started), the
//! compiler child's. The child is made the leader of its own group when spawned
//! (`process_group(0)`).

/// The process group a child leads. Killed when dropped too (unless disarmed), so a caller
/// that gives up on the child leaves no process of the group behind.
pub(crate) struct ProcessGroup {
    id: Option<libc::pid_t>,
}

impl ProcessGroup {
    /// The group led by the process `pid` (a child spawned with `process_group(0)`); none
    /// when the pid is unknown (the child was already reaped) or not a valid pid.
    pub(crate) fn led_by(pid: Option<u32>) -> ProcessGroup {
        let id = pid
            .and_then(|pid| libc::pid_t::try_from(pid).ok())
            .filter(|pid| *pid > 0);
        ProcessGroup { id }
    }

    /// Sends SIGKILL to every process of the group. The group id cannot be reused while
    /// any member lives, or while its leader is not reaped, so this never reaches an
    /// unrelated process as long as the group is disarmed before its leader is reaped.
    pub(crate) fn kill(&self) {
        let Some(id) = self.id else {
            return;
        };
        // SAFETY: killpg has no memory-safety preconditions; a group without members
        // yields ESRCH, which is the wanted outcome.
        let _result = unsafe { libc::killpg(id, libc::SIGKILL) };
    }

    /// The child ended as it should: leave the group alone from now on (an action may have
    /// started an app in it; a reaped leader's id may be reused).
    pub(crate) fn disarm(&mut self) {
        self.id = None;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

//! Running a short-lived helper process confined: under an address-space limit, first in
//! line for the kernel's OOM killer, in its own process group, and killed with that group at
//! a time-out. The compiler child runs this way, so a component built to make the compiler
//! slow or memory-hungry costs the VM a bounded child, never the daemon or the workload.

use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::process_group::ProcessGroup;

/// How a confined child ended, with all it wrote.
#[derive(Debug)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a confined child gave no [`Finished`].
#[derive(Debug)]
pub(crate) enum NotFinished {
    /// It could not be started at all (the program is missing, or not executable).
    Spawn(io::Error),
    /// It ran past its time-out and was killed.
    TimedOut,
    /// Its pipes or its exit could not be waited for; it was killed.
    Wait(io::Error),
}

/// The kernel's OOM score adjustment of the child: the highest, so that when the VM runs
/// out of memory, the kernel kills the compiler before the workload or the daemon.
const OOM_SCORE_ADJ: &[u8] = b"1000";

/// Runs `command` confined, with `input` on its stdin, and collects its stdout and stderr.
/// The child may map at most `address_space_bytes` (`RLIMIT_AS`: an allocation past it
/// fails), and is killed with its process group if it has not exited after `timeout`.
pub(crate) fn run_confined(
    command: &mut Command,
    input: Vec<u8>,
    timeout: Duration,
    address_space_bytes: u64,
) -> Result<Finished, NotFinished> {
    confine(command, address_space_bytes);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(NotFinished::Spawn)?;
    let mut group = ProcessGroup::led_by(Some(child.id()));
    let answered = match exchange(&mut child, input) {
        Ok(answered) => answered,
        Err(error) => return Err(kill(child, group, NotFinished::Wait(error))),
    };
    match answered.recv_timeout(timeout) {
        Ok(Ok((stdout, stderr))) => {
            // It has exited (not yet reaped): its group id is still its own.
            group.disarm();
            let status = child.wait().map_err(NotFinished::Wait)?;
            Ok(Finished {
                status,
                stdout,
                stderr,
            })
        }
        Ok(Err(error)) => Err(kill(child, group, NotFinished::Wait(error))),
        Err(mpsc::RecvTimeoutError::Timeout) => Err(kill(child, group, NotFinished::TimedOut)),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(kill(
            child,
            group,
            NotFinished::Wait(io::Error::other(
                "the thread reading the child's output died",
            )),
        )),
    }
}

/// Sets the limits the child takes on between `fork` and `exec`.
fn confine(command: &mut Command, address_space_bytes: u64) {
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed: getrlimit, setrlimit, open, write and close are system calls, and
    // nothing here allocates or takes a lock.
    unsafe {
        command.pre_exec(move || {
            limit_address_space(address_space_bytes);
            raise_oom_score();
            Ok(())
        });
    }
}

/// Lowers the calling process's `RLIMIT_AS` to `bytes`, or to the limit it already has if
/// that is lower (raising a hard limit needs privileges). Between `fork` and `exec`:
/// system calls only.
fn limit_address_space(bytes: u64) {
    let mut current = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: getrlimit and setrlimit read and write only the `rlimit` they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_AS, &mut current) != 0 {
            return;
        }
        let bytes = bytes.min(current.rlim_max);
        let limit = libc::rlimit {
            rlim_cur: bytes,
            rlim_max: bytes,
        };
        let _lowered = libc::setrlimit(libc::RLIMIT_AS, &limit);
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

/// What the output thread answers: the child's stdout and stderr once it has exited.
type Exchanged = io::Result<(Vec<u8>, Vec<u8>)>;

/// Starts a thread that writes `input` to the child's stdin, reads its stdout and stderr to
/// their ends, then waits, without reaping it, for the child to exit; it answers on the
/// returned channel. Err: the thread could not be started.
fn exchange(child: &mut Child, input: Vec<u8>) -> io::Result<mpsc::Receiver<Exchanged>> {
    let (answer, answered) = mpsc::channel();
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let pid = child.id();
    thread::Builder::new()
        .name("confined-child-io".into())
        .spawn(move || {
            let (stdin, stdout, stderr) = pipes;
            let output = write_and_read(stdin, stdout, stderr, &input)
                .and_then(|output| wait_for_exit(pid).map(|()| output));
            let _receiver_gone = answer.send(output);
        })?;
    Ok(answered)
}

/// Writes `input` to stdin (then closes it) while stderr is read beside, then reads stdout.
/// A child that exits without reading all its input makes the write fail; that is not an
/// error here (its status says why it exited).
fn write_and_read(
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    input: &[u8],
) -> io::Result<(Vec<u8>, Vec<u8>)> {
    thread::scope(|scope| {
        let stderr = scope.spawn(|| read_to_end(stderr));
        if let Some(mut stdin) = stdin {
            let _early_exit = stdin.write_all(input);
        }
        let stdout = read_to_end(stdout)?;
        let stderr = stderr
            .join()
            .map_err(|_panic| io::Error::other("the thread reading stderr panicked"))??;
        Ok((stdout, stderr))
    })
}

fn read_to_end(pipe: Option<impl Read>) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        pipe.read_to_end(&mut bytes)?;
    }
    Ok(bytes)
}

/// Waits until the child `pid` has exited, leaving it unreaped (`WNOWAIT`), so that its
/// process group can still be killed safely until the caller reaps it.
fn wait_for_exit(pid: u32) -> io::Result<()> {
    let id = libc::id_t::from(pid);
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

/// Kills the child's whole group, reaps the child, and answers `why`.
fn kill(mut child: Child, mut group: ProcessGroup, why: NotFinished) -> NotFinished {
    group.kill();
    group.disarm();
    let _already_gone = child.kill();
    let _status = child.wait();
    why
}

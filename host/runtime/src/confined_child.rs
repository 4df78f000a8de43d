//! Running a short-lived helper process confined: under a memory limit, first in line for
//! the kernel's OOM killer (Linux), in a process tree of its own (a process group; a Job
//! Object on Windows), and killed with that tree at a time-out. The compiler child runs this way, so a component built to make the compiler
//! slow or memory-hungry costs the VM a bounded child, never the daemon or the workload.

use std::io::{self, Read, Write};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use forewarn_platform::process_tree::{self, ExitWaiter, Limits, ProcessTree};

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

/// Runs `command` confined, with `input` on its stdin, and collects its stdout and stderr.
/// The child may use at most `memory_bytes` (its address space, `RLIMIT_AS`, on Unix; its
/// committed memory on Windows: an allocation past it fails), is the OOM killer's first
/// choice on Linux (so that when the VM runs out of memory the kernel kills the compiler
/// before the workload or the daemon), and is killed with its tree if it has not exited
/// after `timeout` (wall-clock: the backstop for a child that waits rather than works; the
/// work itself is bounded by `cpu_seconds` of CPU time, which a busy machine does not use up
/// faster).
pub(crate) fn run_confined(
    command: &mut Command,
    input: Vec<u8>,
    timeout: Duration,
    memory_bytes: u64,
    cpu_seconds: u64,
) -> Result<Finished, NotFinished> {
    let limits = Limits {
        memory_bytes: Some(memory_bytes),
        cpu_seconds: Some(cpu_seconds),
        oom_killer_first: true,
    };
    process_tree::prepare(command, limits);
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(NotFinished::Spawn)?;
    let mut group = match ProcessTree::adopt(&child, limits) {
        Ok(group) => group,
        Err(error) => {
            let _status = child.wait();
            return Err(NotFinished::Spawn(error));
        }
    };
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

/// What the output thread answers: the child's stdout and stderr once it has exited.
type Exchanged = io::Result<(Vec<u8>, Vec<u8>)>;

/// Starts a thread that writes `input` to the child's stdin, reads its stdout and stderr to
/// their ends, then waits, without reaping it, for the child to exit; it answers on the
/// returned channel. Err: the thread could not be started.
fn exchange(child: &mut Child, input: Vec<u8>) -> io::Result<mpsc::Receiver<Exchanged>> {
    let (answer, answered) = mpsc::channel();
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let exited = ExitWaiter::of(child)?;
    thread::Builder::new()
        .name("confined-child-io".into())
        .spawn(move || {
            let (stdin, stdout, stderr) = pipes;
            let output = write_and_read(stdin, stdout, stderr, &input)
                .and_then(|output| exited.wait().map(|()| output));
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

/// Kills the child's whole group, reaps the child, and answers `why`.
fn kill(mut child: Child, mut group: ProcessTree, why: NotFinished) -> NotFinished {
    group.kill();
    group.disarm();
    let _already_gone = child.kill();
    let _status = child.wait();
    why
}

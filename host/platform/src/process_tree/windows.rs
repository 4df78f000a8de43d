//! Process trees on Windows: the child is created suspended, put in a Job Object of its own
//! (which every process it starts joins too), and only then resumed; killing the tree is
//! terminating the job.

use std::io;
use std::os::windows::io::{AsHandle, AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};
use std::os::windows::process::CommandExt;
use std::process::Command;

use windows_sys::Win32::Foundation::{CloseHandle, HANDLE, INVALID_HANDLE_VALUE, WAIT_FAILED};
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
};
use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOB_OBJECT_LIMIT_PROCESS_MEMORY, JOB_OBJECT_LIMIT_PROCESS_TIME,
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
    SetInformationJobObject, TerminateJobObject,
};
use windows_sys::Win32::System::Threading::{
    CREATE_NO_WINDOW, CREATE_SUSPENDED, INFINITE, OpenThread, ResumeThread, THREAD_SUSPEND_RESUME,
    TerminateProcess, WaitForSingleObject,
};

use super::{Limits, Spawned};

/// The exit code of the processes of a killed tree.
const KILLED_EXIT_CODE: u32 = 1;

pub(super) fn prepare(command: &mut Command, _limits: Limits) {
    // Suspended until it is in its job; no console window of its own (the daemon runs as a
    // service, and an action's output is read through pipes).
    command.creation_flags(CREATE_SUSPENDED | CREATE_NO_WINDOW);
}

pub(super) fn request_stop(_child: &impl Spawned) -> bool {
    false
}

/// The Job Object holding the child and what it started.
pub(super) struct Tree {
    job: Option<OwnedHandle>,
}

impl Tree {
    /// Puts the (suspended) child in a new job with `limits`, then resumes it. On failure
    /// the child is terminated before it ever ran.
    pub(super) fn adopt(child: &impl Spawned, limits: Limits) -> io::Result<Tree> {
        let (Some(pid), Some(process)) = (child.pid(), child.raw_handle()) else {
            return Err(io::Error::other("the child has already been reaped"));
        };
        match job_for(process, limits).and_then(|job| resume(pid).map(|()| job)) {
            Ok(job) => Ok(Tree { job: Some(job) }),
            Err(error) => {
                // SAFETY: `process` is the live child's handle, owned by its `Child`.
                unsafe { TerminateProcess(process as HANDLE, KILLED_EXIT_CODE) };
                Err(error)
            }
        }
    }

    pub(super) fn kill(&self) {
        if let Some(job) = &self.job {
            // SAFETY: a valid job handle; terminating an empty job is harmless.
            unsafe { TerminateJobObject(job.as_raw_handle() as HANDLE, KILLED_EXIT_CODE) };
        }
    }

    /// Lets the job's processes outlive its handle (no kill-on-close), then closes it.
    pub(super) fn disarm(&mut self) {
        if let Some(job) = self.job.take() {
            let _kept = set_limits(&job, 0, None, None);
        }
    }
}

/// A new job, killed when its last handle closes, holding `process`.
fn job_for(process: RawHandle, limits: Limits) -> io::Result<OwnedHandle> {
    // SAFETY: no name, default security; the handle is checked before use.
    let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if raw.is_null() {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh handle this function owns from now on.
    let job = unsafe { OwnedHandle::from_raw_handle(raw as RawHandle) };
    let memory = limits
        .memory_bytes
        .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX));
    let mut flags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    if memory.is_some() {
        flags |= JOB_OBJECT_LIMIT_PROCESS_MEMORY;
    }
    // The job's per-process user time counts 100 ns ticks.
    let user_time = limits
        .cpu_seconds
        .map(|seconds| i64::try_from(seconds.saturating_mul(10_000_000)).unwrap_or(i64::MAX));
    if user_time.is_some() {
        flags |= JOB_OBJECT_LIMIT_PROCESS_TIME;
    }
    set_limits(&job, flags, memory, user_time)?;
    // SAFETY: both handles are valid; the process is the suspended child.
    if unsafe { AssignProcessToJobObject(job.as_raw_handle() as HANDLE, process as HANDLE) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(job)
}

fn set_limits(
    job: &OwnedHandle,
    flags: u32,
    memory: Option<usize>,
    user_time: Option<i64>,
) -> io::Result<()> {
    // SAFETY: a plain-data structure, valid all zeroes.
    let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
    info.BasicLimitInformation.LimitFlags = flags;
    info.ProcessMemoryLimit = memory.unwrap_or(0);
    info.BasicLimitInformation.PerProcessUserTimeLimit = user_time.unwrap_or(0);
    // SAFETY: `info` is the structure the class names, with its exact size.
    let set = unsafe {
        SetInformationJobObject(
            job.as_raw_handle() as HANDLE,
            JobObjectExtendedLimitInformation,
            (&raw const info).cast(),
            std::mem::size_of_val(&info) as u32,
        )
    };
    match set {
        0 => Err(io::Error::last_os_error()),
        _ => Ok(()),
    }
}

/// Resumes the threads of the suspended process `pid` (a new process has one).
fn resume(pid: u32) -> io::Result<()> {
    // SAFETY: a snapshot of every thread; closed below.
    let snapshot = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if snapshot == INVALID_HANDLE_VALUE {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the snapshot handle is owned here and closed once.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(snapshot as RawHandle) };
    // SAFETY: a plain-data structure; dwSize set as the API requires.
    let mut entry: THREADENTRY32 = unsafe { std::mem::zeroed() };
    entry.dwSize = std::mem::size_of::<THREADENTRY32>() as u32;
    let mut resumed = 0;
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle() as HANDLE, &mut entry) };
    while more != 0 {
        if entry.th32OwnerProcessID == pid {
            resume_thread(entry.th32ThreadID)?;
            resumed += 1;
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot.as_raw_handle() as HANDLE, &mut entry) };
    }
    match resumed {
        0 => Err(io::Error::other(format!(
            "process {pid} has no thread to resume"
        ))),
        _ => Ok(()),
    }
}

fn resume_thread(thread_id: u32) -> io::Result<()> {
    // SAFETY: the handle is checked, then closed once.
    unsafe {
        let thread = OpenThread(THREAD_SUSPEND_RESUME, 0, thread_id);
        if thread.is_null() {
            return Err(io::Error::last_os_error());
        }
        let previous = ResumeThread(thread);
        let error = io::Error::last_os_error();
        CloseHandle(thread);
        match previous {
            u32::MAX => Err(error),
            _ => Ok(()),
        }
    }
}

/// Waits on a duplicate of the child's process handle (the `Child` keeps its own, so the
/// process id is not reused meanwhile).
pub(super) struct Waiter {
    process: OwnedHandle,
}

impl Waiter {
    pub(super) fn of(child: &std::process::Child) -> io::Result<Waiter> {
        Ok(Waiter {
            process: child.as_handle().try_clone_to_owned()?,
        })
    }

    pub(super) fn wait(self) -> io::Result<()> {
        // SAFETY: a valid process handle owned by `self`.
        let waited =
            unsafe { WaitForSingleObject(self.process.as_raw_handle() as HANDLE, INFINITE) };
        match waited {
            WAIT_FAILED => Err(io::Error::last_os_error()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use windows_sys::Win32::System::JobObjects::{
        JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JobObjectBasicAccountingInformation,
        QueryInformationJobObject,
    };

    use super::*;

    /// The number of live processes in the tree's job.
    fn active_processes(tree: &Tree) -> u32 {
        let job = tree.job.as_ref().expect("an armed tree");
        // SAFETY: a plain-data structure the query fills in, with its exact size.
        unsafe {
            let mut info: JOBOBJECT_BASIC_ACCOUNTING_INFORMATION = std::mem::zeroed();
            let queried = QueryInformationJobObject(
                job.as_raw_handle() as HANDLE,
                JobObjectBasicAccountingInformation,
                (&raw mut info).cast(),
                std::mem::size_of_val(&info) as u32,
                std::ptr::null_mut(),
            );
            assert_ne!(queried, 0, "{}", io::Error::last_os_error());
            info.ActiveProcesses
        }
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    #[test]
    fn a_grandchild_joins_the_job_and_dies_with_it() {
        let mut command = Command::new("cmd.exe");
        command.args([
            "/c",
            "start /b ping -n 120 127.0.0.1 > nul & ping -n 121 127.0.0.1 > nul",
        ]);
        prepare(&mut command, Limits::default());
        let mut child = command.spawn().expect("cmd.exe starts");
        let tree = Tree::adopt(&child, Limits::default()).expect("adopted");
        // cmd.exe and its two pings (the one `start /b` runs is a grandchild).
        wait_until("cmd.exe and both pings in the job", || {
            active_processes(&tree) >= 3
        });
        tree.kill();
        wait_until("the job to be empty", || active_processes(&tree) == 0);
        let status = child.wait().expect("reaped");
        assert_eq!(status.code(), Some(KILLED_EXIT_CODE as i32));
    }

    #[test]
    fn a_disarmed_tree_leaves_what_it_started_running() {
        let mut command = Command::new("cmd.exe");
        command.args(["/c", "exit 0"]);
        prepare(&mut command, Limits::default());
        let mut child = command.spawn().expect("cmd.exe starts");
        let mut tree = Tree::adopt(&child, Limits::default()).expect("adopted");
        assert!(child.wait().expect("reaped").success());
        tree.disarm();
        assert!(tree.job.is_none());
        tree.kill();
    }
}

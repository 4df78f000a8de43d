//! forewarn's operating-system seams: each concern one module with the same interface on
//! Linux (Unix) and Windows, so that nothing above this crate needs a `cfg`.
//!
//! - [`process_tree`]: a child and everything it starts, killed as a whole (a process group
//!   on Unix, a Job Object on Windows), with optional limits (address space and OOM score on
//!   Linux; the job's memory limit on Windows).
//! - [`file_access`]: who owns a file or directory and who besides may write it (owner and
//!   mode bits on Unix; owner and DACL on Windows), private directories, opening without
//!   following links.
//! - [`host_addresses`]: this host's own IP addresses.
//! - [`host_check`]: which `Host` a loopback HTTP server answers (against DNS rebinding);
//!   the simulator's console and the daemon's admin endpoint.
//! - [`exit_status`]: what ended a child (a signal exists on Unix only).
//! - [`stop_request`]: waiting for the operating system to ask the process to stop.
//! - [`disk_reserve`]: space allocated beyond a file's end (`fallocate` on Linux; nothing
//!   elsewhere), and where a file's allocation ends.
//! - [`default_paths`]: where the config, plugins, state and logs live by default.
//! - [`action_env`]: the environment variables an operator action inherits.
//! - [`boot_id`]: which boot of the machine this is (a reboot tells from a restart).

pub mod action_env;
pub mod boot_id;
pub mod default_paths;
pub mod disk_reserve;
pub mod exit_status;
pub mod file_access;
pub mod host_addresses;
pub mod host_check;
pub mod process_tree;
pub mod stop_request;
pub mod trust;
#[cfg(windows)]
mod wide_text;

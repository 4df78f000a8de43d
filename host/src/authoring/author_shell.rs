//! The platform's shell for a command line an author types (`plugin dev --build`): `sh -c`
//! on Unix, `cmd /C` on Windows.

use std::process::Command;

/// `line` run by the platform's shell.
pub(crate) fn command(line: &str) -> Command {
    let (shell, flag) = match cfg!(windows) {
        true => ("cmd", "/C"),
        false => ("sh", "-c"),
    };
    let mut command = Command::new(shell);
    command.args([flag, line]);
    command
}

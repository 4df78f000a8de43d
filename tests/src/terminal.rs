//! A program run in a pseudo-terminal whose output is read by a terminal emulator (the
//! `vt100` crate): what an operator at a real terminal would see, escapes and all. Unix only
//! (`openpty`).

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// Rows of the emulated terminal.
pub const ROWS: u16 = 60;
/// Columns of the emulated terminal.
pub const COLUMNS: u16 = 160;

/// A program running with a pseudo-terminal as its stdin, stdout and stderr.
pub struct Terminal {
    child: Child,
    input: std::fs::File,
    output: Receiver<Vec<u8>>,
    /// Every byte the program wrote, as it wrote it.
    pub raw: Vec<u8>,
    parser: vt100::Parser,
    ended: bool,
}

impl Terminal {
    /// Starts `command` in a fresh pseudo-terminal of [`ROWS`] × [`COLUMNS`].
    pub fn spawn(mut command: Command) -> Terminal {
        let mut master = -1;
        let mut slave = -1;
        let size = libc::winsize {
            ws_row: ROWS,
            ws_col: COLUMNS,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty writes two descriptors it opened into the integers given; no name
        // buffer, default terminal settings, the size above.
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened by openpty and are owned by nobody else.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let stdio = || Stdio::from(slave.try_clone().expect("duplicate the terminal"));
        let child = command
            .stdin(stdio())
            .stdout(stdio())
            .stderr(stdio())
            .spawn()
            .expect("start the program in the terminal");
        // Only the child holds the terminal's side now: its end is the reader's end of file.
        drop(slave);
        let mut reader = std::fs::File::from(master.try_clone().expect("duplicate the master"));
        let (send, output) = channel();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 64 * 1024];
            // A read error (EIO once the program closed the terminal) ends the output.
            while let Ok(count) = reader.read(&mut buffer) {
                if count == 0 || send.send(buffer[..count].to_vec()).is_err() {
                    return;
                }
            }
        });
        Terminal {
            child,
            input: std::fs::File::from(master),
            output,
            raw: Vec::new(),
            parser: vt100::Parser::new(ROWS, COLUMNS, 0),
            ended: false,
        }
    }

    /// Reads what the program writes until `done(raw bytes so far)` holds or it ends; false
    /// when it ended first. Panics past `timeout`.
    pub fn read_until(&mut self, timeout: Duration, done: impl Fn(&[u8]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(&self.raw) {
                return true;
            }
            if self.ended {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(bytes) => {
                    self.parser.process(&bytes);
                    self.raw.extend_from_slice(&bytes);
                }
                Err(RecvTimeoutError::Disconnected) => self.ended = true,
                Err(RecvTimeoutError::Timeout) => panic!(
                    "the program wrote nothing more for {timeout:?}; the screen:\n{}",
                    self.screen()
                ),
            }
        }
    }

    /// Reads until the program closes the terminal, and waits for it.
    pub fn read_to_end(&mut self, timeout: Duration) -> std::process::ExitStatus {
        self.read_until(timeout, |_| false);
        self.child.wait().expect("wait for the program")
    }

    /// Types `text` (an answer and its newline).
    pub fn type_text(&mut self, text: &str) {
        self.input
            .write_all(text.as_bytes())
            .expect("type into the terminal");
    }

    /// What the screen shows now: each row's visible text.
    pub fn screen(&self) -> String {
        self.parser.screen().contents()
    }

    /// The row the cursor is on, as shown.
    pub fn cursor_row(&self) -> String {
        let screen = self.parser.screen();
        let (row, _) = screen.cursor_position();
        screen
            .rows(0, COLUMNS)
            .nth(usize::from(row))
            .unwrap_or_default()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

//! UTF-16 strings for Windows API calls: NUL-terminated in, copied out.

use std::ffi::{OsStr, OsString};
use std::os::windows::ffi::{OsStrExt, OsStringExt};

/// `text` as a NUL-terminated UTF-16 string.
pub(crate) fn wide(text: &OsStr) -> Vec<u16> {
    text.encode_wide().chain(std::iter::once(0)).collect()
}

/// A NUL-terminated UTF-16 string, copied.
///
/// # Safety
/// `text` must point to a NUL-terminated UTF-16 string.
pub(crate) unsafe fn from_wide_ptr(text: *const u16) -> OsString {
    let mut length = 0;
    // SAFETY: the caller's promise: a terminating NUL exists.
    unsafe {
        while *text.add(length) != 0 {
            length += 1;
        }
        OsString::from_wide(std::slice::from_raw_parts(text, length))
    }
}

//! The plugin's durable key-value state (survives reloads and daemon restarts), with typed
//! helpers that store numbers and text as readable UTF-8 (`set_u64("n", 7)` stores `"7"`).

use crate::HostError;
use crate::host::imports as raw;

/// The bytes stored under `key`, or `None`.
pub fn get(key: &str) -> Option<Vec<u8>> {
    raw::state_get(key)
}

/// Stores `value` under `key`; it is on disk when this returns. Fails with
/// `HostError::Invalid` when the key or the plugin's total state is over its quota.
pub fn set(key: &str, value: &[u8]) -> Result<(), HostError> {
    raw::state_set(key, value)
}

/// Removes `key` (no error if it is absent).
pub fn delete(key: &str) -> Result<(), HostError> {
    raw::state_delete(key)
}

/// The text stored under `key`; `None` when absent or not UTF-8.
pub fn get_string(key: &str) -> Option<String> {
    String::from_utf8(get(key)?).ok()
}

/// Stores `value` under `key` as UTF-8.
pub fn set_string(key: &str, value: &str) -> Result<(), HostError> {
    set(key, value.as_bytes())
}

/// The number stored under `key` by `set_u64`; `None` when absent or not a number.
pub fn get_u64(key: &str) -> Option<u64> {
    parse_u64(&get(key)?)
}

/// Stores `value` under `key` as decimal text.
pub fn set_u64(key: &str, value: u64) -> Result<(), HostError> {
    set(key, value.to_string().as_bytes())
}

/// The flag stored under `key` by `set_bool`; `None` when absent or not a flag.
pub fn get_bool(key: &str) -> Option<bool> {
    match get(key)?.as_slice() {
        b"true" => Some(true),
        b"false" => Some(false),
        _ => None,
    }
}

/// Stores `value` under `key` as `true` or `false`.
pub fn set_bool(key: &str, value: bool) -> Result<(), HostError> {
    set(key, if value { b"true" } else { b"false" })
}

fn parse_u64(bytes: &[u8]) -> Option<u64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_u64_reads_decimal_text_only() {
        assert_eq!(parse_u64(b"42"), Some(42));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"\x2a\0\0\0\0\0\0\0"), None);
        assert_eq!(parse_u64(b""), None);
    }
}

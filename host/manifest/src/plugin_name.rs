//! The plugin-name rule: a plugin's name becomes file names (`NAME.wasm`, `NAME.toml`, its
//! key-value directory), so it is short and made of a safe alphabet everywhere forewarn runs.

/// The longest plugin name, in bytes (names become file names).
pub const MAX_PLUGIN_NAME_BYTES: usize = 64;

/// What is wrong with `name` as a plugin name (1 to 64 bytes of `[a-z0-9_-]`, safe as a file
/// name everywhere forewarn uses one), or None when it is usable.
pub fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.len() > MAX_PLUGIN_NAME_BYTES {
        return Some("it is too long");
    }
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-';
    if !name.bytes().all(allowed) {
        return Some("it contains a character outside a-z, 0-9, '_' and '-'");
    }
    None
}

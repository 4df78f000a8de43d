//! Text from outside, made safe to print: every string a registry, an artifact, a lock file
//! or a manifest supplies (a version annotation, a reference, a grant, a signer's name, a
//! plugin name) goes through the escaping the logs use ([`forewarn_events::log_safe`]:
//! control characters, line and paragraph separators and bidirectional marks written as
//! `\u{1b}`, `\n`, …) and is cut, visibly (`…`), to a length that fits what it is. A terminal
//! escape in such a string cannot clear the screen, hide the real grants, forge a prompt or
//! write the clipboard (OSC 52); a 900 KiB annotation cannot fill the screen.

use forewarn_pipeline::setting_error::SettingError;

/// Longest version shown ("1.2.0", "2026.01.15-rc1"): a version is short.
pub const VERSION_MAX_BYTES: usize = 64;
/// Longest plugin name, signer or other one-word value shown.
pub const NAME_MAX_BYTES: usize = 128;
/// Longest reference, path, grant value or media type shown.
pub const REFERENCE_MAX_BYTES: usize = 512;
/// Longest whole message (an error with the text it quotes) shown.
pub const MESSAGE_MAX_BYTES: usize = 16 * 1024;

/// `text` escaped as the logs escape it and cut at `max_bytes` (with `…` when cut).
pub fn escaped(text: &str, max_bytes: usize) -> String {
    forewarn_events::log_safe(text, max_bytes)
}

/// A version annotation as shown.
pub fn version(text: &str) -> String {
    escaped(text, VERSION_MAX_BYTES)
}

/// A name (plugin, signer) as shown.
pub fn name(text: &str) -> String {
    escaped(text, NAME_MAX_BYTES)
}

/// A reference, path, grant value or media type as shown.
pub fn reference(text: &str) -> String {
    escaped(text, REFERENCE_MAX_BYTES)
}

/// Whether `text` holds a character the escaping would change: a control character, a line
/// or paragraph separator or a bidirectional mark.
pub fn moves_text(text: &str) -> bool {
    forewarn_events::log_safe(text, usize::MAX) != text
}

/// Refuses a control character (an escape, a newline), a line separator or a bidirectional
/// mark in a value shown to an operator (a grant, a plugin name, an event type): printed at
/// `plugin push`, at the install's consent and by `plugin list`, it could rewrite their
/// terminal (clear the screen, hide the real grants, write the clipboard). The error names
/// the entry and says what the value is (`what_it_is`).
pub(crate) fn refuse_text_that_moves(
    key: &str,
    values: &[impl AsRef<str>],
    what_it_is: &str,
) -> Result<(), SettingError> {
    for (index, value) in values.iter().enumerate() {
        let value = value.as_ref();
        if moves_text(value) {
            let problem = format!(
                "entry {} (\"{}\") holds a control character, a line separator or a \
                 bidirectional mark, which would rewrite the terminal of whoever reads the \
                 grants; remove it ({what_it_is})",
                index + 1,
                reference(value)
            );
            return Err(SettingError::new(key, problem));
        }
    }
    Ok(())
}

/// A message of several lines (what a command prints, an error it ends with): each line
/// escaped, the line breaks kept, the whole cut at [`MESSAGE_MAX_BYTES`].
pub fn message(text: &str) -> String {
    let lines: Vec<String> = text
        .split('\n')
        .map(|line| escaped(line, MESSAGE_MAX_BYTES))
        .collect();
    let joined = lines.join("\n");
    match joined.len() > MESSAGE_MAX_BYTES {
        false => joined,
        true => {
            let mut cut = MESSAGE_MAX_BYTES;
            while !joined.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}…", &joined[..cut])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_are_written_out_and_long_text_is_cut_visibly() {
        let forged = "1.0\u{1b}[2J\u{1b}[H fake \u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[8m";
        let shown = version(forged);
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "{shown}"
        );
        assert!(shown.starts_with("1.0\\u{1b}[2J"), "{shown}");
        let long = version(&"9".repeat(900 * 1024));
        assert!(
            long.len() <= VERSION_MAX_BYTES && long.ends_with('…'),
            "{long}"
        );
        assert!(moves_text("evil\u{1b}[2J.example:80"));
        assert!(moves_text("a\u{202e}b"));
        assert!(!moves_text("https://storage.azure.com/"));
        assert_eq!(
            message("line one\nline\u{1b}[2J two"),
            "line one\nline\\u{1b}[2J two"
        );
    }
}

//! Text helpers for what plugins and the outside world hand the daemon: cutting on
//! character boundaries and making text safe for one log line or one line of a terminal.
//! A leaf: it imports nothing of the crate. The runtime and the daemon cut with these.

/// Marks text that was cut; it counts against the byte cap it was cut to.
const ELLIPSIS: &str = "…";

/// `text` cut to at most `max_bytes`, on a character boundary.
pub fn truncate(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The first `max_chars` characters of `text`, with "…" when it was cut (the ellipsis is
/// one character more): for short labels (a fleet record's names, a key's fingerprint).
pub fn cut_to_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}{ELLIPSIS}", &text[..at]),
        None => text.to_owned(),
    }
}

/// `text` cut to at most `max_bytes` on a character boundary, with "…" after it when it
/// was cut (the ellipsis's 3 bytes come on top).
pub fn cut_to_bytes(text: &str, max_bytes: usize) -> String {
    match truncate(text, max_bytes) {
        kept if kept.len() == text.len() => text.to_owned(),
        kept => format!("{kept}{ELLIPSIS}"),
    }
}

/// `text` made safe for one log line: control characters (newlines, carriage returns, ANSI
/// escapes) and the characters that move or reorder text (line and paragraph separators,
/// bidirectional overrides) written escaped (`\n`, `\u{1b}`, `\u{202e}`), so no text
/// from a plugin or from outside can forge or hide log lines, and the result cut to at
/// most `max_bytes` (a cut ends in `…`, which counts). Escaped text passes unchanged.
pub fn log_safe(text: &str, max_bytes: usize) -> String {
    let room = max_bytes.saturating_sub(ELLIPSIS.len());
    let mut safe = String::with_capacity(text.len().min(max_bytes));
    for character in text.chars() {
        let before = safe.len();
        if moves_text(character) {
            safe.extend(character.escape_default());
        } else {
            safe.push(character);
        }
        if safe.len() > room {
            safe.truncate(before);
            safe.push_str(ELLIPSIS);
            return safe;
        }
    }
    safe
}

/// Whether `character` would start a new line, rewrite the terminal or reorder what
/// follows it when printed: control characters (C0, DEL, C1), U+2028/U+2029, and the
/// bidirectional marks, embeddings, overrides and isolates.
fn moves_text(character: char) -> bool {
    character.is_control()
        || matches!(
            character,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&character)
        || ('\u{2066}'..='\u{2069}').contains(&character)
}

#[cfg(test)]
mod tests {
    use super::{cut_to_bytes, cut_to_chars, log_safe, truncate};

    #[test]
    fn log_safe_escapes_separators_and_bidirectional_overrides() {
        assert_eq!(
            log_safe("a\u{2028}b\u{2029}c\u{202e}d\u{2066}e\u{200f}", 200),
            "a\\u{2028}b\\u{2029}c\\u{202e}d\\u{2066}e\\u{200f}"
        );
        let once = log_safe("x\n\u{1b}[2J", 200);
        assert_eq!(log_safe(&once, 200), once, "escaped text passes unchanged");
    }

    #[test]
    fn log_safe_escapes_control_characters() {
        assert_eq!(
            log_safe("ok\n2026-01-01T00:00:00Z INFO forged\r\u{1b}[2J", 200),
            "ok\\n2026-01-01T00:00:00Z INFO forged\\r\\u{1b}[2J"
        );
        assert_eq!(log_safe("plain text, ünïcode", 200), "plain text, ünïcode");
    }

    #[test]
    fn log_safe_caps_the_escaped_length() {
        let cut = log_safe(&"\n".repeat(1000), 100);
        assert!(cut.len() <= 100, "{} bytes", cut.len());
        assert!(cut.ends_with('…'), "{cut}");
        assert!(!cut.contains('\n'));
        let cut = log_safe(&"é".repeat(1000), 101);
        assert!(cut.len() <= 101 && cut.ends_with('…'), "{cut}");
    }

    #[test]
    fn cuts_say_they_cut_and_keep_characters_whole() {
        assert_eq!(cut_to_chars("vm-abc", 6), "vm-abc");
        assert_eq!(cut_to_chars("vm-abcdef", 6), "vm-abc…");
        assert_eq!(cut_to_chars("ééé", 2), "éé…");
        assert_eq!(cut_to_bytes("héllo", 6), "héllo");
        assert_eq!(cut_to_bytes("héllo", 2), "h…");
        assert_eq!(cut_to_bytes("héllo", 3), "hé…");
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo", 2), "h");
        assert_eq!(truncate("héllo", 3), "hé");
        assert_eq!(truncate("short", 100), "short");
    }
}

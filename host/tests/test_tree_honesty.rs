//! The test tree cannot pass without running what it names (issue 44).
//!
//! Reads every test source of the workspace (the crates' `tests/` directories, the shared
//! harness in `tests/src`, and the `#[cfg(test)]` modules in `src/`) and fails, naming each
//! `file:line` and what to do instead, on:
//!
//! - a skip: a string saying `SKIPPED`, or a printed line starting with "skip";
//! - an early return in a test function (`return;`, `return Ok(())`, a `let … else { return }`):
//!   the test then passes without testing; it must fail instead, naming the missing tool or
//!   privilege and the fix (a return that is no skip, such as a test's child-process part,
//!   says so in a comment on the lines above: `// not a skip: <why>`);
//! - an early return in a test helper right after a check for a tool or a privilege;
//! - `#[ignore]` (or `cfg_attr(…, ignore)`) without a reason string;
//! - a test compiled out on Windows (`#[cfg(unix)]`, `cfg(not(windows))`, `target_os =
//!   "linux"`, on the test, its module or its file) without a comment `// not on Windows:
//!   <reason>` on the lines above the attribute.
//!
//! It also counts the tests compiled out on Windows and those ignored there (printed; run
//! with `--nocapture` to read the list); tests/windows.sh checks the counts of the Wine runs
//! against the Linux lists with the same rules (tests/windows/expected-counts.py).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// One problem found in the tree.
#[derive(Debug)]
struct Finding {
    file: String,
    line: usize,
    what: String,
    fix: &'static str,
}

/// A test compiled out or ignored on Windows.
#[derive(Debug)]
struct WindowsExclusion {
    file: String,
    line: usize,
    test: String,
    reason: String,
}

#[derive(Debug, Default)]
struct Report {
    findings: Vec<Finding>,
    compiled_out: Vec<WindowsExclusion>,
    ignored_on_windows: Vec<WindowsExclusion>,
    /// Tests only a Windows build has (`cfg(windows)`): the Linux lists lack them.
    windows_only: Vec<WindowsExclusion>,
    files: usize,
    tests: usize,
}

const FIX_SKIP: &str = "fail instead: panic! naming the missing tool or privilege and the fix \
                        (what to install, run as root); a test that cannot run must not pass";
const FIX_RETURN: &str = "a test must not return early: assert what it needs (panic! naming the \
                          problem and the fix) or wait for it with a deadline";
const FIX_IGNORE: &str = "give the reason: #[ignore = \"why, and how to run it\"]";
const FIX_CFG: &str = "say why on the line above: `// not on Windows: <reason>`, or drop the cfg \
                       if the test can run under Wine (tests/windows.sh)";

/// A source file cut into lines: the code with comments removed and string contents blanked,
/// each line's comment text, and the string literals starting on each line.
struct Lexed {
    raw: Vec<String>,
    code: Vec<String>,
    comments: Vec<String>,
    strings: Vec<Vec<String>>,
}

fn lex(text: &str) -> Lexed {
    let raw: Vec<String> = text.lines().map(str::to_owned).collect();
    let lines = raw.len().max(1);
    let mut code = vec![String::new(); lines];
    let mut comments = vec![String::new(); lines];
    let mut strings: Vec<Vec<String>> = vec![Vec::new(); lines];
    let chars: Vec<char> = text.chars().collect();
    let mut line = 0usize;
    let mut i = 0usize;
    let push_code = |code: &mut Vec<String>, line: usize, c: char| {
        if c != '\n'
            && let Some(l) = code.get_mut(line)
        {
            l.push(c);
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                if let Some(l) = comments.get_mut(line) {
                    l.push(chars[i]);
                }
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    } else if let Some(l) = comments.get_mut(line) {
                        l.push(chars[i]);
                    }
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !prev_is_ident(&chars, i)
            && raw_string_start(&chars, i + 1).is_some()
        {
            let (hashes, body_start) = raw_string_start(&chars, i + 1).unwrap_or((0, i + 2));
            let start_line = line;
            let mut content = String::new();
            let mut j = body_start;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                if chars[j] == '\n' {
                    line += 1;
                }
                content.push(chars[j]);
                j += 1;
            }
            code[start_line].push_str("\"\"");
            strings[start_line].push(content);
            i = j;
        } else if c == '"' {
            let start_line = line;
            let mut content = String::new();
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                if chars[j] == '\\' {
                    content.push(chars[j]);
                    j += 1;
                }
                if let Some(&ch) = chars.get(j) {
                    if ch == '\n' {
                        line += 1;
                    }
                    content.push(ch);
                }
                j += 1;
            }
            code[start_line].push_str("\"\"");
            strings[start_line].push(content);
            i = j + 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\'') or a lifetime ('a).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' && chars[j] != '\n' {
                    j += 1;
                }
                code[line].push_str("' '");
                i = j + 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                code[line].push_str("' '");
                i += 3;
            } else {
                push_code(&mut code, line, c);
                i += 1;
            }
        } else {
            push_code(&mut code, line, c);
            i += 1;
        }
    }
    Lexed {
        raw,
        code,
        comments,
        strings,
    }
}

fn prev_is_ident(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// At `i` (just after an `r`): `#`s then `"` make a raw string; its hash count and body start.
fn raw_string_start(chars: &[char], i: usize) -> Option<(usize, usize)> {
    let mut hashes = 0;
    while chars.get(i + hashes) == Some(&'#') {
        hashes += 1;
    }
    (chars.get(i + hashes) == Some(&'"')).then_some((hashes, i + hashes + 1))
}

/// The attribute and comment lines directly above `line` (nearest first is not kept: the
/// result is in file order), as (line index) list.
fn block_above(lexed: &Lexed, line: usize) -> Vec<usize> {
    let mut block = Vec::new();
    let mut i = line;
    while i > 0 {
        let above = i - 1;
        let code = lexed.code[above].trim();
        if code.is_empty() {
            if lexed.comments[above].trim().is_empty() {
                break;
            }
            block.push(above);
            i = above;
        } else if code.starts_with("#[") || code.starts_with("#![") {
            block.push(above);
            i = above;
        } else {
            // The inside or the end of a multi-line attribute: look for its `#[` start.
            let start = (above.saturating_sub(12)..above)
                .rev()
                .find(|&k| lexed.code[k].trim_start().starts_with("#["));
            match start {
                Some(start)
                    if (start + 1..=above).all(|k| !lexed.code[k].trim().ends_with(';'))
                        && !code.contains('{') =>
                {
                    block.extend((start..=above).rev());
                    i = start;
                }
                _ => break,
            }
        }
    }
    block.reverse();
    block
}

fn attribute_text(lexed: &Lexed, block: &[usize]) -> String {
    block
        .iter()
        .filter(|&&k| !lexed.code[k].trim().is_empty())
        .map(|&k| lexed.raw[k].trim())
        .collect::<Vec<_>>()
        .join(" ")
}

fn is_test_attribute(attributes: &str) -> bool {
    attributes.contains("#[test]")
        || attributes.contains("#[tokio::test")
        || attributes.contains("::test]")
        || attributes.contains("::test(")
}

/// Whether a `cfg(…)` among `attributes` leaves the item out of a Windows build.
fn compiled_out_on_windows(attributes: &str) -> bool {
    let squeezed: String = attributes.chars().filter(|c| !c.is_whitespace()).collect();
    let mut rest = squeezed.as_str();
    while let Some(at) = rest.find("cfg(") {
        let before = &rest[..at];
        let predicate_start = at + 4;
        let mut depth = 1;
        let mut end = predicate_start;
        for (k, ch) in rest[predicate_start..].char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = predicate_start + k;
                break;
            }
        }
        let predicate = &rest[predicate_start..end];
        // `cfg_attr(` is not `cfg(`; `#[cfg(` and `#![cfg(` are.
        if !before.ends_with("_attr")
            && !predicate.contains("not(unix)")
            && (predicate.contains("unix")
                || predicate.contains("\"linux\"")
                || predicate.contains("not(windows)"))
        {
            return true;
        }
        rest = &rest[end.min(rest.len())..];
        if rest.is_empty() {
            break;
        }
        rest = &rest[1..];
    }
    false
}

/// Whether a `cfg(…)` among `attributes` builds the item for Windows only.
fn compiled_only_on_windows(attributes: &str) -> bool {
    let squeezed: String = attributes.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed.contains("#[cfg(windows)]")
        || squeezed.contains("#[cfg(not(unix))]")
        || squeezed.contains("#[cfg(all(test,windows))]")
        || squeezed.contains("#[cfg(all(windows,test))]")
        || squeezed.contains("#[cfg(target_os=\"windows\")]")
}

/// The reason a `// not on Windows: <reason>` comment in the block gives, if any.
fn windows_reason(lexed: &Lexed, block: &[usize]) -> Option<String> {
    for &k in block {
        let comment = lexed.comments[k].to_lowercase();
        if let Some(at) = comment.find("not on windows:") {
            let reason = lexed.comments[k][at + "not on windows:".len()..].trim();
            if reason.len() >= 3 {
                return Some(reason.to_owned());
            }
        }
    }
    None
}

fn ignore_without_reason(attributes: &str) -> bool {
    let squeezed: String = attributes.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed.contains("#[ignore]")
        || squeezed.contains(",ignore)")
        || squeezed.contains("ignore=\"\"")
}

fn ignored_on_windows_reason(attributes: &str) -> Option<String> {
    let squeezed: String = attributes.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = squeezed.find("cfg_attr(")?;
    let rest = &squeezed[at..];
    let windows = rest.find("windows")?;
    let ignore = rest.find("ignore")?;
    if windows > ignore {
        return None;
    }
    let reason = rest[ignore..].split('"').nth(1).unwrap_or("").to_owned();
    Some(reason)
}

/// The line index of the `{` that closes the block opened at or after (`line`, from `col`).
fn block_end(lexed: &Lexed, line: usize) -> usize {
    let mut depth = 0i64;
    let mut parens = 0i64;
    let mut opened = false;
    for k in line..lexed.code.len() {
        for ch in lexed.code[k].chars() {
            match ch {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                '(' | '[' => parens += 1,
                ')' | ']' => parens -= 1,
                ';' if !opened && depth == 0 && parens == 0 => return k,
                _ => {}
            }
            if opened && depth == 0 {
                return k;
            }
        }
    }
    lexed.code.len().saturating_sub(1)
}

fn item_name(code: &str, keyword: &str) -> Option<String> {
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let at = words.iter().position(|w| *w == keyword)?;
    // Only an item line: the keyword comes after visibility and qualifiers.
    if words[..at].iter().any(|w| {
        !matches!(
            *w,
            "pub" | "crate" | "super" | "async" | "unsafe" | "const" | "in"
        )
    }) {
        return None;
    }
    words.get(at + 1).map(|w| (*w).to_owned())
}

/// Where a `return` in `code` ends the function without a value or with `Ok(())`.
fn bare_return(code: &str) -> bool {
    let mut rest = code;
    while let Some(at) = rest.find("return") {
        let before_ok = at == 0 || {
            let prev = rest[..at].chars().next_back().unwrap_or(' ');
            !(prev.is_alphanumeric() || prev == '_')
        };
        let boundary = !rest[at + 6..].starts_with(|c: char| c.is_alphanumeric() || c == '_');
        let after = rest[at + 6..].trim_start();
        if before_ok && boundary {
            let squeezed: String = after.chars().filter(|c| !c.is_whitespace()).collect();
            if squeezed.is_empty()
                || squeezed.starts_with(';')
                || squeezed.starts_with('}')
                || squeezed.starts_with("Ok(())")
            {
                return true;
            }
        }
        rest = &rest[at + 6..];
    }
    false
}

/// Words that say a condition checks for a tool or a privilege.
const TOOL_CHECKS: &[&str] = &[
    "geteuid",
    "getuid",
    "is_root",
    "NotFound",
    "which(",
    "command_exists",
    "has_tool",
    "have_tool",
    "is_installed",
    "tool_available",
    "CAP_SYS",
];

struct Scanner<'a> {
    root: &'a Path,
    report: Report,
    /// Files whose module declaration is `cfg(windows)`.
    windows_only_files: Vec<PathBuf>,
}

impl Scanner<'_> {
    fn relative(&self, path: &Path) -> String {
        path.strip_prefix(self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    fn finding(&mut self, path: &Path, line: usize, what: String, fix: &'static str) {
        let file = self.relative(path);
        self.report.findings.push(Finding {
            file,
            line: line + 1,
            what,
            fix,
        });
    }

    /// Scans one file; `whole` when all of it is test code, `out_reason` when the whole file
    /// is compiled out on Windows (its module declaration says so).
    fn scan_file(&mut self, path: &Path, whole: bool, out_on_windows: Option<String>) {
        let Ok(text) = fs::read_to_string(path) else {
            return;
        };
        self.report.files += 1;
        let lexed = lex(&text);
        let count = lexed.code.len();
        // Per line: test code, and compiled out on Windows.
        let mut test_code = vec![whole; count];
        let mut out: Vec<Option<String>> = vec![out_on_windows; count];
        let mut windows_only = vec![self.windows_only_files.iter().any(|f| f == path); count];

        // `#![cfg(unix)]` on the file.
        for k in 0..count {
            let code = lexed.code[k].trim();
            if code.starts_with("#![cfg(") && compiled_out_on_windows(&lexed.raw[k]) {
                let block = block_above(&lexed, k + 1);
                let reason = windows_reason(&lexed, &block);
                if file_has_tests(&lexed) && reason.is_none() {
                    self.finding(
                        path,
                        k,
                        "the file's tests are compiled out on Windows (`#![cfg(…)]`) and no \
                         comment says why"
                            .to_owned(),
                        FIX_CFG,
                    );
                }
                out.iter_mut()
                    .for_each(|o| *o = Some(reason.clone().unwrap_or_default()));
            }
        }

        // Modules: `#[cfg(test)]` ones are test code; `cfg(unix)` ones are out on Windows.
        for k in 0..count {
            let code = lexed.code[k].trim();
            let Some(name) = item_name(code, "mod") else {
                continue;
            };
            let block = block_above(&lexed, k);
            let attributes = attribute_text(&lexed, &block);
            let is_test_mod = attributes.contains("cfg(test)")
                || attributes.contains("cfg(all(test")
                || (attributes.contains("cfg(") && attributes.contains("test,"));
            let is_out = compiled_out_on_windows(&attributes);
            if code.ends_with(';') {
                // `mod name;`: the module's own file.
                let Some(file) = module_file(path, &name, &attributes) else {
                    continue;
                };
                let in_test = is_test_mod || test_code[k];
                let file_out = if is_out {
                    Some(windows_reason(&lexed, &block).unwrap_or_default())
                } else {
                    out[k].clone()
                };
                if is_out && file_has_tests_at(&file) {
                    self.require_reason(path, &lexed, &block, k, &format!("module `{name}`"));
                }
                if windows_only[k] || compiled_only_on_windows(&attributes) {
                    self.windows_only_files.push(file.clone());
                }
                self.scan_file(&file, in_test, file_out);
            } else {
                let end = block_end(&lexed, k);
                if is_test_mod {
                    test_code[k..=end].iter_mut().for_each(|t| *t = true);
                }
                if compiled_only_on_windows(&attributes) {
                    windows_only[k..=end].iter_mut().for_each(|w| *w = true);
                }
                if is_out {
                    let has_tests = (k..=end).any(|j| is_test_attribute(&lexed.code[j]));
                    if has_tests {
                        self.require_reason(path, &lexed, &block, k, &format!("module `{name}`"));
                    }
                    let reason = windows_reason(&lexed, &block).unwrap_or_default();
                    out[k..=end]
                        .iter_mut()
                        .for_each(|o| *o = Some(reason.clone()));
                }
            }
        }

        // Test functions, and what is inside them.
        let mut k = 0;
        while k < count {
            let code = lexed.code[k].trim().to_owned();
            let Some(name) = item_name(&code, "fn") else {
                k += 1;
                continue;
            };
            let block = block_above(&lexed, k);
            let attributes = attribute_text(&lexed, &block);
            let end = block_end(&lexed, k);
            if !is_test_attribute(&attributes) {
                if test_code[k] {
                    self.scan_helper(path, &lexed, k, end);
                }
                k += 1;
                continue;
            }
            self.report.tests += 1;
            if ignore_without_reason(&attributes) {
                self.finding(
                    path,
                    k,
                    format!("test `{name}` is ignored without a reason"),
                    FIX_IGNORE,
                );
            }
            if windows_only[k] || compiled_only_on_windows(&attributes) {
                self.report.windows_only.push(WindowsExclusion {
                    file: self.relative(path),
                    line: k + 1,
                    test: name.clone(),
                    reason: String::new(),
                });
            } else if compiled_out_on_windows(&attributes) {
                self.require_reason(path, &lexed, &block, k, &format!("test `{name}`"));
                let reason = windows_reason(&lexed, &block).unwrap_or_default();
                self.push_compiled_out(path, k, &name, reason);
            } else if let Some(reason) = out[k].clone() {
                self.push_compiled_out(path, k, &name, reason);
            } else if let Some(reason) = ignored_on_windows_reason(&attributes) {
                self.report.ignored_on_windows.push(WindowsExclusion {
                    file: self.relative(path),
                    line: k + 1,
                    test: name.clone(),
                    reason,
                });
            }
            self.scan_test_body(path, &lexed, &name, k, end);
            k = end.max(k) + 1;
        }

        // Skips said aloud, anywhere in test code.
        for (k, in_test) in test_code.iter().enumerate() {
            if !in_test {
                continue;
            }
            let prints = [
                "print!(",
                "println!(",
                "eprint!(",
                "eprintln!(",
                "writeln!(",
            ]
            .iter()
            .any(|m| lexed.code[k].contains(m));
            for string in &lexed.strings[k] {
                let lower = string.trim_start().to_lowercase();
                if string.contains("SKIPPED") || (prints && lower.starts_with("skip")) {
                    self.finding(
                        path,
                        k,
                        format!("a skip: {:?}", lexed.raw[k].trim()),
                        FIX_SKIP,
                    );
                }
            }
        }
    }

    fn push_compiled_out(&mut self, path: &Path, line: usize, name: &str, reason: String) {
        self.report.compiled_out.push(WindowsExclusion {
            file: self.relative(path),
            line: line + 1,
            test: name.to_owned(),
            reason,
        });
    }

    fn require_reason(
        &mut self,
        path: &Path,
        lexed: &Lexed,
        block: &[usize],
        k: usize,
        what: &str,
    ) {
        if windows_reason(lexed, block).is_none() {
            self.finding(
                path,
                k,
                format!("{what} is compiled out on Windows and no comment says why"),
                FIX_CFG,
            );
        }
    }

    fn scan_test_body(&mut self, path: &Path, lexed: &Lexed, name: &str, start: usize, end: usize) {
        // Braces opened by a closure or a nested fn: a return there leaves only that.
        let mut stack: Vec<bool> = Vec::new();
        for k in start..=end {
            let code = &lexed.code[k];
            let mut segment_start = 0;
            let bytes: Vec<char> = code.chars().collect();
            for (j, &ch) in bytes.iter().enumerate() {
                match ch {
                    '{' => {
                        let before: String = bytes[segment_start..j].iter().collect();
                        let nested = k != start
                            && (opens_closure(&before)
                                || before.contains("fn ")
                                || before.contains("async move")
                                || before.trim_end().ends_with("async"));
                        let nested = nested || stack.last().copied().unwrap_or(false);
                        stack.push(nested);
                        segment_start = j + 1;
                    }
                    '}' => {
                        stack.pop();
                        segment_start = j + 1;
                    }
                    ';' => segment_start = j + 1,
                    _ => {}
                }
            }
            let in_closure = stack.last().copied().unwrap_or(false);
            let allowed = (k.saturating_sub(3)..=k)
                .any(|j| lexed.comments[j].to_lowercase().contains("not a skip:"));
            if k != start && !in_closure && !allowed && bare_return(code) {
                self.finding(
                    path,
                    k,
                    format!(
                        "an early return in test `{name}`: {:?}",
                        lexed.raw[k].trim()
                    ),
                    FIX_RETURN,
                );
            }
        }
    }

    fn scan_helper(&mut self, path: &Path, lexed: &Lexed, start: usize, end: usize) {
        for k in start..=end {
            if !bare_return(&lexed.code[k]) && !lexed.code[k].contains("return None") {
                continue;
            }
            let context: String = (k.saturating_sub(3)..=k)
                .map(|j| lexed.raw[j].as_str())
                .collect::<Vec<_>>()
                .join(" ");
            if let Some(word) = TOOL_CHECKS.iter().find(|w| context.contains(*w)) {
                self.finding(
                    path,
                    k,
                    format!(
                        "a test helper returns early after a check for a tool or a privilege \
                         (`{word}`): {:?}",
                        lexed.raw[k].trim()
                    ),
                    FIX_SKIP,
                );
            }
        }
    }
}

/// Whether `segment` (the code before a `{`) starts a closure: a `|` right after `(`, `,`,
/// `=`, `move` or at the start (`a || b` is not one).
fn opens_closure(segment: &str) -> bool {
    let chars: Vec<char> = segment.chars().collect();
    chars.iter().enumerate().any(|(i, &c)| {
        if c != '|' {
            return false;
        }
        let before: String = chars[..i].iter().collect();
        let before = before.trim_end();
        before.is_empty()
            || before.ends_with('(')
            || before.ends_with(',')
            || before.ends_with('=')
            || before.ends_with("move")
    })
}

fn file_has_tests(lexed: &Lexed) -> bool {
    lexed.code.iter().any(|line| is_test_attribute(line))
}

fn file_has_tests_at(path: &Path) -> bool {
    fs::read_to_string(path).is_ok_and(|text| file_has_tests(&lex(&text)))
}

/// The file of `mod name;` declared in `declaring` (a `#[path]` attribute, or the usual
/// `name.rs` / `name/mod.rs` next to it).
fn module_file(declaring: &Path, name: &str, attributes: &str) -> Option<PathBuf> {
    let dir = declaring.parent()?;
    let stem = declaring.file_stem()?.to_str()?;
    let owns_dir = matches!(stem, "mod" | "lib" | "main") || declaring.ends_with("build.rs");
    let base = if owns_dir {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    if let Some(at) = attributes.find("path") {
        let rest = &attributes[at..];
        if let Some(value) = rest.split('"').nth(1) {
            let candidate = if owns_dir {
                dir.join(value)
            } else {
                // In a non-mod file a #[path] is relative to the file's directory.
                dir.join(value)
            };
            return candidate.is_file().then_some(candidate);
        }
    }
    [
        base.join(format!("{name}.rs")),
        base.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|candidate| candidate.is_file())
}

/// Scans the workspace at `root`: the crates' `tests/` directories and `tests/src` whole,
/// the `src/` trees for their test modules.
fn scan_tree(root: &Path, skip_file: Option<&Path>) -> Report {
    let mut scanner = Scanner {
        root,
        report: Report::default(),
        windows_only_files: Vec::new(),
    };
    let mut files = Vec::new();
    for top in ["host", "tests", "sdk", "plugins", "bench"] {
        collect_rs(&root.join(top), &mut files);
    }
    files.sort();
    for file in files {
        if skip_file.is_some_and(|skip| file.ends_with(skip)) {
            continue;
        }
        let relative = file.strip_prefix(root).unwrap_or(&file);
        let parts: Vec<&str> = relative
            .components()
            .filter_map(|c| c.as_os_str().to_str())
            .collect();
        let in_guests = parts.windows(2).any(|w| w == ["tests", "guests"]);
        if in_guests || relative.ends_with("build.rs") {
            continue;
        }
        // `<crate>/tests/*.rs` and the shared harness (`tests/src`) are test code throughout.
        let tests_dir = parts.len() >= 2 && parts[parts.len() - 2] == "tests";
        let harness = parts.first() == Some(&"tests") && parts.get(1) == Some(&"src");
        let tests_subdir =
            parts.iter().rev().skip(1).any(|p| *p == "tests") && !parts.contains(&"src");
        if tests_dir || harness || tests_subdir {
            scanner.scan_file(&file, true, None);
        } else if parts.last() == Some(&"lib.rs") || parts.last() == Some(&"main.rs") {
            // Crate roots: the module walk finds the test modules and unix-only files.
            scanner.scan_file(&file, false, None);
        }
    }
    scanner.report
}

fn collect_rs(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !matches!(
                name.as_ref(),
                "target" | "node_modules" | ".tools" | ".venv" | "fixtures" | "templates"
            ) && !name.starts_with('.')
            {
                collect_rs(&path, files);
            }
        } else if name.ends_with(".rs") {
            files.push(path);
        }
    }
}

fn render(report: &Report) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{} files read, {} test functions; {} compiled out on Windows, {} ignored on Windows, \
         {} on Windows only",
        report.files,
        report.tests,
        report.compiled_out.len(),
        report.ignored_on_windows.len(),
        report.windows_only.len()
    );
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for exclusion in &report.compiled_out {
        let _ = writeln!(
            text,
            "  compiled out on Windows: {}:{} {}: {}",
            exclusion.file, exclusion.line, exclusion.test, exclusion.reason
        );
    }
    for exclusion in &report.ignored_on_windows {
        *by_reason.entry(exclusion.reason.as_str()).or_default() += 1;
    }
    for (reason, count) in by_reason {
        let _ = writeln!(text, "  ignored on Windows: {count} ({reason})");
    }
    text
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root above host/")
        .to_path_buf()
}

#[test]
fn no_test_skips_returns_early_or_leaves_windows_without_a_reason() {
    let root = workspace_root();
    let report = scan_tree(&root, Some(Path::new("host/tests/test_tree_honesty.rs")));
    eprint!("{}", render(&report));
    // tests/windows.sh reads the exclusions to check each Wine run's count against Linux's.
    if let Some(path) = std::env::var_os("FOREWARN_WINDOWS_EXCLUSIONS") {
        let mut list = String::new();
        for (kind, exclusions) in [
            ("compiled-out", &report.compiled_out),
            ("ignored", &report.ignored_on_windows),
            ("windows-only", &report.windows_only),
        ] {
            for exclusion in exclusions {
                let _ = writeln!(
                    list,
                    "{kind}\t{}\t{}\t{}",
                    exclusion.file, exclusion.test, exclusion.reason
                );
            }
        }
        fs::write(&path, list)
            .unwrap_or_else(|error| panic!("cannot write {}: {error}", Path::new(&path).display()));
    }
    assert!(
        report.tests > 500 && report.files > 50,
        "the listing read {} files and {} tests: it looks in the wrong place ({})",
        report.files,
        report.tests,
        root.display()
    );
    let mut problems = String::new();
    for finding in &report.findings {
        let _ = writeln!(
            problems,
            "{}:{}: {}\n    fix: {}",
            finding.file, finding.line, finding.what, finding.fix
        );
    }
    assert!(
        report.findings.is_empty(),
        "{} tests can pass without testing what they name, or leave Windows without saying why:\n{problems}",
        report.findings.len()
    );
}

// The listing's own tests: a planted skip of each kind is named, and honest code is not.

/// A directory removed when dropped.
struct Planted(PathBuf);

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn plant(files: &[(&str, &str)]) -> (Planted, Report) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let unique = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = Planted(std::env::temp_dir().join(format!(
        "forewarn-tree-honesty-{}-{unique}",
        std::process::id()
    )));
    for (path, text) in files {
        let path = dir.0.join(path);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, text).expect("write");
    }
    let report = scan_tree(&dir.0, None);
    (dir, report)
}

fn lines_found(report: &Report) -> Vec<(String, usize)> {
    report
        .findings
        .iter()
        .map(|f| (f.file.clone(), f.line))
        .collect()
}

#[test]
fn a_planted_skip_is_named_with_its_line_and_the_fix() {
    let (_dir, report) = plant(&[(
        "host/tests/planted.rs",
        r#"
#[test]
fn needs_root() {
    let disk = match mount() {
        Ok(disk) => disk,
        Err(reason) => {
            eprintln!("SKIPPED: {reason}");
            return;
        }
    };
    let _ = disk;
}

#[test]
fn needs_a_tool() {
    if !tool_present("openssl") {
        eprintln!("skipping: no openssl");
        return
    }
    let Some(x) = find() else { return };
    assert!(x);
}

#[test]
fn result_test() -> Result<(), String> {
    if missing() { return Ok(()); }
    Ok(())
}

#[test]
#[ignore]
fn silent() {}

fn helper() -> Option<u32> {
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    Some(1)
}

macro_rules! disk_or_skip {
    () => { match mount() { Ok(d) => d, Err(r) => { eprintln!("SKIPPED: {r}"); return; } } };
}
"#,
    )]);
    let found = lines_found(&report);
    let file = "host/tests/planted.rs".to_owned();
    for line in [7, 8, 17, 18, 20, 26, 32, 36, 42] {
        assert!(
            found.contains(&(file.clone(), line)),
            "line {line} not named; found {found:?}\n{:#?}",
            report.findings
        );
    }
    assert_eq!(found.len(), 9, "{:#?}", report.findings);
    assert!(report.findings.iter().all(|f| !f.fix.is_empty()));
}

#[test]
fn honest_tests_and_helpers_pass() {
    let (_dir, report) = plant(&[(
        "tests/src/lib.rs",
        r#"
/// Waits for the thing: returns as soon as it is there.
pub fn wait_for(done: impl Fn() -> bool) {
    loop {
        if done() {
            return;
        }
    }
}

#[test]
fn closures_may_return() {
    let worker = std::thread::spawn(move || {
        if true {
            return;
        }
    });
    worker.join().unwrap();
    let text = "return; skipped is only a word here";
    if std::env::var("CHILD").is_ok() {
        // not a skip: the child's part prints its figures for the parent
        println!("figures");
        return;
    }
    assert!(!text.is_empty(), "no skip: {}", '}');
}

#[test]
#[ignore = "a measurement: run it by hand"]
fn measured() {}
"#,
    )]);
    assert!(report.findings.is_empty(), "{:#?}", report.findings);
    assert_eq!(report.tests, 2);
}

#[test]
fn windows_exclusions_need_a_reason_and_are_counted() {
    let (_dir, report) = plant(&[
        (
            "host/platform/src/lib.rs",
            r#"
#[cfg(unix)]
#[path = "imp/unix.rs"]
mod imp;

pub fn f() {}

#[cfg(test)]
mod tests {
    // not on Windows: reads /proc, which Windows has not
    #[cfg(unix)]
    #[test]
    fn with_reason() {}

    #[cfg(unix)]
    #[test]
    fn without_reason() {}

    #[cfg(not(unix))]
    #[test]
    fn windows_only() {}

    #[test]
    #[cfg_attr(
        windows,
        ignore = "needs openssl"
    )]
    fn ignored_there() {}
}

#[cfg(all(test, target_os = "linux"))]
mod linux_tests {
    #[test]
    fn a() {}
}
"#,
        ),
        (
            "host/platform/src/imp/unix.rs",
            "#[cfg(test)]\nmod tests {\n    #[test]\n    fn in_unix_file() {}\n}\n",
        ),
    ]);
    let found = lines_found(&report);
    let file = "host/platform/src/lib.rs".to_owned();
    assert!(found.contains(&(file.clone(), 4)), "{found:?}"); // mod imp;
    assert!(found.contains(&(file.clone(), 17)), "{found:?}"); // without_reason
    assert!(found.contains(&(file.clone(), 32)), "{found:?}"); // mod linux_tests
    assert_eq!(found.len(), 3, "{:#?}", report.findings);
    let names: Vec<&str> = report
        .compiled_out
        .iter()
        .map(|e| e.test.as_str())
        .collect();
    assert_eq!(
        names,
        ["in_unix_file", "with_reason", "without_reason", "a"],
        "{report:#?}"
    );
    assert_eq!(
        report.compiled_out[1].reason,
        "reads /proc, which Windows has not"
    );
    assert_eq!(report.ignored_on_windows.len(), 1);
    assert_eq!(report.ignored_on_windows[0].reason, "needs openssl");
    let windows_only: Vec<&str> = report
        .windows_only
        .iter()
        .map(|e| e.test.as_str())
        .collect();
    assert_eq!(windows_only, ["windows_only"], "{report:#?}");
}

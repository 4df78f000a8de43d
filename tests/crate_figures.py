#!/usr/bin/env python3
"""Counts a crate's production lines and `pub` items, the figures of docs/architecture.md.

Production lines: each file's lines before its inline test module (`#[cfg(test)]` at the
start of a line, then `mod NAME {`), an out-of-line `#[cfg(test)] mod NAME;` not counted,
files named `tests.rs` or under a `tests/` folder left out.
`pub` items: lines of that production code that declare an item `pub` (not `pub(crate)`,
`pub(super)`): fn, struct, enum, trait, type, const, static, mod, use (fields not counted).

`Result<_, String>`: the signatures and types of that production code whose error is a bare
`String` (`--string-errors`, over the whole of host/: every crate's `src/`).

Usage: python3 tests/crate_figures.py host/src [host/manifest/src ...]
       python3 tests/crate_figures.py --string-errors"""
import pathlib
import re
import sys

PUB = re.compile(
    r"^\s*pub\s+((async|unsafe|const|extern)\s+)*(fn|struct|enum|trait|type|const|static|mod|use|union)\b"
)
TEST_START = re.compile(r"^#\[cfg\(test\)\]")


def production(path):
    """The file's lines up to its inline test module (`#[cfg(test)]` then `mod NAME {`); an
    out-of-line `#[cfg(test)] mod NAME;` is left out, and the lines after it still count."""
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = []
    skip_next = False
    for index, line in enumerate(lines):
        if skip_next:
            skip_next = False
            continue
        if TEST_START.match(line):
            following = lines[index + 1].strip() if index + 1 < len(lines) else ""
            if re.match(r"^(pub(\([a-z]+\))? )?mod \w+;$", following):
                skip_next = True
                continue
            return kept
        kept.append(line)
    return kept


def figures(src):
    total_lines = total_pub = 0
    for path in sorted(pathlib.Path(src).rglob("*.rs")):
        rel = path.relative_to(src)
        if path.name == "tests.rs" or "tests" in rel.parts[:-1]:
            continue
        lines = production(path)
        total_lines += len(lines)
        total_pub += sum(1 for line in lines if PUB.match(line))
    return total_lines, total_pub


STRING_ERROR = re.compile(r"Result<[^;{]*?,\s*String\s*>")


def string_errors(root):
    """Each production file under `root` with its count of `Result<_, String>`."""
    found = []
    for path in sorted(pathlib.Path(root).rglob("*.rs")):
        parts = path.relative_to(root).parts
        if "target" in parts or "tests" in parts[:-1] or path.name == "tests.rs":
            continue
        count = len(STRING_ERROR.findall("\n".join(production(path))))
        if count:
            found.append((count, str(path)))
    return found


if sys.argv[1:] == ["--string-errors"]:
    found = string_errors("host")
    for count, path in sorted(found, reverse=True):
        print(f"{count} {path}")
    print(f"host/: {sum(count for count, _ in found)} Result<_, String>")
else:
    for src in sys.argv[1:] or ["host/src"]:
        lines, pubs = figures(src)
        print(f"{src}: {lines} production lines, {pubs} pub items")

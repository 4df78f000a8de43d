#!/usr/bin/env python3
"""Lists the `crate::` edges between the modules of a crate's src/ (test modules and
comments left out) and reports every cycle among them; exits 1 when there is one.

Usage: python3 host/tests/module_cycles.py CRATE/src [--quiet]"""
import pathlib, re, sys

src = pathlib.Path(sys.argv[1])
modules = {}
for path in sorted(src.rglob("*.rs")):
    rel = path.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    if "tests" in parts:
        continue  # a test module (tests.rs, tests/…): its imports are the tests', not the crate's
    name = "::".join(parts) or "crate"
    text = path.read_text()
    # The inline test module is cut off; an out-of-line `#[cfg(test)] mod tests;` is only a
    # declaration (the code after it is the crate's).
    cut = re.search(r"#\[cfg\(test\)\]\s*mod tests\s*\{", text)
    text = text[: cut.start()] if cut else text
    modules[name] = re.sub(r"//[^\n]*", "", text)

def resolve(path):
    parts = path.split("::")
    for end in range(len(parts), 0, -1):
        candidate = "::".join(parts[:end])
        if candidate in modules:
            return candidate
    return None

def expand(tree):
    """`a::{b, c::d}` -> ['a::b', 'a::c::d']"""
    tree = tree.strip()
    m = re.match(r"^([\w:]*?)(::)?\{(.*)\}$", tree, re.S)
    if not m:
        return [tree]
    prefix, body = m.group(1), m.group(3)
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "{": depth += 1
        if ch == "}": depth -= 1
        if ch == "," and depth == 0:
            items.append(cur); cur = ""
        else:
            cur += ch
    items.append(cur)
    out = []
    for item in filter(None, (i.strip() for i in items)):
        for sub in expand(item):
            out.append(f"{prefix}::{sub}" if prefix else sub)
    return out

edges = {name: set() for name in modules}
for name, text in modules.items():
    paths = []
    for use in re.finditer(r"\buse\s+crate::(.*?);", text, re.S):
        paths += expand(use.group(1))
    paths += re.findall(r"(?<!use )\bcrate::([\w:]+)", text)
    for child in re.findall(r"^\s*(?:pub(?:\(crate\))?\s+)?mod\s+(\w+);", text, re.M):
        if name != "crate":  # the crate root declares every module: not a dependency
            paths.append(f"{name}::{child}")
    if name != "crate":  # relative paths to child modules (`use version::X` in wit/mod.rs)
        for use in re.finditer(r"\buse\s+(\w+)::", text):
            child = f"{name}::{use.group(1)}"
            if child in modules:
                paths.append(child)
    for path in paths:
        path = path.split(" as ")[0].strip()
        target = resolve(path) if "::" in name or True else None
        if target is None and "::" not in path:
            target = resolve(path)
        if target and target != name:
            edges[name].add(target)

if "--quiet" not in sys.argv:
    for name in sorted(edges):
        print(f"{name:16} -> {', '.join(sorted(edges[name])) or '(nothing)'}")

# Tarjan's strongly connected components
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1:
            sccs.append(sorted(comp))
for v in sorted(edges):
    if v not in index:
        visit(v)
print()
print("cycles:", "none" if not sccs else "")
for comp in sccs:
    print("  ", " <-> ".join(comp))
sys.exit(1 if sccs else 0)

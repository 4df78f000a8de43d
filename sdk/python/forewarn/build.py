"""forewarn-build-py PLUGIN.py -o PLUGIN.wasm — builds a forewarn plugin written in Python into
a WebAssembly component with componentize-py (also: python -m forewarn.build ...).

The module defines on_event(event, phase, ctx) and optionally on_start(ctx). The component binds
forewarn:plugin@0.3.0 (the WIT inside this package, forewarn/wit/). componentize-py is the one
beside this Python (a venv), else the one on PATH; COMPONENTIZE_PY names another.
"""

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WORLD = "event-handler"
PACKAGE = Path(__file__).resolve().parent

# The component's entry module: the SDK turns the plugin's on_event (and on_start, if it has
# one) into the Handler export.
ENTRY = """import forewarn
import {module} as _plugin

Handler = forewarn.handler(_plugin.on_event, getattr(_plugin, "on_start", None))
"""

# What is not the plugin's code in its folder: caches, build output, a venv, a vendored SDK.
SKIPPED = shutil.ignore_patterns(".*", "__pycache__", "*.wasm", "vendor", "node_modules")


def _componentize_py() -> str:
    named = os.environ.get("COMPONENTIZE_PY")
    if named:
        return named
    beside = Path(sys.executable).parent / "componentize-py"
    if beside.is_file():
        return str(beside)
    found = shutil.which("componentize-py")
    if found:
        return found
    sys.exit(
        "error: componentize-py not found beside this Python or on PATH: "
        "pip install 'componentize-py~=0.25.1' (pip install forewarn-sdk brings it), "
        "or set COMPONENTIZE_PY"
    )


def check_exports(plugin: Path) -> None:
    """Fails before the (slow) build when the module defines no on_event function, naming the
    fix; a syntax error is named with its line."""
    try:
        tree = ast.parse(plugin.read_text(), filename=str(plugin))
    except SyntaxError as error:
        sys.exit(f"error: {plugin.name}:{error.lineno}: {error.msg}: fix the syntax and build again")
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assigned = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    imported = {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    if "on_event" not in defined | assigned | imported:
        sys.exit(
            f"error: {plugin.name} defines no on_event function, so the plugin would have "
            "nothing to answer events with: add `def on_event(event, phase, ctx):` returning "
            "forewarn.approve() or forewarn.defer(reason)"
        )


# A traceback frame in the plugin's own sources (copied to the build's src/, which
# componentize-py names /2/ inside the component).
PLUGIN_FRAME = re.compile(r'^\s*File "(?:/\d+/)?(?P<file>[^"]+)", line (?P<line>\d+)')


def summarise_failure(output: str, plugin: Path) -> str:
    """The line that matters in componentize-py's output: the exception, and where in the
    plugin's own code it was raised (componentize-py imports the module at build time, so a
    mistake at module level fails the build with a full traceback)."""
    lines = [line for line in output.splitlines() if line.strip()]
    where = ""
    for line in lines:
        match = PLUGIN_FRAME.match(line)
        if match and Path(match["file"]).name != "forewarn_entry.py" and "/sdk/" not in line:
            where = f"{Path(match['file']).name}:{match['line']}: "
    exception = next(
        (line.strip() for line in reversed(lines) if re.match(r"^\w[\w.]*(Error|Exception|Exit)\b", line.strip())),
        lines[-1].strip() if lines else "no output",
    )
    return f"{where}{exception}"


def build(plugin: Path, output: Path) -> None:
    """Builds the component `output` from the module `plugin`."""
    if plugin.suffix != ".py" or not plugin.is_file():
        sys.exit(f"error: {plugin} is not a Python module (.py file)")
    check_exports(plugin)
    componentize_py = _componentize_py()
    with tempfile.TemporaryDirectory(prefix="forewarn-py-") as work:
        work = Path(work)
        (work / "forewarn_entry.py").write_text(ENTRY.format(module=plugin.stem))
        # Copies, so that the import at build time writes no __pycache__ into the sources and
        # nothing else of an installed environment joins the component.
        shutil.copytree(PACKAGE, work / "sdk" / "forewarn", ignore=SKIPPED)
        shutil.copytree(plugin.resolve().parent, work / "src", ignore=SKIPPED)
        command = [
            componentize_py, "-d", str(PACKAGE / "wit"), "-w", WORLD, "componentize",
            "forewarn_entry", "-p", str(work), "-p", str(work / "sdk"), "-p", str(work / "src"),
            "-o", str(output),
        ]
        verbose = os.environ.get("FOREWARN_BUILD_VERBOSE") == "1"
        result = subprocess.run(
            command,
            stdout=None if verbose else subprocess.DEVNULL,
            stderr=None if verbose else subprocess.PIPE,
            text=True,
        )
        if result.returncode != 0:
            summary = "" if verbose else f": {summarise_failure(result.stderr, plugin)}"
            sys.exit(
                f"error: componentize-py failed (exit {result.returncode}) building "
                f"{plugin}{summary}" + ("" if verbose else "\n(FOREWARN_BUILD_VERBOSE=1 shows its whole output)")
            )
    print(f"built {output} ({output.stat().st_size} bytes)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="forewarn-build-py",
        description="Build a forewarn plugin written in Python into a WebAssembly component.",
    )
    parser.add_argument("plugin", type=Path, help="the plugin module, e.g. my_plugin.py")
    parser.add_argument("-o", dest="output", type=Path, required=True, help="the component to write")
    args = parser.parse_args(argv)
    build(args.plugin, args.output)


if __name__ == "__main__":
    main()

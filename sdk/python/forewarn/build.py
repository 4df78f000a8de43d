"""forewarn-build-py PLUGIN.py -o PLUGIN.wasm — builds a forewarn plugin written in Python into
a WebAssembly component with componentize-py (also: python -m forewarn.build ...).

The module defines on_event(event, phase, ctx) and optionally on_start(ctx). The component binds
forewarn:plugin@0.3.0 (the WIT inside this package, forewarn/wit/). componentize-py is the one
beside this Python (a venv), else the one on PATH; COMPONENTIZE_PY names another.
"""

import argparse
import os
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


def build(plugin: Path, output: Path) -> None:
    """Builds the component `output` from the module `plugin`."""
    if plugin.suffix != ".py" or not plugin.is_file():
        sys.exit(f"error: {plugin} is not a Python module (.py file)")
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
        result = subprocess.run(command, stdout=subprocess.DEVNULL)
        if result.returncode != 0:
            sys.exit(f"error: componentize-py failed (exit {result.returncode}) building {plugin}")
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

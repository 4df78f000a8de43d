#!/usr/bin/env bash
# Builds the Windows package: a zip with forewarn.exe, the default config (Windows paths,
# written by the exe itself: `forewarn.exe config example`), the bundled plugins (`forewarn.exe
# plugin export-bundled`) and README.txt, then lists what it holds. Runs the exe under Wine
# (tests/windows/env.sh). An MSI would need the WiX toolset, which runs on Windows only: it
# is not built here.
#
#   packaging/windows/make-zip.sh PATH/TO/forewarn.exe OUT.zip
set -euo pipefail

exe="$(realpath "$1")"
out="$(realpath -m "$2")"
repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$repo_dir/tests/windows/env.sh"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$exe" "$stage/forewarn.exe"
# The exe prints CRLF-free text; the config is what `service install` writes too.
"$WINE" "$stage/forewarn.exe" config example > "$stage/forewarn.toml"
"$WINE" "$stage/forewarn.exe" plugin export-bundled 'Z:'"${stage//\//\\}"'\plugins' > /dev/null
cp "$repo_dir/packaging/windows/README.txt" "$stage/README.txt"
"$WINE" "$stage/forewarn.exe" config check 'Z:'"${stage//\//\\}"'\forewarn.toml' > /dev/null

rm -f "$out"
(cd "$stage" && python3 -m zipfile -c "$out" forewarn.exe forewarn.toml plugins README.txt)
echo "windows package: $out"
python3 -m zipfile -l "$out"

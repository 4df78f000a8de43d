#!/usr/bin/env bash
# Installs Azurite (Microsoft's Azure Storage emulator, npm package `azurite`, pinned) into
# tests/.tools/azurite for the tests that store blobs over HTTPS with OAuth. Idempotent: a
# second run checks the installed version and returns at once.
# 3.35.0 is the newest Azurite whose `engines` accept Node.js 20 (3.36 wants >= 21, 3.37
# >= 22); a private Node.js 22 fetched by install-language-toolchains.sh serves it as well.
set -euo pipefail

AZURITE_VERSION="3.35.0"

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
prefix="$repo_dir/tests/.tools/azurite"
manifest="$prefix/node_modules/azurite/package.json"

[[ -x "$repo_dir/tests/.tools/node/bin/node" ]] && export PATH="$repo_dir/tests/.tools/node/bin:$PATH"
command -v node >/dev/null && command -v npm >/dev/null \
    || { echo "azurite: node and npm are missing: run bash tests/install-language-toolchains.sh js, or install Node.js >= 20 with npm" >&2; exit 1; }

installed="$(node -p 'try { require(process.argv[1]).version } catch { "" }' "$manifest")"
if [[ "$installed" == "$AZURITE_VERSION" && -x "$prefix/node_modules/.bin/azurite-blob" ]]; then
    echo "azurite: $AZURITE_VERSION already installed"
    exit 0
fi
echo "azurite: installing azurite $AZURITE_VERSION into tests/.tools/azurite (npm install)"
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION"

#!/usr/bin/env bash
# Installs what the browser tests (host/tests/e2e_pages.rs) drive: Debian's headless
# Chromium (apt, when missing) and puppeteer-core (npm, pinned in tests/browser/package-lock.json,
# no browser download) into tests/browser/node_modules. Idempotent: quick when present.
set -euo pipefail

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
browser_dir="$repo_dir/tests/browser"
source "$repo_dir/tests/apt-install.sh"

if ! command -v chromium >/dev/null 2>&1; then
    echo "browser: installing chromium from Debian's packages (the page tests drive it headless)"
    apt_install chromium
fi

[[ -x "$repo_dir/tests/.tools/node/bin/node" ]] && export PATH="$repo_dir/tests/.tools/node/bin:$PATH"
command -v node >/dev/null && command -v npm >/dev/null \
    || { echo "browser: node and npm are missing: run bash tests/install-language-toolchains.sh js, or install Node.js >= 20 with npm" >&2; exit 1; }

wanted="$(node -p 'require(process.argv[1]).dependencies["puppeteer-core"]' "$browser_dir/package.json")"
installed="$(node -p 'try { require(process.argv[1]).version } catch { "" }' "$browser_dir/node_modules/puppeteer-core/package.json")"
if [[ "$installed" == "$wanted" ]]; then
    echo "browser: chromium $(chromium --version 2>/dev/null | awk '{print $2}') and puppeteer-core $wanted already installed"
    exit 0
fi
echo "browser: installing puppeteer-core $wanted into tests/browser/node_modules (npm ci)"
# PUPPETEER_SKIP_DOWNLOAD: puppeteer-core never downloads a browser; said anyway, for clarity.
PUPPETEER_SKIP_DOWNLOAD=1 npm ci --prefix "$browser_dir" --no-audit --no-fund --loglevel=error

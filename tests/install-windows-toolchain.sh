#!/usr/bin/env bash
# Installs what the Windows build and its tests under Wine need, when missing, and prints
# nothing else when all is there:
# - Debian's mingw-w64 cross compiler (the linker of x86_64-pc-windows-gnu) and wine64 8.0
#   (the loader is /usr/lib/wine/wine64; `wine` on PATH would need the separate package);
# - the Rust standard library for x86_64-pc-windows-gnu (`rustup target add`, for the
#   toolchain this checkout pins, as host/wasm-build does for wasm32-wasip2);
# - a Wine prefix in target/windows/wine-prefix (WINEPREFIX) holding a stand-in
#   bcryptprimitives.dll (tests/windows/bcryptprimitives.c): Wine 8.0 lacks ProcessPrng,
#   which every Rust exe imports since Rust 1.78, so no exe would start (status c0000135).
#   A test-environment fix only: real Windows has the DLL.
set -euo pipefail

repo_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo_dir/tests/apt-install.sh"
source "$repo_dir/tests/windows/env.sh"

missing=()
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || missing+=(gcc-mingw-w64-x86-64)
[[ -x "$WINE" ]] || missing+=(wine64)
if [[ ${#missing[@]} -gt 0 ]]; then
    echo "windows: installing ${missing[*]} from Debian's packages (the Windows build and its tests under Wine)"
    apt_install "${missing[@]}"
fi

sysroot="$(rustc --print sysroot)"
if [[ ! -d "$sysroot/lib/rustlib/$WINDOWS_TARGET/lib" ]]; then
    echo "windows: adding the $WINDOWS_TARGET target (rustup target add)"
    toolchain_args=()
    [[ -n "${RUSTUP_TOOLCHAIN:-}" ]] && toolchain_args=(--toolchain "$RUSTUP_TOOLCHAIN")
    rustup target add "$WINDOWS_TARGET" "${toolchain_args[@]}"
fi

shim="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
if [[ ! -f "$shim" || "$repo_dir/tests/windows/bcryptprimitives.c" -nt "$shim" ]]; then
    if [[ ! -f "$WINEPREFIX/system.reg" ]]; then
        echo "windows: creating the Wine prefix $WINEPREFIX (wineboot, about 20 s)"
        mkdir -p "$WINEPREFIX"
        "$WINE" wineboot --init >/dev/null 2>&1
        "$WINESERVER" --wait
    fi
    echo "windows: building the ProcessPrng stand-in into the prefix's system32"
    x86_64-w64-mingw32-gcc -shared -O2 -s -o "$shim" \
        "$repo_dir/tests/windows/bcryptprimitives.c" -ladvapi32
fi

# env.sh — sourced by the Windows scripts: the target, Wine's loader and server, and the
# Wine prefix (target/windows/wine-prefix unless WINEPREFIX names another).
_windows_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export WINDOWS_TARGET="x86_64-pc-windows-gnu"
export WINE="${WINE:-/usr/lib/wine/wine64}"
export WINESERVER="${WINESERVER:-/usr/lib/wine/wineserver}"
export WINEPREFIX="${WINEPREFIX:-$_windows_repo/target/windows/wine-prefix}"
# Quiet, no Mono or Gecko installer prompts, no display.
export WINEDEBUG="${WINEDEBUG:--all}"
export WINEDLLOVERRIDES="${WINEDLLOVERRIDES:-mscoree,mshtml=}"
unset DISPLAY WAYLAND_DISPLAY

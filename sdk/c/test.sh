#!/usr/bin/env bash
# Runs the native tests of a forewarn plugin written in C, in one command:
#   sdk/c/test.sh my_plugin.c test_my_plugin.c [more.c ...]
# Compiles the sources with the host's C compiler (CC, default gcc) against testing.c, a stub
# host that answers the host calls from what the test set up and records them (testing.h), and
# runs the result: the test file has main() and returns fw_test_finish(). Needs cargo (it
# builds host/component-tool, which generates the bindings the SDK's header includes).
set -euo pipefail

sdk_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_dir="$(cd "$sdk_dir/../.." && pwd)"
cc="${CC:-gcc}"

if [[ $# -eq 0 || "$1" == -h || "$1" == --help ]]; then
    sed -n '2,6p' "$0"
    [[ $# -eq 0 ]] && exit 2 || exit 0
fi
if ! command -v "$cc" >/dev/null; then
    echo "error: $cc not found: install a C compiler (apt-get install gcc) or set CC" >&2
    exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The bindings, as sdk/c/build.sh generates them.
source "$sdk_dir/bindings.sh"
c_bindings "$work/bindings"

# The generated host wrappers lower calls into wasm imports; natively testing.c is the host,
# so they are renamed out of the way (the types' free functions and string helpers stay).
renames=()
for call in log config state_get state_set state_delete set_ready drain_progress http_send azure_access_token run_action; do
    renames+=("-Dforewarn_plugin_host_${call}=fw_generated_host_${call}")
done
"$cc" -w -c "${renames[@]}" -I "$work/bindings" "$work/bindings/event_handler.c" -o "$work/event_handler.o"

"$cc" -g -O0 -Wall -Wextra -Wno-unused-parameter -fsanitize=address,undefined -fno-omit-frame-pointer \
    -I "$sdk_dir" -I "$work/bindings" \
    "$@" "$sdk_dir/forewarn.c" "$sdk_dir/testing.c" "$work/event_handler.o" \
    -o "$work/test"
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" "$work/test"

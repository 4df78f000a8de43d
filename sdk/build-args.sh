# The command line every sdk/*/build.sh takes: `build.sh INPUT... -o OUTPUT.wasm`. Sourced;
# sets `inputs` (an array) and `output`, prints the calling script's header for -h.
# Usage: parse_build_args "usage line" "$@"
parse_build_args() {
    local usage="$1"
    shift
    inputs=()
    output=""
    while [[ $# -gt 0 ]]; do
        case "$1" in
            -o) output="$2"; shift 2 ;;
            -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
            *) inputs+=("$1"); shift ;;
        esac
    done
    if [[ -z "$output" || ${#inputs[@]} -eq 0 ]]; then
        echo "usage: $0 $usage" >&2
        exit 2
    fi
}

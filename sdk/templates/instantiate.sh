#!/usr/bin/env bash
# Copies sdk/templates/LANG into DIR with the placeholders filled in, as `forewarn plugin new`
# does (for checking the templates by hand and in host/tests/e2e_sdk_testing.rs):
#   sdk/templates/instantiate.sh LANG NAME DIR
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: $0 LANG NAME DIR (LANG: c, python, js)" >&2; exit 2; }
lang="$1" name="$2" dir="$3"
templates="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
sdk_dir="$(cd "$templates/../$lang" && pwd)"
wit_version="$(sed -n 's/^package forewarn:plugin@\(.*\);$/\1/p' "$templates/../../wit/forewarn.wit")"
name_snake="${name//-/_}"
fill() { sed -e "s|{{name}}|$name|g" -e "s|{{name_snake}}|$name_snake|g" -e "s|{{sdk_dir}}|$sdk_dir|g" -e "s|{{wit_version}}|$wit_version|g"; }
mkdir -p "$dir"
(cd "$templates/$lang" && find . -type f) | while read -r file; do
    target="$dir/$(printf '%s' "${file#./}" | fill)"
    [[ "$(basename "$target")" == _gitignore ]] && target="$(dirname "$target")/.gitignore"
    mkdir -p "$(dirname "$target")"
    fill < "$templates/$lang/$file" > "$target"
    if [[ -x "$templates/$lang/$file" ]]; then chmod +x "$target"; fi
done
echo "$dir"

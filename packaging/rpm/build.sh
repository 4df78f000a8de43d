#!/bin/sh
# Builds the forewarn .rpm with rpmbuild from a build that already happened:
#   packaging/rpm/build.sh [TARGET_DIR] [OUT_DIR]
# TARGET_DIR holds `forewarn` and `bundled-plugins/` (default: target/release, after
# `cargo build --release -p forewarn-host` and
# `target/release/forewarn plugin export-bundled target/release/bundled-plugins`); the
# package, forewarn-VERSION-1.ARCH.rpm, goes to OUT_DIR (default: target/rpm).
# rpmbuild comes with Debian's and Ubuntu's `rpm` package, and RHEL's `rpm-build`.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
target=$(cd "${1:-$root/target/release}" && pwd)
out=${2:-$root/target/rpm}
for needed in "$target/forewarn" "$target/bundled-plugins/lb-drain.wasm"; do
    if [ ! -e "$needed" ]; then
        echo "packaging/rpm/build.sh: $needed is missing: build forewarn and export the bundled plugins first (docs/operations.md, \"Building the .rpm\")" >&2
        exit 1
    fi
done
if ! command -v rpmbuild >/dev/null 2>&1; then
    echo "packaging/rpm/build.sh: rpmbuild is not installed: apt-get install rpm (Debian, Ubuntu) or dnf install rpm-build (RHEL)" >&2
    exit 1
fi
version=$("$target/forewarn" --version | awk '{print $2}')
topdir=$(mktemp -d)
trap 'rm -rf "$topdir"' EXIT
rpmbuild -bb --quiet "$root/packaging/rpm/forewarn.spec" \
    --define "_topdir $topdir" \
    --define "forewarn_version $version" \
    --define "forewarn_target $target" \
    --define "forewarn_src $root"
mkdir -p "$out"
cp "$topdir"/RPMS/*/*.rpm "$out"/
ls "$out"/forewarn-"$version"-1.*.rpm

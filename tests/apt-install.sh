# apt-install.sh — sourced by the scripts that install what they need from Debian's packages
# (tests/run.sh, tests/install-*.sh, host/link/record-startup-code.sh).

# Installs the Debian packages named, as root (through sudo when not root), quietly.
apt_install() {
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    # One `apt-get update` per run: the scripts tests/run.sh calls inherit the mark.
    if [ -z "${FOREWARN_APT_UPDATED:-}" ]; then
        $sudo apt-get update -qq
        export FOREWARN_APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

#!/usr/bin/env bash
# ensure_debian_package.sh PACKAGE GLOB: install Debian's PACKAGE with apt-get (non-interactive) unless
# an executable file matching GLOB is already there. Needs root (or passwordless sudo) and apt-get only
# when it has to install. Exits 0 when a file matching GLOB is executable afterwards.
set -euo pipefail

package="$1"
glob="$2"

present() {
    local file
    for file in $glob; do  # unquoted: the glob expands here
        [ -x "$file" ] && return 0
    done
    return 1
}

if present; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_debian_package: $glob is missing and apt-get is not available to install $package" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "ensure_debian_package: $glob is missing; run as root: apt-get install -y $package" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-upgrade "$package"
present || { echo "ensure_debian_package: $package is installed but $glob is still missing" >&2; exit 1; }

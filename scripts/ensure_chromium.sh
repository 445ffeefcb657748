#!/usr/bin/env bash
# Make sure Debian's Chromium is installed for the web demo's browser tests (no browser download
# by Playwright: the tests drive /usr/bin/chromium). Installs it only when it is missing; needs root
# (or passwordless sudo) and apt-get. Exits 0 when Chromium is present afterwards.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure_chromium: /usr/bin/chromium is missing and apt-get is not available" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "ensure_chromium: /usr/bin/chromium is missing; run as root: apt-get install -y chromium" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q chromium
test -x /usr/bin/chromium

#!/usr/bin/env bash
# Make sure Debian's Chromium is installed for the web demo's browser tests (no browser download
# by Playwright: the tests drive /usr/bin/chromium). Installs it only when it is missing; needs root
# (or passwordless sudo) and apt-get. Exits 0 when Chromium is present afterwards.
exec bash "$(dirname "$0")/ensure_debian_package.sh" chromium /usr/bin/chromium

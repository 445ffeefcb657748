#!/usr/bin/env bash
# Make sure Debian's PostgreSQL server binaries are installed: the tests start a real server from
# /usr/lib/postgresql/<version>/bin (tests/_postgres.py). Installs the postgresql package only when
# no initdb is there; needs root (or passwordless sudo) and apt-get. Exits 0 when initdb is present afterwards.
exec bash "$(dirname "$0")/ensure_debian_package.sh" postgresql '/usr/lib/postgresql/*/bin/initdb'

#!/bin/sh
# Builds (once per machine) the Debian sid root file system the tests use as the source of
# CPython 3.14 and 3.15 (release and -dbg builds, with their headers) and as the container
# image of the container tests. Cached outside the repository; a second run only prints
# the path. Prints "SKIP sid-root: <reason>" and exits 0 where it cannot be built, so the
# suites that need it skip with that reason.
#
#   scripts/sid-root.sh            -> builds if missing, prints the root's path
#   scripts/sid-root.sh --path     -> only prints the path (built or not; never builds)
#   SCRY_SID_ROOT=DIR              -> where (default /var/cache/scry-tests/sid-root)
set -eu
root=${SCRY_SID_ROOT:-/var/cache/scry-tests/sid-root}
pkgs=python3.14,python3.15,python3.14-dbg,python3.15-dbg,libpython3.14-dev,libpython3.15-dev,python3-numpy
stamp="$root/.scry-sid-root"
if [ "${1:-}" = --path ]; then
    echo "$root"
    exit 0
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pkgs" ]; then
    echo "$root"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "SKIP sid-root: building $root needs root" >&2
    exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
        >/dev/null 2>&1 || { echo "SKIP sid-root: debootstrap cannot be installed" >&2; exit 0; }
fi
tmp="$root.tmp.$$"
rm -rf "$tmp"
mkdir -p "$(dirname "$root")"
echo "scry: building the Debian sid test root in $root (about 2-5 minutes, once per machine)" >&2
if ! debootstrap --variant=minbase --include="$pkgs" sid "$tmp" http://deb.debian.org/debian \
        >"$tmp.log" 2>&1; then
    echo "SKIP sid-root: debootstrap failed (last lines of $tmp.log follow)" >&2
    tail -n 5 "$tmp.log" >&2
    rm -rf "$tmp"
    exit 0
fi
rm -f "$tmp.log"
# Keep it small: apt caches and docs are not needed to run Python.
rm -rf "$tmp/var/cache/apt/archives/"*.deb "$tmp/usr/share/doc" "$tmp/usr/share/man"
echo "$pkgs" >"$tmp/.scry-sid-root"
rm -rf "$root"
mv "$tmp" "$root"
echo "$root"
